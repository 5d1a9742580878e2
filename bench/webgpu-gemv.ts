/**
 * Matrix rows of the `webgpu` suite: the decoder's linear kernels
 * (src/gpu/decoder-ops.ts, wgsl/decoder-ops.ts, wgsl/gemm.ts,
 * wgsl/gemv-blocks.ts) alone, against the same run's ceilings.
 *
 *   decode  GEMV, 1 token:    W [rows, cols] read once;
 *           bytes = W's bytes + x (4·cols) + out (4·rows); bw_frac = gbps / copy
 *   prefill GEMM, 512 tokens: flops = 2·rows·cols·tokens; fma_frac = gflops / fma
 *
 * W in each format the GPU runner holds: bf16 and f16 (2 B a value), q8
 * (Q8_0 codes, 1 B, plus an f32 scale a 32-block: 1.125 B), and the ggml
 * blocks Q4_K (144 B a 256-block: 0.5625 B) and Q6_K (210 B: 0.8203 B).
 * Decode W is [32768, 4096] (bf16 256 MiB, Q4_K 72 MiB): larger than an
 * H100's or H200's 50–60 MB L2, so repeated GEMVs read memory, not cache.
 * Values are random (never zeros: zeros can run faster than data); a block's
 * f16 super-scales are set to 2⁻⁸ so that no block decodes to inf or NaN.
 * On a software adapter (--quick) W is [1024, 1024] and prefill 16 tokens.
 */
import type { GpuDevice } from "../src/gpu/device.js";
import { GpuDecoderOps, type GpuQ8Weight, type GpuView } from "../src/gpu/decoder-ops.js";
import { type GpuBlockType, blockRowBytes } from "../src/gpu/quant-blocks.js";
import { type GpuCeilings, adapterName, timeGpu } from "./gpu-ceilings.js";
import type { Row } from "./harness.js";

type Format = "bf16" | "f16" | "q8" | "q4_k" | "q6_k";
const FORMATS: readonly Format[] = ["bf16", "f16", "q8", "q4_k", "q6_k"];
/** Byte offset of each block's f16 super-scale d (ggml-common.h): block_q4_K {d, dmin, …}, block_q6_K {…, d}. */
const SUPER_SCALES: Record<"q4_k" | "q6_k", readonly number[]> = { q4_k: [0, 2], q6_k: [208] };
const F16_2_POW_MINUS_8 = 0x1c00;

function randomBytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  const words = new Uint32Array(out.buffer, 0, n >>> 2);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < words.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    words[i] = s >>> 0;
  }
  return out;
}

/** Random values of `format` for W [rows, cols], as the GPU runner's buffers hold them. */
function weightBytes(format: Format, rows: number, cols: number): { codes: Uint8Array; scales?: Float32Array } {
  if (format === "bf16" || format === "f16") {
    const b = randomBytes(rows * cols * 2, 7);
    // Keep each 16-bit value's exponent moderate (bits 14..10 of f16, 14..7 of bf16 below the top): clear the top exponent bit.
    for (let i = 1; i < b.length; i += 2) b[i] = b[i]! & 0xbf;
    return { codes: b };
  }
  if (format === "q8") {
    const scales = new Float32Array(rows * (cols / 32));
    for (let i = 0; i < scales.length; i++) scales[i] = 1 / 1024 + (i % 17) / 65536;
    return { codes: randomBytes(rows * cols, 11), scales };
  }
  const rowBytes = blockRowBytes(format, cols);
  const b = randomBytes(rows * rowBytes, 13);
  const blockBytes = format === "q4_k" ? 144 : 210;
  const view = new DataView(b.buffer);
  for (let o = 0; o < b.length; o += blockBytes) for (const at of SUPER_SCALES[format]) view.setUint16(o + at, F16_2_POW_MINUS_8, true);
  return { codes: b };
}

function bytesPerValue(format: Format): number {
  return { bf16: 2, f16: 2, q8: 1.125, q4_k: 144 / 256, q6_k: 210 / 256 }[format];
}

export async function matrixRows(gpu: GpuDevice, ceil: GpuCeilings, small: boolean, log: (line: string) => void): Promise<Row[]> {
  const ops = await GpuDecoderOps.create(gpu);
  await ops.prepareBlocks(["q4_k", "q6_k"] satisfies GpuBlockType[]);
  const rows: Row[] = [];
  const held: GPUBuffer[] = [];
  const upload = (data: ArrayBufferView, label: string): GPUBuffer => {
    const b = gpu.pool.acquire(Math.max(16, Math.ceil(data.byteLength / 4) * 4), label);
    held.push(b);
    gpu.device.queue.writeBuffer(b, 0, data.buffer, data.byteOffset, data.byteLength);
    return b;
  };
  try {
    type Shape = { phase: "decode" | "prefill"; rows: number; cols: number; tokens: number; formats: readonly Format[] };
    const shapes: Shape[] = small ? [{ phase: "decode", rows: 1024, cols: 1024, tokens: 1, formats: FORMATS }, { phase: "prefill", rows: 1024, cols: 1024, tokens: 16, formats: FORMATS }] : [{ phase: "decode", rows: 32768, cols: 4096, tokens: 1, formats: FORMATS }, { phase: "prefill", rows: 4096, cols: 4096, tokens: 512, formats: FORMATS }];
    // The model rows' decode GEMVs (Qwen2.5-0.5B, q8): q/k/v, o, gate+up, down, and the LM head: a layer's and a step's kernel time.
    const modelShapes: Shape[] = small ? [] : ([[1152, 896], [896, 896], [9728, 896], [896, 4864], [151936, 896]] as const).map(([rows, cols]) => ({ phase: "decode", rows, cols, tokens: 1, formats: ["q8"] }));
    for (const shape of [...shapes, ...modelShapes]) {
      for (const format of shape.formats) {
        const { rows: R, cols: C, tokens: T } = shape;
        const w = weightBytes(format, R, C);
        if (w.codes.byteLength > gpu.limits.maxStorageBufferBindingSize) {
          log(`${format} [${R}, ${C}]: ${w.codes.byteLength} B is over the adapter's binding limit ${gpu.limits.maxStorageBufferBindingSize}; skipped`);
          continue;
        }
        const weight: GpuView = { buffer: upload(w.codes, `bench ${format} weight`) };
        const q8: GpuQ8Weight | null = format === "q8" ? { codes: weight, scales: { buffer: upload(w.scales!, "bench q8 scales") } } : null;
        const x: GpuView = { buffer: upload(Float32Array.from({ length: T * C }, (_, i) => ((i * 2654435761) >>> 0) / 2 ** 32 - 0.5), "bench x") };
        const out: GpuView = { buffer: gpu.pool.acquire(T * R * 4, "bench out") };
        held.push(out.buffer);
        const a = { x, out, tokens: T, rows: R, cols: C };
        const encode = (pass: GPUComputePassEncoder): void => {
          const decode = shape.phase === "decode";
          if (q8) (decode ? ops.gemvQ8 : ops.gemmQ8).call(ops, pass, { ...a, weight: q8 });
          else if (format === "q4_k" || format === "q6_k") (decode ? ops.gemvBlocks : ops.gemmBlocks).call(ops, pass, { ...a, weight, type: format });
          else if (format === "bf16" || format === "f16") (decode ? ops.gemv : ops.gemm).call(ops, pass, { ...a, weight, weightDtype: format });
        };
        const ms = await timeGpu(gpu, encode, small ? 1 : 10, small ? 3 : 7);
        ops.recycle();
        const bytes = R * C * bytesPerValue(format) + 4 * T * (C + R);
        const flops = 2 * R * C * T;
        const gbps = bytes / (ms * 1e6);
        const gflops = flops / (ms * 1e6);
        const bound = Math.max(bytes / (ceil.copy_gbps * 1e6), flops / (ceil.fma_gflops * 1e6));
        log(`${shape.phase} ${format} [${R}, ${C}] × ${T}: ${ms.toFixed(3)} ms, ${gbps.toFixed(1)} GB/s, ${gflops.toFixed(1)} GFLOP/s`);
        rows.push({ adapter: adapterName(gpu), op: shape.phase === "decode" ? "gemv" : "gemm", weights: format, rows: R, cols: C, tokens: T, ms, gbps, gflops, bw_frac: gbps / ceil.copy_gbps, fma_frac: gflops / ceil.fma_gflops, roofline: bound / ms, software: gpu.adapter.software });
        for (const b of held.splice(0)) gpu.pool.release(b);
      }
    }
  } finally {
    for (const b of held) gpu.pool.release(b);
    ops.dispose();
  }
  return rows;
}

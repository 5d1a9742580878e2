/**
 * A decoder's weights on the GPU, uploaded once from the DecoderWeights the
 * loaders built in wasm memory (model/decoder-weights.ts: the same
 * safetensors and GGUF paths as the CPU runner), in the layouts the WGSL
 * GEMVs read (wgsl/decoder-ops.ts):
 *
 *   f32, bf16      row-major [rows, cols] in the same dtype (bf16 values are
 *                  exact bf16: the CPU tiles hold them so), decoded by kv-load
 *   q8             int8 codes [rows, blocks·32] and f32 scales [rows, blocks],
 *                  read straight out of the CPU tiles (the same codes and scales)
 *   q4, q2_k …     ggml blocks (quant-blocks.ts: q4_0 with an f32 scale, block_q2_K,
 *   q6_k, iq4_xs   block_q3_K, block_q4_K, block_q5_K, block_q6_K, block_iq4_xs), rows
 *                  of blocks back to back, decoded in the kernels (wgsl/gemv-blocks.ts):
 *                  the values exactly the CPU's, at the file's 2.625 / 3.44 / 4.5 / 5.5 /
 *                  6.56 / 4.25 bits a weight (q4: 5)
 *
 * A matrix is a list of row parts, each one buffer: a WeightStack's parts
 * (fused QKV of mixed ggml types) and any part bigger than the adapter's
 * maxStorageBufferBindingSize split by rows, as the several wasm memories
 * split a model. The GEMV runs once per part into its rows of the output.
 */
import { ArgumentError } from "../errors.js";
import type { DecoderWeights } from "../model/decoder-weights.js";
import { type Weight, WeightStack, gatherRows } from "../ops/weight.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tensor } from "../tensor/tensor.js";
import type { GpuDecoderOps, GpuMatrixKernel, GpuView, GpuXLoad } from "./decoder-ops.js";
import type { GluActivation } from "./wgsl/decoder-ops.js";
import { BufferUsage } from "./constants.js";
import { type GpuBlockType, blockRowBytes, gpuBlockType, packBlockRows } from "./quant-blocks.js";
import { unpackQ8Rows } from "./q8-tile-rows.js";
import type { GpuDevice } from "./device.js";

/** One row range [r0, r0 + rows) of a matrix in its own buffer(s). */
export type GpuMatrixPart =
  | { kind: "f32" | "bf16"; r0: number; rows: number; buffer: GPUBuffer }
  | { kind: "q8"; r0: number; rows: number; codes: GPUBuffer; scales: GPUBuffer }
  | { kind: "blocks"; type: GpuBlockType; r0: number; rows: number; buffer: GPUBuffer };

export interface GpuMatrix {
  rows: number;
  cols: number;
  parts: GpuMatrixPart[];
  /** What the GPU holds, for the startup line: "q8", "bf16", "q4_k", "q4_0 (from q4)". */
  format: string;
}

export interface GpuLayerWeights {
  inputNorm: GPUBuffer;
  postNorm: GPUBuffer;
  /** Gemma's sandwich norms of the attention and MLP outputs, or null. */
  attnOutNorm: GPUBuffer | null;
  mlpOutNorm: GPUBuffer | null;
  qkv: GpuMatrix;
  qkvBias: GPUBuffer | null;
  qNorm: GPUBuffer | null;
  kNorm: GPUBuffer | null;
  o: GpuMatrix;
  oBias: GPUBuffer | null;
  gateUp: GpuMatrix;
  gateUpBias: GPUBuffer | null;
  down: GpuMatrix;
  downBias: GPUBuffer | null;
}

export interface GpuDecoderWeights {
  embedding: GpuMatrix;
  layers: GpuLayerWeights[];
  finalNorm: GPUBuffer;
  lmHead: GpuMatrix;
  /** Bytes of every buffer uploaded. */
  bytes: number;
}

/** Rows decoded per gatherRows call when a matrix goes up as f32 (bounds the wasm scratch to ~16 MiB). */
const DECODE_CHUNK_BYTES = 16 << 20;

class Uploader {
  bytes = 0;
  readonly buffers: GPUBuffer[] = [];
  constructor(
    readonly gpu: GpuDevice,
    readonly rt: Runtime,
    readonly maxBinding: number,
  ) {}

  /** A buffer of its own of `bytes` rounded up to 4 (not pooled: weights live as long as the runner). */
  alloc(bytes: number, label: string): GPUBuffer {
    const size = Math.max(4, Math.ceil(bytes / 4) * 4);
    const buffer = this.gpu.device.createBuffer({ size, usage: BufferUsage.STORAGE | BufferUsage.COPY_DST, label });
    this.buffers.push(buffer);
    this.bytes += size;
    return buffer;
  }

  /** Writes `data` at byte `offset` (a multiple of 4) of `buffer`, zero-padded to whole words. */
  write(buffer: GPUBuffer, offset: number, data: ArrayBufferView): void {
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (bytes.byteLength % 4 === 0) this.gpu.device.queue.writeBuffer(buffer, offset, bytes);
    else {
      const padded = new Uint8Array(Math.ceil(bytes.byteLength / 4) * 4);
      padded.set(bytes);
      this.gpu.device.queue.writeBuffer(buffer, offset, padded);
    }
  }

  /** A buffer holding `data`. */
  put(data: ArrayBufferView, label: string): GPUBuffer {
    const buffer = this.alloc(data.byteLength, label);
    this.write(buffer, 0, data);
    return buffer;
  }

  vector(t: Tensor | null, label: string): GPUBuffer | null {
    if (t === null) return null;
    const src = this.rt.of(t.memory);
    return this.put(new Float32Array(src.memory.buffer, t.ptr, t.numel).slice(), label);
  }

  matrix(w: Weight, label: string): GpuMatrix {
    const ws = w instanceof WeightStack ? w.parts : [w];
    const parts: GpuMatrixPart[] = [];
    const formats = new Set<string>();
    let r0 = 0;
    for (const part of ws) {
      formats.add(this.#part(part, r0, parts, label));
      r0 += part.rows;
    }
    return { rows: w.rows, cols: w.cols, parts, format: [...formats].join(" + ") };
  }

  /** Rows per buffer so that none passes the binding limit. */
  #rowsPerBuffer(rowBytes: number, label: string): number {
    const max = this.maxBinding;
    const n = Math.floor(max / rowBytes);
    if (n < 1) throw new ArgumentError(label, `has rows of ${rowBytes} bytes, beyond a GPU binding's ${max} (maxStorageBufferBindingSize)`);
    return n;
  }

  #part(w: Weight, base: number, out: GpuMatrixPart[], label: string): string {
    const { rows, cols } = w;
    const blocks = Math.ceil(cols / 32);
    const type = gpuBlockType(w.format);
    if (type !== null) {
      const step = this.#rowsPerBuffer(blockRowBytes(type, cols), label);
      const tiles = new Uint8Array(this.rt.of(w.memory).memory.buffer, w.ptr, w.byteLength);
      const rowBytes = blockRowBytes(type, cols);
      // Rows repacked per write: ~16 MiB of host memory at a time, an even count (a 4-byte-aligned offset for 210-byte Q6_K and 110-byte Q3_K blocks).
      const chunk = Math.max(2, 2 * Math.floor(DECODE_CHUNK_BYTES / (2 * rowBytes)));
      for (let r0 = 0; r0 < rows; r0 += step) {
        const n = Math.min(step, rows - r0);
        const buffer = this.alloc(n * rowBytes, `${label} ${type} blocks`);
        for (let c = 0; c < n; c += chunk) this.write(buffer, c * rowBytes, packBlockRows(tiles, w.format, w.blocks, r0 + c, Math.min(chunk, n - c)));
        out.push({ kind: "blocks", type, r0: base + r0, rows: n, buffer });
      }
      return type === "q4_0" ? "q4_0 (from q4)" : type;
    }
    if (w.format === "q8" || w.format === "q5") {
      const step = this.#rowsPerBuffer(blocks * 32, label);
      const tiles = new Uint8Array(this.rt.of(w.memory).memory.buffer, w.ptr, w.byteLength);
      for (let r0 = 0; r0 < rows; r0 += step) {
        const n = Math.min(step, rows - r0);
        const { codes, scales } = unpackQ8Rows(tiles, w.format, blocks, r0, n);
        out.push({ kind: "q8", r0: base + r0, rows: n, codes: this.put(codes, `${label} codes`), scales: this.put(scales, `${label} scales`) });
      }
      return w.format === "q5" ? "q8 (from q5)" : "q8";
    }
    const kind = w.format === "bf16" ? "bf16" : "f32";
    const step = Math.min(this.#rowsPerBuffer(cols * (kind === "bf16" ? 2 : 4), label), Math.max(1, Math.floor(DECODE_CHUNK_BYTES / (cols * 4))));
    const rt = this.rt.of(w.memory);
    const scratch = rt.heap.alloc(step * cols * 4, `${label} upload scratch`);
    const ids = rt.heap.alloc(step * 4, `${label} upload rows`);
    try {
      for (let r0 = 0; r0 < rows; r0 += step) {
        const n = Math.min(step, rows - r0);
        const idv = new Int32Array(rt.memory.buffer, ids, n);
        for (let i = 0; i < n; i++) idv[i] = r0 + i;
        gatherRows(rt, w, ids, n, scratch, cols * 4);
        const f32 = new Float32Array(rt.memory.buffer, scratch, n * cols);
        const data = kind === "bf16" ? bf16Bits(f32) : f32.slice();
        out.push({ kind, r0: base + r0, rows: n, buffer: this.put(data, label) });
      }
    } finally {
      rt.free(scratch);
      rt.free(ids);
    }
    return w.format === "f32" || w.format === "bf16" ? w.format : `f32 (from ${w.format})`;
  }
}

/** The high halves of f32 values that are exact bf16 (as the CPU's bf16 tiles decode). */
function bf16Bits(f32: Float32Array): Uint16Array {
  const u = new Uint32Array(f32.buffer, f32.byteOffset, f32.length);
  const out = new Uint16Array(f32.length);
  for (let i = 0; i < u.length; i++) out[i] = u[i]! >>> 16;
  return out;
}


/**
 * Uploads `weights` (left as they are: the caller frees them) to the GPU,
 * no buffer above `maxBinding` bytes (default, and at most, the adapter's limit).
 * On failure the buffers made so far are destroyed.
 */
export function uploadDecoderWeights(gpu: GpuDevice, rt: Runtime, weights: DecoderWeights, maxBinding = gpu.limits.maxStorageBufferBindingSize): { weights: GpuDecoderWeights; destroy: () => void } {
  const up = new Uploader(gpu, rt, Math.min(maxBinding, gpu.limits.maxStorageBufferBindingSize));
  const destroy = () => {
    for (const b of up.buffers.splice(0)) b.destroy();
  };
  try {
    const embedding = up.matrix(weights.embedding, "embed_tokens");
    const layers = weights.layers.map((w, l): GpuLayerWeights => ({
      inputNorm: up.vector(w.inputNorm, `layer ${l} input_layernorm`)!,
      postNorm: up.vector(w.postNorm, `layer ${l} post_attention_layernorm`)!,
      attnOutNorm: up.vector(w.attnOutNorm, `layer ${l} post_attention_layernorm (Gemma)`),
      mlpOutNorm: up.vector(w.mlpOutNorm, `layer ${l} post_feedforward_layernorm`),
      qkv: up.matrix(w.qkv, `layer ${l} qkv_proj`),
      qkvBias: up.vector(w.qkvBias, `layer ${l} qkv bias`),
      qNorm: up.vector(w.qNorm, `layer ${l} q_norm`),
      kNorm: up.vector(w.kNorm, `layer ${l} k_norm`),
      o: up.matrix(w.o, `layer ${l} o_proj`),
      oBias: up.vector(w.oBias, `layer ${l} o_proj bias`),
      gateUp: up.matrix(w.gateUp, `layer ${l} gate_up_proj`),
      gateUpBias: up.vector(w.gateUpBias, `layer ${l} gate_up bias`),
      down: up.matrix(w.down, `layer ${l} down_proj`),
      downBias: up.vector(w.downBias, `layer ${l} down_proj bias`),
    }));
    const finalNorm = up.vector(weights.finalNorm, "model.norm")!;
    const lmHead = weights.lmHead === weights.embedding ? embedding : up.matrix(weights.lmHead, "lm_head");
    return { weights: { embedding, layers, finalNorm, lmHead, bytes: up.bytes }, destroy };
  } catch (e) {
    destroy();
    throw e;
  }
}

/**
 * The matrix kernels a forward over `w` records (GpuDecoderOps compiles only
 * these): for every part of a linear layer's matrix (the head's included)
 * its format's GEMV and GEMM, as encodeLinear picks them, and for every part
 * of the embedding its gather (the runner's embedding step).
 */
export function matrixKernels(w: GpuDecoderWeights): GpuMatrixKernel[] {
  const out = new Set<GpuMatrixKernel>();
  for (const m of [w.lmHead, ...w.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])]) {
    for (const p of m.parts) {
      if (p.kind === "blocks") out.add(`gemv ${p.type}`).add("gemm blocks");
      else if (p.kind === "q8") out.add("gemv q8").add("gemm q8");
      else out.add("gemv f32").add("gemm");
    }
  }
  for (const p of w.embedding.parts) out.add(p.kind === "blocks" ? "embedding blocks" : "embedding");
  return [...out].sort();
}

/** Tokens from which a linear layer runs as the tiled GEMM (each weight read once per 32 tokens) instead of the GEMV. */
export const GEMM_MIN_TOKENS = 4;

/**
 * A linear layer's input: x as stored, or what the decoder computes from it first —
 * the RMSNorm before a projection (`norm`), the gated activation of gate_up rows
 * before the down projection (`glu`: x is gate_up [T, 2·cols], gate then up).
 * The GEMV fuses them into its x load (GpuXLoad); the GEMM path records them into
 * `scratch` (f32 [T, cols]) first.
 */
export interface LinearInput {
  x: GpuView;
  norm?: { weight: GPUBuffer; eps: number };
  glu?: GluActivation;
  scratch?: GPUBuffer;
}

/**
 * Records out[t, :] = in[t, :] · Wᵀ (+ bias) for every part of `m` into its
 * rows of out [tokens, m.rows] (added to them with `accumulate`: the residual
 * add): the GEMV for decode-sized steps, with the input's norm or GLU fused
 * into its x load; from GEMM_MIN_TOKENS tokens the norm or GLU once into
 * `scratch`, then the tiled GEMM.
 */
export function encodeLinear(ops: GpuDecoderOps, pass: GPUComputePassEncoder, m: GpuMatrix, a: LinearInput & { out: GpuView; bias?: GPUBuffer | null; tokens: number; accumulate?: boolean }): void {
  const gemm = a.tokens >= GEMM_MIN_TOKENS;
  let x = a.x;
  let load: GpuXLoad = {};
  if (a.norm || a.glu) {
    if (gemm) {
      if (!a.scratch) throw new ArgumentError("scratch", "is needed for a normed or gated input of the GEMM path");
      if (a.norm) ops.rmsNorm(pass, { x, weight: { buffer: a.norm.weight }, out: { buffer: a.scratch }, rows: a.tokens, cols: m.cols, eps: a.norm.eps });
      else ops[a.glu === "silu" ? "swiglu" : "geglu"](pass, { gate: x, up: { buffer: x.buffer, offset: (x.offset ?? 0) + m.cols }, inStride: 2 * m.cols, out: { buffer: a.scratch }, n: m.cols, rows: a.tokens });
      x = { buffer: a.scratch };
    } else if (a.norm) load = { xNorm: { weight: { buffer: a.norm.weight }, eps: a.norm.eps } };
    else load = { xGlu: { act: a.glu!, up: m.cols }, xStride: 2 * m.cols };
  }
  for (const p of m.parts) {
    const out = { buffer: a.out.buffer, offset: (a.out.offset ?? 0) + p.r0 };
    const common = { x, out, outStride: m.rows, tokens: a.tokens, rows: p.rows, cols: m.cols, accumulate: a.accumulate ?? false, ...(a.bias ? { bias: { buffer: a.bias, offset: p.r0 } } : {}) };
    if (p.kind === "blocks") {
      const b = { ...common, weight: { buffer: p.buffer }, type: p.type };
      if (gemm) ops.gemmBlocks(pass, b);
      else ops.gemvBlocks(pass, { ...b, ...load });
    } else if (p.kind === "q8") {
      const q8 = { ...common, weight: { codes: { buffer: p.codes }, scales: { buffer: p.scales } } };
      if (gemm) ops.gemmQ8(pass, q8);
      else ops.gemvQ8(pass, { ...q8, ...load });
    } else {
      const f = { ...common, weight: { buffer: p.buffer }, weightDtype: p.kind };
      if (gemm) ops.gemm(pass, f);
      else ops.gemv(pass, { ...f, ...load });
    }
  }
}

// Conformance of the WGSL kernels over ggml weight blocks (src/gpu/wgsl/
// gemv-blocks.ts, the block GEMM in gemm.ts, the block embedding) against
// their float64 twin: the blocks decoded by decodeBlockRows (ggml's
// dequantize_row_*) times x in linearReference. Blocks: q2_k, q3_k, q4_k,
// q5_k, q6_k and iq4_xs as raw random bytes (every code, scale and min;
// subnormal f16 super-scales on every third block; q2_k, q3_k and iq4_xs
// with the extremes by row: subnormal, up to 6.4e4, 0) and as quantized
// rows; q4_0 (f32 d) with random codes over 720 columns (a partial last
// block whose padding codes are random too: the kernels must not read past
// cols). Shapes: 37 rows × 768 columns (3 superblocks: 96 units over a
// workgroup of 64; 37 rows: a partial GEMM tile of 32), and for q2_k, q3_k
// and iq4_xs also 67 × 256 (one superblock: half the GEMV's invocations
// idle) and 3 × 1280 (q3_k's 110-byte blocks at odd word offsets), 1 and 7
// tokens for the GEMV (a token group of 4 and a partial one), 5 and 33 for
// the GEMM (tile edges), bias into columns 5… of an output 13 wider than
// the rows, poisoned with NaN (the columns outside stay NaN). Tolerance:
//   |got − ref| ≤ 1e-5 · (Σ_c |x·w| + Σ_c |x|·|dmin·m| + |bias|)
// (f32 sums in another order; the kernels sum d·sc·q and dmin·m apart).
// The embedding gathers decoded rows within 1e-6 relative (f32 d·sc·q).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError } from "../../src/ops-entry.js";
import { GpuDecoderOps } from "../../src/gpu/decoder-ops.js";
import type { GpuDevice } from "../../src/gpu/index.js";
import { GPU_BLOCK_TYPES, type GpuBlockType, blockRowBytes } from "../../src/gpu/quant-blocks.js";
import { quantize } from "../../src/sources/gguf/quantize.js";
import { decodeBlockRows } from "../../src/ops/reference/block-decode.js";
import { linearMagnitude, linearReference } from "../../src/ops/reference/linear.js";
import { randn, rng, uniform } from "../helpers/random.js";
import { randomKquantBlocks } from "./block-support.js";
import { openTestGpu, runPass } from "./support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);

const GGML_NAME = { q2_k: "Q2_K", q3_k: "Q3_K", q4_k: "Q4_K", q5_k: "Q5_K", q6_k: "Q6_K", iq4_xs: "IQ4_XS" } as const;

/** q4_0 blocks (f32 d, 16 code bytes) with random codes, the padding past cols random too. */
function randomQ40(rows: number, cols: number, seed: number): Uint8Array {
  const r = rng(seed);
  const out = new Uint8Array(rows * blockRowBytes("q4_0", cols));
  const view = new DataView(out.buffer);
  for (let at = 0; at < out.length; at += 20) {
    view.setFloat32(at, (r() - 0.5) * 0.1, true);
    for (let j = 4; j < 20; j++) out[at + j] = Math.floor(r() * 256);
  }
  return out;
}

/** Blocks of `type` for a [rows, cols] matrix: raw random bytes (the extreme super-scales by row for the types that ask) or quantized random rows. */
function blocksOf(type: GpuBlockType, rows: number, cols: number, seed: number, raw: boolean, extremes = false): Uint8Array {
  if (type === "q4_0") return randomQ40(rows, cols, seed);
  return raw ? randomKquantBlocks(GGML_NAME[type], rows, cols, seed, extremes) : quantize(GGML_NAME[type], randn(rows * cols, seed, 0.5), cols);
}

describe("WebGPU kernels over ggml blocks against the float64 decode", () => {
  let gpu: GpuDevice;
  let ops: GpuDecoderOps;
  before(async () => {
    if (!opened.gpu) return;
    gpu = opened.gpu;
    ops = await GpuDecoderOps.create(gpu);
    await ops.prepareBlocks(GPU_BLOCK_TYPES);
  });
  after(() => {
    ops?.dispose();
    opened.gpu?.destroy();
  });

  const upload = (data: ArrayLike<number>, label: string) => gpu.upload(new Uint8Array(Float32Array.from(data).buffer), label);
  const run = (record: (pass: GPUComputePassEncoder) => void, out: GPUBuffer, n: number) => runPass(gpu, ops, "a block-kernel test", record, out, n);

  /** [rows, cols] shapes: every type's, and the awkward ones q2_k, q3_k and iq4_xs run too. */
  const BASE: readonly [number, number][] = [[37, 768]];
  const AWKWARD: readonly [number, number][] = [[37, 768], [67, 256], [3, 1280]];
  const CASES: { type: GpuBlockType; raw: boolean; extremes?: boolean; shapes?: readonly [number, number][] }[] = [
    { type: "q4_k", raw: true },
    { type: "q4_k", raw: false },
    { type: "q5_k", raw: true },
    { type: "q6_k", raw: true },
    { type: "q6_k", raw: false },
    { type: "q4_0", raw: true },
    { type: "q2_k", raw: true, extremes: true, shapes: AWKWARD },
    { type: "q2_k", raw: false },
    { type: "q3_k", raw: true, extremes: true, shapes: AWKWARD },
    { type: "q3_k", raw: false },
    { type: "iq4_xs", raw: true, extremes: true, shapes: AWKWARD },
    { type: "iq4_xs", raw: false },
  ];
  for (const [k, { type, raw, extremes = false, shapes = BASE }] of CASES.entries()) {
    const what = raw ? (extremes ? "raw random blocks, extreme super-scales" : "raw random blocks") : "quantized rows";
    gpuTest(`${type} ${what}, ${shapes.map(([r, c]) => `${r} × ${c}`).join(", ")}: GEMV (1, 7 tokens) and tiled GEMM (5, 33 tokens), bias, into columns 5… of a wider output`, async () => {
      for (const [rows, c] of shapes) await checkProducts(type, rows, type === "q4_0" ? 720 : c, 20 + k, raw, extremes);
    });
  }

  /** One matrix of `type` blocks [rows, cols] through the GEMV and the GEMM against linearReference. */
  async function checkProducts(type: GpuBlockType, rows: number, cols: number, seed: number, raw: boolean, extremes: boolean): Promise<void> {
    const [outStride, col0, k] = [rows + 13, 5, seed - 20];
    const bytes = blocksOf(type, rows, cols, seed, raw, extremes);
    const { values, offsets } = decodeBlockRows(type, bytes, rows, cols);
    const wb = gpu.upload(bytes, `${type} blocks`);
    const bias = uniform(rows, 40 + k);
    const bb = upload(bias, "bias");
    for (const [tokens, kernel] of [[1, "gemv"], [7, "gemv"], [5, "gemm"], [33, "gemm"]] as const) {
      const x = uniform(tokens * cols, 50 + tokens, -2, 2);
      const xb = upload(x, "x");
      const ob = upload(new Float32Array(tokens * outStride).fill(NaN), "out");
      const a = { x: { buffer: xb }, weight: { buffer: wb }, type, out: { buffer: ob, offset: col0 }, outStride, bias: { buffer: bb }, tokens, rows, cols };
      const got = await run((pass) => (kernel === "gemv" ? ops.gemvBlocks(pass, a) : ops.gemmBlocks(pass, a)), ob, tokens * outStride);
      const shape = { tokens, rows, cols };
      const ref = linearReference(x, values, shape, bias);
      const mag = linearMagnitude(x, values, shape);
      const off = linearMagnitude(x, offsets, shape);
      for (let i = 0; i < tokens * rows; i++) {
        const [t, r] = [Math.floor(i / rows), i % rows];
        const g = got[t * outStride + col0 + r]!;
        const tol = 1e-5 * (mag[i]! + off[i]! + Math.abs(bias[r]!));
        if (!(Math.abs(g - ref[i]!) <= tol)) assert.fail(`${kernel} ${type} ${rows} × ${cols} T=${tokens}: out[${t}, ${r}] = ${g}, reference ${ref[i]} (tolerance ${tol})`);
      }
      for (let t = 0; t < tokens; t++) for (const c of [0, col0 - 1, col0 + rows]) assert.ok(Number.isNaN(got[t * outStride + c]!), `${kernel} ${type} T=${tokens}: wrote column ${c}`);
      for (const b of [xb, ob]) gpu.pool.release(b);
    }
    for (const b of [wb, bb]) gpu.pool.release(b);
  }

  gpuTest("embedding over blocks: 7 ids, rows 4… of a 37-row matrix held from row 4 (another part's ids left alone), every type", async () => {
    const ids = [36, 0, 5, 5, 17, 4, 36];
    const ib = gpu.upload(new Uint8Array(Int32Array.from(ids).buffer), "ids");
    for (const [k, type] of GPU_BLOCK_TYPES.entries()) {
      const [rows, cols, first] = [37, type === "q4_0" ? 720 : 512, 4];
      const bytes = blocksOf(type, rows, cols, 60 + k, true);
      const { values } = decodeBlockRows(type, bytes, rows, cols);
      const wb = gpu.upload(bytes.subarray(first * blockRowBytes(type, cols)), "part");
      const ob = upload(new Float32Array(ids.length * cols).fill(NaN), "out");
      const got = await run((pass) => ops.embeddingBlocks(pass, { ids: { buffer: ib }, weight: { buffer: wb }, type, out: { buffer: ob }, tokens: ids.length, rows: rows - first, firstRow: first, cols }), ob, ids.length * cols);
      ids.forEach((id, t) => {
        for (let c = 0; c < cols; c++) {
          const g = got[t * cols + c]!;
          if (id < first) assert.ok(Number.isNaN(g), `${type}: id ${id} belongs to another part`);
          else if (!(Math.abs(g - values[id * cols + c]!) <= 1e-6 * Math.abs(values[id * cols + c]!) + 1e-30)) assert.fail(`${type}: token ${t} (id ${id}) column ${c}: ${g}, reference ${values[id * cols + c]}`);
        }
      });
      for (const b of [wb, ob]) gpu.pool.release(b);
    }
    gpu.pool.release(ib);
  });

  gpuTest("a K-quant width not a multiple of 256, a weight buffer too small and an unknown type are ArgumentErrors naming the argument", async () => {
    const b = gpu.pool.acquire(4096, "small");
    const enc = gpu.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    const a = { x: { buffer: b }, weight: { buffer: b }, out: { buffer: b }, tokens: 1, rows: 1 };
    assert.throws(() => ops.gemvBlocks(pass, { ...a, type: "q4_k", cols: 300 }), (e: Error) => e instanceof ArgumentError && /^cols must be a multiple of q4_k's 256 values a block, got 300/.test(e.message));
    assert.throws(() => ops.gemvBlocks(pass, { ...a, rows: 30, type: "q6_k", cols: 256 }), /weight needs 6300 bytes \(offset 0 \+ 6300 elements\), its buffer has 4096/);
    assert.throws(() => ops.gemmBlocks(pass, { ...a, type: "iq2_xs" as GpuBlockType, cols: 256 }), /type must be one of q4_0 \| q4_k \| q5_k \| q6_k \| q2_k \| q3_k \| iq4_xs, got "iq2_xs"/);
    pass.end();
    enc.finish();
    gpu.pool.release(b);
  });
});

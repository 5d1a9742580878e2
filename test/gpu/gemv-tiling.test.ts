// The edges of the tiled decode GEMVs (src/gpu/wgsl/gemv-tiling.ts, gemv.ts,
// gemv-blocks.ts) against linearReference, on a device with subgroups turned
// off (the shared-memory tree reduction; decoder-ops.test.ts and
// block-kernels.test.ts run the subgroupAdd path where the adapter has it,
// SwiftShader included, and a second device here would double the compiles):
//   - rows not a multiple of the rows a workgroup (13 over 4, 13 and 11 over 8:
//     the last group's clamped rows must not be written);
//   - tokens 1 and 6 (a full token group of 4, then a partial one of 2);
//   - f32 / f16 / bf16 weights on the 16-byte path (cols 264, offset 0) and off
//     it (cols 77 at element offset 3: rows start mid-word), x at offsets 0
//     (the vec4 view of x) and 1 (four f32 loads);
//   - q8 with cols 200 and 90 (a last chunk of 8 and 10 codes inside a partial
//     block, x zero past cols);
//   - q4_k (vec4 header and codes), q6_k (210-byte blocks at 2-byte offsets),
//     q4_0 over 72 columns (a partial last block whose padding codes are random).
// Outputs outside the written columns stay NaN. Tolerance as the other GEMV
// suites: |got − ref| ≤ 1e-5 · (Σ_c |x·w| + Σ_c |x|·|dmin·m| + |bias|).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { GpuDecoderOps, packQ8Weight } from "../../src/gpu/decoder-ops.js";
import { GpuDevice } from "../../src/gpu/index.js";
import { type GpuBlockType, blockRowBytes } from "../../src/gpu/quant-blocks.js";
import { decodeBlockRows } from "../../src/ops/reference/block-decode.js";
import { linearMagnitude, linearReference } from "../../src/ops/reference/linear.js";
import { decodeValue, encodeValue } from "../../src/tensor/codec.js";
import { rng, uniform } from "../helpers/random.js";
import { randomKquantBlocks } from "./block-support.js";
import { openTestGpu, runPass } from "./support.js";

const opened = await openTestGpu();
const skip = opened.skip;

/** q4_0 blocks (f32 d, 16 code bytes), random codes (the padding past cols too). */
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

for (const variant of ["subgroups off"] as const) {
  describe(`tiled decode GEMVs, ${variant}`, () => {
    let gpu: GpuDevice;
    let ops: GpuDecoderOps;
    before(async () => {
      if (!opened.gpu) return;
      gpu = (await GpuDevice.open({ device: "webgpu", disable: [variant === "subgroups off" ? "subgroups" : "shader-f16"] }))!;
      ops = await GpuDecoderOps.create(gpu);
      await ops.prepareBlocks(["q4_k", "q6_k", "q4_0"]);
    });
    after(() => {
      ops?.dispose();
      gpu?.destroy();
      opened.gpu?.destroy();
    });

    const f32Bytes = (a: ArrayLike<number>) => new Uint8Array(Float32Array.from(a).buffer);
    const poisoned = (n: number) => gpu.upload(f32Bytes(new Float32Array(n).fill(NaN)), "out");

    /** Runs `record` into out [tokens, rows + 7] at column 3 and checks rows × tokens against ref (tolerance per output). */
    async function check(what: string, tokens: number, rows: number, record: (pass: GPUComputePassEncoder, out: GPUBuffer) => void, ref: ArrayLike<number>, tol: (i: number) => number): Promise<void> {
      const [outStride, col0] = [rows + 7, 3];
      const ob = poisoned(tokens * outStride);
      const got = await runPass(gpu, ops, what, (pass) => record(pass, ob), ob, tokens * outStride);
      for (let i = 0; i < tokens * rows; i++) {
        const [t, r] = [Math.floor(i / rows), i % rows];
        const g = got[t * outStride + col0 + r]!;
        if (!(Math.abs(g - ref[i]!) <= tol(i))) assert.fail(`${what}: out[${t}, ${r}] = ${g}, reference ${ref[i]} (tolerance ${tol(i)})`);
      }
      for (let t = 0; t < tokens; t++) for (const c of [0, col0 - 1, col0 + rows, outStride - 1]) assert.ok(Number.isNaN(got[t * outStride + c]!), `${what}: wrote column ${c} of token ${t}`);
      gpu.pool.release(ob);
    }

    test("f32 / f16 / bf16: 13 rows, 1 and 6 tokens, cols 264 on the 16-byte path and 77 at element offset 3 off it, x at offsets 0 and 1, bias", { skip }, async () => {
      for (const [k, dtype] of (["f32", "f16", "bf16"] as const).entries()) {
        for (const [cols, wOff, xOff] of [[264, 0, 0], [77, 3, 1]] as const) {
          const rows = 13;
          const w = uniform(rows * cols, 70 + k);
          const codes = Array.from(w, (v) => (dtype === "f32" ? v : encodeValue(dtype, v)));
          const values = codes.map((c) => (dtype === "f32" ? Math.fround(c) : decodeValue(dtype, c)));
          const padded = [...new Array<number>(wOff).fill(0), ...codes];
          const wb = gpu.upload(dtype === "f32" ? f32Bytes(padded) : new Uint8Array(Uint16Array.from(padded.length % 2 ? [...padded, 0] : padded).buffer), "w");
          const bias = uniform(rows, 80 + k);
          const bb = gpu.upload(f32Bytes(bias), "bias");
          for (const tokens of [1, 6]) {
            const x = uniform(tokens * cols, 90 + tokens);
            const xb = gpu.upload(f32Bytes([...new Array<number>(xOff).fill(0), ...x]), "x");
            const shape = { tokens, rows, cols };
            const ref = linearReference(x, values, shape, bias);
            const mag = linearMagnitude(x, values, shape);
            await check(`${variant} gemv ${dtype} cols ${cols} T=${tokens}`, tokens, rows, (pass, ob) => ops.gemv(pass, { x: { buffer: xb, offset: xOff }, weight: { buffer: wb, offset: wOff }, weightDtype: dtype, out: { buffer: ob, offset: 3 }, outStride: rows + 7, bias: { buffer: bb }, tokens, rows, cols }), ref, (i) => 1e-5 * (mag[i]! + Math.abs(bias[i % rows]!)));
            gpu.pool.release(xb);
          }
          for (const b of [wb, bb]) gpu.pool.release(b);
        }
      }
    });

    test("q8: 13 rows, 1 and 6 tokens, cols 200 and 90 (a last chunk of 8 and 10 codes in a partial block), x at offsets 0 and 1", { skip }, async () => {
      for (const [cols, xOff] of [[200, 0], [90, 1]] as const) {
        const rows = 13;
        const q = packQ8Weight(uniform(rows * cols, 100 + cols), rows, cols);
        const blocks = Math.ceil(cols / 32);
        const values = Array.from({ length: rows * cols }, (_, i) => Math.fround(q.codes[Math.floor(i / cols) * blocks * 32 + (i % cols)]! * q.scales[Math.floor(i / cols) * blocks + Math.floor((i % cols) / 32)]!));
        const cb = gpu.upload(new Uint8Array(q.codes.buffer), "codes");
        const sb = gpu.upload(f32Bytes(q.scales), "scales");
        for (const tokens of [1, 6]) {
          const x = uniform(tokens * cols, 110 + tokens);
          const xb = gpu.upload(f32Bytes([...new Array<number>(xOff).fill(0), ...x]), "x");
          const shape = { tokens, rows, cols };
          const ref = linearReference(x, values, shape);
          const mag = linearMagnitude(x, values, shape);
          await check(`${variant} gemv q8 cols ${cols} T=${tokens}`, tokens, rows, (pass, ob) => ops.gemvQ8(pass, { x: { buffer: xb, offset: xOff }, weight: { codes: { buffer: cb }, scales: { buffer: sb } }, out: { buffer: ob, offset: 3 }, outStride: rows + 7, tokens, rows, cols }), ref, (i) => 1e-5 * mag[i]!);
          gpu.pool.release(xb);
        }
        for (const b of [cb, sb]) gpu.pool.release(b);
      }
    });

    test("ggml blocks: q4_k and q6_k 13 × 512, q4_0 11 × 72 (a partial last block), 1 and 6 tokens, x at offsets 0 and 1, bias", { skip }, async () => {
      const cases: [GpuBlockType, number, number][] = [["q4_k", 13, 512], ["q6_k", 13, 512], ["q4_0", 11, 72]];
      for (const [k, [type, rows, cols]] of cases.entries()) {
        const bytes = type === "q4_0" ? randomQ40(rows, cols, 120 + k) : randomKquantBlocks(type === "q4_k" ? "Q4_K" : "Q6_K", rows, cols, 120 + k);
        const { values, offsets } = decodeBlockRows(type, bytes, rows, cols);
        const wb = gpu.upload(bytes, `${type} blocks`);
        const bias = uniform(rows, 130 + k);
        const bb = gpu.upload(f32Bytes(bias), "bias");
        for (const [tokens, xOff] of [[1, 0], [6, 0], [1, 1], [6, 1]] as const) {
          const x = uniform(tokens * cols, 140 + tokens, -2, 2);
          const xb = gpu.upload(f32Bytes([...new Array<number>(xOff).fill(0), ...x]), "x");
          const shape = { tokens, rows, cols };
          const ref = linearReference(x, values, shape, bias);
          const mag = linearMagnitude(x, values, shape);
          const off = linearMagnitude(x, offsets, shape);
          await check(`${variant} gemv ${type} x offset ${xOff} T=${tokens}`, tokens, rows, (pass, ob) => ops.gemvBlocks(pass, { x: { buffer: xb, offset: xOff }, weight: { buffer: wb }, type, out: { buffer: ob, offset: 3 }, outStride: rows + 7, bias: { buffer: bb }, tokens, rows, cols }), ref, (i) => 1e-5 * (mag[i]! + off[i]! + Math.abs(bias[i % rows]!)));
          gpu.pool.release(xb);
        }
        for (const b of [wb, bb]) gpu.pool.release(b);
      }
    });
  });
}

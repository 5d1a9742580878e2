// Conformance of the WGSL decoder kernels (src/gpu/wgsl/decoder-ops.ts)
// against their float64 twins in src/ops/reference: RMSNorm with the fused
// residual add (f32, f16 and bf16 weights, strided rows), SwiGLU, RoPE (from
// the cos/sin cache; 1e-6 relative), KV append (bit-exact codes), the KV
// append with RoPE of q and k fused (q and the f32 cache 1e-6 relative, the
// f16 cache 1e-3: a rounding step of the rotated value), and the f32
// and q8 GEMV and tiled GEMM (f16 / bf16 / q8 weights, bias, a wider output),
// the embedding gather, SwiGLU over gate_up rows and the per-head RMSNorm,
// on awkward sizes (97 columns, 1000 elements, 7 and 33 tokens), outputs
// poisoned with NaN first. Tolerances: RMSNorm and SwiGLU per element
// |got − ref| ≤ 1e-5 · max(1, |ref|); GEMV |got − ref| ≤ 1e-5 · Σ|x·w|
// (linearMagnitude: f32 accumulation in another order). The matrix kernels
// compile on demand (GpuDecoderOps.prepare), checked by name.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError } from "../../src/ops-entry.js";
import { GpuDecoderOps, type GpuQ8Weight, type GpuView, packQ8Weight, ropeCosSinCache } from "../../src/gpu/decoder-ops.js";
import type { GpuDevice } from "../../src/gpu/index.js";
import { linearMagnitude, linearReference } from "../../src/ops/reference/linear.js";
import { rmsNormReference } from "../../src/ops/reference/rmsnorm.js";
import { ropeReference } from "../../src/ops/reference/rope.js";
import { ropeInvFreq } from "../../src/ops/rope.js";
import { swigluReference } from "../../src/ops/reference/swiglu.js";
import { decodeValue, encodeValue } from "../../src/tensor/codec.js";
import { uniform } from "../helpers/random.js";
import { openTestGpu, runPass } from "./support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);

describe("WebGPU decoder kernels against the float64 references", () => {
  let gpu: GpuDevice;
  let ops: GpuDecoderOps;
  before(async () => {
    if (!opened.gpu) return;
    gpu = opened.gpu;
    ops = await GpuDecoderOps.create(gpu);
  });
  after(() => {
    ops?.dispose();
    opened.gpu?.destroy();
  });

  const upload = (data: ArrayLike<number>, label: string) => gpu.upload(new Uint8Array(Float32Array.from(data).buffer), label);
  const poisoned = (n: number, label: string) => upload(new Float32Array(n).fill(NaN), label);
  const run = (record: (pass: GPUComputePassEncoder) => void, out: GPUBuffer, n: number) => runPass(gpu, ops, "a decoder-ops test", record, out, n);
  function close(what: string, got: ArrayLike<number>, ref: ArrayLike<number>, tol: (i: number) => number): void {
    assert.equal(got.length, ref.length, `${what}: length`);
    for (let i = 0; i < ref.length; i++) {
      if (!(Math.abs(got[i]! - ref[i]!) <= tol(i))) assert.fail(`${what}: element ${i} = ${got[i]}, reference ${ref[i]} (tolerance ${tol(i)})`);
    }
  }

  gpuTest("RMSNorm with the fused residual add: 7 rows of 97 (row stride 100), f32 / f16 / bf16 weights", async () => {
    const rows = 7;
    const cols = 97;
    const stride = 100;
    for (const [seed, dtype] of [[1, "f32"], [2, "f16"], [3, "bf16"]] as const) {
      const x = uniform(rows * stride, seed, -2, 2);
      const delta = uniform(rows * cols, seed + 10);
      const wValues = Array.from(uniform(cols, seed + 20, 0.5, 1.5));
      const wCodes = wValues.map((v) => (dtype === "f32" ? v : encodeValue(dtype, v)));
      const wDecoded = wCodes.map((c) => (dtype === "f32" ? Math.fround(c) : decodeValue(dtype, c)));
      const wBytes = dtype === "f32" ? new Uint8Array(Float32Array.from(wCodes).buffer) : new Uint8Array(Uint16Array.from(wCodes).buffer);
      const xb = upload(x, "x");
      const db = upload(delta, "delta");
      const wb = gpu.upload(wBytes, "w");
      const ob = poisoned(rows * cols, "out");
      const got = await run((pass) => ops.rmsNorm(pass, { x: { buffer: xb }, xStride: stride, delta: { buffer: db }, weight: { buffer: wb }, weightDtype: dtype, out: { buffer: ob }, rows, cols, eps: 1e-5 }), ob, rows * cols);
      const summed = Array.from({ length: rows * cols }, (_, i) => x[Math.floor(i / cols) * stride + (i % cols)]! + delta[i]!);
      const ref = rmsNormReference(summed.map(Math.fround), wDecoded, rows, cols, 1e-5);
      close(`rmsnorm ${dtype}`, got, ref, (i) => 1e-5 * Math.max(1, Math.abs(ref[i]!)));
      const residual = new Float32Array(await gpu.read(xb, rows * stride * 4));
      close(`residual ${dtype}`, Array.from({ length: rows * cols }, (_, i) => residual[Math.floor(i / cols) * stride + (i % cols)]!), summed.map(Math.fround), () => 0);
      for (const b of [xb, db, wb, ob]) gpu.pool.release(b);
    }
  });

  gpuTest("SwiGLU over 1000 elements", async () => {
    const n = 1000;
    const g = uniform(n, 4, -8, 8);
    const u = uniform(n, 5);
    const [gb, ub, ob] = [upload(g, "gate"), upload(u, "up"), poisoned(n, "out")];
    const got = await run((pass) => ops.swiglu(pass, { gate: { buffer: gb }, up: { buffer: ub }, out: { buffer: ob }, n }), ob, n);
    const ref = swigluReference(g, u);
    close("swiglu", got, ref, (i) => 1e-5 * Math.max(1, Math.abs(ref[i]!)));
    for (const b of [gb, ub, ob]) gpu.pool.release(b);
  });

  gpuTest("GEMV f32: 1 and 7 tokens, 97 rows × 1000 columns, at element offsets", async () => {
    const rows = 97;
    const cols = 1000;
    for (const tokens of [1, 7]) {
      const x = uniform(tokens * cols, 6 + tokens);
      const w = uniform(rows * cols, 7);
      const xb = upload([0, 0, 0, ...x], "x"); // x at element offset 3
      const wb = upload(w, "w");
      const ob = poisoned(5 + tokens * rows, "out");
      const got = (await run((pass) => ops.gemv(pass, { x: { buffer: xb, offset: 3 }, weight: { buffer: wb }, out: { buffer: ob, offset: 5 }, tokens, rows, cols }), ob, 5 + tokens * rows)).subarray(5);
      const shape = { tokens, rows, cols };
      const ref = linearReference(x, w, shape);
      const mag = linearMagnitude(x, w, shape);
      close(`gemv T=${tokens}`, got, ref, (i) => 1e-5 * mag[i]!);
      for (const b of [xb, wb, ob]) gpu.pool.release(b);
    }
  });

  gpuTest("GEMV q8 (Q8_0 codes, f32 scales): 7 tokens, 97 rows × 1000 columns (a partial last block), against the dequantized weights", async () => {
    const [tokens, rows, cols] = [7, 97, 1000];
    const x = uniform(tokens * cols, 11);
    const w = uniform(rows * cols, 12);
    const q = packQ8Weight(w, rows, cols);
    const blocks = Math.ceil(cols / 32);
    const dequantized = Array.from({ length: rows * cols }, (_, i) => {
      const [r, c] = [Math.floor(i / cols), i % cols];
      return Math.fround(q.codes[r * blocks * 32 + c]! * q.scales[r * blocks + Math.floor(c / 32)]!);
    });
    assert.ok(dequantized.some((v, i) => v !== Math.fround(w[i]!)), "the weights were quantized");
    const xb = upload(x, "x");
    const cb = gpu.upload(new Uint8Array(q.codes.buffer), "codes");
    const sb = upload(q.scales, "scales");
    const ob = poisoned(tokens * rows, "out");
    const got = await run((pass) => ops.gemvQ8(pass, { x: { buffer: xb }, weight: { codes: { buffer: cb }, scales: { buffer: sb } }, out: { buffer: ob }, tokens, rows, cols }), ob, tokens * rows);
    const shape = { tokens, rows, cols };
    const ref = linearReference(x, dequantized, shape);
    const mag = linearMagnitude(x, dequantized, shape);
    close("gemv q8", got, ref, (i) => 1e-5 * mag[i]!);
    for (const b of [xb, cb, sb, ob]) gpu.pool.release(b);
  });

  /** W [rows, cols] in `dtype` (f32 | f16 | bf16 | q8): the bytes the kernels read and the values they multiply by. */
  function weightIn(dtype: "f32" | "f16" | "bf16" | "q8", rows: number, cols: number, seed: number) {
    const w = uniform(rows * cols, seed);
    if (dtype === "q8") {
      const q = packQ8Weight(w, rows, cols);
      const blocks = Math.ceil(cols / 32);
      const values = Array.from({ length: rows * cols }, (_, i) => Math.fround(q.codes[Math.floor(i / cols) * blocks * 32 + (i % cols)]! * q.scales[Math.floor(i / cols) * blocks + Math.floor((i % cols) / 32)]!));
      const codes = gpu.upload(new Uint8Array(q.codes.buffer), "codes");
      const scales = upload(q.scales, "scales");
      return { values, weight: { codes: { buffer: codes }, scales: { buffer: scales } }, buffers: [codes, scales] };
    }
    const codes = Array.from(w, (v) => (dtype === "f32" ? v : encodeValue(dtype, v)));
    const values = codes.map((c) => (dtype === "f32" ? Math.fround(c) : decodeValue(dtype, c)));
    const b = gpu.upload(dtype === "f32" ? new Uint8Array(Float32Array.from(codes).buffer) : new Uint8Array(Uint16Array.from(codes).buffer), "w");
    return { values, weight: { buffer: b }, buffers: [b] };
  }

  gpuTest("GEMV and the tiled GEMM: f32 / f16 / bf16 / q8 weights, 1, 7 and 33 tokens (tile edges), 37 rows × 80 columns, bias, into columns 5… of a 50-wide output", async () => {
    const [rows, cols, outStride, col0] = [37, 80, 50, 5];
    for (const [k, dtype] of (["f32", "f16", "bf16", "q8"] as const).entries()) {
      const w = weightIn(dtype, rows, cols, 30 + k);
      const bias = uniform(rows, 40 + k);
      const bb = upload(bias, "bias");
      for (const tokens of [1, 7, 33]) {
        const x = uniform(tokens * cols, 50 + tokens);
        const xb = upload(x, "x");
        for (const kernel of ["gemv", "gemm"] as const) {
          const ob = poisoned(tokens * outStride, "out");
          const common = { x: { buffer: xb }, out: { buffer: ob, offset: col0 }, outStride, bias: { buffer: bb }, tokens, rows, cols };
          const got = await run((pass) => {
            if (dtype === "q8") (kernel === "gemv" ? ops.gemvQ8(pass, { ...common, weight: w.weight as GpuQ8Weight }) : ops.gemmQ8(pass, { ...common, weight: w.weight as GpuQ8Weight }));
            else (kernel === "gemv" ? ops.gemv(pass, { ...common, weight: w.weight as GpuView, weightDtype: dtype }) : ops.gemm(pass, { ...common, weight: w.weight as GpuView, weightDtype: dtype }));
          }, ob, tokens * outStride);
          const shape = { tokens, rows, cols };
          const ref = linearReference(x, w.values, shape, bias);
          const mag = linearMagnitude(x, w.values, shape);
          const rowsOf = (a: ArrayLike<number>) => Array.from({ length: tokens * rows }, (_, i) => a[Math.floor(i / rows) * outStride + col0 + (i % rows)]!);
          close(`${kernel} ${dtype} T=${tokens}`, rowsOf(got), ref, (i) => 1e-5 * (mag[i]! + Math.abs(bias[i % rows]!)));
          // Outside its columns the output keeps its poison.
          for (let t = 0; t < tokens; t++) for (const c of [0, col0 - 1, col0 + rows]) assert.ok(Number.isNaN(got[t * outStride + c]!), `${kernel} ${dtype} T=${tokens}: wrote column ${c}`);
          gpu.pool.release(ob);
        }
        gpu.pool.release(xb);
      }
      for (const b of [bb, ...w.buffers]) gpu.pool.release(b);
    }
  });

  gpuTest("tiled GEMM across its 64-token × 128-row tiles: 65 and 97 tokens × 130 rows × 72 columns (a partial 16-column slab), f32 / bf16 / q8, bias", async () => {
    const [rows, cols] = [130, 72];
    for (const [k, dtype] of (["f32", "bf16", "q8"] as const).entries()) {
      const w = weightIn(dtype, rows, cols, 70 + k);
      const bias = uniform(rows, 80 + k);
      const bb = upload(bias, "bias");
      for (const tokens of [65, 97]) {
        const x = uniform(tokens * cols, 90 + tokens);
        const xb = upload(x, "x");
        const ob = poisoned(tokens * rows, "out");
        const common = { x: { buffer: xb }, out: { buffer: ob }, bias: { buffer: bb }, tokens, rows, cols };
        const got = await run((pass) => {
          if (dtype === "q8") ops.gemmQ8(pass, { ...common, weight: w.weight as GpuQ8Weight });
          else ops.gemm(pass, { ...common, weight: w.weight as GpuView, weightDtype: dtype });
        }, ob, tokens * rows);
        const shape = { tokens, rows, cols };
        const ref = linearReference(x, w.values, shape, bias);
        const mag = linearMagnitude(x, w.values, shape);
        close(`gemm ${dtype} T=${tokens}`, got, ref, (i) => 1e-5 * (mag[i]! + Math.abs(bias[i % rows]!)));
        gpu.pool.release(ob);
        gpu.pool.release(xb);
      }
      for (const b of [bb, ...w.buffers]) gpu.pool.release(b);
    }
  });

  gpuTest("embedding: 7 ids out of 37 rows of 80, f32 / bf16 / q8 rows, exact", async () => {
    const [rows, cols] = [37, 80];
    const ids = [36, 0, 5, 5, 17, 1, 36];
    const ib = gpu.upload(new Uint8Array(Int32Array.from(ids).buffer), "ids");
    for (const [k, dtype] of (["f32", "bf16", "q8"] as const).entries()) {
      const w = weightIn(dtype, rows, cols, 60 + k);
      const ob = poisoned(ids.length * cols, "out");
      const got = await run((pass) => ops.embedding(pass, { ids: { buffer: ib }, weight: w.weight, dtype, out: { buffer: ob }, tokens: ids.length, rows, cols }), ob, ids.length * cols);
      const ref = ids.flatMap((id) => w.values.slice(id * cols, (id + 1) * cols));
      close(`embedding ${dtype}`, got, ref, () => 0);
      for (const b of [ob, ...w.buffers]) gpu.pool.release(b);
    }
    gpu.pool.release(ib);
  });

  gpuTest("SwiGLU over rows: the gate and up halves of a [7, 2·97] gate_up into a compact [7, 97]", async () => {
    const [rows, n] = [7, 97];
    const gu = uniform(rows * 2 * n, 70, -8, 8);
    const gb = upload(gu, "gate_up");
    const ob = poisoned(rows * n, "out");
    const got = await run((pass) => ops.swiglu(pass, { gate: { buffer: gb }, up: { buffer: gb, offset: n }, inStride: 2 * n, out: { buffer: ob }, n, rows }), ob, rows * n);
    const g = Array.from({ length: rows * n }, (_, i) => gu[Math.floor(i / n) * 2 * n + (i % n)]!);
    const u = Array.from({ length: rows * n }, (_, i) => gu[Math.floor(i / n) * 2 * n + n + (i % n)]!);
    const ref = swigluReference(g, u);
    close("swiglu rows", got, ref, (i) => 1e-5 * Math.max(1, Math.abs(ref[i]!)));
    for (const b of [gb, ob]) gpu.pool.release(b);
  });

  gpuTest("RMSNorm per head inside qkv (Qwen3's q_norm): 3 tokens × 5 heads of 16, token stride 120, into a compact [15, 16]", async () => {
    const [tokens, heads, d, stride] = [3, 5, 16, 120];
    const x = uniform(tokens * stride, 80, -2, 2);
    const w = Array.from(uniform(d, 81, 0.5, 1.5));
    const xb = upload(x, "qkv");
    const wb = upload(w, "w");
    const ob = poisoned(tokens * heads * d, "out");
    const got = await run((pass) => ops.rmsNorm(pass, { x: { buffer: xb, offset: 4 }, xStride: stride, group: heads, weight: { buffer: wb }, out: { buffer: ob }, rows: tokens * heads, cols: d, eps: 1e-6 }), ob, tokens * heads * d);
    const rowsIn = Array.from({ length: tokens * heads * d }, (_, i) => Math.fround(x[4 + Math.floor(i / (heads * d)) * stride + (i % (heads * d))]!));
    const ref = rmsNormReference(rowsIn, w.map(Math.fround), tokens * heads, d, 1e-6);
    close("rmsnorm per head", got, ref, (i) => 1e-5 * Math.max(1, Math.abs(ref[i]!)));
    for (const b of [xb, wb, ob]) gpu.pool.release(b);
  });

  gpuTest("RoPE from the cos/sin cache: 7 tokens at positions up to 4000, 3 heads of 80 with rotary dim 64, token stride 250, llama3-scaled frequencies", async () => {
    const tokens = 7;
    const heads = 3;
    const headDim = 80;
    const rotaryDim = 64;
    const stride = 250;
    const maxPos = 4096;
    // Llama 3.1's scaling, through the CPU side's own inv_freq.
    const invFreq = ropeInvFreq({ headDim, rotaryDim, theta: 500000, scaling: { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 } });
    const positions = [0, 1, 7, 97, 1000, 2047, 4000];
    const x = uniform(tokens * stride, 8);
    const xb = upload(x, "x");
    const pb = gpu.upload(new Uint8Array(Int32Array.from(positions).buffer), "positions");
    const cb = upload(ropeCosSinCache(invFreq, maxPos), "cos/sin");
    const got = await run((pass) => ops.rope(pass, { x: { buffer: xb }, tokenStride: stride, positions: { buffer: pb }, cosSin: { buffer: cb }, maxPos, tokens, heads, headDim, rotaryDim }), xb, tokens * stride);
    const packed = Array.from({ length: tokens * heads * headDim }, (_, i) => x[Math.floor(i / (heads * headDim)) * stride + (i % (heads * headDim))]!);
    const ref = ropeReference(packed, positions, invFreq, { tokens, heads, headDim, rotaryDim });
    const gotPacked = Array.from({ length: tokens * heads * headDim }, (_, i) => got[Math.floor(i / (heads * headDim)) * stride + (i % (heads * headDim))]!);
    close("rope", gotPacked, ref, (i) => 1e-6 * Math.max(1, Math.abs(ref[i]!)));
    for (let t = 0; t < tokens; t++) for (let i = heads * headDim; i < stride; i++) assert.equal(got[t * stride + i], x[t * stride + i], "bytes between tokens are untouched");
    for (const b of [xb, pb, cb]) gpu.pool.release(b);
  });

  gpuTest("KV append with RoPE fused: q rotated in place and k rotated into the cache in one dispatch, qkv rows [T, (H + 2·Hkv)·D], H 3, Hkv 1, D 80, rotary dim 64, f32 and f16 caches, a token skipped by slot −1", async () => {
    const [tokens, H, hkv, d, rotaryDim, maxPos, numSlots] = [5, 3, 1, 80, 64, 2048, 24];
    const cols = (H + 2 * hkv) * d;
    const invFreq = ropeInvFreq({ headDim: d, rotaryDim, theta: 10000 });
    const positions = [0, 3, 97, 1000, 2047];
    const slots = [7, -1, 0, 23, 12];
    const qkv = uniform(tokens * cols, 70, -2, 2);
    const pick = (off: number, heads: number) => Array.from({ length: tokens * heads * d }, (_, i) => qkv[Math.floor(i / (heads * d)) * cols + off + (i % (heads * d))]!);
    const qRef = ropeReference(pick(0, H), positions, invFreq, { tokens, heads: H, headDim: d, rotaryDim });
    const kRef = ropeReference(pick(H * d, hkv), positions, invFreq, { tokens, heads: hkv, headDim: d, rotaryDim });
    const vIn = pick((H + hkv) * d, hkv);
    const pb = gpu.upload(new Uint8Array(Int32Array.from(positions).buffer), "positions");
    const cb = upload(ropeCosSinCache(invFreq, maxPos), "cos/sin");
    const sb = gpu.upload(new Uint8Array(Int32Array.from(slots).buffer), "slots");
    for (const dtype of ["f32", "f16"] as const) {
      const eb = dtype === "f32" ? 4 : 2;
      const xb = upload(qkv, "qkv");
      const [ck, cv] = [gpu.upload(new Uint8Array(numSlots * hkv * d * eb).fill(0xab), "cache k"), gpu.upload(new Uint8Array(numSlots * hkv * d * eb).fill(0xab), "cache v")];
      const got = await run((pass) => ops.appendKv(pass, {
        k: { buffer: xb, offset: H * d }, v: { buffer: xb, offset: (H + hkv) * d }, tokenStride: cols, slots: { buffer: sb }, cacheK: { buffer: ck }, cacheV: { buffer: cv }, dtype, numSlots, tokens, numKvHeads: hkv, headDim: d,
        rope: { positions: { buffer: pb }, cosSin: { buffer: cb }, maxPos, rotaryDim, q: { x: { buffer: xb }, tokenStride: cols, heads: H } },
      }), xb, tokens * cols);
      const qGot = Array.from({ length: tokens * H * d }, (_, i) => got[Math.floor(i / (H * d)) * cols + (i % (H * d))]!);
      close(`${dtype}: q rotated in place`, qGot, qRef, (i) => 1e-6 * Math.max(1, Math.abs(qRef[i]!)));
      for (let t = 0; t < tokens; t++) for (let e = H * d; e < cols; e++) assert.equal(got[t * cols + e], qkv[t * cols + e], "k and v rows are left as they were");
      const read = async (buf: GPUBuffer) => {
        const bytes = await gpu.read(buf, numSlots * hkv * d * eb);
        return dtype === "f32" ? Array.from(new Float32Array(bytes)) : Array.from(new Uint16Array(bytes), (c) => decodeValue("f16", c));
      };
      const [kc, vc] = [await read(ck), await read(cv)];
      const tol = dtype === "f32" ? 1e-6 : 1e-3;
      slots.forEach((slot, t) => {
        if (slot < 0) return;
        for (let e = 0; e < hkv * d; e++) {
          const [kw, vw] = [kRef[t * hkv * d + e]!, dtype === "f32" ? vIn[t * hkv * d + e]! : decodeValue("f16", encodeValue("f16", vIn[t * hkv * d + e]!))];
          if (!(Math.abs(kc[slot * hkv * d + e]! - kw) <= tol * Math.max(1, Math.abs(kw)))) assert.fail(`${dtype}: cache K slot ${slot} element ${e} = ${kc[slot * hkv * d + e]}, rotated reference ${kw}`);
          assert.equal(vc[slot * hkv * d + e], vw, `${dtype}: cache V slot ${slot} element ${e}`);
        }
      });
      const untouched = dtype === "f32" ? new Float32Array(new Uint8Array(4).fill(0xab).buffer)[0]! : decodeValue("f16", 0xabab);
      for (const slot of [1, 22]) assert.equal(kc[slot * hkv * d], untouched, `slot ${slot} untouched`);
      for (const b of [xb, ck, cv]) gpu.pool.release(b);
    }
    for (const b of [pb, cb, sb]) gpu.pool.release(b);
  });

  gpuTest("KV append into a paged cache: 7 tokens (one skipped by slot −1) into scattered slots, K and V at their own token strides, f32 / f16 / bf16 codes equal the CPU codec's, other slots untouched", async () => {
    const tokens = 7;
    const hkv = 2;
    const d = 80;
    const numSlots = 40;
    const stride = 170;
    const slots = [33, 0, -1, 17, 5, 39, 16];
    const k = uniform(tokens * stride, 9, -3, 3);
    const vStride = 200;
    const v = uniform(tokens * vStride, 10, -3, 3);
    k[3] = NaN; // token 0, head 0, dim 3: a NaN stays NaN
    for (const dtype of ["f32", "f16", "bf16"] as const) {
      const eb = dtype === "f32" ? 4 : 2;
      const fill = new Uint8Array(numSlots * hkv * d * eb).fill(0xab);
      const [kb, vb] = [upload(k, "k"), upload(v, "v")];
      const sb = gpu.upload(new Uint8Array(Int32Array.from(slots).buffer), "slots");
      const [ck, cv] = [gpu.upload(fill, "cache k"), gpu.upload(fill, "cache v")];
      await run((pass) => ops.appendKv(pass, { k: { buffer: kb }, v: { buffer: vb }, tokenStride: stride, vTokenStride: vStride, slots: { buffer: sb }, cacheK: { buffer: ck }, cacheV: { buffer: cv }, dtype, numSlots, tokens, numKvHeads: hkv, headDim: d }), ck, 4);
      for (const [name, src, buf] of [["k", k, ck], ["v", v, cv]] as const) {
        const bytes = new Uint8Array(await gpu.read(buf, fill.byteLength));
        const codes = dtype === "f32" ? new Uint32Array(bytes.buffer) : new Uint16Array(bytes.buffer);
        const want = dtype === "f32" ? new Uint32Array(new Uint8Array(fill).buffer) : new Uint16Array(new Uint8Array(fill).buffer);
        slots.forEach((slot, t) => {
          if (slot < 0) return;
          for (let e = 0; e < hkv * d; e++) {
            const x = src[t * (name === "k" ? stride : vStride) + e]!;
            want[slot * hkv * d + e] = dtype === "f32" ? new Uint32Array(Float32Array.of(x).buffer)[0]! : encodeValue(dtype, x);
          }
        });
        for (let i = 0; i < want.length; i++) {
          const nan = (c: number) => (dtype === "f32" ? Number.isNaN(new Float32Array(Uint32Array.of(c).buffer)[0]) : Number.isNaN(decodeValue(dtype, c)));
          if (codes[i] !== want[i] && !(nan(codes[i]!) && nan(want[i]!))) assert.fail(`${dtype} ${name}: element ${i} code ${codes[i]!.toString(16)}, want ${want[i]!.toString(16)}`);
        }
      }
      for (const b of [kb, vb, sb, ck, cv]) gpu.pool.release(b);
    }
  });

  gpuTest("sizes beyond a buffer and a zero count are ArgumentErrors naming the argument", async () => {
    const b = gpu.pool.acquire(256, "small");
    const enc = gpu.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    assert.throws(() => ops.gemv(pass, { x: { buffer: b }, weight: { buffer: b }, out: { buffer: b, offset: 60 }, tokens: 1, rows: 8, cols: 8 }), (e: Error) => e instanceof ArgumentError && /^x needs 4096 bytes|^weight needs 256 bytes|^out needs 272 bytes/.test(e.message));
    assert.throws(() => ops.swiglu(pass, { gate: { buffer: b }, up: { buffer: b }, out: { buffer: b }, n: 0 }), /n must be an integer ≥ 1, got 0/);
    pass.end();
    enc.finish();
    gpu.pool.release(b);
  });

  gpuTest("matrix kernels compile on demand: create(gpu, []) has none, recording one unprepared is an error naming it, prepare() adds it, a bad name is an ArgumentError", async () => {
    const bare = await GpuDecoderOps.create(gpu, []);
    const b = gpu.pool.acquire(256, "small");
    const o = gpu.pool.acquire(256, "small out");
    const enc = gpu.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    try {
      assert.deepEqual(bare.kernels, []);
      assert.deepEqual(ops.kernels, ["embedding", "gemm", "gemm q8", "gemv f32", "gemv q8"]); // create's default
      const q8 = { x: { buffer: b }, weight: { codes: { buffer: b }, scales: { buffer: b } }, out: { buffer: o }, tokens: 1, rows: 2, cols: 32 };
      assert.throws(() => bare.gemvQ8(pass, q8), /^Error: the gemv q8 kernel is not compiled: await prepare\(\["gemv q8"\]\) first/);
      await bare.prepare(["gemv q8", "gemv q8"]);
      assert.deepEqual(bare.kernels, ["gemv q8"]);
      bare.gemvQ8(pass, q8);
      await assert.rejects(bare.prepare(["gemv q9" as "gemv q8"]), (e: Error) => e instanceof ArgumentError && /^kernels must name matrix kernels .*, got "gemv q9"$/.test(e.message));
    } finally {
      pass.end();
      enc.finish();
      bare.dispose();
      gpu.pool.release(b);
      gpu.pool.release(o);
    }
  });
});

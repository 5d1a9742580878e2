// Conformance of the WebGPU kernels on quantized paged KV caches (int8 with
// per-token scales; fp8 e4m3 and e5m2 at per-tensor scale 1 — the caches
// loadModel makes, src/kv/kv-quant.ts) against the CPU:
// - KV append (wgsl/kv-append.ts) against the CPU's appendKv into a
//   PagedKvCache (assembly/kv/append.ts, whose float64 twin is
//   src/kv/reference.ts referenceQuantizeRow): the same codes in the same
//   layout and the same per-token scales. Tolerances: fp8 codes bit-exact;
//   int8 scales |gpu − cpu| ≤ 1e-6 · cpu and codes within ±1 (WGSL's f32
//   division is within 2.5 ULP, wasm's correctly rounded, so x / s at a
//   half may round the other way); bytes of unwritten slots stay poisoned.
// - paged attention (decode with FlashDecoding split-KV and the LSE merge;
//   FlashAttention-2 for a prefill chunk) reading those caches, against
//   referencePagedAttention (float64 over referenceGatherKv's dequantized
//   rows), D = 80, GQA 4/2, lengths 1, 7 and 97, block size 16, out and lse
//   poisoned with NaN, unread slots of the last blocks poisoned (int8 scales
//   NaN, fp8 codes NaN). Tolerances: support.ts (2e-5).
// - what does not run on the GPU yet (fp8 with scales ≠ 1, int8 dense K/V:
//   refused by the operator's own check) is an ArgumentError naming it
//   (int8 per-channel runs: int8-channel-kv.test.ts).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError, PagedKvCache, type Runtime, Tensor, appendKv, createRuntime, referencePagedAttention } from "../../src/ops-entry.js";
import { GpuDecoderOps } from "../../src/gpu/decoder-ops.js";
import { type GpuDevice, gpuFlashAttention, gpuPagedAttention } from "../../src/gpu/index.js";
import { cacheLayout } from "../../src/gpu/wgsl/kv-load.js";
import { type AttentionResult } from "../../src/ops-entry.js";
import { freeAll, lseShapeOf, randomTensor, rng } from "../attention/support.js";
import { gaussian, pagedFixture } from "../kv/paged-support.js";
import { assertGpuClose, openTestGpu } from "./support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);
const BYTE_DTYPES = ["int8", "fp8e4m3", "fp8e5m2"] as const;

describe("WebGPU kernels on int8 and fp8 paged KV caches against the CPU and the float64 references", () => {
  let rt: Runtime;
  let gpu: GpuDevice;
  let ops: GpuDecoderOps;
  before(async () => {
    rt = await createRuntime({ threads: 1 });
    if (!opened.gpu) return;
    gpu = opened.gpu;
    ops = await GpuDecoderOps.create(gpu);
  });
  after(async () => {
    ops?.dispose();
    opened.gpu?.destroy();
    await rt.dispose();
  });

  gpuTest("KV append: 7 tokens (one skipped by slot −1) into scattered slots, D = 80, K and V at their own token strides: the CPU appendKv's codes and per-token scales, in its layout; saturation, subnormals, halfway cases and a zero row", async () => {
    const [tokens, hkv, d, blockSize, numBlocks] = [7, 2, 80, 16, 3];
    const numSlots = blockSize * numBlocks;
    const slots = Int32Array.from([33, 0, -1, 17, 5, 47, 16]);
    const random = rng(21);
    const k = gaussian(tokens * hkv * d, random, true);
    const v = gaussian(tokens * hkv * d, random, true);
    k.fill(0, hkv * d, hkv * d + d); // token 1, head 0: all zeros (scale 0, codes 0)
    // token 3: beyond fp8's range (saturates), e4m3 subnormals, values halfway between codes (ties to even).
    const special = [1000, -1e6, 448, 464, 57344, 61440, 1e-3, -(2 ** -10), 3 * 2 ** -10, 1.0625, 1.1875, -2.5, 2 ** -17, 3 * 2 ** -17, 0, -0];
    k.set(special, 3 * hkv * d);
    v.set(special.map((x) => -x), 3 * hkv * d + d + 4);
    const [kStride, vStride] = [hkv * d + 10, hkv * d + 30];
    const spread = (x: Float32Array, stride: number) => {
      const out = new Float32Array(tokens * stride).fill(NaN);
      for (let t = 0; t < tokens; t++) out.set(x.subarray(t * hkv * d, (t + 1) * hkv * d), t * stride);
      return out;
    };
    for (const dtype of BYTE_DTYPES) {
      // The CPU: appendKv into a one-layer PagedKvCache.
      const cache = new PagedKvCache(rt, { numLayers: 1, numBlocks, blockSize, numKvHeads: hkv, headDim: d, dtype });
      const kt = rt.tensor("f32", [tokens, hkv, d]).set(k);
      const vt = rt.tensor("f32", [tokens, hkv, d]).set(v);
      appendKv(rt, { cache, layer: 0, k: kt, v: vt, slotMapping: slots });
      // The GPU: the same rows at other token strides into poisoned buffers of cacheLayout's size.
      const layout = cacheLayout(numSlots, hkv, d, dtype);
      const fill = new Uint8Array(layout.bytes).fill(0xab);
      const kb = gpu.upload(new Uint8Array(spread(k, kStride).buffer), "k");
      const vb = gpu.upload(new Uint8Array(spread(v, vStride).buffer), "v");
      const sb = gpu.upload(new Uint8Array(slots.buffer), "slots");
      const [ck, cv] = [gpu.upload(fill, "cache k"), gpu.upload(fill, "cache v")];
      await gpu.scoped("an append test", async () => {
        const enc = gpu.device.createCommandEncoder();
        const pass = enc.beginComputePass();
        ops.appendKv(pass, { k: { buffer: kb }, v: { buffer: vb }, tokenStride: kStride, vTokenStride: vStride, slots: { buffer: sb }, cacheK: { buffer: ck }, cacheV: { buffer: cv }, dtype, numSlots, tokens, numKvHeads: hkv, headDim: d });
        pass.end();
        gpu.device.queue.submit([enc.finish()]);
        await gpu.device.queue.onSubmittedWorkDone();
      });
      ops.recycle();
      let offByOne = 0;
      for (const which of ["k", "v"] as const) {
        const got = new Uint8Array(await gpu.read(which === "k" ? ck : cv, layout.bytes));
        const layer = cache.layer(0);
        const codes = new Uint8Array(rt.memory.buffer, (which === "k" ? layer.k : layer.v).ptr, numSlots * hkv * d);
        const scales = dtype === "int8" ? ((which === "k" ? layer.kScale : layer.vScale)!.data() as Float32Array) : null;
        const gotScales = new Float32Array(got.buffer, layout.scaleOff * 4, dtype === "int8" ? numSlots * hkv : 0);
        const written = new Set(Array.from(slots).filter((s) => s >= 0));
        for (let slot = 0; slot < numSlots; slot++) {
          for (let h = 0; h < hkv; h++) {
            const row = slot * hkv + h;
            if (!written.has(slot)) {
              for (let i = 0; i < d; i++) assert.equal(got[row * d + i], 0xab, `${dtype} ${which}: unwritten slot ${slot} byte ${i} is untouched`);
              if (scales) assert.equal(new Uint8Array(gotScales.buffer, gotScales.byteOffset + row * 4, 4)[0], 0xab, `${dtype} ${which}: unwritten slot ${slot}'s scale is untouched`);
              continue;
            }
            if (scales) {
              const [g, c] = [gotScales[row]!, scales[row]!];
              if (!(Math.abs(g - c) <= 1e-6 * c)) assert.fail(`${dtype} ${which}: slot ${slot} head ${h}: scale ${g}, CPU ${c}`);
            }
            for (let i = 0; i < d; i++) {
              const [g, c] = [got[row * d + i]!, codes[row * d + i]!];
              if (g === c) continue;
              const step = Math.abs(((g << 24) >> 24) - ((c << 24) >> 24));
              if (dtype !== "int8" || step > 1) assert.fail(`${dtype} ${which}: slot ${slot} head ${h} dim ${i}: code 0x${g.toString(16)}, CPU 0x${c.toString(16)}`);
              offByOne++;
            }
          }
        }
      }
      assert.ok(offByOne <= 4, `${dtype}: ${offByOne} int8 codes one step off the CPU's (division rounding), of ${2 * 6 * hkv * d}`);
      for (const b of [kb, vb, sb, ck, cv]) gpu.pool.release(b);
      freeAll(rt, { kt, vt });
      cache.dispose();
    }
  });

  gpuTest("paged attention over int8 / fp8e4m3 / fp8e5m2 caches: a mixed step (decode + a 7-token prefill chunk: FlashAttention-2) and a decode step, split-KV 1 and 3, D = 80, lengths 1, 7, 97", async () => {
    for (const [n, dtype] of BYTE_DTYPES.entries()) {
      const random = rng(30 + n);
      const [D, bs] = [80, 16];
      const f = pagedFixture(rt, { dtype, lengths: [1, 7, 97], blockSize: bs, numKvHeads: 2, headDim: D, random, values: (m) => gaussian(m, random, true) });
      // Poison what no sequence may read: the slots past each length in its last block.
      const layer = f.cache.layer(0);
      f.lengths.forEach((len, b) => {
        const blk = f.blockTable[b * f.maxBlocksPerSeq + Math.floor((len - 1) / bs)]!;
        for (let p = len % bs === 0 ? bs : len % bs; p < bs; p++) {
          const slot = blk * bs + p;
          for (const t of [layer.k, layer.v]) new Uint8Array(rt.memory.buffer, t.ptr + slot * 2 * D, 2 * D).fill(0x7f); // fp8 NaN
          for (const s of [layer.kScale, layer.vScale]) if (s) new Float32Array(rt.memory.buffer, s.ptr + slot * 2 * 4, 2).fill(NaN);
        }
      });
      for (const cuSeqlensQ of [[0, 1, 8, 9], [0, 1, 2, 3]]) {
        const T = cuSeqlensQ[3]!;
        const q = randomTensor(rt, "f32", [T, 4, D], random);
        const o = { q, cache: f.cache, layer: 0, cuSeqlensQ, seqLens: f.lengths, blockTable: f.blockTable, maxBlocksPerSeq: f.maxBlocksPerSeq, causal: true };
        const ref = referencePagedAttention(o);
        for (const splitKv of [1, 3]) {
          const out = rt.tensor("f32", q.shape).fill(NaN);
          const lse = rt.tensor("f32", lseShapeOf("TND", q)).fill(NaN);
          const r: AttentionResult = await gpuPagedAttention(gpu, rt, { ...o, splitKv, out, lse });
          assert.equal(r.out, out);
          assertGpuClose(`${dtype} paged T=${T} splitKv=${splitKv}`, { out: out.toFloat32(), lse: lse.toFloat32() }, ref, D);
          freeAll(rt, { out, lse });
        }
        rt.free(q);
      }
      f.cache.dispose();
    }
  });

  gpuTest("what the GPU does not read yet is an ArgumentError naming it: fp8 scales ≠ 1, int8 dense K/V", async () => {
    const random = rng(40);
    const q = randomTensor(rt, "f32", [1, 1, 16], random);
    const call = (cache: PagedKvCache, blockTable: Int32Array, cols: number) => gpuPagedAttention(gpu, rt, { q, cache, layer: 0, cuSeqlensQ: [0, 1], seqLens: [5], blockTable, maxBlocksPerSeq: cols });
    const ones = new Float32Array(16).fill(1);
    const pc = pagedFixture(rt, { dtype: "int8", int8: { mode: "per-channel", kScale: ones, vScale: ones }, lengths: [5], blockSize: 4, numKvHeads: 1, headDim: 16, random });
    const f8 = pagedFixture(rt, { dtype: "fp8e4m3", fp8: { kScale: 0.5 }, lengths: [5], blockSize: 4, numKvHeads: 1, headDim: 16, random });
    await assert.rejects(call(f8.cache, f8.blockTable, f8.maxBlocksPerSeq), (e: Error) => e instanceof ArgumentError && /^cache is fp8 with per-tensor scales \(k 0\.5, v 1\), which the webgpu backend does not run yet/.test(e.message));
    const qd = randomTensor(rt, "f32", [1, 1, 4, 16], random);
    const kd = new Tensor(rt.memory, pc.cache.layer(0).k.ptr, "int8", [1, 1, 4, 16]);
    await assert.rejects(gpuFlashAttention(gpu, rt, { q: qd, k: kd, v: kd }), /k\.dtype must be one of f32 \| f16 \| bf16, got "int8"/); // the operator's own check, before the GPU
    pc.cache.dispose();
    f8.cache.dispose();
    freeAll(rt, { q, qd });
  });
});

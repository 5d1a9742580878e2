// Conformance of the WebGPU kernels on int8 paged KV caches with static
// per-channel scales and offsets (src/kv/kv-quant.ts Int8PerChannel: x =
// (q + offset) · scale, scale and offset f32 [Hkv, D] given once) against the
// float64 twins of src/kv/reference.ts:
// - KV append (wgsl/kv-append.ts, code 6) against referenceQuantizeRow: the
//   codes of q = rne(x / scale − offset) clamped, NaN → 0, with random
//   scales in [0.004, 0.05] and offsets in [−4, 4] per channel, D = 20 and 80
//   (awkward: not a multiple of 8), 7 tokens into scattered slots, one skipped
//   (slot −1), K and V at their own token strides; saturation (±1e6, ±Inf),
//   NaN and zero among the inputs. Tolerance: codes equal or one step apart
//   (WGSL's f32 division is within 2.5 ULP, not correctly rounded, so
//   x / scale at a half may round the other way), at most 4 such codes a
//   call; bytes of unwritten slots stay poisoned and the scales and offsets
//   in the same buffers stay as uploaded.
// - paged attention (IncreFlashAttention decode with FlashDecoding split-KV
//   and the LSE merge; FlashAttention-2 for a prefill chunk) over such a
//   cache filled by the CPU's appendKv, against referencePagedAttention
//   (float64 over referenceGatherKv's dequantized rows), D = 80 (D = 20 would
//   compile the DMAX 64 kernels too: seconds on SwiftShader; the append covers
//   it), GQA 4/2, lengths 1, 7 and 97, block sizes 16 and 5, splitKv 1 and 3, out and
//   lse poisoned with NaN, the unread slots of each last block holding code
//   −128 in every channel (far off the result if read). Tolerances:
//   support.ts (2e-5).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Int8PerChannel, PagedKvCache, type Runtime, createRuntime, referencePagedAttention } from "../../src/ops-entry.js";
import { referenceQuantizeRow } from "../../src/kv/reference.js";
import { GpuDecoderOps } from "../../src/gpu/decoder-ops.js";
import { type GpuDevice, gpuPagedAttention } from "../../src/gpu/index.js";
import { cacheLayout } from "../../src/gpu/wgsl/kv-load.js";
import { freeAll, lseShapeOf, randomTensor, rng } from "../attention/support.js";
import { gaussian, pagedFixture } from "../kv/paged-support.js";
import { assertGpuClose, openTestGpu } from "./support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);

/** Per-channel parameters f32 [Hkv, D]: scales in [0.004, 0.05], offsets in [−4, 4]. */
function channelParams(n: number, random: () => number): Int8PerChannel {
  const scale = () => Float32Array.from({ length: n }, () => 0.004 + 0.046 * random());
  const offset = () => Float32Array.from({ length: n }, () => 8 * random() - 4);
  return { mode: "per-channel", kScale: scale(), vScale: scale(), kOffset: offset(), vOffset: offset() };
}

describe("WebGPU kernels on int8 per-channel paged KV caches against the float64 references", () => {
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

  gpuTest("KV append, D = 20 and 80: referenceQuantizeRow's codes with the static scales and offsets; saturation, NaN, zero; unwritten slots and the parameters untouched", async () => {
    for (const d of [20, 80]) {
      const [tokens, hkv, blockSize, numBlocks] = [7, 2, 16, 3];
      const numSlots = blockSize * numBlocks;
      const slots = Int32Array.from([33, 0, -1, 17, 5, 47, 16]);
      const random = rng(50 + d);
      const int8 = channelParams(hkv * d, random);
      const k = gaussian(tokens * hkv * d, random, true).map((x) => x * 0.5);
      const v = gaussian(tokens * hkv * d, random, true).map((x) => x * 0.5);
      k.set([1e6, -1e6, Infinity, -Infinity, NaN, 0, -0], 3 * hkv * d); // token 3: saturation, NaN → 0, zeros (code −offset)
      v.set([NaN, -Infinity, 1e6, 0], 4 * hkv * d + d);
      const [kStride, vStride] = [hkv * d + 12, hkv * d + 4];
      const spread = (x: Float32Array, stride: number) => {
        const out = new Float32Array(tokens * stride).fill(NaN);
        for (let t = 0; t < tokens; t++) out.set(x.subarray(t * hkv * d, (t + 1) * hkv * d), t * stride);
        return out;
      };
      // The oracle's cache (one layer, the same parameters) for referenceQuantizeRow.
      const cache = new PagedKvCache(rt, { numLayers: 1, numBlocks, blockSize, numKvHeads: hkv, headDim: d, dtype: "int8", int8 });
      const layer = cache.layer(0);
      // The GPU buffers: codes poisoned with 0xab, then scale and offset [Hkv, D] as the runner uploads them.
      const layout = cacheLayout(numSlots, hkv, d, "int8", "per-channel");
      assert.equal(layout.bytes, numSlots * hkv * d + 2 * hkv * d * 4);
      const initial = (which: "k" | "v") => {
        const bytes = new Uint8Array(layout.bytes).fill(0xab);
        const params = new Float32Array(bytes.buffer, layout.scaleOff * 4, 2 * hkv * d);
        params.set(which === "k" ? int8.kScale : int8.vScale);
        params.set(which === "k" ? int8.kOffset! : int8.vOffset!, hkv * d);
        return bytes;
      };
      const init = { k: initial("k"), v: initial("v") };
      const kb = gpu.upload(new Uint8Array(spread(k, kStride).buffer), "k");
      const vb = gpu.upload(new Uint8Array(spread(v, vStride).buffer), "v");
      const sb = gpu.upload(new Uint8Array(slots.buffer), "slots");
      const [ck, cv] = [gpu.upload(init.k, "cache k"), gpu.upload(init.v, "cache v")];
      await gpu.scoped("an append test", async () => {
        const enc = gpu.device.createCommandEncoder();
        const pass = enc.beginComputePass();
        ops.appendKv(pass, { k: { buffer: kb }, v: { buffer: vb }, tokenStride: kStride, vTokenStride: vStride, slots: { buffer: sb }, cacheK: { buffer: ck }, cacheV: { buffer: cv }, dtype: "int8", int8Mode: "per-channel", numSlots, tokens, numKvHeads: hkv, headDim: d });
        pass.end();
        gpu.device.queue.submit([enc.finish()]);
        await gpu.device.queue.onSubmittedWorkDone();
      });
      ops.recycle();
      let offByOne = 0;
      for (const which of ["k", "v"] as const) {
        const got = new Uint8Array(await gpu.read(which === "k" ? ck : cv, layout.bytes));
        assert.deepEqual(got.subarray(layout.scaleOff * 4), init[which].subarray(layout.scaleOff * 4), `D=${d} ${which}: scales and offsets as uploaded`);
        const x = which === "k" ? k : v;
        for (let slot = 0; slot < numSlots; slot++) {
          const t = slots.indexOf(slot);
          for (let h = 0; h < hkv; h++) {
            const row = slot * hkv + h;
            if (t < 0) {
              for (let i = 0; i < d; i++) assert.equal(got[row * d + i], 0xab, `D=${d} ${which}: unwritten slot ${slot} byte ${i} is untouched`);
              continue;
            }
            const want = referenceQuantizeRow(cache, layer, which, h, x.subarray((t * hkv + h) * d, (t * hkv + h + 1) * d)).codes;
            for (let i = 0; i < d; i++) {
              const g = (got[row * d + i]! << 24) >> 24;
              if (g === want[i]) continue;
              if (Math.abs(g - want[i]!) > 1) assert.fail(`D=${d} ${which}: slot ${slot} head ${h} dim ${i}: code ${g}, reference ${want[i]} (x ${x[(t * hkv + h) * d + i]})`);
              offByOne++;
            }
          }
        }
      }
      assert.ok(offByOne <= 4, `D=${d}: ${offByOne} codes one step off the reference (division rounding), of ${2 * 6 * hkv * d}`);
      for (const b of [kb, vb, sb, ck, cv]) gpu.pool.release(b);
      cache.dispose();
    }
  });

  gpuTest("paged attention over an int8 per-channel cache: a mixed step (decode + a 7-token prefill chunk: FlashAttention-2) and a decode step, split-KV 1 and 3, D = 80, block sizes 16 and 5, lengths 1, 7, 97", async () => {
    for (const [D, bs] of [[80, 16], [80, 5]] as const) {
      const random = rng(60 + bs);
      const hkv = 2;
      const int8 = channelParams(hkv * D, random);
      const f = pagedFixture(rt, { dtype: "int8", int8, lengths: [1, 7, 97], blockSize: bs, numKvHeads: hkv, headDim: D, random, values: (m) => gaussian(m, random, true).map((x) => x * 0.5) });
      // Poison what no sequence may read: the slots past each length in its last block hold code −128.
      const layer = f.cache.layer(0);
      f.lengths.forEach((len, b) => {
        const blk = f.blockTable[b * f.maxBlocksPerSeq + Math.floor((len - 1) / bs)]!;
        for (let p = len % bs === 0 ? bs : len % bs; p < bs; p++) {
          const slot = blk * bs + p;
          for (const t of [layer.k, layer.v]) new Uint8Array(rt.memory.buffer, t.ptr + slot * hkv * D, hkv * D).fill(0x80);
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
          const r = await gpuPagedAttention(gpu, rt, { ...o, splitKv, out, lse });
          assert.equal(r.out, out);
          assertGpuClose(`int8 per-channel D=${D} bs=${bs} T=${T} splitKv=${splitKv}`, { out: out.toFloat32(), lse: lse.toFloat32() }, ref, D);
          freeAll(rt, { out, lse });
        }
        rt.free(q);
      }
      f.cache.dispose();
    }
  });
});

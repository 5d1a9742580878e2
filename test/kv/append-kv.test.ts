// appendKv writes every token's K/V into its slot with exactly the codes (and
// per-token scales) the reference quantizer gives, leaves every other slot
// untouched, and rejects bad slot mappings and shapes by name.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { PagedKvCache, type PagedKvCacheOptions, type Runtime, Tensor, appendKv, createRuntime } from "../../src/ops-entry.js";
import { referenceGatherKv, referenceQuantizeRow } from "../../src/kv/reference.js";

let rt: Runtime;
before(async () => {
  rt = await createRuntime({ threads: 2 });
});
after(() => rt.dispose());

function rng(seed: number): () => number {
  return () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** Gaussian values with a few large outliers, as real K/V have. */
function gaussianWithOutliers(n: number, rand: () => number): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const g = Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
    x[i] = rand() < 0.01 ? g * 40 : g;
  }
  return x;
}

const HKV = 3;
const D = 80;
const LAYERS = 2;
const channels = HKV * D;
const rand0 = rng(99);
const channelScale = Float32Array.from({ length: LAYERS * channels }, () => 0.01 + rand0() * 0.05);
const channelOffset = Float32Array.from({ length: channels }, () => Math.round((rand0() - 0.5) * 8) / 4);

const CASES: { name: string; options: Partial<PagedKvCacheOptions> }[] = [
  { name: "f32", options: { dtype: "f32" } },
  { name: "f16", options: { dtype: "f16" } },
  { name: "bf16", options: { dtype: "bf16" } },
  { name: "int8 per-token", options: { dtype: "int8", int8: { mode: "per-token" } } },
  { name: "int8 per-channel with offsets", options: { dtype: "int8", int8: { mode: "per-channel", kScale: channelScale, vScale: channelScale, kOffset: channelOffset } } },
  { name: "fp8e4m3 per-tensor", options: { dtype: "fp8e4m3", fp8: { kScale: 0.05, vScale: 0.02 } } },
  { name: "fp8e5m2 per-layer scales", options: { dtype: "fp8e5m2", fp8: { kScale: [0.5, 2], vScale: 1 } } },
];

describe("appendKv stores exactly the reference codes", () => {
  for (const c of CASES) {
    test(c.name, () => {
      const blockSize = 16;
      const numBlocks = 7;
      const cache = new PagedKvCache(rt, { numLayers: LAYERS, numBlocks, blockSize, numKvHeads: HKV, headDim: D, ...c.options });
      const rand = rng(c.name.length * 7919);
      for (let l = 0; l < LAYERS; l++) {
        const layer = cache.layer(l);
        new Uint8Array(rt.memory.buffer, layer.k.ptr, layer.k.byteLength).fill(0x5a);
        new Uint8Array(rt.memory.buffer, layer.v.ptr, layer.v.byteLength).fill(0x5a);
      }
      // 37 tokens into shuffled distinct slots, two of them padding (−1).
      const T = 37;
      const perm = [...Array(cache.numSlots).keys()].sort(() => rand() - 0.5);
      const slots = Int32Array.from({ length: T }, (_, t) => (t === 5 || t === 30 ? -1 : perm[t]!));
      // K and V as strided slices of one fused [T, 2·Hkv·D + 16] buffer.
      const stride = 2 * channels + 16;
      const fused = rt.tensor("f32", [T, stride]);
      fused.set(gaussianWithOutliers(T * stride, rand));
      const k = new Tensor(rt.memory, fused.ptr, "f32", [T, HKV, D], [stride, D, 1]);
      const v = new Tensor(rt.memory, fused.ptr + channels * 4, "f32", [T, HKV, D], [stride, D, 1]);
      const layerIndex = 1;
      appendKv(rt, { cache, layer: layerIndex, k, v, slotMapping: slots });

      const layer = cache.layer(layerIndex);
      const kx = k.toFloat32();
      const vx = v.toFloat32();
      for (const [which, x, store, scales] of [["k", kx, layer.k, layer.kScale], ["v", vx, layer.v, layer.vScale]] as const) {
        const raw = store.data();
        const written = new Set<number>();
        for (let t = 0; t < T; t++) {
          const slot = slots[t]!;
          if (slot < 0) continue;
          written.add(slot);
          for (let h = 0; h < HKV; h++) {
            const row = x.subarray((t * HKV + h) * D, (t * HKV + h + 1) * D);
            const want = referenceQuantizeRow(cache, layer, which, h, row);
            const got = Array.from(raw.subarray((slot * HKV + h) * D, (slot * HKV + h + 1) * D));
            assert.deepEqual(got, want.codes, `${which} token ${t} head ${h}`);
            if (want.scale !== null) assert.equal((scales!.data() as Float32Array)[slot * HKV + h], want.scale);
          }
        }
        // Untouched: every byte of slots nobody wrote, and all of layer 0.
        const bytesPerSlot = channels * store.elementBytes;
        const bytes = new Uint8Array(rt.memory.buffer, store.ptr, store.byteLength);
        for (let s = 0; s < cache.numSlots; s++) {
          if (written.has(s)) continue;
          for (let b = 0; b < bytesPerSlot; b++) if (bytes[s * bytesPerSlot + b] !== 0x5a) assert.fail(`${which} slot ${s} was overwritten`);
        }
      }
      const other = cache.layer(0).k;
      assert.ok(new Uint8Array(rt.memory.buffer, other.ptr, other.byteLength).every((b) => b === 0x5a), "layer 0 untouched");
      if (c.name === "f32") {
        // f32 stores exactly: gathering through a block table gives the input back.
        const table = [...Array(numBlocks).keys()];
        const gathered = referenceGatherKv(cache, layerIndex, "k", table, cache.numSlots);
        for (let t = 0; t < T; t++) {
          if (slots[t]! < 0) continue;
          for (let j = 0; j < channels; j++) assert.equal(gathered[slots[t]! * channels + j], kx[t * channels + j]);
        }
      }
      rt.free(fused);
      cache.dispose();
    });
  }
});

test("per-token int8: an all-zero row stores scale 0 and codes 0", () => {
  const cache = new PagedKvCache(rt, { numLayers: 1, numBlocks: 1, blockSize: 4, numKvHeads: 1, headDim: 8, dtype: "int8" });
  const k = rt.tensor("f32", [1, 1, 8]).fill(0);
  const v = rt.tensor("f32", [1, 1, 8]).set([1, -2, 3, -4, 5, -6, 7, -127]);
  appendKv(rt, { cache, layer: 0, k, v, slotMapping: Int32Array.of(2) });
  const layer = cache.layer(0);
  assert.equal(layer.kScale!.data()[2], 0);
  assert.deepEqual(Array.from(layer.k.data().subarray(16, 24)), [0, 0, 0, 0, 0, 0, 0, 0]);
  assert.equal(layer.vScale!.data()[2], 1);
  assert.deepEqual(Array.from(layer.v.data().subarray(16, 24)), [1, -2, 3, -4, 5, -6, 7, -127]);
  cache.dispose();
});

test("validation names the argument and the value", () => {
  const cache = new PagedKvCache(rt, { numLayers: 2, numBlocks: 2, blockSize: 4, numKvHeads: 2, headDim: 8, dtype: "f16" });
  const k = rt.tensor("f32", [3, 2, 8]).fill(1);
  const v = rt.tensor("f32", [3, 2, 8]).fill(1);
  const run = (slots: Int32Array, extra: object = {}) => appendKv(rt, { cache, layer: 0, k, v, slotMapping: slots, ...extra });
  assert.throws(() => run(Int32Array.of(0, 8, 1)), /slotMapping\[1\] must be in \[-1, 8\) \(−1 skips\), got 8/);
  assert.throws(() => run(Int32Array.of(0, -2, 1)), /slotMapping\[1\] must be in \[-1, 8\) \(−1 skips\), got -2/);
  assert.throws(() => run(Int32Array.of(3, 5, 3)), /slotMapping\[2\] writes slot 3, already written by token 0 in this append/);
  assert.throws(() => run(Int32Array.of(0, 1)), /slotMapping must have one slot per token \(3\), got 2/);
  assert.throws(() => run(Int32Array.of(0, 1, 2), { layer: 2 }), /layer must be ≤ 1, got 2/);
  const h = rt.tensor("f16", [3, 2, 8]);
  assert.throws(() => appendKv(rt, { cache, layer: 0, k: h, v, slotMapping: Int32Array.of(0, 1, 2) }), /k.dtype must be f32, got "f16"/);
  const wrong = rt.tensor("f32", [3, 2, 4]);
  assert.throws(() => appendKv(rt, { cache, layer: 0, k, v: wrong, slotMapping: Int32Array.of(0, 1, 2) }), /v.shape must be \[T, Hkv, D\] = \[3, 2, 8\], got \[3, 2, 4\]/);
  cache.dispose();
});

test("cache options are validated", () => {
  const base = { numLayers: 1, numBlocks: 2, blockSize: 4, numKvHeads: 2, headDim: 8 };
  assert.throws(() => new PagedKvCache(rt, { ...base, blockSize: 257 }), /blockSize must be ≤ 256, got 257/);
  assert.throws(() => new PagedKvCache(rt, { ...base, dtype: "int4" as never }), /dtype must be one of .*got "int4"/);
  assert.throws(() => new PagedKvCache(rt, { ...base, dtype: "f16", int8: { mode: "per-token" } }), /int8 applies to dtype int8 only, got dtype "f16"/);
  assert.throws(
    () => new PagedKvCache(rt, { ...base, dtype: "int8", int8: { mode: "per-channel", kScale: new Float32Array(15), vScale: new Float32Array(16) } }),
    /int8.kScale must have Hkv·D = 16 or numLayers·Hkv·D = 16 values, got 15/,
  );
  assert.throws(
    () => new PagedKvCache(rt, { ...base, dtype: "int8", int8: { mode: "per-channel", kScale: new Float32Array(16), vScale: new Float32Array(16) } }),
    /int8.kScale\[0\] must be a finite positive number, got 0/,
  );
  assert.throws(() => new PagedKvCache(rt, { ...base, dtype: "fp8e4m3", fp8: { kScale: [1, 2] } }), /fp8.kScale must be a number or one number per layer \(1\), got \[1, 2\]/);
});

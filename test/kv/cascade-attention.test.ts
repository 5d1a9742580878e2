// cascadeAttention: a prefix shared by every sequence of a batch (the same
// blocks at the start of every table) attended once for all queries, each
// suffix separately, merged by mergeStates — equals pagedAttention over the
// whole tables and the float64 reference (1e-5 row-relative), for f32, bf16
// and int8 (both int8 paths), decode and prefill-chunk queries, with causal,
// softcap and scale, with and without a plan reused across layers; and its
// checks name the bad value.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  type CascadeAttentionOptions,
  type Int8Path,
  type PagedKvCache,
  type Runtime,
  type Tensor,
  cascadeAttention,
  createRuntime,
  pagedAttention,
  planCascadeAttention,
  referencePagedAttention,
} from "../../src/ops-entry.js";
import { assertClose } from "../attention/support.js";
import { maxRelError, offsets, pagedFixture, rng } from "./paged-support.js";

const H = 8;
const HKV = 2;
const D = 64;

let rt: Runtime;
before(async () => {
  rt = await createRuntime();
});
after(() => rt.dispose());

/** The options cascadeAttention and pagedAttention share. */
interface Common {
  q: Tensor;
  cache: PagedKvCache;
  layer: number;
  causal?: boolean;
  softcap?: number;
  scale?: number;
  int8Path?: Int8Path;
}

const CASES = [
  { name: "f32, block size 16, decode + prefill chunks, causal", dtype: "f32", blockSize: 16, prefixBlocks: 20, suffix: [1, 17, 100, 5, 64], sq: [1, 1, 30, 5, 64], extra: { causal: true } },
  { name: "bf16, block size 8, softcap and scale", dtype: "bf16", blockSize: 8, prefixBlocks: 9, suffix: [3, 1, 40], sq: [3, 1, 1], extra: { softcap: 3, scale: 0.5, causal: true } },
  { name: "int8 per-token, dequantize", dtype: "int8", blockSize: 16, prefixBlocks: 8, suffix: [2, 33, 1, 1, 1, 1, 7, 9], sq: [1, 1, 1, 1, 1, 1, 1, 1], extra: { int8Path: "dequantize" } },
  { name: "int8 per-token, high-performance integer path", dtype: "int8", blockSize: 16, prefixBlocks: 8, suffix: [2, 33, 1, 1, 1, 1, 7, 9], sq: [1, 1, 1, 1, 1, 1, 1, 1], extra: { int8Path: "high-performance" } },
  { name: "f32, empty shared prefix", dtype: "f32", blockSize: 4, prefixBlocks: 0, suffix: [5, 9], sq: [5, 2], extra: { causal: true } },
] as const;

for (const [ci, c] of CASES.entries()) {
  test(`cascade equals full attention: ${c.name}`, () => {
    const random = rng(3000 + ci);
    const Lp = c.prefixBlocks * c.blockSize;
    const lengths = c.suffix.map((s) => Lp + s);
    const f = pagedFixture(rt, { lengths, blockSize: c.blockSize, numKvHeads: HKV, headDim: D, dtype: c.dtype, random, sharedPrefix: Lp, numLayers: 2 });
    const cuQ = offsets(c.sq);
    const T = cuQ[cuQ.length - 1]!;
    const q = rt.tensor("f32", [T, H, D]).set(Float32Array.from({ length: T * H * D }, () => 2 * random() - 1));
    const batch = { cuSeqlensQ: cuQ, seqLens: lengths, blockTable: f.blockTable, maxBlocksPerSeq: f.maxBlocksPerSeq };
    const plan = planCascadeAttention(rt, { cache: f.cache, numHeads: H, sharedPrefixLength: Lp, ...batch });
    try {
      for (let layer = 0; layer < 2; layer++) {
        const opts: Common = { q, cache: f.cache, layer, ...c.extra };
        const out = rt.tensor("f32", [T, H, D]).fill(NaN);
        const lse = rt.tensor("f32", [T, H]).fill(NaN);
        const r = cascadeAttention(rt, layer === 0 ? { ...opts, plan, out, lse } : { ...opts, ...batch, sharedPrefixLength: Lp, out, lse });
        assert.equal(r.out, out);
        assert.equal(r.lse, lse);
        const got = { out: out.toFloat32(), lse: lse.toFloat32() };
        const full = pagedAttention(rt, { ...opts, ...batch, returnLse: true });
        const fullRes = { out: full.out.toFloat32(), lse: full.lse!.toFloat32() };
        const ref = referencePagedAttention({ ...opts, ...batch });
        if ("int8Path" in c.extra && c.extra.int8Path === "high-performance") {
          // The integer path quantizes each query row and each tile's probabilities: different tiles, different rounding.
          const err = maxRelError(got.out, fullRes.out, D);
          assert.ok(err < 2e-4, `cascade vs paged, integer path: ${err}`);
        } else {
          assertClose(`layer ${layer}: cascade vs pagedAttention`, got, fullRes, D);
          assertClose(`layer ${layer}: cascade vs reference`, got, ref, D);
        }
        for (const t of [out, lse, full.out, full.lse!]) rt.free(t);
      }
    } finally {
      plan.dispose();
      rt.free(q);
      f.cache.dispose();
    }
  });
}

test("cascade returns lse on request and allocates out", () => {
  const random = rng(3100);
  const f = pagedFixture(rt, { lengths: [40, 35], blockSize: 8, numKvHeads: HKV, headDim: D, random, sharedPrefix: 32 });
  const q = rt.tensor("f32", [5, H, D]).set(Float32Array.from({ length: 5 * H * D }, () => random() - 0.5));
  const o = { q, cache: f.cache, layer: 0, cuSeqlensQ: [0, 2, 5], seqLens: [40, 35], blockTable: f.blockTable, sharedPrefixLength: 32, causal: true };
  const inUse = rt.heap.inUse;
  const r = cascadeAttention(rt, { ...o, returnLse: true });
  assert.deepEqual(r.lse!.shape, [5, H]);
  assertClose("returnLse", { out: r.out.toFloat32(), lse: r.lse!.toFloat32() }, referencePagedAttention(o), D);
  rt.free(r.out);
  rt.free(r.lse!);
  assert.equal(rt.heap.inUse, inUse, "temporaries and the call's own plan are freed");
  rt.free(q);
  f.cache.dispose();
});

test("cascade checks name the bad value", () => {
  const random = rng(3200);
  const f = pagedFixture(rt, { lengths: [40, 35], blockSize: 8, numKvHeads: HKV, headDim: D, random, sharedPrefix: 32 });
  const q = rt.tensor("f32", [5, H, D]);
  const base = { q, cache: f.cache, layer: 0, cuSeqlensQ: [0, 2, 5], seqLens: [40, 35], blockTable: f.blockTable, sharedPrefixLength: 32 };
  assert.throws(() => cascadeAttention(rt, { ...base, window: [4, 0] } as CascadeAttentionOptions), /window is not supported by cascadeAttention/);
  assert.throws(() => cascadeAttention(rt, { ...base, sharedPrefixLength: 34 }), /seqLens\[1\] must be ≥ sharedPrefixLength \+ its 3 new tokens = 37 \(queries come after the shared prefix\), got 35/);
  const table = Int32Array.from(f.blockTable);
  table[f.maxBlocksPerSeq + 2] = table[3]!;
  assert.throws(() => cascadeAttention(rt, { ...base, blockTable: table }), new RegExp(`blockTable\\[1\\]\\[2\\] must be the shared prefix's block ${table[2]} \\(blockTable\\[0\\]\\[2\\]\\), got ${table[3]}`));
  const plan = planCascadeAttention(rt, { ...base, numHeads: H });
  assert.throws(() => cascadeAttention(rt, { ...base, plan }), /cuSeqlensQ is a plan field/);
  plan.dispose();
  assert.throws(() => cascadeAttention(rt, { q, cache: f.cache, layer: 0, plan }), /plan was disposed/);
  rt.free(q);
  f.cache.dispose();
});

// pagedAttention: equal, bit for bit, to the padded-cache decode
// (increFlashAttention) and to the contiguous-KV prefill (flashAttention) on
// the same stored data, for block sizes 1, 8, 16, 128, blocks scattered by a
// random permutation, mixed lengths (0 … 1000) and appendKv in several steps;
// against the float64 reference with every option, forced split-KV, ragged
// decode + chunked-prefill batches, one plan over several layers, and thread
// counts (tolerances: ../attention/support.ts, 1e-5 row-relative).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  AttentionPlan,
  type PagedAttentionOptions,
  type Runtime,
  type Tensor,
  createRuntime,
  flashAttention,
  increFlashAttention,
  pagedAttention,
  planPagedAttention,
  referencePagedAttention,
} from "../../src/ops-entry.js";
import { assertClose, assertIdentical } from "../attention/support.js";
import { contiguousKv, offsets, pagedFixture, paddedFromPaged, rng, runPaged as runPagedIn } from "./paged-support.js";

const H = 8;
const HKV = 2;
const D = 64;
const LENGTHS = [0, 1, 7, 97, 300, 1000];

let rt: Runtime;
before(async () => {
  rt = await createRuntime();
});
after(() => rt.dispose());

function runPaged(o: PagedAttentionOptions, lseShape: number[]): { out: Float32Array; lse: Float32Array } {
  return runPagedIn(rt, o, lseShape);
}

function randomQ(shape: number[], random: () => number): Tensor {
  return rt.tensor("f32", shape).set(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => 2 * random() - 1));
}

describe("paged results equal padded-cache results on the same data", () => {
  const dtypes = ["f32", "bf16", "f16", "f32"] as const;
  [1, 8, 16, 128].forEach((blockSize, i) => {
    const dtype = dtypes[i]!;
    const layout = i % 2 === 0 ? "BSND" : "BNSD";
    for (const Sq of [1, 3]) {
      test(`decode Sq=${Sq}, block size ${blockSize}, ${dtype}, padded ${layout}: identical bits`, () => {
        const random = rng(10 * blockSize + Sq);
        const f = pagedFixture(rt, { lengths: LENGTHS, blockSize, numKvHeads: HKV, headDim: D, dtype, random });
        const Smax = 1000;
        const k = paddedFromPaged(rt, f, "k", layout, Smax);
        const v = paddedFromPaged(rt, f, "v", layout, Smax);
        const B = LENGTHS.length;
        const q = randomQ(layout === "BNSD" ? [B, H, Sq, D] : [B, Sq, H, D], random);
        // The same KV chunks in both plans (a paged plan groups KV heads into units and may split differently).
        const splitKv = 1 + (blockSize % 3);
        const padPlan = AttentionPlan.create(rt, { actualSeqLengths: LENGTHS, numHeads: H, numKvHeads: HKV, headDim: D, qLen: Sq, splitKv });
        const plan = planPagedAttention(rt, { cache: f.cache, numHeads: H, qLen: Sq, seqLens: LENGTHS, blockTable: f.blockTable, splitKv });
        try {
          const lseShape = layout === "BNSD" ? [B, H, Sq] : [B, Sq, H];
          const out = rt.tensor("f32", q.shape).fill(NaN);
          const lse = rt.tensor("f32", lseShape).fill(NaN);
          increFlashAttention(rt, { q, k, v, layout, plan: padPlan, causal: true, out, lse });
          const paged = runPaged({ q, layout, cache: f.cache, layer: 0, plan, causal: true }, lseShape);
          assertIdentical("out", paged.out, out.toFloat32());
          assertIdentical("lse", paged.lse, lse.toFloat32());
          rt.free(out);
          rt.free(lse);
        } finally {
          padPlan.dispose();
          plan.dispose();
          for (const t of [k, v, q]) rt.free(t);
          f.cache.dispose();
        }
      });
    }
  });
});

describe("appendKv in steps, then pagedAttention, equals flashAttention on the full tensors", () => {
  // Ragged batch: sequence b's last sq[b] keys are its new tokens (decode and prefill chunks mixed).
  const sq = [0, 1, 7, 40, 16, 333];
  [1, 8, 16, 128].forEach((blockSize) => {
    test(`block size ${blockSize}: identical bits to flashAttention TND (causal, unsplit)`, () => {
      const random = rng(500 + blockSize);
      const f = pagedFixture(rt, { lengths: LENGTHS, blockSize, numKvHeads: HKV, headDim: D, random, appendChunks: 3 });
      const cuQ = offsets(sq);
      const T = cuQ[cuQ.length - 1]!;
      const q = randomQ([T, H, D], random);
      const k = contiguousKv(rt, f.k, HKV, D);
      const v = contiguousKv(rt, f.v, HKV, D);
      const out = rt.tensor("f32", [T, H, D]).fill(NaN);
      const lse = rt.tensor("f32", [T, H]).fill(NaN);
      try {
        flashAttention(rt, { q, k: k.t, v: v.t, layout: "TND", cuSeqlensQ: cuQ, cuSeqlensK: k.cu, causal: true, out, lse });
        const batch = { cuSeqlensQ: cuQ, seqLens: LENGTHS, blockTable: f.blockTable, maxBlocksPerSeq: f.maxBlocksPerSeq };
        const paged = runPaged({ q, cache: f.cache, layer: 0, ...batch, splitKv: 1, causal: true }, [T, H]);
        assertIdentical("out", paged.out, out.toFloat32());
        assertIdentical("lse", paged.lse, lse.toFloat32());
        // The automatic plan (split where it pays) agrees within rounding.
        const auto = runPaged({ q, cache: f.cache, layer: 0, ...batch, causal: true }, [T, H]);
        assertClose("auto plan", auto, { out: out.toFloat32(), lse: lse.toFloat32() }, D);
      } finally {
        for (const t of [q, k.t, v.t, out, lse]) rt.free(t);
        f.cache.dispose();
      }
    });
  });
});

describe("pagedAttention vs the float64 reference", () => {
  const B = LENGTHS.length;
  const sq = [2, 1, 7, 16, 40, 5];
  const cuQ = offsets(sq);
  const T = cuQ[B]!;
  const random = rng(900);
  const Lmax = Math.max(...LENGTHS);
  const maxSq = Math.max(...sq);
  const options: Record<string, () => Partial<PagedAttentionOptions>> = {
    plain: () => ({}),
    scale: () => ({ scale: 0.6 }),
    causal: () => ({ causal: true }),
    "window [50, 0]": () => ({ window: [50, 0] }),
    "window [200, -1], causal": () => ({ window: [200, -1], causal: true }),
    "alibi [H]": () => ({ alibiSlopes: rt.tensor("f32", [H]).set(Array.from({ length: H }, (_, h) => 2 ** -(h + 1))) }),
    "alibi [B, H]": () => ({ alibiSlopes: rt.tensor("f32", [B, H]).set(Array.from({ length: B * H }, () => 0.1 * random())) }),
    "bias [B, 1, maxSq, maxLen]": () => ({ bias: rt.tensor("f32", [B, 1, maxSq, Lmax]).set(Array.from({ length: B * maxSq * Lmax }, () => 3 * random() - 1.5)) }),
    "mask [B, H, maxSq, maxLen]": () => ({ mask: rt.tensor("uint8", [B, H, maxSq, Lmax]).set(Array.from({ length: B * H * maxSq * Lmax }, () => (random() < 0.3 ? 1 : 0))) }),
    softcap: () => ({ softcap: 1.5, scale: 1 }),
    "all together": () => ({
      alibiSlopes: rt.tensor("f32", [H]).set(Array.from({ length: H }, (_, h) => 0.02 * (h + 1))),
      bias: rt.tensor("f32", [Lmax]).set(Array.from({ length: Lmax }, () => random() - 0.5)),
      mask: rt.tensor("uint8", [B, 1, 1, Lmax]).set(Array.from({ length: B * Lmax }, () => (random() < 0.1 ? 1 : 0))),
      window: [600, 0],
      causal: true,
      softcap: 4,
      scale: 0.3,
    }),
  };
  const fixtures = new Map<string, ReturnType<typeof pagedFixture>>();
  const fixture = (dtype: "f32" | "bf16") => {
    if (!fixtures.has(dtype)) fixtures.set(dtype, pagedFixture(rt, { lengths: LENGTHS, blockSize: 16, numKvHeads: HKV, headDim: D, dtype, random: rng(dtype.length) }));
    return fixtures.get(dtype)!;
  };
  after(() => fixtures.forEach((f) => f.cache.dispose()));
  Object.entries(options).forEach(([name, make], i) => {
    const dtype = i % 2 === 0 ? "f32" : "bf16";
    test(`${name} (${dtype}; splitKv auto, 1 and 3)`, () => {
      const f = fixture(dtype);
      const q = randomQ([T, H, D], random);
      const opt = make();
      const o: PagedAttentionOptions = { q, cache: f.cache, layer: 0, cuSeqlensQ: cuQ, seqLens: LENGTHS, blockTable: f.blockTable, ...opt };
      try {
        const ref = referencePagedAttention(o);
        assertClose(name, runPaged(o, [T, H]), ref, D);
        for (const splitKv of [1, 3]) assertClose(`${name}, splitKv=${splitKv}`, runPaged({ ...o, splitKv }, [T, H]), ref, D);
      } finally {
        rt.free(q);
        for (const v of Object.values(opt)) if (v && typeof v === "object" && "ptr" in v) rt.free(v as Tensor);
      }
    });
  });
});

test("decode Sq = 1..16 in one ragged batch: GQA 1, 2, 4, 7; 10 KV heads (units of 8 + 2 heads); D = 13, 16, 80, 256; block sizes 3..256", () => {
  const cases = [
    { G: 1, Hkv: 3, D: 80, blockSize: 256 },
    { G: 7, Hkv: 1, D: 13, blockSize: 5 },
    { G: 4, Hkv: 1, D: 256, blockSize: 32 },
    { G: 2, Hkv: 10, D: 16, blockSize: 3 },
  ];
  cases.forEach((c, ci) => {
    const random = rng(1200 + ci);
    const lengths = [16, 1, 300, 600, 17, 40, 2, 800];
    const sq = [16, 1, 4, 9, 15, 2, 2, 11];
    const f = pagedFixture(rt, { lengths, blockSize: c.blockSize, numKvHeads: c.Hkv, headDim: c.D, dtype: ci === 1 ? "f16" : "f32", random });
    const cuQ = offsets(sq);
    const T = cuQ[cuQ.length - 1]!;
    const Hq = c.G * c.Hkv;
    const q = randomQ([T, Hq, c.D], random);
    const plan = planPagedAttention(rt, { cache: f.cache, numHeads: Hq, cuSeqlensQ: cuQ, seqLens: lengths, blockTable: f.blockTable, splitKv: 4 });
    try {
      const o: PagedAttentionOptions = { q, cache: f.cache, layer: 0, plan, causal: true };
      assert.equal(plan.split, true);
      assertClose(`G=${c.G} D=${c.D}`, runPaged(o, [T, Hq]), referencePagedAttention(o), c.D);
    } finally {
      plan.dispose();
      rt.free(q);
      f.cache.dispose();
    }
  });
});

test("one plan serves every layer of a step", () => {
  const random = rng(1300);
  const lengths = [500, 3, 64];
  const sq = [1, 3, 64];
  const f = pagedFixture(rt, { lengths, blockSize: 16, numKvHeads: HKV, headDim: D, dtype: "bf16", numLayers: 3, random });
  const cuQ = offsets(sq);
  const plan = planPagedAttention(rt, { cache: f.cache, numHeads: H, cuSeqlensQ: cuQ, seqLens: lengths, blockTable: f.blockTable, maxBlocksPerSeq: f.maxBlocksPerSeq });
  const q = randomQ([cuQ[3]!, H, D], random);
  try {
    for (let layer = 0; layer < 3; layer++) {
      const o: PagedAttentionOptions = { q, cache: f.cache, layer, plan, causal: true };
      assertClose(`layer ${layer}`, runPaged(o, [cuQ[3]!, H]), referencePagedAttention(o), D);
    }
  } finally {
    plan.dispose();
    rt.free(q);
    f.cache.dispose();
  }
});

test("one thread and all threads give identical bits for a forced plan", async () => {
  const random = rng(1400);
  const lengths = [900, 5, 300];
  const sq = [1, 5, 20];
  const cuQ = offsets(sq);
  const results: Float32Array[] = [];
  const rt1 = await createRuntime({ threads: 1 });
  const rtN = await createRuntime({ threads: Math.max(3, rt.threads) });
  const qValues = Float32Array.from({ length: cuQ[3]! * H * D }, () => random() - 0.5);
  for (const r of [rt1, rtN]) {
    const f = pagedFixture(r, { lengths, blockSize: 8, numKvHeads: HKV, headDim: D, dtype: "int8", random: rng(1401) });
    const q = r.tensor("f32", [cuQ[3]!, H, D]).set(qValues);
    for (const int8Path of ["dequantize", "high-performance"] as const) {
      const { out } = pagedAttention(r, { q, cache: f.cache, layer: 0, cuSeqlensQ: cuQ, seqLens: lengths, blockTable: f.blockTable, splitKv: 3, causal: true, int8Path });
      results.push(out.toFloat32());
      r.free(out);
    }
    r.free(q);
    f.cache.dispose();
  }
  assertIdentical("dequantize path", results[0]!, results[2]!);
  assertIdentical("integer path", results[1]!, results[3]!);
  await Promise.all([rt1.dispose(), rtN.dispose()]);
});

// Quantized paged caches: every storage dtype and scaling dequantized inside
// the kernel equals the float64 reference run on the decoded values (1e-5
// row-relative, ../attention/support.ts); the int8 integer path (IFA
// AntiQuant, 2 or 3 int8 rows per query / probability row) stays within its
// stated error of that reference; and the quantization error against f32 KV
// for gaussian data with outliers is measured and logged per mode.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  type Int8Path,
  type PagedAttentionOptions,
  type PagedKvCacheOptions,
  type Runtime,
  createRuntime,
  pagedAttention,
  referencePagedAttention,
} from "../../src/ops-entry.js";
import { assertClose } from "../attention/support.js";
import { gaussian, maxRelError, offsets, pagedFixture, rng, runPaged } from "./paged-support.js";

/**
 * Stated error of the integer path against the reference on the decoded values
 * (max over query rows of max_d |o − ref| / max_d |ref|), on uniform K/V and on
 * gaussian K/V with 1% outliers ×40: "high-performance" carries each query row
 * and each tile's probabilities to 1/32258 of their largest element, so a
 * score moves by up to scale · max|q| / 64516 · Σ_d |k_d| (measured ≤ 8e-5 on
 * uniform data, ≤ 1.6e-3 with outliers in per-token int8, whose decoded rows
 * keep them); "high-precision" carries them to about f32 rounding (≤ 6e-6).
 */
export const INT_PATH_TOL: Readonly<Record<Exclude<Int8Path, "dequantize">, number>> = { "high-performance": 3e-3, "high-precision": 1e-5 };

let rt: Runtime;
before(async () => {
  rt = await createRuntime();
});
after(() => rt.dispose());

const LENGTHS = [1, 7, 97, 300, 1000, 16];
const SQ = [1, 1, 3, 16, 40, 16];

function channelParams(hkv: number, d: number, random: () => number, offsets: boolean) {
  const n = hkv * d;
  const scale = () => Float32Array.from({ length: n }, () => (0.5 + random()) / 127);
  const offset = () => Float32Array.from({ length: n }, () => Math.round(20 * random() - 10));
  return offsets ? { kScale: scale(), vScale: scale(), kOffset: offset(), vOffset: offset() } : { kScale: scale(), vScale: scale() };
}

interface QuantCase {
  name: string;
  cache: (hkv: number, d: number, random: () => number) => Partial<PagedKvCacheOptions>;
}

const QUANT: QuantCase[] = [
  { name: "f16", cache: () => ({ dtype: "f16" }) },
  { name: "bf16", cache: () => ({ dtype: "bf16" }) },
  { name: "int8 per-token", cache: () => ({ dtype: "int8", int8: { mode: "per-token" } }) },
  { name: "int8 per-channel", cache: (h, d, r) => ({ dtype: "int8", int8: { mode: "per-channel", ...channelParams(h, d, r, false) } }) },
  { name: "int8 per-channel with offsets", cache: (h, d, r) => ({ dtype: "int8", int8: { mode: "per-channel", ...channelParams(h, d, r, true) } }) },
  { name: "fp8e4m3", cache: () => ({ dtype: "fp8e4m3", fp8: { kScale: 0.01, vScale: 0.004 } }) },
  { name: "fp8e5m2", cache: () => ({ dtype: "fp8e5m2", fp8: { kScale: [2] } }) },
];

describe("dequantized in the kernel = the reference on the decoded values (1e-5)", () => {
  for (const [qi, qc] of QUANT.entries()) {
    for (const D of [80, 20]) {
      test(`${qc.name}, D=${D}: decode + prefill chunks, causal, split-KV`, () => {
        const random = rng(4000 + 10 * qi + D);
        const [G, Hkv] = D === 80 ? [4, 2] : [3, 1];
        const H = G * Hkv;
        const f = pagedFixture(rt, { lengths: LENGTHS, blockSize: 16, numKvHeads: Hkv, headDim: D, random, ...qc.cache(Hkv, D, random) });
        const cuQ = offsets(SQ);
        const T = cuQ[cuQ.length - 1]!;
        const q = rt.tensor("f32", [T, H, D]).set(Float32Array.from({ length: T * H * D }, () => 2 * random() - 1));
        try {
          const o: PagedAttentionOptions = { q, cache: f.cache, layer: 0, cuSeqlensQ: cuQ, seqLens: LENGTHS, blockTable: f.blockTable, causal: true, int8Path: f.cache.dtype === "int8" ? "dequantize" : undefined };
          const ref = referencePagedAttention(o);
          for (const splitKv of [undefined, 3]) assertClose(`${qc.name} splitKv=${splitKv}`, runPaged(rt, { ...o, ...(splitKv ? { splitKv } : {}) }), ref, D);
        } finally {
          rt.free(q);
          f.cache.dispose();
        }
      });
    }
  }
});

describe("the int8 integer path against the reference on the decoded values", () => {
  const shapes = [
    { G: 4, Hkv: 2, D: 128 },
    { G: 1, Hkv: 3, D: 80 },
    { G: 7, Hkv: 1, D: 8 },
    { G: 2, Hkv: 1, D: 256 },
  ];
  const data = {
    "gaussian K/V with outliers": (random: () => number) => (n: number) => gaussian(n, random, true),
    "uniform K/V": (random: () => number) => (n: number) => Float32Array.from({ length: n }, () => 2 * random() - 1),
  };
  for (const path of ["high-performance", "high-precision"] as const) {
    for (const qc of QUANT.filter((c) => c.name.startsWith("int8"))) {
      test(`${path}, ${qc.name}: error ≤ ${INT_PATH_TOL[path]} (G 1, 2, 4, 7; D 8..256; decode and prefill rows)`, (t) => {
        for (const [dataName, values] of Object.entries(data)) {
          let worst = 0;
          const perShape: string[] = [];
          shapes.forEach((s, si) => {
            const random = rng(5000 + si + qc.name.length + dataName.length);
            const H = s.G * s.Hkv;
            const f = pagedFixture(rt, { lengths: LENGTHS, blockSize: 16, numKvHeads: s.Hkv, headDim: s.D, random, values: values(random), ...qc.cache(s.Hkv, s.D, random) });
            const cuQ = offsets(SQ);
            const T = cuQ[cuQ.length - 1]!;
            const q = rt.tensor("f32", [T, H, s.D]).set(gaussian(T * H * s.D, random));
            try {
              const o: PagedAttentionOptions = { q, cache: f.cache, layer: 0, cuSeqlensQ: cuQ, seqLens: LENGTHS, blockTable: f.blockTable, causal: true, int8Path: path };
              const ref = referencePagedAttention(o);
              const r = runPaged(rt, { ...o, splitKv: si + 1 });
              const err = maxRelError(r.out, ref.out, s.D);
              let lseErr = 0;
              for (let i = 0; i < r.lse.length; i++) lseErr = Math.max(lseErr, Math.abs(r.lse[i]! - ref.lse[i]!) / Math.max(1, Math.abs(ref.lse[i]!)));
              assert.ok(err <= INT_PATH_TOL[path], `${dataName}, G=${s.G} D=${s.D}: out error ${err.toExponential(2)} > ${INT_PATH_TOL[path]}`);
              assert.ok(lseErr <= INT_PATH_TOL[path], `${dataName}, G=${s.G} D=${s.D}: lse error ${lseErr.toExponential(2)} > ${INT_PATH_TOL[path]}`);
              worst = Math.max(worst, err);
              perShape.push(`G=${s.G} D=${s.D} ${err.toExponential(1)}`);
            } finally {
              rt.free(q);
              f.cache.dispose();
            }
          });
          t.diagnostic(`${path} ${qc.name}, ${dataName}: max out error vs reference on decoded values ${worst.toExponential(2)} (${perShape.join(", ")})`);
        }
      });
    }
  }
});

describe("quantization error against f32 KV (gaussian K/V with 1% outliers ×40)", () => {
  const Hkv = 2;
  const G = 4;
  const H = G * Hkv;
  const D = 128;
  const lengths = [1024, 256, 64, 700];
  const sq = [1, 1, 8, 32];
  const random = rng(7000);
  const k = lengths.map((n) => gaussian(n * Hkv * D, random, true));
  const v = lengths.map((n) => gaussian(n * Hkv * D, random, true));
  const qValues = gaussian(offsets(sq)[lengths.length]! * H * D, random);
  /** Per-channel (h, d) minimum and maximum over every token of `rows`. */
  const channelRange = (rows: Float32Array[]) => {
    const lo = new Float32Array(Hkv * D).fill(Infinity);
    const hi = new Float32Array(Hkv * D).fill(-Infinity);
    for (const r of rows) for (let i = 0; i < r.length; i++) {
      const c = i % (Hkv * D);
      lo[c] = Math.min(lo[c]!, r[i]!);
      hi[c] = Math.max(hi[c]!, r[i]!);
    }
    return { lo, hi };
  };
  const amax = (rows: Float32Array[]) => rows.reduce((m, r) => r.reduce((a, x) => Math.max(a, Math.abs(x)), m), 0);
  const kr = channelRange(k);
  const vr = channelRange(v);
  // Calibrated as a deployment would: symmetric scale = max|x| / 127 per channel; asymmetric
  // x = (q + offset)·scale mapping [min, max] onto [−127.5, 127.5]; fp8 scale = amax / the format's max.
  const sym = (r: { lo: Float32Array; hi: Float32Array }) => r.lo.map((l, i) => Math.max(Math.abs(l), Math.abs(r.hi[i]!)) / 127 || 1);
  const asymScale = (r: { lo: Float32Array; hi: Float32Array }) => r.lo.map((l, i) => (r.hi[i]! - l) / 255 || 1);
  const asymOffset = (r: { lo: Float32Array; hi: Float32Array }, s: Float32Array) => r.lo.map((l, i) => (r.hi[i]! + l) / 2 / s[i]!);
  const kAs = asymScale(kr);
  const vAs = asymScale(vr);
  const MODES: { name: string; cache: Partial<PagedKvCacheOptions>; path?: Int8Path; bound: number }[] = [
    { name: "f16", cache: { dtype: "f16" }, bound: 5e-3 },
    { name: "bf16", cache: { dtype: "bf16" }, bound: 3e-2 },
    { name: "fp8e4m3 (scale amax/448)", cache: { dtype: "fp8e4m3", fp8: { kScale: amax(k) / 448, vScale: amax(v) / 448 } }, bound: 0.3 },
    { name: "fp8e5m2 (scale amax/57344)", cache: { dtype: "fp8e5m2", fp8: { kScale: amax(k) / 57344, vScale: amax(v) / 57344 } }, bound: 0.5 },
    ...(["dequantize", "high-performance", "high-precision"] as const).flatMap((path) => [
      { name: `int8 per-token, ${path}`, cache: { dtype: "int8" as const, int8: { mode: "per-token" as const } }, path, bound: 0.15 },
      { name: `int8 per-channel symmetric, ${path}`, cache: { dtype: "int8" as const, int8: { mode: "per-channel" as const, kScale: sym(kr), vScale: sym(vr) } }, path, bound: 0.15 },
      { name: `int8 per-channel asymmetric (offsets), ${path}`, cache: { dtype: "int8" as const, int8: { mode: "per-channel" as const, kScale: kAs, vScale: vAs, kOffset: asymOffset(kr, kAs), vOffset: asymOffset(vr, vAs) } }, path, bound: 0.15 },
    ]),
  ];
  let truth: { out: ArrayLike<number>; lse: ArrayLike<number> } | undefined;
  const queue = (rows: Float32Array[]) => {
    let i = 0;
    return () => rows[i++ % rows.length]!;
  };
  const run = (cache: Partial<PagedKvCacheOptions>, path: Int8Path | undefined, reference: boolean) => {
    const f = pagedFixture(rt, { lengths, blockSize: 16, numKvHeads: Hkv, headDim: D, random: rng(1), values: queue([...k, ...v]), ...cache });
    const cuQ = offsets(sq);
    const q = rt.tensor("f32", [cuQ[lengths.length]!, H, D]).set(qValues);
    const o: PagedAttentionOptions = { q, cache: f.cache, layer: 0, cuSeqlensQ: cuQ, seqLens: lengths, blockTable: f.blockTable, causal: true, ...(path ? { int8Path: path } : {}) };
    try {
      return reference ? referencePagedAttention(o) : runPaged(rt, o);
    } finally {
      rt.free(q);
      f.cache.dispose();
    }
  };
  test("f32 KV: the kernel equals the reference (the baseline of the rows below)", () => {
    truth = run({ dtype: "f32" }, undefined, true);
    assertClose("f32", run({ dtype: "f32" }, undefined, false), truth, D);
  });
  for (const m of MODES) {
    test(`${m.name}: relative L2 error against f32 KV below ${m.bound} (logged)`, (t) => {
      const got = run(m.cache, m.path, false);
      const ref = truth!;
      // Over the whole output: ‖o − o_f32‖₂ / ‖o_f32‖₂, max |o − o_f32| / max |o_f32|, and the worst row (max_d |Δ| / max_d |o_f32|).
      let num = 0;
      let den = 0;
      let maxAbs = 0;
      let maxRef = 0;
      for (let i = 0; i < ref.out.length; i++) {
        const d = got.out[i]! - ref.out[i]!;
        num += d * d;
        den += ref.out[i]! * ref.out[i]!;
        maxAbs = Math.max(maxAbs, Math.abs(d));
        maxRef = Math.max(maxRef, Math.abs(ref.out[i]!));
      }
      const l2 = Math.sqrt(num / den);
      const worstRow = maxRelError(got.out, ref.out, D);
      let lseErr = 0;
      for (let i = 0; i < got.lse.length; i++) lseErr = Math.max(lseErr, Math.abs(got.lse[i]! - ref.lse[i]!));
      t.diagnostic(
        `quantization error vs f32 KV | ${m.name} | out rel L2 ${l2.toExponential(2)} | out max abs / max |o| ${(maxAbs / maxRef).toExponential(2)} | worst row ${worstRow.toExponential(2)} | lse max abs ${lseErr.toExponential(2)}`,
      );
      assert.ok(l2 < m.bound, `${m.name}: relative L2 error ${l2} ≥ ${m.bound}`);
    });
  }
});

test("int8 caches default to the high-performance integer path (headDim % 8 == 0), else to dequantize", () => {
  for (const D of [16, 12]) {
    const random = rng(8000 + D);
    const f = pagedFixture(rt, { lengths: [40, 3], blockSize: 8, numKvHeads: 1, headDim: D, dtype: "int8", random });
    const q = rt.tensor("f32", [2, 2, D]).set(Float32Array.from({ length: 4 * D }, () => random() - 0.5));
    const o: PagedAttentionOptions = { q, cache: f.cache, layer: 0, cuSeqlensQ: [0, 1, 2], seqLens: [40, 3], blockTable: f.blockTable };
    const outs = [undefined, D % 8 === 0 ? "high-performance" : "dequantize", D % 8 === 0 ? "dequantize" : undefined].map((int8Path) => {
      const r = pagedAttention(rt, { ...o, ...(int8Path ? { int8Path: int8Path as Int8Path } : {}) });
      const x = r.out.toFloat32();
      rt.free(r.out);
      return x;
    });
    assert.deepEqual(outs[0], outs[1], `D=${D}`);
    if (D % 8 === 0) assert.notDeepEqual(outs[0], outs[2], "the integer path rounds differently from dequantize");
    rt.free(q);
    f.cache.dispose();
  }
});

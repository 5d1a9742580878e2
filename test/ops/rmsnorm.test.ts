// RMSNorm and the fused residual add + RMSNorm against the float64 reference:
// rows of awkward lengths, f32/f16/bf16 weights, in place, per-head (Qwen3's
// q/k norm on [T, H, D]), strided rows, poisoned outputs.
//
// Tolerance: |out − ref| ≤ (D/2 + 8) · 2⁻²⁴ · |w·x·inv| + 1e-30 — the f32 sum of
// squares (two accumulators) dominates; the rest is a few roundings.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError, type Runtime, Tensor, addRmsNorm, createRuntime, rmsNorm } from "../../src/ops-entry.js";
import { rmsNormReference } from "../../src/ops/reference/rmsnorm.js";
import { addReference } from "../../src/ops/reference/add.js";
import { assertWithin, randn } from "../helpers/random.js";

const U = 2 ** -24;

describe("rmsNorm", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime({ threads: 2 });
  });
  after(() => rt.dispose());

  const tol = (ref: Float64Array, d: number) => (i: number) => (d / 2 + 8) * U * Math.abs(ref[i]!) + 1e-30;

  for (const wdt of ["f32", "f16", "bf16"] as const) {
    test(`rows of length 1, 7, 80, 97, 896, 1000 with ${wdt} weights, into out and in place`, () => {
      for (const [rows, d] of [[1, 1], [3, 7], [5, 80], [33, 97], [2, 896], [4, 1000]] as const) {
        const xv = randn(rows * d, rows * d, 3);
        const x = rt.tensor("f32", [rows, d]).set(xv);
        const weight = rt.tensor(wdt, [d]).set(randn(d, d + 1));
        const want = rmsNormReference(xv, weight.toFloat32(), rows, d, 1e-6);
        const out = rt.tensor("f32", [rows, d]).fill(NaN);
        rmsNorm(rt, { x, weight, out, eps: 1e-6 });
        assertWithin(out.toFloat32(), want, tol(want, d), `[${rows}, ${d}]`);
        rmsNorm(rt, { x, weight, eps: 1e-6 }); // in place
        assertWithin(x.toFloat32(), want, tol(want, d), `[${rows}, ${d}] in place`);
        for (const t of [x, weight, out]) rt.free(t);
      }
    });
  }

  test("per head on [T, H, D] (Qwen3 q/k norm) with strided tokens; eps matters for tiny rows", () => {
    const T = 3;
    const H = 5;
    const D = 64;
    const wide = rt.tensor("f32", [T, 2 * H * D]).set(randn(T * 2 * H * D, 4));
    const q = new Tensor(rt.memory, wide.ptr, "f32", [T, H, D], [2 * H * D, D, 1]);
    const qv = q.toFloat32();
    const rest = wide.toFloat32().filter((_, i) => i % (2 * H * D) >= H * D);
    const weight = rt.tensor("f32", [D]).set(randn(D, 5));
    rmsNorm(rt, { x: q, weight, eps: 1e-6 });
    const want = rmsNormReference(qv, weight.toFloat32(), T * H, D, 1e-6);
    assertWithin(q.toFloat32(), want, tol(want, D), "q heads");
    assert.deepEqual(wide.toFloat32().filter((_, i) => i % (2 * H * D) >= H * D), rest, "the k half is untouched");
    // A row of tiny values: eps decides the result.
    const x = rt.tensor("f32", [1, 4]).set([1e-4, -1e-4, 2e-4, 0]);
    const out = rt.tensor("f32", [1, 4]).fill(NaN);
    const ones = rt.tensor("f32", [4]).fill(1);
    rmsNorm(rt, { x, weight: ones, out, eps: 1e-5 });
    const ref = rmsNormReference(x.toFloat32(), [1, 1, 1, 1], 1, 4, 1e-5);
    assertWithin(out.toFloat32(), ref, tol(ref, 4), "eps");
    assert.ok(Math.abs(out.toFloat32()[0]! - 1e-4 / Math.sqrt(1.5e-8 / 1 + 1e-5)) < 1e-9);
  });

  test("addRmsNorm: x ← x + delta, out = norm(x), also with out = delta", () => {
    for (const [rows, d] of [[1, 896], [7, 97], [4, 80]] as const) {
      const xv = randn(rows * d, 10 + d);
      const dv = randn(rows * d, 11 + d);
      const x = rt.tensor("f32", [rows, d]).set(xv);
      const delta = rt.tensor("f32", [rows, d]).set(dv);
      const weight = rt.tensor("f32", [d]).set(randn(d, 12));
      const out = rt.tensor("f32", [rows, d]).fill(NaN);
      addRmsNorm(rt, { x, delta, weight, out, eps: 1e-5 });
      const sum = addReference(xv, dv);
      assertWithin(x.toFloat32(), sum, (i) => U * Math.abs(sum[i]!), "residual");
      const want = rmsNormReference(x.toFloat32(), weight.toFloat32(), rows, d, 1e-5);
      assertWithin(out.toFloat32(), want, tol(want, d), "norm");
      x.set(xv);
      addRmsNorm(rt, { x, delta, weight, out: delta, eps: 1e-5 });
      assertWithin(delta.toFloat32(), want, tol(want, d), "out = delta");
      for (const t of [x, delta, weight, out]) rt.free(t);
    }
  });

  test("bad arguments are refused by name", () => {
    const x = rt.tensor("f32", [2, 8]);
    const w = rt.tensor("f32", [8]);
    const check = (fn: () => unknown, argument: string, text: RegExp) =>
      assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.argument === argument && text.test(e.message));
    check(() => rmsNorm(rt, { x, weight: rt.tensor("f32", [7]), eps: 1e-6 }), "weight.shape", /\[8\]/);
    check(() => rmsNorm(rt, { x, weight: rt.tensor("int8", [8]), eps: 1e-6 }), "weight.dtype", /f32 \| f16 \| bf16/);
    check(() => rmsNorm(rt, { x, weight: w, eps: -1 }), "eps", /≥ 0/);
    check(() => rmsNorm(rt, { x, weight: w, eps: NaN }), "eps", /finite/);
    check(() => rmsNorm(rt, { x, weight: w, out: rt.tensor("f32", [2, 9]), eps: 1e-6 }), "out.shape", /must equal x.shape/);
    check(() => rmsNorm(rt, { x, weight: w, out: new Tensor(rt.memory, x.ptr + 4, "f32", [2, 8]), eps: 1e-6 }), "out", /overlap/);
    check(() => addRmsNorm(rt, { x, delta: rt.tensor("f32", [2, 7]), weight: w, eps: 1e-6 }), "delta.shape", /must equal x.shape/);
  });
});

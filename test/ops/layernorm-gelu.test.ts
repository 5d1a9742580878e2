// BERT's pointwise ops against their float64 twins: LayerNorm with a bias and
// the fused residual add (ops/layernorm.ts, reference/layernorm.ts) on awkward
// row lengths, strided rows, in place and into a poisoned out, rows far from
// zero and constant rows; exact (erf) and tanh GELU (ops/gelu.ts,
// reference/gelu.ts) on awkward lengths, chunk tails, the negative tail and
// extremes.
//
// Tolerances (U = 2⁻²⁴):
// - LayerNorm: |Δ| ≤ (D/2 + 8)·U·(|n̂·w| + |w|·(1 + |mean|/σ)) + 4U·|b| + 1e-30,
//   n̂ = (s − mean)/σ: the f32 sums of the mean and of the squared deviations
//   (D/2·U each, as RMSNorm's sum of squares) carry to n̂ relatively, and the
//   mean's absolute error (≈ D/2·U·(|mean| + σ)) to n̂ through 1/σ.
// - GELU erf: relative (32 + 4z²)·U, z = |x|/√2, plus 1e-36 absolute: the erfc
//   formula's 1.2e−7 (2U), e^'s 2 ulp and a few roundings, and the rounding of
//   the argument −z² (≈ 3z²·U absolute, so relative in e^); below −13 e^ stops at
//   its clamp (1e−38), the absolute term. tanh: geglu-softcap.test.ts's bound.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError, type Runtime, Tensor, createRuntime } from "../../src/ops-entry.js";
import { gelu } from "../../src/ops/gelu.js";
import { addLayerNorm, layerNorm } from "../../src/ops/layernorm.js";
import { geluReference } from "../../src/ops/reference/gelu.js";
import { layerNormReference } from "../../src/ops/reference/layernorm.js";
import { assertWithin, randn, uniform } from "../helpers/random.js";

const U = 2 ** -24;

/** The LayerNorm bound above, from the float64 row statistics. */
function layerNormTol(s: ArrayLike<number>, w: ArrayLike<number>, b: ArrayLike<number>, rows: number, d: number, eps: number): (i: number) => number {
  const k = (d / 2 + 8) * U;
  const stats = Array.from({ length: rows }, (_, r) => {
    let m = 0;
    for (let i = 0; i < d; i++) m += s[r * d + i]!;
    m /= d;
    let v = 0;
    for (let i = 0; i < d; i++) v += (s[r * d + i]! - m) ** 2;
    return { m, sd: Math.sqrt(v / d + eps) };
  });
  return (i) => {
    const { m, sd } = stats[Math.floor(i / d)]!;
    const j = i % d;
    const n = (s[i]! - m) / sd;
    return k * (Math.abs(n * w[j]!) + Math.abs(w[j]!) * (1 + Math.abs(m) / sd)) + 4 * U * Math.abs(b[j]!) + 1e-30;
  };
}

const geluErfTol = (x: ArrayLike<number>, want: ArrayLike<number>) => (i: number) => (32 + 4 * Math.min((x[i]! * x[i]!) / 2, 1e4)) * U * Math.abs(want[i]!) + 1e-36;
const geluTanhTol = (x: ArrayLike<number>, want: ArrayLike<number>) => (i: number) => {
  const v = x[i]!;
  const u2 = Math.abs(2 * Math.sqrt(2 / Math.PI) * (v + 0.044715 * v * v * v));
  return (16 + 4 * Math.min(u2, 200)) * U * Math.abs(want[i]!) + 1e-36;
};

describe("layerNorm, addLayerNorm, gelu", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime({ threads: 2 });
  });
  after(() => rt.dispose());

  test("layerNorm and addLayerNorm on rows of 1, 3, 7, 8, 97, 384 and 1000 (tails; several work items), into a poisoned out, in place and into delta", () => {
    for (const [rows, d] of [[1, 1], [3, 3], [2, 7], [5, 8], [33, 97], [50, 384], [20, 1000]] as const) {
      const xv = randn(rows * d, rows * d, 2);
      const dv = randn(rows * d, rows * d + 1, 3);
      const wv = randn(d, d + 2);
      const bv = randn(d, d + 3, 0.5);
      const eps = d === 1 ? 1e-5 : 1e-12;
      const sum = Float64Array.from(xv, (v, i) => v + dv[i]!);
      const x = rt.tensor("f32", [rows, d]).set(xv);
      const delta = rt.tensor("f32", [rows, d]).set(dv);
      const weight = rt.tensor("f32", [d]).set(wv);
      const bias = rt.tensor("f32", [d]).set(bv);
      const out = rt.tensor("f32", [rows, d]).fill(NaN);
      const plain = layerNormReference(xv, null, wv, bv, rows, d, eps);
      layerNorm(rt, { x, weight, bias, out, eps });
      assertWithin(out.toFloat32(), plain, layerNormTol(xv, wv, bv, rows, d, eps), `[${rows}, ${d}]`);
      const fused = layerNormReference(xv, dv, wv, bv, rows, d, eps);
      out.fill(NaN);
      addLayerNorm(rt, { x, delta, weight, bias, out, eps });
      const tol = layerNormTol(sum, wv, bv, rows, d, eps);
      assertWithin(out.toFloat32(), fused, tol, `[${rows}, ${d}] + delta`);
      assert.deepEqual(x.toFloat32(), xv, "x is only read");
      assert.deepEqual(delta.toFloat32(), dv, "delta is only read");
      addLayerNorm(rt, { x, delta, weight, bias, out: delta, eps });
      assertWithin(delta.toFloat32(), fused, tol, `[${rows}, ${d}] into delta`);
      const ov = out.toFloat32();
      addLayerNorm(rt, { x, delta: out, weight, bias, eps }); // in place: x ← LN(x + LN(x + delta))
      const twice = layerNormReference(xv, ov, wv, bv, rows, d, eps);
      assertWithin(x.toFloat32(), twice, layerNormTol(Float64Array.from(xv, (v, i) => v + ov[i]!), wv, bv, rows, d, eps), `[${rows}, ${d}] in place`);
      for (const t of [x, delta, weight, bias, out]) rt.free(t);
    }
  });

  test("strided rows: x, delta and out as column slices of wider buffers; the gaps are untouched", () => {
    const [rows, d, stride] = [9, 37, 45];
    const buf = rt.tensor("f32", [rows, stride]).set(randn(rows * stride, 5));
    const dbuf = rt.tensor("f32", [rows, stride]).set(randn(rows * stride, 6));
    const obuf = rt.tensor("f32", [rows, stride]).fill(NaN);
    const view = (t: Tensor, at: number): Tensor => new Tensor(rt.memory, t.ptr + at * 4, "f32", [rows, d], [stride, 1]);
    const x = view(buf, 3);
    const delta = view(dbuf, 8);
    const out = view(obuf, 1);
    const weight = rt.tensor("f32", [d]).set(randn(d, 7));
    const bias = rt.tensor("f32", [d]).set(randn(d, 8));
    const xv = x.toFloat32();
    const dv = delta.toFloat32();
    addLayerNorm(rt, { x, delta, weight, bias, out, eps: 1e-5 });
    const want = layerNormReference(xv, dv, weight.toFloat32(), bias.toFloat32(), rows, d, 1e-5);
    assertWithin(out.toFloat32(), want, layerNormTol(Float64Array.from(xv, (v, i) => v + dv[i]!), weight.toFloat32(), bias.toFloat32(), rows, d, 1e-5), "strided");
    const all = obuf.toFloat32();
    for (let r = 0; r < rows; r++) for (let c = 0; c < stride; c++) if (c < 1 || c >= 1 + d) assert.ok(Number.isNaN(all[r * stride + c]!), `out gap [${r}, ${c}] untouched`);
    for (const t of [buf, dbuf, obuf, weight, bias]) rt.free(t);
  });

  test("rows far from zero (mean 1000, σ 0.01: two-pass statistics) and constant rows (out = bias)", () => {
    const [rows, d] = [4, 384];
    const xv = Float32Array.from(randn(rows * d, 9, 0.01), (v, i) => (i < d ? 0.5 : 1000 + v));
    const wv = randn(d, 10);
    const bv = randn(d, 11);
    const x = rt.tensor("f32", [rows, d]).set(xv);
    const weight = rt.tensor("f32", [d]).set(wv);
    const bias = rt.tensor("f32", [d]).set(bv);
    const out = rt.tensor("f32", [rows, d]).fill(NaN);
    layerNorm(rt, { x, weight, bias, out, eps: 1e-12 });
    const got = out.toFloat32();
    assert.deepEqual(got.subarray(0, d), bv, "a constant row normalizes to 0: out = bias exactly");
    const want = layerNormReference(xv, null, wv, bv, rows, d, 1e-12);
    assertWithin(got, want, layerNormTol(xv, wv, bv, rows, d, 1e-12), "mean 1000");
    for (const t of [x, weight, bias, out]) rt.free(t);
  });

  test("gelu erf and tanh on 1, 3, 4, 7, 97, 16385 and 40000 values (tails, chunks); the element past the end is untouched", () => {
    for (const form of ["erf", "tanh"] as const) {
      for (const n of [1, 3, 4, 7, 97, 16385, 40000]) {
        const v = uniform(n, n, -14, 14);
        const t = rt.tensor("f32", [n + 1]).set([...v, 12345]);
        const x = new Tensor(rt.memory, t.ptr, "f32", [n]);
        gelu(rt, { x, form });
        const want = geluReference(v, form);
        assertWithin(x.toFloat32(), want, (form === "erf" ? geluErfTol : geluTanhTol)(v, want), `${form} n ${n}`);
        assert.equal(t.toFloat32()[n], 12345, `${form} n ${n}: past the end`);
        rt.free(t);
      }
    }
  });

  test("gelu erf: the negative tail keeps its relative precision (no 1 + erf cancellation); extremes", () => {
    const v = Float32Array.from([-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -12, -13, -0.5, 0.5, 3, 6, 100, -100, 1e30, -1e30, 1e-30, -1e-30, 0, -0, 1e-40]);
    const x = rt.tensor("f32", [v.length]).set(v);
    gelu(rt, { x, form: "erf" });
    const got = x.toFloat32();
    const want = geluReference(v, "erf");
    assertWithin(got, want, geluErfTol(v, want), "extremes");
    assert.ok(Object.is(got[23], -0), "−0 keeps its sign");
    const inf = rt.tensor("f32", [3]).set([Infinity, -Infinity, NaN]);
    gelu(rt, { x: inf, form: "erf" });
    const r = inf.toFloat32();
    assert.equal(r[0], Infinity);
    assert.ok(Number.isNaN(r[1]!) && Number.isNaN(r[2]!), "−∞ (−∞·0, as PyTorch) and NaN give NaN");
    rt.free(x);
    rt.free(inf);
  });

  test("bad arguments are refused by name", () => {
    const a = rt.tensor("f32", [2, 4]);
    const w = rt.tensor("f32", [4]);
    const check = (fn: () => unknown, argument: string, text: RegExp) =>
      assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.argument === argument && text.test(e.message));
    check(() => layerNorm(rt, { x: a, weight: rt.tensor("f32", [5]), bias: w, eps: 1e-5 }), "weight.shape", /must be \[4\]/);
    check(() => layerNorm(rt, { x: a, weight: w, bias: rt.tensor("f32", [3]), eps: 1e-5 }), "bias.shape", /must be \[4\]/);
    check(() => layerNorm(rt, { x: a, weight: w, bias: w, eps: -1 }), "eps", /-1/);
    check(() => addLayerNorm(rt, { x: a, delta: rt.tensor("f32", [2, 5]), weight: w, bias: w, eps: 1e-5 }), "delta.shape", /must equal x.shape/);
    check(() => layerNorm(rt, { x: rt.tensor("bf16", [2, 4]), weight: w, bias: w, eps: 1e-5 }), "x.dtype", /f32/);
    check(() => gelu(rt, { x: a, form: "exact" as "erf" }), "form", /must be "erf" or "tanh", got "exact"/);
    check(() => gelu(rt, { x: new Tensor(rt.memory, a.ptr, "f32", [4, 2], [1, 4]), form: "erf" }), "x", /contiguous/);
  });
});

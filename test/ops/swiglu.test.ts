// SwiGLU activation and the residual add against float64 references: awkward
// lengths (tails of 1–3), extreme gate values, fused gate_up views, in place.
//
// Tolerance for silu(g)·u: 8 · 2⁻²⁴ relative (e^x ≤ 2 ulp, one division, two
// roundings), plus 1e-36 absolute where silu underflows (g ≪ −87).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError, type Runtime, Tensor, add, createRuntime, swiglu } from "../../src/ops-entry.js";
import { addReference } from "../../src/ops/reference/add.js";
import { swigluReference } from "../../src/ops/reference/swiglu.js";
import { assertWithin, randn, uniform } from "../helpers/random.js";

const U = 2 ** -24;

describe("swiglu and add", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime({ threads: 2 });
  });
  after(() => rt.dispose());

  test("silu(gate) · up for rows of 1, 7, 97, 4864 and 5000 columns (chunks and tails)", () => {
    for (const [T, n] of [[1, 1], [3, 7], [2, 97], [1, 4864], [2, 5000]] as const) {
      const g = uniform(T * n, n, -30, 30);
      const u = randn(T * n, n + 1);
      const gate = rt.tensor("f32", [T, n]).set(g);
      const up = rt.tensor("f32", [T, n]).set(u);
      const out = rt.tensor("f32", [T, n]).fill(NaN);
      swiglu(rt, { gate, up, out });
      const want = swigluReference(g, u);
      assertWithin(out.toFloat32(), want, (i) => 8 * U * Math.abs(want[i]!) + 1e-36, `[${T}, ${n}]`);
      for (const t of [gate, up, out]) rt.free(t);
    }
  });

  test("extreme gates: silu(±100), ±87, 0, −0 and tiny values", () => {
    const g = [100, -100, 88, -88, 87, -87, 0, -0, 1e-30, -1e-30, 20, -20, 3.5, -3.5];
    const u = g.map((_, i) => (i % 2 ? -2 : 2));
    const gate = rt.tensor("f32", [g.length]).set(g);
    const up = rt.tensor("f32", [g.length]).set(u);
    const out = rt.tensor("f32", [g.length]).fill(NaN);
    swiglu(rt, { gate, up, out });
    const want = swigluReference(gate.toFloat32(), u);
    assertWithin(out.toFloat32(), want, (i) => 8 * U * Math.abs(want[i]!) + 1e-36, "extremes");
  });

  test("gate and up as the two halves of a fused gate_up output; out = gate in place", () => {
    const T = 3;
    const I = 37;
    const fused = rt.tensor("f32", [T, 2 * I]).set(randn(T * 2 * I, 7, 3));
    const f = fused.toFloat32();
    const gate = new Tensor(rt.memory, fused.ptr, "f32", [T, I], [2 * I, 1]);
    const up = new Tensor(rt.memory, fused.ptr + I * 4, "f32", [T, I], [2 * I, 1]);
    const g = gate.toFloat32();
    const u = up.toFloat32();
    swiglu(rt, { gate, up, out: gate });
    const want = swigluReference(g, u);
    assertWithin(gate.toFloat32(), want, (i) => 8 * U * Math.abs(want[i]!) + 1e-36, "in place");
    assert.deepEqual(up.toFloat32(), u, "up untouched");
    assert.equal(f.length, 2 * T * I);
  });

  test("add: out = a + b exactly (f32), in place, sizes with tails", () => {
    for (const n of [1, 7, 97, 896, 100003]) {
      const av = randn(n, n);
      const bv = randn(n, n + 1);
      const a = rt.tensor("f32", [n]).set(av);
      const b = rt.tensor("f32", [n]).set(bv);
      const out = rt.tensor("f32", [n]).fill(NaN);
      add(rt, { a, b, out });
      const want = Float32Array.from(addReference(av, bv)); // f32 addition is exact then rounded once
      assert.deepEqual(out.toFloat32(), want, `n = ${n}`);
      add(rt, { a, b, out: a });
      assert.deepEqual(a.toFloat32(), want, `n = ${n} in place`);
      for (const t of [a, b, out]) rt.free(t);
    }
  });

  test("bad arguments are refused by name", () => {
    const a = rt.tensor("f32", [2, 4]);
    const check = (fn: () => unknown, argument: string, text: RegExp) =>
      assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.argument === argument && text.test(e.message));
    check(() => swiglu(rt, { gate: a, up: rt.tensor("f32", [2, 5]), out: a }), "up.shape", /must equal gate.shape/);
    check(() => swiglu(rt, { gate: a, up: a, out: new Tensor(rt.memory, a.ptr + 4, "f32", [2, 4]) }), "out", /overlap/);
    check(() => add(rt, { a, b: rt.tensor("bf16", [2, 4]), out: a }), "b.dtype", /f32/);
    check(() => add(rt, { a, b: a, out: new Tensor(rt.memory, a.ptr, "f32", [2, 4], [1, 2]) }), "out", /contiguous/);
  });
});

// Gemma's pointwise ops against float64 references: GeGLU (tanh GELU) on
// awkward lengths, extreme gates and fused gate_up views; the logit softcap
// cap·tanh(x/cap) across the series/exp switch and at ±∞; the scale x ← s·x.
//
// Tolerances (U = 2⁻²⁴): gelu(g)·u within (16 + 4·|2u|)·U relative, plus
// 1e-36 absolute — e^(−2u) is ≤ 2 ulp of an argument that itself carries a
// few ulp of |2u|, u = √(2/π)(g + 0.044715g³); softcap within 8·U·cap
// absolute (tanh to a few ulp of 1, times cap); scale exact (one f32 product).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError, type Runtime, Tensor, createRuntime } from "../../src/ops-entry.js";
import { gegluReference } from "../../src/ops/reference/swiglu.js";
import { softcapReference } from "../../src/ops/reference/softcap.js";
import { scale } from "../../src/ops/scale.js";
import { softcap } from "../../src/ops/softcap.js";
import { geglu } from "../../src/ops/swiglu.js";
import { assertWithin, randn, uniform } from "../helpers/random.js";

const U = 2 ** -24;
const geluTol = (g: ArrayLike<number>, want: ArrayLike<number>) => (i: number) => {
  const x = g[i]!;
  const u2 = Math.abs(2 * Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x));
  return (16 + 4 * Math.min(u2, 200)) * U * Math.abs(want[i]!) + 1e-36;
};

describe("geglu, softcap, scale", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime({ threads: 2 });
  });
  after(() => rt.dispose());

  test("gelu_tanh(gate) · up for rows of 1, 7, 97, 4864 and 5000 columns (chunks and tails)", () => {
    for (const [T, n] of [[1, 1], [3, 7], [2, 97], [1, 4864], [2, 5000]] as const) {
      const g = uniform(T * n, n, -12, 12);
      const u = randn(T * n, n + 1);
      const gate = rt.tensor("f32", [T, n]).set(g);
      const up = rt.tensor("f32", [T, n]).set(u);
      const out = rt.tensor("f32", [T, n]).fill(NaN);
      geglu(rt, { gate, up, out });
      const want = gegluReference(g, u);
      assertWithin(out.toFloat32(), want, geluTol(g, want), `[${T}, ${n}]`);
      for (const t of [gate, up, out]) rt.free(t);
    }
  });

  test("extreme gates: ±1e30, ±100, ±10, 0, −0, tiny; +Infinity passes through", () => {
    const g = [1e30, -1e30, 100, -100, 10, -10, 0, -0, 1e-30, -1e-30, 3.5, -3.5, -5, 5];
    const u = g.map((_, i) => (i % 2 ? -2 : 2));
    const gate = rt.tensor("f32", [g.length]).set(g);
    const up = rt.tensor("f32", [g.length]).set(u);
    const out = rt.tensor("f32", [g.length]).fill(NaN);
    geglu(rt, { gate, up, out });
    const gv = gate.toFloat32();
    const want = gegluReference(gv, u);
    assertWithin(out.toFloat32(), want, geluTol(gv, want), "extremes");
    const inf = rt.tensor("f32", [1]).set([Infinity]);
    const one = rt.tensor("f32", [1]).set([1]);
    geglu(rt, { gate: inf, up: one, out: one });
    assert.deepEqual([...one.toFloat32()], [Infinity]); // −∞ gives NaN, as PyTorch's ½x(1 + tanh u) does
  });

  test("gate and up as the two halves of a fused gate_up output; out = gate in place", () => {
    const T = 3;
    const I = 37;
    const fused = rt.tensor("f32", [T, 2 * I]).set(randn(T * 2 * I, 7, 3));
    const gate = new Tensor(rt.memory, fused.ptr, "f32", [T, I], [2 * I, 1]);
    const up = new Tensor(rt.memory, fused.ptr + I * 4, "f32", [T, I], [2 * I, 1]);
    const g = gate.toFloat32();
    const u = up.toFloat32();
    geglu(rt, { gate, up, out: gate });
    const want = gegluReference(g, u);
    assertWithin(gate.toFloat32(), want, geluTol(g, want), "in place");
    assert.deepEqual(up.toFloat32(), u, "up untouched");
  });

  test("softcap: cap·tanh(x/cap) for 1, 3, 4097 and 70001 values (tails, chunks), across |x/cap| = 1/16", () => {
    for (const [n, cap] of [[1, 30], [3, 50], [4097, 30], [70001, 5]] as const) {
      const v = Float32Array.from(uniform(n, n, -1, 1), (r, i) => (i % 3 === 0 ? r * cap * 0.1 : i % 3 === 1 ? r * cap * 4 : r * 1e-3));
      const x = rt.tensor("f32", [n]).set(v);
      softcap(rt, { x, cap });
      const want = softcapReference(v, cap);
      assertWithin(x.toFloat32(), want, () => 8 * U * cap, `n ${n}, cap ${cap}`);
      rt.free(x);
    }
    const edge = [Infinity, -Infinity, 0, -0, 1e-30, -1e-30, 1e30, 30 / 16, -30 / 16];
    const x = rt.tensor("f32", [edge.length]).set(edge);
    softcap(rt, { x, cap: 30 });
    const got = x.toFloat32();
    assertWithin(got, softcapReference(edge, 30), () => 8 * U * 30, "edges");
    assert.ok(Object.is(got[3], -0), "−0 keeps its sign");
  });

  test("scale: x · s exactly (one f32 product), tails", () => {
    for (const n of [1, 7, 40000]) {
      const v = randn(n, n);
      const x = rt.tensor("f32", [2, n]).set([...v, ...v]);
      scale(rt, { x, s: Math.sqrt(2304) });
      const want = Float32Array.from(v, (a) => Math.fround(a * Math.fround(48)));
      assert.deepEqual(x.toFloat32(), Float32Array.from([...want, ...want]));
      rt.free(x);
    }
  });

  test("bad arguments are refused by name", () => {
    const a = rt.tensor("f32", [2, 4]);
    const check = (fn: () => unknown, argument: string, text: RegExp) =>
      assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.argument === argument && text.test(e.message));
    check(() => softcap(rt, { x: a, cap: 0 }), "cap", /must be > 0, got 0/);
    check(() => softcap(rt, { x: new Tensor(rt.memory, a.ptr, "f32", [4, 2], [1, 4]), cap: 30 }), "x", /contiguous/);
    check(() => scale(rt, { x: a, s: NaN }), "s", /finite/);
    check(() => scale(rt, { x: rt.tensor("bf16", [4]), s: 2 }), "x.dtype", /f32/);
    check(() => geglu(rt, { gate: a, up: rt.tensor("f32", [2, 5]), out: a }), "up.shape", /must equal gate.shape/);
  });
});

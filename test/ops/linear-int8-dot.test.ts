// The relaxed q8 and q4 kernels' two int8-dot modes (src/runtime/module.ts
// Int8DotMode): "u8" (the relaxed dot reads its second operand as exact
// unsigned bytes, AVX-VNNI: activation codes + 128, minus 128 · Σw) and "i7"
// (the portable path, forced by createRuntime({ int8Dot: "i7" })). Both take
// the same exact int32 sums, so their outputs must be bit-identical; each must
// match the float64 reference (bound as in linear.test.ts: (blocks + 4) · 2⁻²⁴
// · Σ|x·w| on what the kernels multiply). Shapes hit the GEMV, the 8- and
// 4-token GEMM tiles and the leftover tokens, with awkward cols (a partial
// last block), poisoned outputs and codes at ±127 (|x·w| sums at their
// largest: 32 · 255 · 127 per row and block in the u8 mode). q4 takes the same
// dots on its nibble planes (gemv.ts q4Lo / q4Hi) against activation codes in
// the chunks' column order (activation.ts Q4_ORDER).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError, type Runtime, Tensor, createRuntime, createWeight, dequantizeWeight, linear } from "../../src/index.js";
import { linearMagnitude, linearReference, quantizeActivationReference } from "../../src/ops/reference/linear.js";
import { assertWithin, randn } from "../helpers/random.js";

const U = 2 ** -24;

interface Case {
  rows: number;
  cols: number;
  tokens: number;
  /** ±1 values only: every weight and activation code is ±127. */
  extreme?: boolean;
  bias?: boolean;
}

const CASES: Case[] = [
  { rows: 1, cols: 1, tokens: 1 },
  { rows: 7, cols: 97, tokens: 1, bias: true },
  { rows: 13, cols: 80, tokens: 5 },
  { rows: 97, cols: 33, tokens: 7, bias: true },
  { rows: 40, cols: 96, tokens: 8 },
  { rows: 130, cols: 80, tokens: 19, bias: true },
  { rows: 64, cols: 1000, tokens: 16 },
  { rows: 24, cols: 256, tokens: 13, extreme: true },
  { rows: 411, cols: 1000, tokens: 1, extreme: true },
  { rows: 21, cols: 160, tokens: 97, bias: true },
];

function values(n: number, seed: number, c: Case, scale = 1): Float32Array {
  const v = randn(n, seed, scale);
  return c.extreme ? v.map((x) => (x < 0 ? -scale : scale)) : v;
}

/** q8 or q4 linear of case c on rt; returns the output after checking it against the float64 reference. */
function run(rt: Runtime, c: Case, seed: number, format: "q8" | "q4"): Float32Array {
  const { rows, cols, tokens } = c;
  const source = rt.tensor("f32", [rows, cols]).set(values(rows * cols, seed, c, 0.5));
  const weight = createWeight(rt, { source, format });
  rt.free(source);
  const x = rt.tensor("f32", [tokens, cols]).set(values(tokens * cols, seed + 1, c));
  const bias = c.bias ? rt.tensor("f32", [rows]).set(randn(rows, seed + 2)) : undefined;
  const out = rt.tensor("f32", [tokens, rows]).fill(NaN);
  linear(rt, { x, weight, out, ...(bias ? { bias } : {}) });
  const got = out.toFloat32();
  const deq = dequantizeWeight(rt, { weight });
  const xk = quantizeActivationReference(x.toFloat32(), tokens, cols);
  const shape = { tokens, rows, cols };
  const want = linearReference(xk, deq.toFloat32(), shape, bias?.toFloat32());
  const mag = linearMagnitude(xk, deq.toFloat32(), shape);
  const bv = bias?.toFloat32();
  const n = Math.ceil(cols / 32);
  assertWithin(got, want, (i) => (n + 4) * U * mag[i]! + (bv ? Math.abs(bv[i % rows]!) * U : 0) + 1e-30, `${format} ${rt.int8Dot} [${rows}×${cols}], T=${tokens}`);
  weight.free();
  for (const t of [x, out, deq, ...(bias ? [bias] : [])]) rt.free(t);
  return got;
}

for (const format of ["q8", "q4"] as const) describe(`${format} linear on both int8-dot modes`, () => {
  let auto: Runtime;
  let i7: Runtime;
  before(async () => {
    auto = await createRuntime({ threads: 2 });
    i7 = await createRuntime({ threads: 2, int8Dot: "i7" });
  });
  after(async () => {
    await auto.dispose();
    await i7.dispose();
  });

  test("rt.int8Dot: i7 on baseline; on relaxed, u8 exactly when the kernel's dot is exact on unsigned bytes; the option forces i7", () => {
    assert.equal(i7.int8Dot, "i7");
    const probe = auto.exports["int8_dot_probe"]!;
    // 4 · (−127) · 255 − 7 only where the second operand is unsigned and nothing saturates.
    const unsignedExact = probe(127, 255, 1) === 129541 && probe(-127, 255, -7) === -129547;
    assert.equal(auto.int8Dot, auto.kernels === "relaxed" && unsignedExact ? "u8" : "i7");
  });

  test("int8Dot: an unknown mode, or u8 where the probe did not find it, is an ArgumentError", async () => {
    await assert.rejects(createRuntime({ threads: 1, int8Dot: "vnni" as never }), (e: Error) => e instanceof ArgumentError && e.argument === "int8Dot" && /"vnni"/.test(e.message));
    if (auto.int8Dot === "u8") {
      const rt = await createRuntime({ threads: 1, int8Dot: "u8" });
      assert.equal(rt.int8Dot, "u8");
      await rt.dispose();
    } else {
      await assert.rejects(createRuntime({ threads: 1, int8Dot: "u8" }), (e: Error) => e instanceof ArgumentError && e.argument === "int8Dot" && /probe: i7/.test(e.message));
    }
  });

  test("each mode matches the float64 reference (GEMV, GEMM tiles, leftovers, poisoned outputs, codes at ±127)", () => {
    CASES.forEach((c, i) => {
      run(auto, c, 100 * i + 5, format);
      run(i7, c, 100 * i + 5, format);
    });
  });

  test("a token's output in a 97-token batch (two 64-token blocks, leftovers) equals its output alone, on each mode", () => {
    const [rows, cols, T] = [19, 96, 97];
    for (const rt of [auto, i7]) {
      const source = rt.tensor("f32", [rows, cols]).set(randn(rows * cols, 41, 0.5));
      const weight = createWeight(rt, { source, format });
      const x = rt.tensor("f32", [T, cols]).set(randn(T * cols, 42));
      const all = rt.tensor("f32", [T, rows]).fill(NaN);
      linear(rt, { x, weight, out: all });
      const batch = all.toFloat32();
      for (const t of [0, 3, 62, 63, 64, 65, 95, 96]) {
        const one = rt.tensor("f32", [1, rows]).fill(NaN);
        linear(rt, { x: new Tensor(rt.memory, x.ptr + t * cols * 4, "f32", [1, cols]), weight, out: one });
        assert.deepEqual(one.toFloat32(), batch.subarray(t * rows, (t + 1) * rows), `${rt.int8Dot} token ${t}`);
        rt.free(one);
      }
      weight.free();
      for (const t of [source, x, all]) rt.free(t);
    }
  });

  test("the u8 and i7 modes give bit-identical outputs", (t) => {
    if (auto.int8Dot !== "u8") {
      t.skip(`this engine's int8 dot is ${auto.int8Dot}: only one mode to run`);
      return;
    }
    CASES.forEach((c, i) => {
      assert.deepEqual(run(auto, c, 100 * i + 7, format), run(i7, c, 100 * i + 7, format), `${format} [${c.rows}×${c.cols}], T=${c.tokens}`);
    });
  });
});

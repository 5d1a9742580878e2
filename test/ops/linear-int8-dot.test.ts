// The q8 and q4 kernels' integer dots (src/runtime/module.ts Int8DotMode): the
// baseline flavor's "i16", and the relaxed flavor's "i16" (the same int16
// dot beside the relaxed float kernels), "i7" (the portable relaxed dot, |w|
// with the sign on the codes) and "u8" (the relaxed dot reads its second
// operand as exact unsigned bytes, AVX-VNNI: activation codes + 128, minus
// 128 · Σw; where probed). Every mode takes the same exact int32 sums, so the
// relaxed flavor's outputs must be bit-identical across its modes; each must
// match the float64 reference (bound as in linear.test.ts: (blocks + 4) · 2⁻²⁴
// · Σ|x·w| on what the kernels multiply). Shapes hit the GEMV, the 8- and
// 4-token GEMM tiles and the leftover tokens, with awkward cols (a partial
// last block), poisoned outputs and codes at ±127 (|x·w| sums at their
// largest: 32 · 255 · 127 per row and block in the u8 mode). q4 takes the same
// dots on its nibble planes (gemv.ts q4Lo / q4Hi) against activation codes in
// the chunks' column order (activation.ts Q4_ORDER).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  ArgumentError,
  type Int8DotMode,
  type Runtime,
  Tensor,
  createRuntime,
  createWeight,
  defaultInt8Dot,
  dequantizeWeight,
  kernelFlavorAvailable,
  linear,
  relaxedInt8DotHere,
} from "../../src/ops-entry.js";
import { linearMagnitude, linearReference, quantizeActivationReference } from "../../src/ops/reference/linear.js";
import type { LinearCase } from "../helpers/linear-case.js";
import { assertWithin, randn } from "../helpers/random.js";

const U = 2 ** -24;

/** extreme: ±1 values only, every weight and activation code ±127. */
type Case = LinearCase;

const CASES: Case[] = [
  { rows: 1, cols: 1, tokens: 1 },
  { rows: 7, cols: 97, tokens: 1, bias: true },
  { rows: 13, cols: 80, tokens: 5 },
  { rows: 97, cols: 33, tokens: 7, bias: true },
  { rows: 40, cols: 96, tokens: 8 },
  { rows: 130, cols: 80, tokens: 19, bias: true },
  { rows: 64, cols: 1000, tokens: 16 },
  // 65 blocks a row, a partial last one, at 16 tokens: the baseline flavor's q8 widens here too (linear.ts WIDEN_FEW_NB).
  { rows: 27, cols: 2050, tokens: 16, bias: true },
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
  assertWithin(got, want, (i) => (n + 4) * U * mag[i]! + (bv ? Math.abs(bv[i % rows]!) * U : 0) + 1e-30, `${format} ${rt.kernels} ${rt.int8Dot} [${rows}×${cols}], T=${tokens}`);
  weight.free();
  for (const t of [x, out, deq, ...(bias ? [bias] : [])]) rt.free(t);
  return got;
}

const relaxedHere = kernelFlavorAvailable("relaxed");
/** The relaxed flavor's modes on this engine: "u8" only where probed. */
const RELAXED_MODES: Int8DotMode[] = relaxedHere ? ["i16", "i7", ...(relaxedInt8DotHere() === "u8" ? ["u8" as const] : [])] : [];

for (const format of ["q8", "q4"] as const) describe(`${format} linear on every integer dot`, () => {
  let baseline: Runtime;
  let relaxed: Runtime[] = [];
  before(async () => {
    baseline = await createRuntime({ threads: 2, kernels: "baseline" });
    relaxed = await Promise.all(RELAXED_MODES.map((int8Dot) => createRuntime({ threads: 2, kernels: "relaxed", int8Dot })));
  });
  after(async () => {
    for (const rt of [baseline, ...relaxed]) await rt.dispose();
  });

  test("rt.int8Dot: i16 on baseline; on relaxed, the probe finds u8 exactly when the kernel's dot is exact on unsigned bytes; the option picks the mode", async (t) => {
    assert.equal(baseline.int8Dot, "i16");
    assert.deepEqual(relaxed.map((rt) => rt.int8Dot), RELAXED_MODES);
    if (!relaxedHere) {
      t.skip("this engine has no relaxed kernels");
      return;
    }
    const auto = await createRuntime({ threads: 1, kernels: "relaxed" });
    const probe = auto.exports["int8_dot_probe"]!;
    // 4 · (−127) · 255 − 7 only where the second operand is unsigned and nothing saturates.
    const unsignedExact = probe(127, 255, 1) === 129541 && probe(-127, 255, -7) === -129547;
    assert.equal(relaxedInt8DotHere(), unsignedExact ? "u8" : "i7");
    assert.equal(auto.int8Dot, defaultInt8Dot("relaxed", process.arch, auto.int8DotLowering));
    await auto.dispose();
  });

  test("int8Dot: an unknown mode, u8 where the probe did not find it, or a relaxed mode on baseline is an ArgumentError", async () => {
    await assert.rejects(createRuntime({ threads: 1, int8Dot: "vnni" as never }), (e: Error) => e instanceof ArgumentError && e.argument === "int8Dot" && /"vnni"/.test(e.message));
    await assert.rejects(createRuntime({ threads: 1, kernels: "baseline", int8Dot: "i7" }), (e: Error) => e instanceof ArgumentError && e.argument === "int8Dot" && /"i7"/.test(e.message) && /only "i16"/.test(e.message));
    if (relaxedHere && relaxedInt8DotHere() !== "u8") {
      await assert.rejects(createRuntime({ threads: 1, kernels: "relaxed", int8Dot: "u8" }), (e: Error) => e instanceof ArgumentError && e.argument === "int8Dot" && /probe: (signed|saturating|unknown)/.test(e.message));
    }
  });

  test("each mode matches the float64 reference (GEMV, GEMM tiles, leftovers, poisoned outputs, codes at ±127)", () => {
    CASES.forEach((c, i) => {
      for (const rt of [baseline, ...relaxed]) run(rt, c, 100 * i + 5, format);
    });
  });

  test("a token's output in a 97-token batch (two 64-token blocks, leftovers) equals its output alone, on each mode", () => {
    const [rows, cols, T] = [19, 96, 97];
    for (const rt of [baseline, ...relaxed]) {
      const source = rt.tensor("f32", [rows, cols]).set(randn(rows * cols, 41, 0.5));
      const weight = createWeight(rt, { source, format });
      const x = rt.tensor("f32", [T, cols]).set(randn(T * cols, 42));
      const all = rt.tensor("f32", [T, rows]).fill(NaN);
      linear(rt, { x, weight, out: all });
      const batch = all.toFloat32();
      for (const t of [0, 3, 62, 63, 64, 65, 95, 96]) {
        const one = rt.tensor("f32", [1, rows]).fill(NaN);
        linear(rt, { x: new Tensor(rt.memory, x.ptr + t * cols * 4, "f32", [1, cols]), weight, out: one });
        assert.deepEqual(one.toFloat32(), batch.subarray(t * rows, (t + 1) * rows), `${rt.kernels} ${rt.int8Dot} token ${t}`);
        rt.free(one);
      }
      weight.free();
      for (const t of [source, x, all]) rt.free(t);
    }
  });

  // Small T (speculative verification's 1 + k tokens, small batches): q8 takes
  // the tokens the 4- and 8-token tiles leave over both halves at once
  // (assembly/linalg/gemm-few.ts, gemvQ8x2). rows 21: a last group of 5 rows
  // (half 1 partial), 19: of 3 (half 1 absent); cols 97: a partial block;
  // 411 × 1000: big enough that the 2-thread runtimes split the rows. T = 16
  // and 17 sit either side of linear.ts FEW_TOKENS (the baseline flavor's
  // 8-row tiles up to 16 tokens, its 4-row tiles above).
  test("T = 2 … 8, 16, 17: each token's output equals its output alone (T = 1), bit for bit, on each mode", () => {
    const SHAPES: [number, number, boolean][] = [[21, 97, true], [19, 64, false], [411, 1000, true]];
    for (const rt of [baseline, ...relaxed]) {
      for (const [rows, cols, withBias] of SHAPES) {
        const source = rt.tensor("f32", [rows, cols]).set(randn(rows * cols, rows + cols, 0.5));
        const weight = createWeight(rt, { source, format });
        const bias = withBias ? rt.tensor("f32", [rows]).set(randn(rows, rows)) : undefined;
        const x = rt.tensor("f32", [17, cols]).set(randn(17 * cols, cols));
        const row = (t: number): Tensor => new Tensor(rt.memory, x.ptr + t * cols * 4, "f32", [1, cols]);
        const alone = Array.from({ length: 17 }, (_, t) => {
          const one = rt.tensor("f32", [1, rows]).fill(NaN);
          linear(rt, { x: row(t), weight, out: one, ...(bias ? { bias } : {}) });
          const got = one.toFloat32();
          rt.free(one);
          return got;
        });
        for (const T of [2, 3, 4, 5, 6, 7, 8, 16, 17]) {
          const out = rt.tensor("f32", [T, rows]).fill(NaN);
          linear(rt, { x: new Tensor(rt.memory, x.ptr, "f32", [T, cols]), weight, out, ...(bias ? { bias } : {}) });
          const batch = out.toFloat32();
          for (let t = 0; t < T; t++) {
            assert.deepEqual(batch.subarray(t * rows, (t + 1) * rows), alone[t], `${format} ${rt.kernels} ${rt.int8Dot} [${rows}×${cols}] T=${T} token ${t}`);
          }
          rt.free(out);
        }
        weight.free();
        for (const t of [source, x, ...(bias ? [bias] : [])]) rt.free(t);
      }
    }
  });

  test("the relaxed flavor's modes give bit-identical outputs", (t) => {
    if (relaxed.length === 0) {
      t.skip("this engine has no relaxed kernels");
      return;
    }
    CASES.forEach((c, i) => {
      const [first, ...rest] = relaxed.map((rt) => run(rt, c, 100 * i + 7, format));
      rest.forEach((got, k) => assert.deepEqual(got, first, `${format} ${RELAXED_MODES[k + 1]} vs i16 [${c.rows}×${c.cols}], T=${c.tokens}`));
    });
  });
});

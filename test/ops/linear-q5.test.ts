// q5 weights (GGUF Q5_0 kept natively: assembly/linalg/layout.ts q5, 7 bits a
// weight) on every integer dot. Below 4 tokens they take their own GEMV with
// int16 activation codes (q5.ts gemvQ5x2); from 4 tokens each row group is
// unpacked to q8 tiles and the q8 GEMMs of the runtime's int8-dot mode run on
// it (linear.ts task_linear_q5). Both take exact int32 sums per block and then
// the same f32 steps, so:
//   - each mode matches the float64 reference: ggml's decoded Q5_0 values times
//     the activation quantized per 32 like Q8_0, within (blocks + 4) · 2⁻²⁴ ·
//     Σ|x·w| (+ 2⁻²⁴·|bias|), as linear-int8-dot.test.ts bounds q8;
//   - outputs are bit-identical across the relaxed flavor's int8-dot modes (the
//     flavors differ in the last bit: the relaxed one fuses its multiply-adds),
//     and a token's row does not depend on the batch it is in (1, 2, 3, 5 tokens
//     or 97).
// Shapes hit T = 1, 2, 3 (GEMV), 4, 5, 13, 19, 97 (GEMM tiles, leftovers, two
// 64-token blocks), rows not a multiple of 8, cols of 1 to 32 blocks, poisoned
// (NaN) outputs beside strided output rows, and codes at −16 and 15 against
// activation codes at ±127.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  GgmlMatrix,
  type Int8DotMode,
  type Runtime,
  Tensor,
  type Weight,
  createGgmlWeight,
  createRuntime,
  kernelFlavorAvailable,
  linear,
  relaxedInt8DotHere,
} from "../../src/ops-entry.js";
import { GGML_TYPES } from "../../src/tensor/ggml-types.js";
import { dequantize } from "../../src/tensor/ggml-dequantize.js";
import { quantize } from "../../src/sources/gguf/quantize.js";
import { linearMagnitude, linearReference, quantizeActivationReference } from "../../src/ops/reference/linear.js";
import { encodeMiniFloat, F16 } from "../../src/tensor/minifloat.js";
import type { LinearCase } from "../helpers/linear-case.js";
import { assertWithin, randn, rng } from "../helpers/random.js";

const U = 2 ** -24;
const Q5_0 = GGML_TYPES.Q5_0;

/** extreme: every code at −16 or 15 (whole blocks), activations ±1: every activation code ±127. */
type Case = LinearCase;

const CASES: Case[] = [
  { rows: 1, cols: 32, tokens: 1 },
  { rows: 7, cols: 96, tokens: 2, bias: true },
  { rows: 13, cols: 160, tokens: 3 },
  { rows: 97, cols: 64, tokens: 4, bias: true },
  { rows: 40, cols: 896, tokens: 5 },
  { rows: 130, cols: 128, tokens: 19, bias: true },
  { rows: 24, cols: 256, tokens: 13, extreme: true },
  { rows: 411, cols: 1024, tokens: 1, extreme: true },
  { rows: 9, cols: 96, tokens: 3, extreme: true },
  { rows: 21, cols: 160, tokens: 97, bias: true },
];

/** Q5_0 blocks of a [rows, cols] matrix: ggml's quantizer on random values, or (extreme) blocks whose codes are all 0 (−16) or all 31 (15). */
function q5Blocks(c: Case, seed: number): Uint8Array {
  if (!c.extreme) return quantize("Q5_0", randn(c.rows * c.cols, seed, 0.5), c.cols);
  const r = rng(seed);
  const bytes = new Uint8Array((c.rows * c.cols / Q5_0.blockSize) * Q5_0.typeSize);
  for (let at = 0; at < bytes.length; at += Q5_0.typeSize) {
    const d = encodeMiniFloat(F16, (r() + 0.5) * 0.01, true);
    bytes[at] = d & 255;
    bytes[at + 1] = d >> 8;
    bytes.fill(r() < 0.5 ? 0 : 255, at + 2, at + Q5_0.typeSize);
  }
  return bytes;
}

function decoded(bytes: Uint8Array, n: number): Float64Array {
  const out = new Float64Array(n);
  dequantize(Q5_0, bytes, n, out);
  return out;
}

function q5Weight(rt: Runtime, bytes: Uint8Array, rows: number, cols: number): Weight {
  const raw = rt.tensor("uint8", [rows, bytes.length / rows]).set(bytes);
  const w = createGgmlWeight(rt, { source: new GgmlMatrix("Q5_0", raw, rows, cols) });
  rt.free(raw);
  return w;
}

/** Case c's linear on rt, its output rows strided between NaN-poisoned columns; checked against the float64 reference, returned. */
function run(rt: Runtime, c: Case, seed: number): Float32Array {
  const { rows, cols, tokens } = c;
  const bytes = q5Blocks(c, seed);
  const weight = q5Weight(rt, bytes, rows, cols);
  assert.equal(weight.format, "q5");
  assert.equal(weight.byteLength, Math.ceil(rows / 8) * (cols / 32) * 224);
  const xv = c.extreme ? Float32Array.from(randn(tokens * cols, seed + 1), (v) => (v < 0 ? -1 : 1)) : randn(tokens * cols, seed + 1);
  const x = rt.tensor("f32", [tokens, cols]).set(xv);
  const bv = c.bias ? randn(rows, seed + 2) : undefined;
  const bias = bv ? rt.tensor("f32", [rows]).set(bv) : undefined;
  const wide = rt.tensor("f32", [tokens, rows + 3]).fill(Number.NaN);
  const out = new Tensor(rt.memory, wide.ptr, "f32", [tokens, rows], [rows + 3, 1]);
  linear(rt, { x, weight, out, ...(bias ? { bias } : {}) });
  const all = wide.toFloat32();
  const got = new Float32Array(tokens * rows);
  for (let t = 0; t < tokens; t++) {
    got.set(all.subarray(t * (rows + 3), t * (rows + 3) + rows), t * rows);
    for (let k = rows; k < rows + 3; k++) assert.ok(Number.isNaN(all[t * (rows + 3) + k]), `wrote past row ${t}'s ${rows} outputs`);
  }
  const xk = quantizeActivationReference(xv, tokens, cols);
  const want = decoded(bytes, rows * cols);
  const shape = { tokens, rows, cols };
  const ref = linearReference(xk, want, shape, bv);
  const mag = linearMagnitude(xk, want, shape);
  assertWithin(got, ref, (i) => (cols / 32 + 4) * U * mag[i]! + (bv ? Math.abs(bv[i % rows]!) * U : 0) + 1e-30, `q5 ${rt.kernels} ${rt.int8Dot} ${JSON.stringify(c)}`);
  weight.free();
  for (const t of [x, wide, ...(bias ? [bias] : [])]) rt.free(t);
  return got;
}

const relaxedHere = kernelFlavorAvailable("relaxed");
/** The relaxed flavor's modes on this engine: "u8" only where probed. */
const RELAXED_MODES: Int8DotMode[] = relaxedHere ? ["i16", "i7", ...(relaxedInt8DotHere() === "u8" ? ["u8" as const] : [])] : [];

describe("q5 linear (GGUF Q5_0 kept natively) on every integer dot", () => {
  let runtimes: Runtime[] = [];
  before(async () => {
    runtimes = [await createRuntime({ threads: 2, kernels: "baseline" }), ...(await Promise.all(RELAXED_MODES.map((int8Dot) => createRuntime({ threads: 2, kernels: "relaxed", int8Dot }))))];
  });
  after(async () => {
    for (const rt of runtimes) await rt.dispose();
  });

  test("each flavor and mode matches the float64 reference; the relaxed modes give the same bits (GEMV at T < 4, unpacked q8 GEMMs from 4)", () => {
    CASES.forEach((c, i) => {
      const outs = runtimes.map((rt) => run(rt, c, 100 * i + 7));
      // runtimes[1] is the first relaxed mode (i16), where the relaxed flavor runs.
      for (let k = 2; k < outs.length; k++) {
        assert.deepEqual(Array.from(outs[k]!), Array.from(outs[1]!), `relaxed ${runtimes[k]!.int8Dot} against relaxed i16, ${JSON.stringify(c)}`);
      }
    });
  });

  test("a token's row is the same alone, in batches of 2, 3 and 5, and in a 97-token batch, on each mode", () => {
    const [rows, cols, T] = [19, 896, 97];
    const bytes = q5Blocks({ rows, cols, tokens: T }, 41);
    for (const rt of runtimes) {
      const weight = q5Weight(rt, bytes, rows, cols);
      const x = rt.tensor("f32", [T, cols]).set(randn(T * cols, 42));
      const all = rt.tensor("f32", [T, rows]).fill(Number.NaN);
      linear(rt, { x, weight, out: all });
      const batch = all.toFloat32();
      for (const [t0, n] of [[0, 1], [63, 1], [96, 1], [1, 2], [62, 2], [5, 3], [94, 3], [60, 5]] as const) {
        const xt = new Tensor(rt.memory, x.ptr + t0 * cols * 4, "f32", [n, cols]);
        const few = rt.tensor("f32", [n, rows]).fill(Number.NaN);
        linear(rt, { x: xt, weight, out: few });
        assert.deepEqual(Array.from(few.toFloat32()), Array.from(batch.subarray(t0 * rows, (t0 + n) * rows)), `${rt.kernels} ${rt.int8Dot}: tokens ${t0} … ${t0 + n - 1}`);
        rt.free(few);
      }
      weight.free();
      for (const t of [x, all]) rt.free(t);
    }
  });
});

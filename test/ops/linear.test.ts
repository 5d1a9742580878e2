// linear: GEMV (T = 1) and GEMM (T > 1) for every weight format against the
// float64 reference, on awkward shapes, with poisoned outputs, bias, strided
// views; bit-identical rows whatever the batch and the thread count.
//
// Tolerances. The reference runs on exactly what the kernels multiply: the
// dequantized weights and, for q8/q4, the activation quantized as the kernels
// quantize it (Q8_0 per block of 32). What remains is f32 rounding, bounded as
// |out − ref| ≤ (n + 4) · 2⁻²⁴ · Σ_c |x_c · w_c| (+ |bias| · 2⁻²⁴): n = cols for
// f32/bf16 (an f32 sum of products), n = blocks for q8/q4 (exact int32 sums
// per block, then one f32 term per block). The error of q8/q4 against the
// unquantized f32 layer is reported and held to a loose bound.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  ArgumentError,
  type Runtime,
  Tensor,
  WEIGHT_FORMATS,
  type Weight,
  type WeightFormat,
  createRuntime,
  createWeight,
  dequantizeWeight,
  linear,
} from "../../src/ops-entry.js";
import { linearMagnitude, linearReference, quantizeActivationReference } from "../../src/ops/reference/linear.js";
import { assertWithin, randn, relRms } from "../helpers/random.js";

const U = 2 ** -24;

interface Case {
  rows: number;
  cols: number;
  tokens: number;
  bias?: boolean;
}

const CASES: Case[] = [
  { rows: 1, cols: 1, tokens: 1 },
  { rows: 7, cols: 97, tokens: 1, bias: true },
  { rows: 13, cols: 80, tokens: 5 },
  { rows: 97, cols: 33, tokens: 7, bias: true },
  { rows: 64, cols: 256, tokens: 4 },
  { rows: 130, cols: 80, tokens: 9, bias: true },
  { rows: 5, cols: 1000, tokens: 3 },
  { rows: 40, cols: 96, tokens: 16 },
  // Over one 64-token sweep block (linear.ts FLOAT_TOKEN_BLOCK): relaxed f32's 3-token tiles leave 1 token in the first block, none in the second.
  { rows: 21, cols: 64, tokens: 67, bias: true },
];

function quantizedFormat(format: WeightFormat): boolean {
  return format === "q8" || format === "q4";
}

describe("linear", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime({ threads: 2 });
  });
  after(() => rt.dispose());

  /** Runs linear and checks it against the reference on what the kernels multiply. */
  function check(format: WeightFormat, c: Case, seed: number): { got: Float32Array; weight: Weight; x: Tensor; src: Float32Array } {
    const { rows, cols, tokens } = c;
    const src = randn(rows * cols, seed, 0.5);
    const source = rt.tensor("f32", [rows, cols]).set(src);
    const weight = createWeight(rt, { source, format });
    rt.free(source);
    const x = rt.tensor("f32", [tokens, cols]).set(randn(tokens * cols, seed + 1));
    const bias = c.bias ? rt.tensor("f32", [rows]).set(randn(rows, seed + 2)) : undefined;
    const out = rt.tensor("f32", [tokens, rows]).fill(NaN);
    linear(rt, { x, weight, out, ...(bias ? { bias } : {}) });
    const got = out.toFloat32();
    const deq = dequantizeWeight(rt, { weight });
    const w = deq.toFloat32();
    const xv = x.toFloat32();
    const xk = quantizedFormat(format) ? quantizeActivationReference(xv, tokens, cols) : xv;
    const shape = { tokens, rows, cols };
    const want = linearReference(xk, w, shape, bias?.toFloat32());
    const mag = linearMagnitude(xk, w, shape);
    const n = quantizedFormat(format) ? Math.ceil(cols / 32) : cols;
    const bv = bias?.toFloat32();
    assertWithin(got, want, (i) => (n + 4) * U * mag[i]! + (bv ? Math.abs(bv[i % rows]!) * U : 0) + 1e-30, `${format} [${rows}×${cols}], T=${tokens}`);
    rt.free(out);
    rt.free(deq);
    if (bias) rt.free(bias);
    return { got, weight, x, src };
  }

  for (const format of WEIGHT_FORMATS) {
    test(`${format}: GEMV and GEMM match the float64 reference within the f32 summation bound`, () => {
      CASES.forEach((c, i) => {
        const r = check(format, c, 1000 * i + 17);
        r.weight.free();
        rt.free(r.x);
      });
    });

    test(`${format}: a token's output is bit-identical whatever batch it is in (GEMM rows = GEMV)`, () => {
      const rows = 37;
      const cols = 97;
      const T = 11;
      const source = rt.tensor("f32", [rows, cols]).set(randn(rows * cols, 3));
      const weight = createWeight(rt, { source, format });
      const x = rt.tensor("f32", [T, cols]).set(randn(T * cols, 4));
      const all = rt.tensor("f32", [T, rows]).fill(NaN);
      linear(rt, { x, weight, out: all });
      const batch = all.toFloat32();
      for (let t = 0; t < T; t++) {
        const xt = new Tensor(rt.memory, x.ptr + t * cols * 4, "f32", [1, cols]);
        const ot = rt.tensor("f32", [1, rows]).fill(NaN);
        linear(rt, { x: xt, weight, out: ot });
        assert.deepEqual(ot.toFloat32(), batch.subarray(t * rows, (t + 1) * rows), `token ${t}`);
        rt.free(ot);
      }
      // And in a smaller batch (a 4-token tile plus leftovers, differently aligned).
      const sub = new Tensor(rt.memory, x.ptr + 2 * cols * 4, "f32", [6, cols]);
      const os = rt.tensor("f32", [6, rows]).fill(NaN);
      linear(rt, { x: sub, weight, out: os });
      assert.deepEqual(os.toFloat32(), batch.subarray(2 * rows, 8 * rows));
      // And in batches of 2 … 9 tokens: every count the tiles leave over (1–3 tokens, both halves at once in linear.ts `leftovers`).
      for (let n = 2; n <= 9; n++) {
        const on = rt.tensor("f32", [n, rows]).fill(NaN);
        linear(rt, { x: new Tensor(rt.memory, x.ptr + cols * 4, "f32", [n, cols]), weight, out: on });
        assert.deepEqual(on.toFloat32(), batch.subarray(rows, (1 + n) * rows), `tokens 1…${n}`);
        rt.free(on);
      }
      for (const t of [source, x, all, os]) rt.free(t);
      weight.free();
    });
  }

  test("q8 / q4: activation codes round exact halves to even (Q8_0's rounding), at T = 1 and in the GEMM", () => {
    // Each 32-column block holds ±127 (so d = 1 and 1/d = 1) and exact halves
    // k + 0.5 in [−126.5, 126.5], where round-half-to-even and round-half-away
    // (or up) give codes one apart; the reference quantizes with roundHalfEven.
    const rows = 24;
    const cols = 96;
    const halves = (t: number, c: number): number => (c % 32 === 0 ? (t % 2 ? -127 : 127) : (((c * 37 + t * 11) % 253) - 126) + 0.5);
    for (const format of ["q8", "q4"] as const) {
      for (const tokens of [1, 5, 17]) {
        const source = rt.tensor("f32", [rows, cols]).set(randn(rows * cols, 41, 0.5));
        const weight = createWeight(rt, { source, format });
        const x = rt.tensor("f32", [tokens, cols]).set(Float32Array.from({ length: tokens * cols }, (_, i) => halves(Math.floor(i / cols), i % cols)));
        const out = rt.tensor("f32", [tokens, rows]).fill(NaN);
        linear(rt, { x, weight, out });
        const deq = dequantizeWeight(rt, { weight });
        const w = deq.toFloat32();
        const xk = quantizeActivationReference(x.toFloat32(), tokens, cols);
        const shape = { tokens, rows, cols };
        const want = linearReference(xk, w, shape);
        const mag = linearMagnitude(xk, w, shape);
        assertWithin(out.toFloat32(), want, (i) => (Math.ceil(cols / 32) + 4) * U * mag[i]! + 1e-30, `${format} ties, T=${tokens}`);
        for (const t of [source, x, out, deq]) rt.free(t);
        weight.free();
      }
    }
  });

  test("results do not depend on the thread count", async () => {
    const rt1 = await createRuntime({ threads: 1 });
    const rt3 = await createRuntime({ threads: 3 });
    // 411 × 1000: big enough in every format (q4 at T = 1: 266 KB) that the
    // 3-thread runtime splits the rows (small linears run on the caller alone).
    const [rows, cols] = [411, 1000];
    try {
      for (const format of WEIGHT_FORMATS) {
        for (const T of [1, 6, 9]) {
          const outs = [rt1, rt3].map((r) => {
            const source = r.tensor("f32", [rows, cols]).set(randn(rows * cols, 8));
            const weight = createWeight(r, { source, format });
            const x = r.tensor("f32", [T, cols]).set(randn(T * cols, 9));
            const out = r.tensor("f32", [T, rows]).fill(NaN);
            linear(r, { x, weight, out });
            const result = out.toFloat32();
            weight.free();
            for (const t of [source, x, out]) r.free(t);
            return result;
          });
          assert.deepEqual(outs[0], outs[1], `${format} T=${T}`);
        }
      }
    } finally {
      await rt1.dispose();
      await rt3.dispose();
    }
  });

  test("strided views: x rows and out rows inside wider buffers (a fused QKV output's slices)", () => {
    const rows = 24;
    const cols = 64;
    const T = 5;
    const source = rt.tensor("f32", [rows, cols]).set(randn(rows * cols, 11));
    const wide = rt.tensor("f32", [T, 3 * cols]).set(randn(T * 3 * cols, 12));
    const outWide = rt.tensor("f32", [T, 2 * rows]).fill(NaN);
    for (const format of WEIGHT_FORMATS) {
      const weight = createWeight(rt, { source, format });
      const x = new Tensor(rt.memory, wide.ptr + cols * 4, "f32", [T, cols], [3 * cols, 1]);
      const out = new Tensor(rt.memory, outWide.ptr + rows * 4, "f32", [T, rows], [2 * rows, 1]);
      outWide.fill(NaN);
      linear(rt, { x, weight, out });
      const xc = rt.tensor("f32", [T, cols]).set(x.toFloat32());
      const oc = rt.tensor("f32", [T, rows]);
      linear(rt, { x: xc, weight, out: oc });
      assert.deepEqual(out.toFloat32(), oc.toFloat32(), format);
      // The other half of the wide output was not touched.
      const o = outWide.toFloat32();
      for (let t = 0; t < T; t++) for (let r = 0; r < rows; r++) assert.ok(Number.isNaN(o[t * 2 * rows + r]!));
      weight.free();
      rt.free(xc);
      rt.free(oc);
    }
    for (const t of [source, wide, outWide]) rt.free(t);
  });

  test("Qwen2.5-0.5B down_proj shape [896, 4864]: q8/q4 error against the unquantized f32 layer (reported)", (t) => {
    const rows = 896;
    const cols = 4864;
    const T = 3;
    const src = randn(rows * cols, 21, 0.02);
    const source = rt.tensor("f32", [rows, cols]).set(src);
    const x = rt.tensor("f32", [T, cols]).set(randn(T * cols, 22));
    const exact = linearReference(x.toFloat32(), src, { tokens: T, rows, cols });
    const bounds: Record<WeightFormat, number> = { f32: 4e-6, bf16: 0.01, q8: 0.02, q4: 0.2 };
    for (const format of WEIGHT_FORMATS) {
      const weight = createWeight(rt, { source, format });
      const out = rt.tensor("f32", [T, rows]).fill(NaN);
      linear(rt, { x, weight, out });
      const err = relRms(out.toFloat32(), exact);
      t.diagnostic(`${format}: relative RMS error vs the f32 layer ${err.toExponential(3)}`);
      assert.ok(err <= bounds[format], `${format}: ${err} > ${bounds[format]}`);
      weight.free();
      rt.free(out);
    }
    rt.free(source);
    rt.free(x);
  });

  test("bad arguments are refused by name", () => {
    const source = rt.tensor("f32", [8, 16]);
    const weight = createWeight(rt, { source, format: "q8" });
    const x = rt.tensor("f32", [2, 16]);
    const out = rt.tensor("f32", [2, 8]);
    const check = (fn: () => unknown, argument: string, text: RegExp) =>
      assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.argument === argument && text.test(e.message));
    const x15 = rt.tensor("f32", [2, 15]);
    check(() => linear(rt, { x: x15, weight, out }), "x.shape[1]", /must be 16 \(weight cols\), got 15/);
    const out7 = rt.tensor("f32", [2, 7]);
    check(() => linear(rt, { x, weight, out: out7 }), "out.shape[1]", /must be 8 \(weight rows\), got 7/);
    const out3 = rt.tensor("f32", [3, 8]);
    check(() => linear(rt, { x, weight, out: out3 }), "out.shape", /must be \[2, 8\]/);
    const xh = rt.tensor("f16", [2, 16]);
    check(() => linear(rt, { x: xh, weight, out }), "x.dtype", /f32, got "f16"/);
    const bias = rt.tensor("f32", [9]);
    check(() => linear(rt, { x, weight, out, bias }), "bias.shape", /\[8\]/);
    const alias = new Tensor(rt.memory, x.ptr, "f32", [2, 8]);
    check(() => linear(rt, { x, weight, out: alias }), "out", /must not overlap x/);
    const colStrided = new Tensor(rt.memory, x.ptr, "f32", [2, 8], [16, 2]);
    check(() => linear(rt, { x: colStrided, weight: createWeight(rt, { source: rt.tensor("f32", [8, 8]), format: "f32" }), out }), "x.strides", /last dimension/);
    check(() => linear(rt, { x, weight: {} as Weight, out }), "weight", /must be a Weight/);
    weight.free();
    check(() => linear(rt, { x, weight, out }), "weight", /was freed/);
  });
});

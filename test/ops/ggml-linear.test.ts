// Native ggml weights (Q8_0, Q5_0, IQ4_NL, IQ4_XS, Q2_K … Q6_K kept as the file stores them) against
// the float64 reference: the repacked Weight decodes to ggml's
// dequantize_row_* values, and linear (GEMV at T = 1, GEMM at T ≥ 4) matches
// the reference on awkward shapes (rows not a multiple of the tile, several
// superblocks, T = 1, 7, 97), with poisoned outputs, bias, strided output
// views and stacks of several formats; rows are bit-identical whatever the
// batch.
//
// Blocks come two ways: ggml-style quantization of random rows (quantize.ts),
// and raw random bytes (any code, scale and min; finite f16 super-scales), so
// the repacking is checked on every bit of the block, not only on what a
// quantizer writes.
//
// Tolerances. The reference multiplies what the kernels multiply: ggml's
// decoded weights and the activation quantized per 256 like Q8_K (types kept as
// q8 or q5 — Q8_0, IQ4_NL, Q5_0: per 32, as the q8 kernels do). The kernels' sums of code products are exact
// int32; what remains is f32 rounding of one or two terms per superblock and
// of ggml's own f32 decode steps: |out − ref| ≤ (nb + 8) · 2⁻²² · Σ|x·w| + 2⁻²⁴·|bias|.
// The decoded weights equal the float64 decode within 2⁻²² relative to the
// block's |d·sc·q| + |dmin·m| (ggml rounds d·sc and d·sc·q to f32).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  GGML_NATIVE,
  GgmlMatrix,
  type GgmlNativeType,
  type Runtime,
  Tensor,
  type Weight,
  createGgmlWeight,
  createRuntime,
  dequantizeWeight,
  linear,
  stackWeights,
} from "../../src/ops-entry.js";
import { GGML_TYPES } from "../../src/tensor/ggml-types.js";
import { dequantize } from "../../src/tensor/ggml-dequantize.js";
import { quantize } from "../../src/sources/gguf/quantize.js";
import { quantizeActivationQ8KReference } from "../../src/ops/reference/kquant.js";
import { linearMagnitude, linearReference, quantizeActivationReference } from "../../src/ops/reference/linear.js";
import { encodeMiniFloat, F16 } from "../../src/tensor/minifloat.js";
import { assertWithin, randn, rng } from "../helpers/random.js";

const TYPES: GgmlNativeType[] = ["Q4_K", "Q5_K", "Q6_K", "Q8_0", "Q5_0", "Q2_K", "Q3_K", "IQ4_NL", "IQ4_XS"];

/** Raw random blocks of `type` for a [rows, cols] matrix: random bytes, the f16 super-scales set to finite values. */
function randomBlocks(type: GgmlNativeType, rows: number, cols: number, seed: number): Uint8Array {
  const t = GGML_TYPES[type];
  const r = rng(seed);
  const bytes = Uint8Array.from({ length: (rows * cols / t.blockSize) * t.typeSize }, () => Math.floor(r() * 256));
  const f16 = (at: number, v: number) => {
    const c = encodeMiniFloat(F16, v, true);
    bytes[at] = c & 255;
    bytes[at + 1] = c >> 8;
  };
  for (let at = 0; at < bytes.length; at += t.typeSize) {
    if (type === "Q8_0" || type === "Q5_0" || type === "IQ4_NL") f16(at, (r() - 0.5) * 0.02);
    else if (type === "IQ4_XS") f16(at, (r() - 0.5) * 0.001);
    else if (type === "Q4_K" || type === "Q5_K") {
      f16(at, (r() - 0.5) * 0.004);
      f16(at + 2, r() * 0.004);
    } else if (type === "Q2_K") {
      f16(at + 80, (r() - 0.5) * 0.01);
      f16(at + 82, r() * 0.01);
    } else if (type === "Q3_K") f16(at + 108, (r() - 0.5) * 0.002);
    else f16(at + 208, (r() - 0.5) * 0.002);
  }
  if (type === "Q8_0") for (let at = 0; at < bytes.length; at += t.typeSize) for (let j = 2; j < 34; j++) if (bytes[at + j] === 128) bytes[at + j] = 129; // ggml never writes −128
  return bytes;
}

/** Types kept as q8 or q5, whose kernels quantize the activation per 32 (Q8_0) rather than per 256 (Q8_K). */
function perBlock32(type: GgmlNativeType | "stack"): boolean {
  return type !== "stack" && (GGML_NATIVE[type].format === "q8" || GGML_NATIVE[type].format === "q5");
}

/** The ggml blocks of a [rows, cols] matrix: quantized from random values, or raw random bytes. */
function blocks(type: GgmlNativeType, rows: number, cols: number, seed: number, raw: boolean): Uint8Array {
  return raw ? randomBlocks(type, rows, cols, seed) : quantize(type, randn(rows * cols, seed, 0.5), cols);
}

function decoded(type: GgmlNativeType, bytes: Uint8Array, n: number): Float64Array {
  const out = new Float64Array(n);
  dequantize(GGML_TYPES[type], bytes, n, out);
  return out;
}

describe("native ggml weights", () => {
  let rt: Runtime;
  const made: (Weight | Tensor)[] = [];
  before(async () => {
    rt = await createRuntime({ threads: 2 });
  });
  after(() => {
    for (const m of made) (m instanceof Tensor ? rt.free(m) : m.free());
    rt.dispose();
  });

  function weightOf(type: GgmlNativeType, bytes: Uint8Array, rows: number, cols: number): Weight {
    const raw = rt.tensor("uint8", [rows, bytes.length / rows]);
    raw.set(bytes);
    const w = createGgmlWeight(rt, { source: new GgmlMatrix(type, raw, rows, cols) });
    rt.free(raw);
    made.push(w);
    return w;
  }

  for (const type of TYPES) {
    for (const raw of [false, true]) {
      test(`${type} ${raw ? "raw random blocks" : "quantized rows"}: the Weight decodes to ggml's values`, () => {
        const rows = 9, cols = 512;
        const bytes = blocks(type, rows, cols, 11, raw);
        const w = weightOf(type, bytes, rows, cols);
        const out = rt.tensor("f32", [rows, cols]).fill(Number.NaN);
        dequantizeWeight(rt, { weight: w, out });
        const want = decoded(type, bytes, rows * cols);
        const scale = Math.max(...want.map(Math.abs));
        assertWithin(out.data(), want, () => scale * 2 ** -21, `${type} decode`);
        rt.free(out);
      });
    }
  }

  const CASES = [
    { rows: 1, cols: 256, tokens: 1 },
    { rows: 7, cols: 512, tokens: 7, bias: true },
    { rows: 13, cols: 768, tokens: 97 },
    { rows: 36, cols: 256, tokens: 5, bias: true },
  ];

  /** linear with `w` over x (default: random); checks against the reference and returns the output rows. */
  function check(w: Weight, want: Float64Array, type: GgmlNativeType | "stack", c: { rows: number; cols: number; tokens: number; bias?: boolean }, seed: number, x0?: Float32Array): Float32Array {
    const { rows, cols, tokens } = c;
    const xv = x0 ?? randn(tokens * cols, seed);
    const x = rt.tensor("f32", [tokens, cols]).set(xv);
    // Output rows strided: each row sits in a row of rows + 3 (poisoned) values.
    const wide = rt.tensor("f32", [tokens, rows + 3]).fill(Number.NaN);
    const out = new Tensor(rt.memory, wide.ptr, "f32", [tokens, rows], [rows + 3, 1]);
    const bv = c.bias ? randn(rows, seed + 1) : undefined;
    const bias = bv ? rt.tensor("f32", [rows]).set(bv) : undefined;
    linear(rt, { x, weight: w, out, ...(bias ? { bias } : {}) });
    const xq = perBlock32(type) ? quantizeActivationReference(xv, tokens, cols) : quantizeActivationQ8KReference(xv, tokens, cols);
    const ref = linearReference(xq, want, { tokens, rows, cols }, bv);
    const mag = linearMagnitude(xq, want, { tokens, rows, cols });
    const nb = cols / 32;
    const got = new Float32Array(tokens * rows);
    const all = wide.data() as Float32Array;
    for (let t = 0; t < tokens; t++) {
      got.set(all.subarray(t * (rows + 3), t * (rows + 3) + rows), t * rows);
      for (let k = rows; k < rows + 3; k++) assert.ok(Number.isNaN(all[t * (rows + 3) + k]), `${type}: wrote past row ${t}'s ${rows} outputs`);
    }
    assertWithin(got, ref, (i) => (nb + 8) * 2 ** -22 * mag[i]! + 2 ** -24 * Math.abs(bv?.[i % rows] ?? 0), `${type} linear ${JSON.stringify(c)}`);
    for (const t of [x, wide, ...(bias ? [bias] : [])]) rt.free(t);
    return got;
  }

  for (const type of TYPES) {
    for (const c of CASES) {
      test(`${type} linear rows ${c.rows}, cols ${c.cols}, T = ${c.tokens}${c.bias ? ", bias" : ""} matches the reference`, () => {
        const bytes = blocks(type, c.rows, c.cols, c.rows * 31 + c.tokens, c.tokens % 2 === 1);
        const w = weightOf(type, bytes, c.rows, c.cols);
        check(w, decoded(type, bytes, c.rows * c.cols), type, c, c.cols + c.tokens);
      });
    }

    test(`${type}: a token's output row does not depend on its batch (GEMM vs GEMV)`, () => {
      const rows = 11, cols = 512, tokens = 9;
      const bytes = blocks(type, rows, cols, 5, false);
      const w = weightOf(type, bytes, rows, cols);
      const xv = randn(tokens * cols, 6);
      const x = rt.tensor("f32", [tokens, cols]).set(xv);
      const all = rt.tensor("f32", [tokens, rows]).fill(Number.NaN);
      linear(rt, { x, weight: w, out: all });
      const one = rt.tensor("f32", [1, rows]);
      for (const t of [0, 4, 8]) {
        const xt = new Tensor(rt.memory, x.ptr + t * cols * 4, "f32", [1, cols]);
        one.fill(Number.NaN);
        linear(rt, { x: xt, weight: w, out: one });
        assert.deepEqual(Array.from(one.data()), Array.from((all.data() as Float32Array).subarray(t * rows, (t + 1) * rows)), `token ${t}`);
      }
      // Batches of 2 and 3 (speculative verification, small decode batches) as well.
      for (const [t0, n] of [[1, 2], [5, 3]] as const) {
        const xt = new Tensor(rt.memory, x.ptr + t0 * cols * 4, "f32", [n, cols]);
        const few = rt.tensor("f32", [n, rows]).fill(Number.NaN);
        linear(rt, { x: xt, weight: w, out: few });
        assert.deepEqual(Array.from(few.data()), Array.from((all.data() as Float32Array).subarray(t0 * rows, (t0 + n) * rows)), `tokens ${t0} … ${t0 + n - 1}`);
        rt.free(few);
      }
      for (const t of [x, all, one]) rt.free(t);
    });
  }

  // The largest sums the kernels' integer dots take: every code at its top
  // (Q4_K nibble 15, Q5_K code 31, Q6_K code 63) against activation codes
  // all ±127. Where the relaxed dot lowers to pmaddubsw, Q4_K sums 8 dots,
  // Q5_K 4 and Q6_K 2 in int16 lanes (kquant-dot.ts gemvQ4KPairs): 30480,
  // 31496 and 32004 here, just below 2^15; one dot more per lane would wrap.
  // T = 9 takes the baseline flavor's widened codes (sc·q, sc·(q − 32) in int16).
  const TOP_CODES: [GgmlNativeType, number, number][] = [["Q4_K", 16, 144], ["Q5_K", 16, 176], ["Q6_K", 0, 192]];
  for (const [type, from, to] of TOP_CODES) test(`${type} with every code at its largest and activations all +1 or all −1 matches the reference (T = 1, 5, 9)`, () => {
    const rows = 9, cols = 512;
    const bytes = randomBlocks(type, rows, cols, 77);
    const size = GGML_TYPES[type].typeSize;
    for (let at = 0; at < bytes.length; at += size) bytes.fill(0xff, at + from, at + to);
    const w = weightOf(type, bytes, rows, cols);
    const want = decoded(type, bytes, rows * cols);
    for (const sign of [1, -1]) for (const tokens of [1, 5, 9]) check(w, want, type, { rows, cols, tokens }, 0, new Float32Array(tokens * cols).fill(sign));
  });

  const STACKS: { name: string; parts: [GgmlNativeType, number][]; bytes: number }[] = [
    { name: "Q4_K, Q6_K, Q8_0 and Q5_K parts (a Q4_K_M fused QKV, and more)", parts: [["Q4_K", 12], ["Q4_K", 5], ["Q6_K", 6], ["Q8_0", 3], ["Q5_K", 2]], bytes: 608 * 3 * 2 + 608 * 2 * 2 + 848 * 2 * 2 + 288 * 1 * 16 + 736 * 1 * 2 },
    { name: "Q5_0, Q8_0 and Q5_0 parts (a Q4_K_M fused QKV of 896-wide layers)", parts: [["Q5_0", 16], ["Q5_0", 9], ["Q8_0", 3], ["Q5_0", 2]], bytes: 224 * 2 * 16 + 224 * 2 * 16 + 288 * 1 * 16 + 224 * 1 * 16 },
    { name: "Q3_K, Q5_K, IQ4_XS, Q2_K and IQ4_NL parts (a Q3_K_M fused QKV, and more)", parts: [["Q3_K", 8], ["Q5_K", 4], ["IQ4_XS", 5], ["Q2_K", 3], ["IQ4_NL", 2]], bytes: 464 * 2 * 2 + 736 * 1 * 2 + 560 * 2 * 2 + 416 * 1 * 2 + 288 * 1 * 16 },
  ];
  for (const { name, parts, bytes: stackBytes } of STACKS) test(`a stack of ${name} is one linear over all its rows`, () => {
    const cols = 512;
    assert.equal(GGML_NATIVE.Q5_0.format, "q5");
    const bytes = parts.map(([type, rows], i) => blocks(type, rows, cols, 40 + i, i % 2 === 0));
    const w = stackWeights(rt, parts.map(([type, rows], i) => weightOf(type, bytes[i]!, rows, cols)));
    made.splice(made.length - parts.length, parts.length, w);
    const rows = parts.reduce((n, [, r]) => n + r, 0);
    assert.equal(w.rows, rows);
    // Q8_0's rows see the per-32 activation: compare each part's rows with its own reference.
    for (const tokens of [1, 6]) {
      const xv = randn(tokens * cols, 90 + tokens);
      const x = rt.tensor("f32", [tokens, cols]).set(xv);
      const out = rt.tensor("f32", [tokens, rows]).fill(Number.NaN);
      const bv = randn(rows, 3);
      const bias = rt.tensor("f32", [rows]).set(bv);
      linear(rt, { x, weight: w, out, bias });
      const got = out.data() as Float32Array;
      let r0 = 0;
      parts.forEach(([type, pr], i) => {
        const want = decoded(type, bytes[i]!, pr * cols);
        const xq = perBlock32(type) ? quantizeActivationReference(xv, tokens, cols) : quantizeActivationQ8KReference(xv, tokens, cols);
        const pb = bv.subarray(r0, r0 + pr);
        const ref = linearReference(xq, want, { tokens, rows: pr, cols }, pb);
        const mag = linearMagnitude(xq, want, { tokens, rows: pr, cols });
        const mine = Float32Array.from({ length: tokens * pr }, (_, k) => got[Math.floor(k / pr) * rows + r0 + (k % pr)]!);
        assertWithin(mine, ref, (k) => (cols / 32 + 8) * 2 ** -22 * mag[k]! + 2 ** -24 * Math.abs(pb[k % pr]!), `stack part ${i} (${type}), T = ${tokens}`);
        r0 += pr;
      });
      const dq = rt.tensor("f32", [rows, cols]).fill(Number.NaN);
      dequantizeWeight(rt, { weight: w, out: dq });
      assert.ok((dq.data() as Float32Array).every(Number.isFinite), "the stack decodes every row");
      for (const t of [x, out, bias, dq]) rt.free(t);
    }
    assert.equal(w.byteLength, stackBytes);
  });

  test("bad sources are refused with the argument named", () => {
    const raw = rt.tensor("uint8", [2, 144]);
    assert.throws(() => createGgmlWeight(rt, { source: new GgmlMatrix("Q4_K", raw, 2, 200) }), /source\.cols.*multiple of Q4_K's block of 256, got 200/);
    assert.throws(() => createGgmlWeight(rt, { source: new GgmlMatrix("Q4_K", raw, 3, 256) }), /source\.bytes/);
    rt.free(raw);
  });
});

describe("native ggml weights stacked in one Weight", () => {
  test("IQ4_NL and Q8_0 rows (both q8) pack into one q8 Weight at tile-aligned row offsets; a misaligned stack, or Q5_0 (q5) with Q8_0, is refused", async () => {
    const rt = await createRuntime({ threads: 2 });
    try {
      const cols = 64;
      const a = blocks("IQ4_NL", 16, cols, 1, true), b = blocks("Q8_0", 5, cols, 2, true), c = blocks("Q5_0", 8, cols, 3, true);
      const raw = (bytes: Uint8Array, rows: number) => rt.tensor("uint8", [rows, bytes.length / rows]).set(bytes);
      const ra = raw(a, 16), rb = raw(b, 5), rc = raw(c, 8);
      const w = createGgmlWeight(rt, { source: [new GgmlMatrix("IQ4_NL", ra, 16, cols), new GgmlMatrix("Q8_0", rb, 5, cols)] });
      assert.equal(w.format, "q8");
      assert.equal(w.rows, 21);
      const out = rt.tensor("f32", [21, cols]).fill(Number.NaN);
      dequantizeWeight(rt, { weight: w, out });
      const want = new Float64Array([...decoded("IQ4_NL", a, 16 * cols), ...decoded("Q8_0", b, 5 * cols)]);
      assert.deepEqual(Array.from(out.data()), Array.from(want, Math.fround), "IQ4_NL and Q8_0 decode exactly");
      const r3 = raw(b.subarray(0, 3 * (b.length / 5)), 3);
      assert.throws(() => createGgmlWeight(rt, { source: [new GgmlMatrix("Q8_0", r3, 3, cols), new GgmlMatrix("IQ4_NL", ra, 16, cols)] }), /source\[0\]\.rows.*multiple of 8/);
      assert.throws(() => createGgmlWeight(rt, { source: [new GgmlMatrix("Q5_0", rc, 8, cols), new GgmlMatrix("Q8_0", rb, 5, cols)] }), /source\[1\] must be q5 with 64 cols like source\[0\], got Q8_0 \(q8\)/);
      w.free();
      for (const t of [ra, rb, rc, r3, out]) rt.free(t);
    } finally {
      rt.dispose();
    }
  });
});

// The K-quant prefill on codes widened to int16 once per quad (Runtime.kquantWide: on by
// default on baseline, and on relaxed under V8 < 13) and on the codes as stored: the same exact
// integers and float steps, so the same outputs bit for bit, whichever this engine runs by default.
describe("Q4_K, Q5_K, Q6_K prefill with and without widened codes", () => {
  for (const type of ["Q4_K", "Q5_K", "Q6_K"] as const) {
    test(`${type}: T = 8, 9 and 97 give the same outputs both ways, on extreme and raw random blocks, and on two threads at once`, async () => {
      const rts = [await createRuntime({ threads: 2, kquantWide: true }), await createRuntime({ threads: 2, kquantWide: false })];
      try {
        const rows = 13, cols = 768;
        const top = randomBlocks(type, rows, cols, 21);
        const [from, to] = { Q4_K: [16, 144], Q5_K: [16, 176], Q6_K: [0, 192] }[type];
        for (let at = 0; at < top.length; at += GGML_TYPES[type].typeSize) top.fill(0xff, at + from, at + to);
        for (const bytes of [top, randomBlocks(type, rows, cols, 22)]) {
          for (const tokens of [8, 9, 97]) {
            const xv = tokens === 8 ? new Float32Array(tokens * cols).fill(-1) : randn(tokens * cols, tokens);
            const outs = rts.map((rt) => {
              const raw = rt.tensor("uint8", [rows, bytes.length / rows]).set(bytes);
              const w = createGgmlWeight(rt, { source: new GgmlMatrix(type, raw, rows, cols) });
              const x = rt.tensor("f32", [tokens, cols]).set(xv);
              const out = rt.tensor("f32", [tokens, rows]).fill(Number.NaN);
              linear(rt, { x, weight: w, out });
              const got = Float32Array.from(out.data() as Float32Array);
              w.free();
              for (const t of [raw, x, out]) rt.free(t);
              return got;
            });
            assert.ok(outs[0]!.every(Number.isFinite), `${type} T = ${tokens}: finite`);
            assert.deepEqual(Array.from(outs[0]!), Array.from(outs[1]!), `${type} T = ${tokens}: widened and stored codes`);
          }
        }
        // Enough work for two work items on the two threads, each item's quads in pairs (the two-quad widened tiles).
        const big = { rows: 64, cols: 2048, tokens: 9 };
        const bytes = randomBlocks(type, big.rows, big.cols, 23);
        const xv = randn(big.tokens * big.cols, 24);
        const outs = rts.map((rt) => {
          const raw = rt.tensor("uint8", [big.rows, bytes.length / big.rows]).set(bytes);
          const w = createGgmlWeight(rt, { source: new GgmlMatrix(type, raw, big.rows, big.cols) });
          const x = rt.tensor("f32", [big.tokens, big.cols]).set(xv);
          const out = rt.tensor("f32", [big.tokens, big.rows]).fill(Number.NaN);
          for (let rep = 0; rep < 4; rep++) linear(rt, { x, weight: w, out });
          const got = Float32Array.from(out.data() as Float32Array);
          w.free();
          for (const t of [raw, x, out]) rt.free(t);
          return got;
        });
        assert.deepEqual(Array.from(outs[0]!), Array.from(outs[1]!), `${type} [${big.rows}, ${big.cols}] T = ${big.tokens}, two threads: widened and stored codes`);
      } finally {
        for (const rt of rts) await rt.dispose();
      }
    });
  }
});

// GEMV micro-kernels (one token) over the tiles of one row group (layout.ts).
//
//   gemv<F>x2(w, …): both halves of the group (8 rows) → res[0..8) f32; the
//                    decode path. The halves are read together as one
//                    sequential stream and share every activation load.
//   gemv<F>(w, …):   one half (4 rows; w = the group's stream + h·halfOffset) → f32x4,
//                    lanes = rows; what linear.ts uses for 2–3 leftover tokens
//                    of f32, bf16 and q4 (q8 takes them both halves at once,
//                    gemm-few.ts; gemvQ8 is the per-half arithmetic they repeat).
//
// Each format accumulates in a fixed order that both variants and the 4-token
// kernels of gemm.ts repeat exactly, so a token's output does not depend on the
// batch it is in:
//   f32 / bf16: two f32x4 accumulators per half (even / odd columns), added at
//               the end; bf16 decodes in the loop (bits << 16).
//   q8 / q4:    per block an exact int32 sum of i32x4.dot_i16x8_s products of
//               the weight codes with the int16 activation codes (a splat of one
//               column pair), then acc += f32(sum) · (w_scale · x_scale). The
//               relaxed flavor's q8 takes the same exact sums with the relaxed
//               int8 dot in the i7 and u8 modes (flavor.ts DOT_*, q8Bias below),
//               so its outputs do not depend on the mode either.
//
// Speed notes (V8 on x64, measured): two halves at once give twice the
// independent f32 add chains (one chain per accumulator is latency-bound) and
// read the weights as one sequential stream.
// Inner loops step a few columns at a time: V8 issues loads in program order
// but sinks the arithmetic, so a fully unrolled block keeps every loaded vector
// live and spills. The int16 dot widens q8 codes one of two ways, by flavor
// (Q8_EXTEND_ON_LOAD).

import { HALF_Q4, HALF_Q8, TILE_BF16, TILE_F32, TILE_Q4, TILE_Q8 } from "./layout";
import { DOT_I16, DOT_U8, RELAXED, dotI8U7, dotI8U8, fmadd, int8Codes } from "../runtime/flavor";

// ---- f32 ----------------------------------------------------------------------
// A row group's tiles are one stream of 32-byte column records (half 0's four
// rows, then half 1's): nb · 32 columns, 32 · nb · 32 bytes.

/** One half (w = the group's stream + 16·h) · x (f32 [nb · 32]) → f32x4, lanes = rows. */
@inline export function gemvF32(w: usize, x: usize, nb: i32): v128 {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0);
  const end = w + <usize>nb * TILE_F32;
  for (; w < end; w += 128, x += 16) {
    a0 = fmadd(v128.load(w, 0), v128.load32_splat(x, 0), a0);
    a1 = fmadd(v128.load(w, 32), v128.load32_splat(x, 4), a1);
    a0 = fmadd(v128.load(w, 64), v128.load32_splat(x, 8), a0);
    a1 = fmadd(v128.load(w, 96), v128.load32_splat(x, 12), a1);
  }
  return f32x4.add(a0, a1);
}

/** Both halves of a row group's stream w · x → res[0..8) f32. */
@inline export function gemvF32x2(w: usize, x: usize, nb: i32, res: usize): void {
  // Two columns an iteration: each accumulator takes one add, none spills.
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), c0 = f32x4.splat(0), c1 = f32x4.splat(0);
  const end = w + <usize>nb * TILE_F32;
  for (; w < end; w += 64, x += 8) {
    const x0 = v128.load32_splat(x, 0), x1 = v128.load32_splat(x, 4);
    a0 = fmadd(v128.load(w, 0), x0, a0);
    c0 = fmadd(v128.load(w, 16), x0, c0);
    a1 = fmadd(v128.load(w, 32), x1, a1);
    c1 = fmadd(v128.load(w, 48), x1, c1);
  }
  v128.store(res, f32x4.add(a0, a1));
  v128.store(res, f32x4.add(c0, c1), 16);
}

// ---- bf16 ---------------------------------------------------------------------
// A row group's tiles are one stream of 32-byte column-pair records.

/** Columns 2j of the four rows: the low halves of the u32 lanes, as f32. */
@inline export function bf16Even(v: v128): v128 {
  return i32x4.shl(v, 16);
}

/** bf16Odd's mask as a 16-byte row: read once per call (V8 13 would rebuild a splat at every use in a loop). */
export const BF16_HI: usize = memory.data<u32>([0xffff0000, 0xffff0000, 0xffff0000, 0xffff0000], 16);

/** Columns 2j + 1: the high halves (hi = v128.load(BF16_HI)). */
@inline export function bf16Odd(v: v128, hi: v128): v128 {
  return v128.and(v, hi);
}

/** One half (w = the group's stream + 16·h) · x → f32x4, lanes = rows. */
@inline export function gemvBf16(w: usize, x: usize, nb: i32): v128 {
  const hi = v128.load(BF16_HI);
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0);
  const end = w + <usize>nb * TILE_BF16;
  for (; w < end; w += 64, x += 16) {
    const p = v128.load(w, 0), q = v128.load(w, 32);
    a0 = fmadd(bf16Even(p), v128.load32_splat(x, 0), a0);
    a1 = fmadd(bf16Odd(p, hi), v128.load32_splat(x, 4), a1);
    a0 = fmadd(bf16Even(q), v128.load32_splat(x, 8), a0);
    a1 = fmadd(bf16Odd(q, hi), v128.load32_splat(x, 12), a1);
  }
  return f32x4.add(a0, a1);
}

@inline export function gemvBf16x2(w: usize, x: usize, nb: i32, res: usize): void {
  const hi = v128.load(BF16_HI);
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), c0 = f32x4.splat(0), c1 = f32x4.splat(0);
  const end = w + <usize>nb * TILE_BF16;
  for (; w < end; w += 32, x += 8) {
    const p = v128.load(w, 0), q = v128.load(w, 16);
    const x0 = v128.load32_splat(x, 0), x1 = v128.load32_splat(x, 4);
    a0 = fmadd(bf16Even(p), x0, a0);
    c0 = fmadd(bf16Even(q), x0, c0);
    a1 = fmadd(bf16Odd(p, hi), x1, a1);
    c1 = fmadd(bf16Odd(q, hi), x1, c1);
  }
  v128.store(res, f32x4.add(a0, a1));
  v128.store(res, f32x4.add(c0, c1), 16);
}

// ---- q8 -----------------------------------------------------------------------

/**
 * How the int16 dot widens q8 codes, fixed per kernel flavor for the V8 that
 * runs that flavor by default (src/runtime/module.ts):
 *   true (relaxed: V8 13, Node 24): sign-extended as they load,
 *     v128.load8x8_s, one vpmovsxbw with its memory operand per 8 codes;
 *   false (baseline: V8 11–12, Node 20, and Node 22 on x64 without AVX-VNNI):
 *     a 16-byte load's bytes interleaved with zero, code · 256, one punpck per
 *     8 codes, with the 1/256 in the scale (q8Scale).
 * V8 13 rematerializes the zero before every punpck and folds the
 * sign-extending load; V8 12 computes each load8x8_s address with an lea of its
 * own. L3-resident q8 linear (4864 × 896, one thread, tools/ab-builds/
 * ab-gemv-cached.mjs): the load form is 1.09–1.16× the interleave at one token
 * under V8 13 and 0.88–0.94× under V8 11–12 (BENCHMARKS.md "gguf", "The int16
 * dot's codes sign-extended as they load"). Either way the int32 sums are exact
 * and the outputs bit-identical.
 */
export const Q8_EXTEND_ON_LOAD: bool = RELAXED;

/** The first column pair of a 16-byte load (bytes 0..7: 4 rows × 2 columns) as int16 codes (· 256 where !Q8_EXTEND_ON_LOAD). */
@inline export function q8Lo(v: v128): v128 {
  if (Q8_EXTEND_ON_LOAD) return i16x8.extend_low_i8x16_s(v);
  return i8x16.shuffle(i32x4.splat(0), v, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
}

/** The second column pair (bytes 8..15) as int16 codes (· 256 where !Q8_EXTEND_ON_LOAD). */
@inline export function q8Hi(v: v128): v128 {
  if (Q8_EXTEND_ON_LOAD) return i16x8.extend_high_i8x16_s(v);
  return i8x16.shuffle(i32x4.splat(0), v, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
}

/**
 * acc + the int16 dot of the 16-byte q8 load at p (4 rows × columns 2i..2i+3)
 * with a token's code pairs x0 (columns 2i, 2i+1) and x1 (2i+2, 2i+3), splat
 * over the rows, the codes sign-extended as they load (Q8_EXTEND_ON_LOAD).
 */
@inline function q8DotI16At(p: usize, x0: v128, x1: v128, acc: v128): v128 {
  return i32x4.add(i32x4.add(acc, i32x4.dot_i16x8_s(v128.load8x8_s(p), x0)), i32x4.dot_i16x8_s(v128.load8x8_s(p, 8), x1));
}

/**
 * A half tile's combined block scale: w_scale · x_scale, or w_scale · (x_scale
 * / 256) for the interleaved int16 codes (code · 256: !Q8_EXTEND_ON_LOAD, mode
 * i16). Both give the same products: 256·s and x_scale / 256 are exact, so
 * f32(256·s) · round(w_scale · x_scale / 256) = f32(s) · round(w_scale · x_scale).
 */
@inline export function q8Scale(mode: i32, w: usize, xs: usize): v128 {
  if (int8Codes(mode) || Q8_EXTEND_ON_LOAD) return f32x4.mul(v128.load(w, 128), v128.load32_splat(xs));
  return f32x4.mul(v128.load(w, 128), f32x4.mul(v128.load32_splat(xs), v128.load(INV_256)));
}

/** 1/256 in four lanes, read by q8Scale at each use (one load, where V8 13 rebuilds a splat constant in three instructions). */
const INV_256: usize = memory.data<f32>([1.0 / 256, 1.0 / 256, 1.0 / 256, 1.0 / 256], 16);

// Relaxed flavor, i7 mode: relaxed_dot_i8x16_i7x16 on int8 activation codes. Its second
// operand must have its top bits clear to be exact on every CPU (flavor.ts
// dotI8U7), so it gets |w| ∈ [0, 127] (q8 codes are in [−127, 127]) and the
// weight's sign moves onto the activation code: x·w = (x·sign w)·|w|, exactly.

/**
 * Static data: the q8Rows byte order, then 16 bytes 0x80 (q8Bias's 128).
 * Kernels load them once per call (q8RowsMask, q8BiasBytes) and pass them
 * down: V8 keeps a loaded vector in a register, where it rebuilds a v128
 * constant at every use inside a loop (3–4 instructions each).
 */
const Q8_CONSTS: usize = memory.data<u8>([0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,
  128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128, 128], 16);

@inline export function q8RowsMask(): v128 {
  return v128.load(Q8_CONSTS);
}

@inline export function q8BiasBytes(): v128 {
  return v128.load(Q8_CONSTS, 16);
}

/**
 * A q8 16-byte load (column pairs 2i, 2i + 1 of 4 rows) reordered so lane r
 * holds row r's 4 columns 4i..4i + 3; mask = q8RowsMask(). Every index is
 * below 16, where the relaxed swizzle (one pshufb) is exact.
 */
@inline export function q8Rows(v: v128, mask: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i8x16.relaxed_swizzle(v, mask);
  return i8x16.swizzle(v, mask);
}

/** x with each byte negated where `neg` (the mask of the negative weight bytes) is set. */
@inline export function signedBy(x: v128, neg: v128): v128 {
  return i8x16.sub(v128.xor(x, neg), neg);
}

/** Relaxed: acc + row sums of w (q8Rows order; |w| = aw, neg = w < 0) · the 4 int8 codes at x (splat over the rows). */
@inline export function q8Dot4(aw: v128, neg: v128, x: usize, acc: v128): v128 {
  return dotI8U7(signedBy(v128.load32_splat(x), neg), aw, acc);
}

/** Relaxed: acc + one q8 16-byte load at w (q8Rows order after the shuffle) · the 4 int8 codes at x. */
@inline export function q8Dot4At(w: usize, x: usize, acc: v128, mask: v128): v128 {
  const wr = q8Rows(v128.load(w), mask);
  return q8Dot4(i8x16.abs(wr), i8x16.lt_s(wr, i8x16.splat(0)), x, acc);
}

// Relaxed flavor, "u8" int8-dot mode (LinearArgs.dot = DOT_U8; src/runtime/module.ts
// probeInt8Dot): where V8 lowers the relaxed dot to AVX-VNNI vpdpbusd, its
// second operand is read as exact unsigned 8 bits (flavor.ts dotI8U8). The
// activation codes are then stored as x + 128 ∈ [1, 255] (activation.ts), the
// weight codes stay signed (first operand, q8Rows order), and per (row, block)
//   Σ x·w = Σ (x + 128)·w − 128·Σ w,
// with 128·Σ w taken by the same dot against bytes 0x80 (q8Bias), once per
// weight load and shared by every token of a GEMM tile: one dot per 16 weight
// bytes per token, instead of abs, compare, xor, sub and dot. Every sum is an
// exact int32 (|Σ| ≤ 32 · 255 · 127), so both modes give the same sums and
// bit-identical outputs.

/** u8 mode: corr + 128 · (row sums of the q8Rows-ordered weight load v; k80 = q8BiasBytes()); other modes: corr. */
@inline export function q8Bias(mode: i32, v: v128, corr: v128, k80: v128): v128 {
  if (mode == DOT_U8) return dotI8U8(v, k80, corr);
  return corr;
}

/** A block's int32 row sums without the u8 mode's bias: sum − corr (u8), else sum. */
@inline export function q8Unbias(mode: i32, sum: v128, corr: v128): v128 {
  if (mode == DOT_U8) return i32x4.sub(sum, corr);
  return sum;
}

// Every mode's GEMM (gemm.ts gemmQ8) shares one loop over 16-byte weight loads
// (4 rows × 4 columns): q8Weight reorders the load once, q8WeightA/B derive the
// two vectors every token reuses, and q8Dot adds one token's four columns.
//   i16 (baseline; relaxed on x64 without AVX-VNNI):
//                A, B = column pairs as int16 (q8Lo, q8Hi); x = 4 int16 codes
//   relaxed i7:  A, B = |w|, w < 0 in q8Rows order;                x = 4 int8 codes
//   relaxed u8:  A = w in q8Rows order (B unused);                 x = 4 codes + 128

/** Bytes of one token's activation codes under one 16-byte q8 weight load (4 columns): int16 or int8 (int8Codes). */
@inline export function q8XStep(mode: i32): usize {
  return int8Codes(mode) ? 4 : 8;
}

/** A q8 16-byte weight load as the mode's dot wants it: q8Rows order (int8 codes) or as stored (int16). */
@inline export function q8Weight(mode: i32, v: v128, mask: v128): v128 {
  if (int8Codes(mode)) return q8Rows(v, mask);
  return v;
}

/** First prepared vector of a q8Weight: w (u8 mode), |w| (relaxed i7) or the first column pair · 256 (i16). */
@inline export function q8WeightA(mode: i32, v: v128): v128 {
  if (mode == DOT_U8) return v;
  if (int8Codes(mode)) return i8x16.abs(v);
  return q8Lo(v);
}

/** Second prepared vector: unused (u8 mode), the mask of w < 0 (relaxed i7) or the second column pair · 256 (i16). */
@inline export function q8WeightB(mode: i32, v: v128): v128 {
  if (mode == DOT_U8) return v;
  if (int8Codes(mode)) return i8x16.lt_s(v, i8x16.splat(0));
  return q8Hi(v);
}

/** acc + the row sums (lanes = rows) of one prepared q8 weight load (q8WeightA/B) · one token's four activation codes at x. */
@inline export function q8Dot(mode: i32, a: v128, b: v128, x: usize, acc: v128): v128 {
  if (mode == DOT_U8) return dotI8U8(a, v128.load32_splat(x), acc);
  if (int8Codes(mode)) return q8Dot4(a, b, x, acc);
  return i32x4.add(i32x4.add(acc, i32x4.dot_i16x8_s(a, v128.load32_splat(x, 0))), i32x4.dot_i16x8_s(b, v128.load32_splat(x, 4)));
}

/** u8 mode: one q8 half tile · one block of activation codes + 128 → exact int32 sums, lanes = rows. */
@inline function q8TileSumU8(w: usize, xq: usize, mask: v128, k80: v128): v128 {
  let r0 = i32x4.splat(0), r1 = i32x4.splat(0), c0 = i32x4.splat(0), c1 = i32x4.splat(0);
  for (let j: usize = 0; j < 128; j += 32) {
    const a = q8Rows(v128.load(w + j), mask), b = q8Rows(v128.load(w + j + 16), mask);
    r0 = dotI8U8(a, v128.load32_splat(xq + (j >> 2)), r0);
    r1 = dotI8U8(b, v128.load32_splat(xq + (j >> 2) + 4), r1);
    c0 = q8Bias(DOT_U8, a, c0, k80);
    c1 = q8Bias(DOT_U8, b, c1, k80);
  }
  return i32x4.sub(i32x4.add(r0, r1), i32x4.add(c0, c1));
}

/** One q8 half tile · one block of activation codes → exact int32 sums (· 256 with interleaved int16 codes), lanes = rows. */
@inline export function q8TileSum(mode: i32, w: usize, xq: usize, mask: v128, k80: v128): v128 {
  if (mode == DOT_U8) return q8TileSumU8(w, xq, mask, k80);
  if (int8Codes(mode)) {
    let r0 = i32x4.splat(0), r1 = i32x4.splat(0);
    for (let j: usize = 0; j < 128; j += 32) {
      r0 = q8Dot4At(w + j, xq + (j >> 2), r0, mask);
      r1 = q8Dot4At(w + j + 16, xq + (j >> 2) + 4, r1, mask);
    }
    return i32x4.add(r0, r1);
  }
  let s0 = i32x4.splat(0), s1 = i32x4.splat(0);
  for (let j: usize = 0; j < 128; j += 32) {
    const p = w + j, x = xq + (j >> 1);
    if (Q8_EXTEND_ON_LOAD) {
      s0 = q8DotI16At(p, v128.load32_splat(x, 0), v128.load32_splat(x, 4), s0);
      s1 = q8DotI16At(p + 16, v128.load32_splat(x, 8), v128.load32_splat(x, 12), s1);
      continue;
    }
    const a = v128.load(p, 0), b = v128.load(p, 16);
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(q8Lo(a), v128.load32_splat(x, 0)));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(q8Hi(a), v128.load32_splat(x, 4)));
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(q8Lo(b), v128.load32_splat(x, 8)));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(q8Hi(b), v128.load32_splat(x, 12)));
  }
  return i32x4.add(s0, s1);
}

/** One half's blocks (stride TILE_Q8) · activation codes xq [nb · 32] i16 with scales xs [nb] f32. */
@inline export function gemvQ8(mode: i32, w: usize, xq: usize, xs: usize, nb: i32): v128 {
  let acc = f32x4.splat(0);
  const mask = q8RowsMask(), k80 = q8BiasBytes();
  for (let b = 0; b < nb; b++, w += TILE_Q8, xq += 64, xs += 4) {
    const sum = q8TileSum(mode, w, xq, mask, k80);
    acc = fmadd(f32x4.convert_i32x4_s(sum), q8Scale(mode, w, xs), acc);
  }
  return acc;
}

/**
 * The decode GEMV's page touches (linear.ts TOUCH_AHEAD): one every this many q8 tiles (4032
 * bytes, under a page). Keep the touches less than a page apart: at 15 tiles (4320 bytes)
 * the [9728, 896] GEMV ran 0.65× as fast (BENCHMARKS.md "gguf", "q8 with f16 block scales").
 */
const Q8_TOUCH_TILES: i32 = 14;

/**
 * Both halves of a row group's tile stream w · the activation → res[0..8) f32.
 * touchAhead ≠ 0 (the decode GEMV, linear.ts): one load touchAhead bytes
 * ahead every Q8_TOUCH_TILES tiles, never past `last`; returns their xor.
 */
@inline export function gemvQ8x2(mode: i32, w: usize, xq: usize, xs: usize, nb: i32, res: usize, touchAhead: usize = 0, last: usize = 0): i32 {
  let acc = f32x4.splat(0), acd = f32x4.splat(0);
  const mask = q8RowsMask(), k80 = q8BiasBytes();
  let sink = 0, touchAt = 0;
  for (let b = 0; b < nb; b++, w += TILE_Q8, xq += 64, xs += 4) {
    const v = w + HALF_Q8;
    if (touchAhead != 0 && b == touchAt) {
      sink ^= load<i32>(min(w + touchAhead, last));
      touchAt += Q8_TOUCH_TILES;
    }
    if (int8Codes(mode)) {
      acc = fmadd(f32x4.convert_i32x4_s(q8TileSum(mode, w, xq, mask, k80)), q8Scale(mode, w, xs), acc);
      acd = fmadd(f32x4.convert_i32x4_s(q8TileSum(mode, v, xq, mask, k80)), q8Scale(mode, v, xs), acd);
      continue;
    }
    let s0 = i32x4.splat(0), s1 = i32x4.splat(0), t0 = i32x4.splat(0), t1 = i32x4.splat(0);
    for (let j: usize = 0; j < 128; j += 32) {
      const p = w + j, q = v + j, x = xq + (j >> 1);
      let x0 = v128.load32_splat(x, 0), x1 = v128.load32_splat(x, 4);
      if (Q8_EXTEND_ON_LOAD) {
        s0 = q8DotI16At(p, x0, x1, s0);
        t0 = q8DotI16At(q, x0, x1, t0);
        const x2 = v128.load32_splat(x, 8), x3 = v128.load32_splat(x, 12);
        s1 = q8DotI16At(p + 16, x2, x3, s1);
        t1 = q8DotI16At(q + 16, x2, x3, t1);
        continue;
      }
      // The interleaved codes (V8 11–12): each accumulator takes one column pair.
      let a = v128.load(p, 0), c = v128.load(q, 0);
      s0 = i32x4.add(s0, i32x4.dot_i16x8_s(q8Lo(a), x0));
      t0 = i32x4.add(t0, i32x4.dot_i16x8_s(q8Lo(c), x0));
      s1 = i32x4.add(s1, i32x4.dot_i16x8_s(q8Hi(a), x1));
      t1 = i32x4.add(t1, i32x4.dot_i16x8_s(q8Hi(c), x1));
      x0 = v128.load32_splat(x, 8);
      x1 = v128.load32_splat(x, 12);
      a = v128.load(p, 16);
      c = v128.load(q, 16);
      s0 = i32x4.add(s0, i32x4.dot_i16x8_s(q8Lo(a), x0));
      t0 = i32x4.add(t0, i32x4.dot_i16x8_s(q8Lo(c), x0));
      s1 = i32x4.add(s1, i32x4.dot_i16x8_s(q8Hi(a), x1));
      t1 = i32x4.add(t1, i32x4.dot_i16x8_s(q8Hi(c), x1));
    }
    acc = fmadd(f32x4.convert_i32x4_s(i32x4.add(s0, s1)), q8Scale(DOT_I16, w, xs), acc);
    acd = fmadd(f32x4.convert_i32x4_s(i32x4.add(t0, t1)), q8Scale(DOT_I16, v, xs), acd);
  }
  v128.store(res, acc);
  v128.store(res, acd, 16);
  return sink;
}

// ---- q4 -----------------------------------------------------------------------

/** Nibble plane k of 8 u16 words, sign-extended to i16x8 (4-bit two's complement). */
@inline export function q4Plane(v: v128, k: i32): v128 {
  return k == 3 ? i16x8.shr_s(v, 12) : i16x8.shr_s(i16x8.shl(v, 12 - 4 * k), 12);
}

/**
 * Activation codes of one column pair, at byte offset o of the int16 layout,
 * as an int16 pair splat over the four lanes (the relaxed flavor's int16 q4
 * kernels get int16 codes too: activation.ts, q4 = 2).
 */
@inline export function xPair(xq: usize, o: usize): v128 {
  return v128.load32_splat(xq + o);
}

/** w_scale · x_scale for a q4 half tile. */
@inline export function q4Scale(w: usize, xs: usize): v128 {
  return f32x4.mul(v128.load(w, 64), v128.load32_splat(xs));
}

/** One q4 half tile · one block of int16 activation codes: exact int32 sums, lanes = rows (baseline). */
@inline export function q4TileSum(w: usize, xq: usize): v128 {
  let s0 = i32x4.splat(0), s1 = i32x4.splat(0);
  for (let m: usize = 0; m < 64; m += 16) {
    const v = v128.load(w + m);
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(q4Plane(v, 0), xPair(xq, m)));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(q4Plane(v, 1), xPair(xq, m + 4)));
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(q4Plane(v, 2), xPair(xq, m + 8)));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(q4Plane(v, 3), xPair(xq, m + 12)));
  }
  return i32x4.add(s0, s1);
}

// Relaxed flavor: the relaxed int8 dot on q4. A 16-byte chunk m of a half tile
// holds, in lane r (4 bytes), row r's columns 8m'..8m'+7 (m' = m / 16) as
// nibbles: byte j's low nibble is column 8m' + (0, 4, 1, 5)[j], its high nibble
// column 8m' + (2, 6, 3, 7)[j] (layout.ts). q4Lo / q4Hi sign-extend the two
// planes to bytes, so each is a q8-like weight load (lane r = four of row r's
// columns) for q8Dot and q8Bias in the u8 int8-dot mode, against activation
// codes + 128 stored in that column order (activation.ts Q4_ORDER): the low
// plane's four at xq + 8m', the high plane's at xq + 8m' + 4. The int32 sums
// are exact, so outputs equal the int16 path's. Only GEMM calls (T > 1) in the
// u8 mode take it (ops/linear.ts): for one token, or in the i7 mode, the int16
// path measured faster, so every other q4 call takes int16 codes (DOT_I16).

/** The low nibbles of a q4 chunk as signed bytes (a 16-bit shift puts each at its byte's top, an 8-bit arithmetic shift brings it back). */
@inline export function q4Lo(v: v128): v128 {
  return i8x16.shr_s(i16x8.shl(v, 4), 4);
}

/** The high nibbles of a q4 chunk as signed bytes. */
@inline export function q4Hi(v: v128): v128 {
  return i8x16.shr_s(v, 4);
}

/** Relaxed, u8 mode, T > 1 (GEMM leftovers): one q4 half tile · one block of activation codes + 128 (Q4_ORDER) → exact int32 sums, lanes = rows. */
@inline export function q4TileSumU8(w: usize, xq: usize, k80: v128): v128 {
  const mode = DOT_U8;
  let r0 = i32x4.splat(0), r1 = i32x4.splat(0), c0 = i32x4.splat(0), c1 = i32x4.splat(0);
  for (let m: usize = 0; m < 64; m += 16) {
    const v = v128.load(w + m);
    const lo = q4Lo(v), hi = q4Hi(v);
    r0 = q8Dot(mode, q8WeightA(mode, lo), q8WeightB(mode, lo), xq + (m >> 1), r0);
    r1 = q8Dot(mode, q8WeightA(mode, hi), q8WeightB(mode, hi), xq + (m >> 1) + 4, r1);
    c0 = q8Bias(mode, lo, c0, k80);
    c1 = q8Bias(mode, hi, c1, k80);
  }
  return q8Unbias(mode, i32x4.add(r0, r1), i32x4.add(c0, c1));
}

@inline export function gemvQ4(mode: i32, w: usize, xq: usize, xs: usize, nb: i32): v128 {
  const k80 = q8BiasBytes();
  let acc = f32x4.splat(0);
  for (let b = 0; b < nb; b++, w += TILE_Q4, xq += 64, xs += 4) {
    const sum = RELAXED && mode == DOT_U8 ? q4TileSumU8(w, xq, k80) : q4TileSum(w, xq);
    acc = fmadd(f32x4.convert_i32x4_s(sum), q4Scale(w, xs), acc);
  }
  return acc;
}

/**
 * Decode (one token): both halves of a q4 row group. On both flavors the int16
 * planes (q4Plane) against activation code pairs in column order (xPair): for
 * one token the relaxed dot's path (q4TileSumU8) measured 1.7× slower
 * (its u8 bias dots are not shared by other tokens, and each half's dots form
 * one latency chain), so linear() takes it only for T > 1 (ops/linear.ts).
 */
@inline export function gemvQ4x2(w: usize, xq: usize, xs: usize, nb: i32, res: usize): void {
  let acc = f32x4.splat(0), acd = f32x4.splat(0);
  for (let b = 0; b < nb; b++, w += TILE_Q4, xq += 64, xs += 4) {
    const v = w + HALF_Q4;
    let s0 = i32x4.splat(0), s1 = i32x4.splat(0), t0 = i32x4.splat(0), t1 = i32x4.splat(0);
    for (let m: usize = 0; m < 64; m += 16) {
      const a = v128.load(w + m), c = v128.load(v + m);
      let x0 = xPair(xq, m), x1 = xPair(xq, m + 4);
      s0 = i32x4.add(s0, i32x4.dot_i16x8_s(q4Plane(a, 0), x0));
      t0 = i32x4.add(t0, i32x4.dot_i16x8_s(q4Plane(c, 0), x0));
      s1 = i32x4.add(s1, i32x4.dot_i16x8_s(q4Plane(a, 1), x1));
      t1 = i32x4.add(t1, i32x4.dot_i16x8_s(q4Plane(c, 1), x1));
      x0 = xPair(xq, m + 8);
      x1 = xPair(xq, m + 12);
      s0 = i32x4.add(s0, i32x4.dot_i16x8_s(q4Plane(a, 2), x0));
      t0 = i32x4.add(t0, i32x4.dot_i16x8_s(q4Plane(c, 2), x0));
      s1 = i32x4.add(s1, i32x4.dot_i16x8_s(q4Plane(a, 3), x1));
      t1 = i32x4.add(t1, i32x4.dot_i16x8_s(q4Plane(c, 3), x1));
    }
    acc = fmadd(f32x4.convert_i32x4_s(i32x4.add(s0, s1)), q4Scale(w, xs), acc);
    acd = fmadd(f32x4.convert_i32x4_s(i32x4.add(t0, t1)), q4Scale(v, xs), acd);
  }
  v128.store(res, acc);
  v128.store(res, acd, 16);
}

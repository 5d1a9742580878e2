// q8 GEMM for a few tokens: both halves of a row group (8 rows: w, w + HALF_Q8,
// layout.ts) × two or three tokens, for every integer dot (flavor.ts DOT_*),
// and × five tokens in the u8 mode.
// linear.ts gives them the q8 tokens that the 4- and 8-token tiles leave over
// (T mod 4 = 2 or 3; 1 goes to gemvQ8x2): T = 2 and 3 are speculative
// decoding's verification steps (1 + k tokens) and small decode batches,
// which were bound by reading the weights, yet ran each half once per token
// through gemvQ8 (T = 2 cost 1.8× T = 1 on the baseline flavor).
//
// As gemmQ8Rows8U8 / gemmQ8Rows8I16 (gemm.ts): each 16-byte weight load of
// each half is prepared once (q8Weight, q8WeightA/B, q8Bias: gemv.ts) and
// dotted with every token's codes; a token's splat feeds both halves. Per
// (row, token) the exact int32 block sums and the float steps
// (acc += f32(sum) · q8Scale, block by block) are gemvQ8's, so outputs are
// bit-identical to the token run alone. The int sums stay in registers
// through a block, the f32 accumulators in res ([token][8 rows] f32) between
// blocks, as in gemm.ts. Registers (V8's 15 allocatable xmm): 3 tokens of the
// int16 dot hold 6 sums, 4 prepared weights and 2 splats.

import { HALF_Q8, TILE_Q8 } from "./layout";
import { q8Bias, q8BiasBytes, q8RowsMask, q8Scale, q8Weight, q8WeightA, q8WeightB, q8XStep, signedBy } from "./gemv";
import { DOT_U8, dotI8U7, dotI8U8, fmadd, int8Codes } from "../runtime/flavor";

/** One token's first activation splat under a 16-byte weight load at x: 4 int8 codes, or the first int16 column pair. */
@inline function xSplat(x: usize): v128 {
  return v128.load32_splat(x);
}

/** The int16 dot's second splat (the second column pair); unused by the int8 dots. */
@inline function xSplat2(mode: i32, x: usize): v128 {
  if (int8Codes(mode)) return i32x4.splat(0);
  return v128.load32_splat(x, 4);
}

/**
 * acc + one token's row sums of a prepared weight load (a = q8WeightA, b =
 * q8WeightB) with the token's splats p, q (xSplat, xSplat2): gemv.ts q8Dot
 * with the splats loaded once for both halves.
 */
@inline function dotSplat(mode: i32, a: v128, b: v128, p: v128, q: v128, acc: v128): v128 {
  if (mode == DOT_U8) return dotI8U8(a, p, acc);
  if (int8Codes(mode)) return dotI8U7(signedBy(p, b), a, acc);
  return i32x4.add(i32x4.add(acc, i32x4.dot_i16x8_s(a, p)), i32x4.dot_i16x8_s(b, q));
}

/** res[o] += f32(sum) · scale: one block's step of gemvQ8 on an accumulator kept in memory. */
@inline function accumulate(res: usize, o: usize, sum: v128, scale: v128): void {
  v128.store(res + o, fmadd(f32x4.convert_i32x4_s(sum), scale, v128.load(res + o)));
}

/** The u8 mode's block sum: the dot against codes + 128 minus 128 · Σw (gemv.ts q8Unbias). */
@inline function unbias(mode: i32, sum: v128, corr: v128): v128 {
  if (mode == DOT_U8) return i32x4.sub(sum, corr);
  return sum;
}

/**
 * Both halves × two tokens (x_t = x0 + t·xStride, scales s_t = s0 + t·sStride,
 * f32 [nb]) → res[0..64) f32 as [token][8 rows].
 */
@inline export function gemmQ8Rows8x2(mode: i32, w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const x1 = x0 + xStride, s1 = s0 + sStride;
  const mask = q8RowsMask(), k80 = q8BiasBytes();
  for (let t: usize = 0; t < 64; t += 16) v128.store(res + t, f32x4.splat(0));
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), ca = i32x4.splat(0);
    let b0 = i32x4.splat(0), b1 = i32x4.splat(0), cb = i32x4.splat(0);
    for (let j: usize = 0, k = xo; j < 128; j += 16, k += q8XStep(mode)) {
      const va = q8Weight(mode, v128.load(w + j), mask), vb = q8Weight(mode, v128.load(w + HALF_Q8 + j), mask);
      const aa = q8WeightA(mode, va), ab = q8WeightB(mode, va), ba = q8WeightA(mode, vb), bb = q8WeightB(mode, vb);
      ca = q8Bias(mode, va, ca, k80);
      cb = q8Bias(mode, vb, cb, k80);
      let p = xSplat(x0 + k), q = xSplat2(mode, x0 + k);
      a0 = dotSplat(mode, aa, ab, p, q, a0);
      b0 = dotSplat(mode, ba, bb, p, q, b0);
      p = xSplat(x1 + k);
      q = xSplat2(mode, x1 + k);
      a1 = dotSplat(mode, aa, ab, p, q, a1);
      b1 = dotSplat(mode, ba, bb, p, q, b1);
    }
    const v = w + HALF_Q8;
    accumulate(res, 0, unbias(mode, a0, ca), q8Scale(mode, w, s0 + so));
    accumulate(res, 16, unbias(mode, b0, cb), q8Scale(mode, v, s0 + so));
    accumulate(res, 32, unbias(mode, a1, ca), q8Scale(mode, w, s1 + so));
    accumulate(res, 48, unbias(mode, b1, cb), q8Scale(mode, v, s1 + so));
    w += TILE_Q8;
  }
}

/** Both halves × three tokens → res[0..96) f32 as [token][8 rows]; see gemmQ8Rows8x2. */
@inline export function gemmQ8Rows8x3(mode: i32, w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const x1 = x0 + xStride, x2 = x1 + xStride, s1 = s0 + sStride, s2 = s1 + sStride;
  const mask = q8RowsMask(), k80 = q8BiasBytes();
  for (let t: usize = 0; t < 96; t += 16) v128.store(res + t, f32x4.splat(0));
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), ca = i32x4.splat(0);
    let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), cb = i32x4.splat(0);
    for (let j: usize = 0, k = xo; j < 128; j += 16, k += q8XStep(mode)) {
      const va = q8Weight(mode, v128.load(w + j), mask), vb = q8Weight(mode, v128.load(w + HALF_Q8 + j), mask);
      const aa = q8WeightA(mode, va), ab = q8WeightB(mode, va), ba = q8WeightA(mode, vb), bb = q8WeightB(mode, vb);
      ca = q8Bias(mode, va, ca, k80);
      cb = q8Bias(mode, vb, cb, k80);
      let p = xSplat(x0 + k), q = xSplat2(mode, x0 + k);
      a0 = dotSplat(mode, aa, ab, p, q, a0);
      b0 = dotSplat(mode, ba, bb, p, q, b0);
      p = xSplat(x1 + k);
      q = xSplat2(mode, x1 + k);
      a1 = dotSplat(mode, aa, ab, p, q, a1);
      b1 = dotSplat(mode, ba, bb, p, q, b1);
      p = xSplat(x2 + k);
      q = xSplat2(mode, x2 + k);
      a2 = dotSplat(mode, aa, ab, p, q, a2);
      b2 = dotSplat(mode, ba, bb, p, q, b2);
    }
    const v = w + HALF_Q8;
    accumulate(res, 0, unbias(mode, a0, ca), q8Scale(mode, w, s0 + so));
    accumulate(res, 16, unbias(mode, b0, cb), q8Scale(mode, v, s0 + so));
    accumulate(res, 32, unbias(mode, a1, ca), q8Scale(mode, w, s1 + so));
    accumulate(res, 48, unbias(mode, b1, cb), q8Scale(mode, v, s1 + so));
    accumulate(res, 64, unbias(mode, a2, ca), q8Scale(mode, w, s2 + so));
    accumulate(res, 80, unbias(mode, b2, cb), q8Scale(mode, v, s2 + so));
    w += TILE_Q8;
  }
}

/**
 * u8 mode: both halves × five tokens → res[0..160) f32 as [token][8 rows]: a
 * 4-token tile and its one leftover token in one pass (T = 5: speculative
 * verification of 4 drafts). 10 int sums, 2 biases, 2 weights and a splat:
 * the 15 xmm registers V8 13 allocates. 1.13–1.22× as fast at T = 5 as the
 * 4-token tile and gemvQ8x2 (Node 24, alternated, load 6).
 */
export function gemmQ8Rows8x5U8(w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const mode = DOT_U8;
  const x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride, x4 = x3 + xStride;
  const mask = q8RowsMask(), k80 = q8BiasBytes();
  for (let t: usize = 0; t < 160; t += 16) v128.store(res + t, f32x4.splat(0));
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0), a4 = i32x4.splat(0), ca = i32x4.splat(0);
    let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0), b4 = i32x4.splat(0), cb = i32x4.splat(0);
    for (let j: usize = 0, k = xo; j < 128; j += 16, k += 4) {
      const va = q8Weight(mode, v128.load(w + j), mask), vb = q8Weight(mode, v128.load(w + HALF_Q8 + j), mask);
      ca = q8Bias(mode, va, ca, k80);
      cb = q8Bias(mode, vb, cb, k80);
      let p = xSplat(x0 + k);
      a0 = dotI8U8(va, p, a0);
      b0 = dotI8U8(vb, p, b0);
      p = xSplat(x1 + k);
      a1 = dotI8U8(va, p, a1);
      b1 = dotI8U8(vb, p, b1);
      p = xSplat(x2 + k);
      a2 = dotI8U8(va, p, a2);
      b2 = dotI8U8(vb, p, b2);
      p = xSplat(x3 + k);
      a3 = dotI8U8(va, p, a3);
      b3 = dotI8U8(vb, p, b3);
      p = xSplat(x4 + k);
      a4 = dotI8U8(va, p, a4);
      b4 = dotI8U8(vb, p, b4);
    }
    const v = w + HALF_Q8;
    accumulate(res, 0, i32x4.sub(a0, ca), q8Scale(mode, w, s0 + so));
    accumulate(res, 16, i32x4.sub(b0, cb), q8Scale(mode, v, s0 + so));
    accumulate(res, 32, i32x4.sub(a1, ca), q8Scale(mode, w, s0 + sStride + so));
    accumulate(res, 48, i32x4.sub(b1, cb), q8Scale(mode, v, s0 + sStride + so));
    accumulate(res, 64, i32x4.sub(a2, ca), q8Scale(mode, w, s0 + 2 * sStride + so));
    accumulate(res, 80, i32x4.sub(b2, cb), q8Scale(mode, v, s0 + 2 * sStride + so));
    accumulate(res, 96, i32x4.sub(a3, ca), q8Scale(mode, w, s0 + 3 * sStride + so));
    accumulate(res, 112, i32x4.sub(b3, cb), q8Scale(mode, v, s0 + 3 * sStride + so));
    accumulate(res, 128, i32x4.sub(a4, ca), q8Scale(mode, w, s0 + 4 * sStride + so));
    accumulate(res, 144, i32x4.sub(b4, cb), q8Scale(mode, v, s0 + 4 * sStride + so));
    w += TILE_Q8;
  }
}

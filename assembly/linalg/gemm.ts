// GEMM micro-kernels: one half of a row group (4 rows; w = the group's tile
// stream + h·halfOffset, layout.ts) × 4 tokens (q8 also × 8: gemmQ8x8). Each
// weight vector is loaded (and decoded) once and used for every token of the
// tile from registers — the register blocking that makes batching pay. Per (row, token) the arithmetic is
// exactly that of the GEMV kernels in gemv.ts, in the same order, so a token's
// output is bit-identical to running it alone.
//
// x_t = x0 + t·xStride is token t's prepared activation row; results land in
// res[0..16) f32 as [token][row]; the caller adds bias and stores.

import { HALF_Q4, HALF_Q8, TILE_BF16, TILE_F32, TILE_Q4, TILE_Q8 } from "./layout";
import { BF16_HI, bf16Even, bf16Odd, q4Hi, q4Lo, q4Plane, q4Scale, q8Bias, q8Dot, q8BiasBytes, Q8_EXTEND_ON_LOAD, q8Hi, q8Lo, q8RowsMask, q8Scale, q8Unbias, q8Weight, q8WeightA, q8WeightB, q8XStep, xPair } from "./gemv";
import { DOT_I16, DOT_I7, DOT_U8, RELAXED, dotI8U8, fmadd } from "../runtime/flavor";

/**
 * f32 / bf16: the four tokens x_t = x0 + t·xStride in one pass, each weight
 * vector decoded once for all four. Eight independent add chains (two per
 * row and token, even and odd columns, as in GEMV): these kernels are bound
 * by their chains' latency, and the relaxed flavor's FMA (latency 4 against
 * an add's 3) needs eight to keep both FMA units busy; two passes of two
 * tokens (four chains) ran relaxed slower than baseline. The baseline flavor
 * takes two passes of two (gemmFloat2), for V8 before 13.
 */
@inline function gemmFloat4(bf16: bool, w: usize, x0: usize, xStride: usize, nb: i32, res: usize): void {
  if (!RELAXED) {
    gemmFloat2(bf16, w, x0, x0 + xStride, nb, res);
    gemmFloat2(bf16, w, x0 + 2 * xStride, x0 + 3 * xStride, nb, res + 32);
    return;
  }
  let x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  const hi = v128.load(BF16_HI);
  let a00 = f32x4.splat(0), a01 = f32x4.splat(0), a10 = f32x4.splat(0), a11 = f32x4.splat(0);
  let a20 = f32x4.splat(0), a21 = f32x4.splat(0), a30 = f32x4.splat(0), a31 = f32x4.splat(0);
  const step: usize = bf16 ? 32 : 64;
  const end = w + <usize>nb * (bf16 ? TILE_BF16 : TILE_F32);
  for (; w < end; w += step, x0 += 8, x1 += 8, x2 += 8, x3 += 8) {
    let e: v128, d: v128;
    if (bf16) {
      const v = v128.load(w);
      e = bf16Even(v);
      d = bf16Odd(v, hi);
    } else {
      e = v128.load(w, 0);
      d = v128.load(w, 32);
    }
    a00 = fmadd(e, v128.load32_splat(x0, 0), a00);
    a10 = fmadd(e, v128.load32_splat(x1, 0), a10);
    a20 = fmadd(e, v128.load32_splat(x2, 0), a20);
    a30 = fmadd(e, v128.load32_splat(x3, 0), a30);
    a01 = fmadd(d, v128.load32_splat(x0, 4), a01);
    a11 = fmadd(d, v128.load32_splat(x1, 4), a11);
    a21 = fmadd(d, v128.load32_splat(x2, 4), a21);
    a31 = fmadd(d, v128.load32_splat(x3, 4), a31);
  }
  v128.store(res, f32x4.add(a00, a01), 0);
  v128.store(res, f32x4.add(a10, a11), 16);
  v128.store(res, f32x4.add(a20, a21), 32);
  v128.store(res, f32x4.add(a30, a31), 48);
}

/**
 * The baseline flavor's gemmFloat4: two passes of two tokens (four chains),
 * the same steps per (row, token), so outputs are bit-identical to one pass
 * of four. V8 12 (Node 22) and 11 (Node 20) place a loop's loads in program
 * order ahead of its arithmetic, so one pass of four holds 8 activation
 * splats, 2 weight vectors and 8 accumulators at once and spilled 3
 * accumulators a column pair (seen in `node --print-wasm-code`). Whole-model
 * f32 / bf16 prefill (synthetic Qwen2.5-0.5B, 256 tokens, two threads):
 * 1.46–1.56× on Node 22, 1.32× on Node 20, 0.91–1.01× on Node 24, whose
 * relaxed flavor (the default there) keeps one pass of four.
 */
@inline function gemmFloat2(bf16: bool, w: usize, x0: usize, x1: usize, nb: i32, res: usize): void {
  const hi = v128.load(BF16_HI);
  let a00 = f32x4.splat(0), a01 = f32x4.splat(0), a10 = f32x4.splat(0), a11 = f32x4.splat(0);
  const step: usize = bf16 ? 32 : 64;
  const end = w + <usize>nb * (bf16 ? TILE_BF16 : TILE_F32);
  for (; w < end; w += step, x0 += 8, x1 += 8) {
    let e: v128, d: v128;
    if (bf16) {
      const v = v128.load(w);
      e = bf16Even(v);
      d = bf16Odd(v, hi);
    } else {
      e = v128.load(w, 0);
      d = v128.load(w, 32);
    }
    a00 = fmadd(e, v128.load32_splat(x0, 0), a00);
    a10 = fmadd(e, v128.load32_splat(x1, 0), a10);
    a01 = fmadd(d, v128.load32_splat(x0, 4), a01);
    a11 = fmadd(d, v128.load32_splat(x1, 4), a11);
  }
  v128.store(res, f32x4.add(a00, a01), 0);
  v128.store(res, f32x4.add(a10, a11), 16);
}

/**
 * f32, relaxed flavor: both halves of a row group (8 rows) × three tokens,
 * res = [token][8 rows] f32 (96 bytes). Per column pair the four weight
 * vectors (even and odd column, each half: the pair's 64-byte record) are
 * loaded once for three tokens, and each token's even / odd splat feeds both
 * halves: 4 + 6 loads for 12 FMAs, where gemmFloat4 (one half × four tokens)
 * takes 2 + 8 for 8 and reads the group's stream once per half. Twelve
 * independent chains (two per row and token, even and odd columns, as in
 * GEMV), so the FMA units (latency 4, two a cycle) have slack beyond the
 * eight chains they need; 12 accumulators + 2 weights + 1 splat fill V8 13's
 * 15 allocatable xmm registers, the odd column's weights loaded into the
 * even's once those are spent. Per (row, token) the same steps in the same
 * order as gemvF32 / gemvF32x2, so outputs stay bit-identical.
 */
export function gemmF32Rows8x3(w: usize, x0: usize, xStride: usize, nb: i32, res: usize): void {
  let x1 = x0 + xStride, x2 = x1 + xStride;
  let e00 = f32x4.splat(0), e01 = f32x4.splat(0), e10 = f32x4.splat(0), e11 = f32x4.splat(0), e20 = f32x4.splat(0), e21 = f32x4.splat(0);
  let d00 = f32x4.splat(0), d01 = f32x4.splat(0), d10 = f32x4.splat(0), d11 = f32x4.splat(0), d20 = f32x4.splat(0), d21 = f32x4.splat(0);
  const end = w + <usize>nb * TILE_F32;
  for (; w < end; w += 64, x0 += 8, x1 += 8, x2 += 8) {
    // e<token><half>: even column 2j; d<token><half>: odd column 2j + 1.
    let p = v128.load(w, 0), q = v128.load(w, 16);
    let s = v128.load32_splat(x0, 0);
    e00 = fmadd(p, s, e00);
    e01 = fmadd(q, s, e01);
    s = v128.load32_splat(x1, 0);
    e10 = fmadd(p, s, e10);
    e11 = fmadd(q, s, e11);
    s = v128.load32_splat(x2, 0);
    e20 = fmadd(p, s, e20);
    e21 = fmadd(q, s, e21);
    p = v128.load(w, 32);
    q = v128.load(w, 48);
    s = v128.load32_splat(x0, 4);
    d00 = fmadd(p, s, d00);
    d01 = fmadd(q, s, d01);
    s = v128.load32_splat(x1, 4);
    d10 = fmadd(p, s, d10);
    d11 = fmadd(q, s, d11);
    s = v128.load32_splat(x2, 4);
    d20 = fmadd(p, s, d20);
    d21 = fmadd(q, s, d21);
  }
  v128.store(res, f32x4.add(e00, d00), 0);
  v128.store(res, f32x4.add(e01, d01), 16);
  v128.store(res, f32x4.add(e10, d10), 32);
  v128.store(res, f32x4.add(e11, d11), 48);
  v128.store(res, f32x4.add(e20, d20), 64);
  v128.store(res, f32x4.add(e21, d21), 80);
}

export function gemmF32(w: usize, x0: usize, xStride: usize, nb: i32, res: usize): void {
  gemmFloat4(false, w, x0, xStride, nb, res);
}

export function gemmBf16(w: usize, x0: usize, xStride: usize, nb: i32, res: usize): void {
  gemmFloat4(true, w, x0, xStride, nb, res);
}

/**
 * The integer dot of the 4-row q8 tiles (gemmQ8, gemmQ8x8): the one mode per
 * flavor without an 8-row kernel, DOT_I16 on baseline and DOT_I7 on relaxed
 * (linear.ts gives the relaxed u8 and i16 modes' tokens to gemmQ8Rows8U8 /
 * gemmQ8Rows8I16 four at a time, so fewer than 4 reach these tiles, and they
 * go to linear.ts bothHalves). A compile-time constant: when these tiles were @inline
 * copies per mode in sibling branches, AssemblyScript passed the mode through
 * a local, binaryen folded the identical copies into one loop that tested it
 * at every dot, and the relaxed i16 GEMM ran at 0.59× the baseline's.
 */
const Q8_TILE_DOT: i32 = RELAXED ? DOT_I7 : DOT_I16;

/**
 * q8 with activation scales s_t = s0 + t·sStride (f32 [nb]), integer dot
 * Q8_TILE_DOT. Each 16-byte weight load is prepared once (q8Weight,
 * q8WeightA/B: the mode's form, see gemv.ts) and dotted with four tokens'
 * codes (q8Dot); per block the same float steps as gemvQ8.
 */
export function gemmQ8(w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const mode = Q8_TILE_DOT;
  const x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  const s1 = s0 + sStride, s2 = s1 + sStride, s3 = s2 + sStride;
  const mask = q8RowsMask(), k80 = q8BiasBytes();
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let i0 = i32x4.splat(0), i1 = i32x4.splat(0), i2 = i32x4.splat(0), i3 = i32x4.splat(0), c = i32x4.splat(0);
    for (let j: usize = 0, k = xo; j < 128; j += 16, k += q8XStep(mode)) {
      const v = q8Weight(mode, v128.load(w + j), mask);
      const wa = q8WeightA(mode, v), wb = q8WeightB(mode, v);
      c = q8Bias(mode, v, c, k80);
      i0 = q8Dot(mode, wa, wb, x0 + k, i0);
      i1 = q8Dot(mode, wa, wb, x1 + k, i1);
      i2 = q8Dot(mode, wa, wb, x2 + k, i2);
      i3 = q8Dot(mode, wa, wb, x3 + k, i3);
    }
    a0 = fmadd(f32x4.convert_i32x4_s(q8Unbias(mode, i0, c)), q8Scale(mode, w, s0 + so), a0);
    a1 = fmadd(f32x4.convert_i32x4_s(q8Unbias(mode, i1, c)), q8Scale(mode, w, s1 + so), a1);
    a2 = fmadd(f32x4.convert_i32x4_s(q8Unbias(mode, i2, c)), q8Scale(mode, w, s2 + so), a2);
    a3 = fmadd(f32x4.convert_i32x4_s(q8Unbias(mode, i3, c)), q8Scale(mode, w, s3 + so), a3);
    w += TILE_Q8;
  }
  v128.store(res, a0, 0);
  v128.store(res, a1, 16);
  v128.store(res, a2, 32);
  v128.store(res, a3, 48);
}

/**
 * q8, eight tokens per weight load: the same per-(row, token) steps as gemmQ8,
 * with the weight load's preparation (q8Weight, q8WeightA/B, q8Bias) shared by
 * twice the tokens. The eight int32 sums stay in registers through a block;
 * the f32 accumulators live in res ([token][row] f32x4, 128 bytes) between
 * blocks, so V8 does not spill the int sums. Relaxed flavor only (linear.ts).
 */
export function gemmQ8x8(w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const mode = Q8_TILE_DOT;
  const x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  const x4 = x3 + xStride, x5 = x4 + xStride, x6 = x5 + xStride, x7 = x6 + xStride;
  for (let t: usize = 0; t < 128; t += 16) v128.store(res + t, f32x4.splat(0));
  const mask = q8RowsMask(), k80 = q8BiasBytes();
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let i0 = i32x4.splat(0), i1 = i32x4.splat(0), i2 = i32x4.splat(0), i3 = i32x4.splat(0);
    let i4 = i32x4.splat(0), i5 = i32x4.splat(0), i6 = i32x4.splat(0), i7 = i32x4.splat(0), c = i32x4.splat(0);
    for (let j: usize = 0, k = xo; j < 128; j += 16, k += q8XStep(mode)) {
      const v = q8Weight(mode, v128.load(w + j), mask);
      const wa = q8WeightA(mode, v), wb = q8WeightB(mode, v);
      c = q8Bias(mode, v, c, k80);
      i0 = q8Dot(mode, wa, wb, x0 + k, i0);
      i1 = q8Dot(mode, wa, wb, x1 + k, i1);
      i2 = q8Dot(mode, wa, wb, x2 + k, i2);
      i3 = q8Dot(mode, wa, wb, x3 + k, i3);
      i4 = q8Dot(mode, wa, wb, x4 + k, i4);
      i5 = q8Dot(mode, wa, wb, x5 + k, i5);
      i6 = q8Dot(mode, wa, wb, x6 + k, i6);
      i7 = q8Dot(mode, wa, wb, x7 + k, i7);
    }
    q8Accumulate(res, 0, q8Unbias(mode, i0, c), q8Scale(mode, w, s0 + so));
    q8Accumulate(res, 16, q8Unbias(mode, i1, c), q8Scale(mode, w, s0 + sStride + so));
    q8Accumulate(res, 32, q8Unbias(mode, i2, c), q8Scale(mode, w, s0 + 2 * sStride + so));
    q8Accumulate(res, 48, q8Unbias(mode, i3, c), q8Scale(mode, w, s0 + 3 * sStride + so));
    q8Accumulate(res, 64, q8Unbias(mode, i4, c), q8Scale(mode, w, s0 + 4 * sStride + so));
    q8Accumulate(res, 80, q8Unbias(mode, i5, c), q8Scale(mode, w, s0 + 5 * sStride + so));
    q8Accumulate(res, 96, q8Unbias(mode, i6, c), q8Scale(mode, w, s0 + 6 * sStride + so));
    q8Accumulate(res, 112, q8Unbias(mode, i7, c), q8Scale(mode, w, s0 + 7 * sStride + so));
    w += TILE_Q8;
  }
}

/**
 * q8, relaxed u8 mode: both halves of a row group (8 rows: w, w + HALF_Q8) ×
 * four tokens, res = [token][8 rows] f32 (128 bytes). Each token's 4-code
 * splat feeds two dots (one per half), so a 16-byte step costs 2 loads, 2
 * shuffles, 2 bias dots and per token one splat and 2 dots: 22 instructions
 * for 128 multiply-adds where the 4-row × 8-token tile of gemmQ8x8 takes 30
 * (this kernel is bound by instruction issue, not by the dots). Per (row,
 * token) the int sums and float steps are gemvQ8's, so outputs stay
 * bit-identical; 8 int sums + 2 biases + 2 weights + 3 temporaries fill
 * V8's 15 allocatable xmm registers.
 */
export function gemmQ8Rows8U8(w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  const mask = q8RowsMask(), k80 = q8BiasBytes();
  for (let t: usize = 0; t < 128; t += 16) v128.store(res + t, f32x4.splat(0));
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0), ca = i32x4.splat(0);
    let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0), cb = i32x4.splat(0);
    for (let j: usize = 0, k = xo; j < 128; j += 16, k += 4) {
      const va = q8Weight(DOT_U8, v128.load(w + j), mask), vb = q8Weight(DOT_U8, v128.load(w + HALF_Q8 + j), mask);
      ca = q8Bias(DOT_U8, va, ca, k80);
      cb = q8Bias(DOT_U8, vb, cb, k80);
      let x = v128.load32_splat(x0 + k);
      a0 = dotI8U8(va, x, a0);
      b0 = dotI8U8(vb, x, b0);
      x = v128.load32_splat(x1 + k);
      a1 = dotI8U8(va, x, a1);
      b1 = dotI8U8(vb, x, b1);
      x = v128.load32_splat(x2 + k);
      a2 = dotI8U8(va, x, a2);
      b2 = dotI8U8(vb, x, b2);
      x = v128.load32_splat(x3 + k);
      a3 = dotI8U8(va, x, a3);
      b3 = dotI8U8(vb, x, b3);
    }
    const v = w + HALF_Q8;
    q8Accumulate(res, 0, i32x4.sub(a0, ca), q8Scale(DOT_U8, w, s0 + so));
    q8Accumulate(res, 16, i32x4.sub(b0, cb), q8Scale(DOT_U8, v, s0 + so));
    q8Accumulate(res, 32, i32x4.sub(a1, ca), q8Scale(DOT_U8, w, s0 + sStride + so));
    q8Accumulate(res, 48, i32x4.sub(b1, cb), q8Scale(DOT_U8, v, s0 + sStride + so));
    q8Accumulate(res, 64, i32x4.sub(a2, ca), q8Scale(DOT_U8, w, s0 + 2 * sStride + so));
    q8Accumulate(res, 80, i32x4.sub(b2, cb), q8Scale(DOT_U8, v, s0 + 2 * sStride + so));
    q8Accumulate(res, 96, i32x4.sub(a3, ca), q8Scale(DOT_U8, w, s0 + 3 * sStride + so));
    q8Accumulate(res, 112, i32x4.sub(b3, cb), q8Scale(DOT_U8, v, s0 + 3 * sStride + so));
    w += TILE_Q8;
  }
}

/**
 * q8, int16 dot (DOT_I16), relaxed flavor: both halves of a row group × four
 * tokens, res = [token][8 rows] f32, as gemmQ8Rows8U8. Each token's two
 * column-pair splats feed four dots (two per half): per 32 weight bytes and
 * token 2 splats, 4 dots and 4 adds, where the 4-row × 8-token tile takes 2
 * splats, 2 dots and 2 adds per 16. Per (row, token) the int sums and float
 * steps are gemvQ8's, so outputs stay bit-identical. 8 int sums, 4 prepared
 * weights and 2 splats fit V8 13's registers; V8 12 loads every splat of an
 * iteration ahead of the arithmetic and would spill, so the baseline flavor
 * (Node 20, 22) takes it only for a few tokens (linear.ts FEW_TOKENS), where
 * it measured faster than the 4-row tiles all the same.
 */
export function gemmQ8Rows8I16(w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  for (let t: usize = 0; t < 128; t += 16) v128.store(res + t, f32x4.splat(0));
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0);
    for (let j: usize = 0, k = xo; j < 128; j += 16, k += 8) {
      // Both halves' column pairs as int16 (gemv.ts Q8_EXTEND_ON_LOAD: sign-extended as they load, or interleaved).
      let al: v128, ah: v128, bl: v128, bh: v128;
      if (Q8_EXTEND_ON_LOAD) {
        const wj = w + j;
        al = v128.load8x8_s(wj);
        ah = v128.load8x8_s(wj, 8);
        bl = v128.load8x8_s(wj, HALF_Q8);
        bh = v128.load8x8_s(wj, HALF_Q8 + 8);
      } else {
        const va = v128.load(w + j), vb = v128.load(w + HALF_Q8 + j);
        al = q8Lo(va); ah = q8Hi(va); bl = q8Lo(vb); bh = q8Hi(vb);
      }
      let p = v128.load32_splat(x0 + k), q = v128.load32_splat(x0 + k, 4);
      a0 = i32x4.add(i32x4.add(a0, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b0 = i32x4.add(i32x4.add(b0, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
      p = v128.load32_splat(x1 + k);
      q = v128.load32_splat(x1 + k, 4);
      a1 = i32x4.add(i32x4.add(a1, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b1 = i32x4.add(i32x4.add(b1, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
      p = v128.load32_splat(x2 + k);
      q = v128.load32_splat(x2 + k, 4);
      a2 = i32x4.add(i32x4.add(a2, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b2 = i32x4.add(i32x4.add(b2, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
      p = v128.load32_splat(x3 + k);
      q = v128.load32_splat(x3 + k, 4);
      a3 = i32x4.add(i32x4.add(a3, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b3 = i32x4.add(i32x4.add(b3, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
    }
    const v = w + HALF_Q8;
    q8Accumulate(res, 0, a0, q8Scale(DOT_I16, w, s0 + so));
    q8Accumulate(res, 16, b0, q8Scale(DOT_I16, v, s0 + so));
    q8Accumulate(res, 32, a1, q8Scale(DOT_I16, w, s0 + sStride + so));
    q8Accumulate(res, 48, b1, q8Scale(DOT_I16, v, s0 + sStride + so));
    q8Accumulate(res, 64, a2, q8Scale(DOT_I16, w, s0 + 2 * sStride + so));
    q8Accumulate(res, 80, b2, q8Scale(DOT_I16, v, s0 + 2 * sStride + so));
    q8Accumulate(res, 96, a3, q8Scale(DOT_I16, w, s0 + 3 * sStride + so));
    q8Accumulate(res, 112, b3, q8Scale(DOT_I16, v, s0 + 3 * sStride + so));
    w += TILE_Q8;
  }
}

/** A q8 tile with its codes sign-extended to int16 (widenQ8Group): half a's codes at [0, 256), half b's at [256, 512), their f32 scales at 512 and 528. */
export const TILE_Q8_I16: i32 = 544;

/** A row group's nb q8 tiles at w → nb TILE_Q8_I16 tiles at dst: each 8-byte run of codes as 8 int16, the scales as they are. */
export function widenQ8Group(w: usize, nb: i32, dst: usize): void {
  for (let b = 0; b < nb; b++, w += TILE_Q8, dst += TILE_Q8_I16) {
    for (let j: usize = 0; j < 128; j += 16) {
      const d = dst + (j << 1);
      v128.store(d, v128.load8x8_s(w + j));
      v128.store(d, v128.load8x8_s(w + j, 8), 16);
      v128.store(d, v128.load8x8_s(w + HALF_Q8 + j), 256);
      v128.store(d, v128.load8x8_s(w + HALF_Q8 + j, 8), 272);
    }
    v128.store(dst, v128.load(w, 128), 512);
    v128.store(dst, v128.load(w + HALF_Q8, 128), 528);
  }
}

/**
 * gemmQ8Rows8I16 on widened tiles (TILE_Q8_I16): the same sums in the same
 * order and the same float steps, so the same outputs bit for bit; the codes
 * come as plain loads, whose offsets V8 folds into the address. Relaxed flavor
 * (V8 13: no spills; gemmQ8I16Rows8ByPair ran 0.89× as fast there).
 */
export function gemmQ8I16Rows8(w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  for (let t: usize = 0; t < 128; t += 16) v128.store(res + t, f32x4.splat(0));
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0);
    for (let j: usize = 0, k = xo; j < 256; j += 32, k += 8) {
      const wj = w + j;
      const al = v128.load(wj), ah = v128.load(wj, 16), bl = v128.load(wj, 256), bh = v128.load(wj, 272);
      let p = v128.load32_splat(x0 + k), q = v128.load32_splat(x0 + k, 4);
      a0 = i32x4.add(i32x4.add(a0, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b0 = i32x4.add(i32x4.add(b0, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
      p = v128.load32_splat(x1 + k);
      q = v128.load32_splat(x1 + k, 4);
      a1 = i32x4.add(i32x4.add(a1, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b1 = i32x4.add(i32x4.add(b1, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
      p = v128.load32_splat(x2 + k);
      q = v128.load32_splat(x2 + k, 4);
      a2 = i32x4.add(i32x4.add(a2, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b2 = i32x4.add(i32x4.add(b2, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
      p = v128.load32_splat(x3 + k);
      q = v128.load32_splat(x3 + k, 4);
      a3 = i32x4.add(i32x4.add(a3, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b3 = i32x4.add(i32x4.add(b3, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
    }
    q8WideBlockStep(w, s0 + so, sStride, a0, b0, a1, b1, a2, b2, a3, b3, res);
    w += TILE_Q8_I16;
  }
}

/**
 * Baseline flavor: the same tile (both halves of a widened group × four
 * tokens) one column pair a step, 16 steps a block: two weight vectors and
 * four splats a step, so with the eight sums fourteen vectors are live where
 * V8 12 and 11 place every load of a step ahead of its arithmetic (the
 * two-pair step holds twenty and spilled). Per (row, token) the int32 sums of
 * gemmQ8 in another order (exact) and its float steps (its codes are · 256
 * and its scale takes 1/256: both products round alike, powers of two), so
 * the outputs are gemmQ8's bit for bit. One linear [4864, 1024], T = 64, two
 * threads, against the two-token tile it replaced: 1.16× on Node 22, 1.14×
 * on Node 20, 1.21× on Node 24 (BENCHMARKS.md "gguf").
 */
export function gemmQ8I16Rows8ByPair(w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  for (let t: usize = 0; t < 128; t += 16) v128.store(res + t, f32x4.splat(0));
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0);
    for (let j: usize = 0, k = xo; j < 256; j += 16, k += 4) {
      const wa = v128.load(w + j), wb = v128.load(w + j, 256);
      let p = v128.load32_splat(x0 + k);
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(wa, p));
      b0 = i32x4.add(b0, i32x4.dot_i16x8_s(wb, p));
      p = v128.load32_splat(x1 + k);
      a1 = i32x4.add(a1, i32x4.dot_i16x8_s(wa, p));
      b1 = i32x4.add(b1, i32x4.dot_i16x8_s(wb, p));
      p = v128.load32_splat(x2 + k);
      a2 = i32x4.add(a2, i32x4.dot_i16x8_s(wa, p));
      b2 = i32x4.add(b2, i32x4.dot_i16x8_s(wb, p));
      p = v128.load32_splat(x3 + k);
      a3 = i32x4.add(a3, i32x4.dot_i16x8_s(wa, p));
      b3 = i32x4.add(b3, i32x4.dot_i16x8_s(wb, p));
    }
    q8WideBlockStep(w, s0 + so, sStride, a0, b0, a1, b1, a2, b2, a3, b3, res);
    w += TILE_Q8_I16;
  }
}

/**
 * Baseline flavor: two widened row groups (w, w2: 16 rows) × two tokens a tile,
 * res = [group][token][8 rows] f32 (128 bytes: w's tokens at 0, w2's at 64).
 * One column pair a step: four weight vectors and two splats, each splat
 * feeding four dots, so with the eight sums fourteen vectors are live, as in
 * gemmQ8I16Rows8ByPair, but the step issues 4 + 2 loads for 8 dots where that
 * tile issues 2 + 4. The step alone (tools/int16-dot-bound, one thread, L1)
 * ran at 0.94–1.00 of the dot's own rate on V8 12 and 11, the 4-token step at
 * 0.82–0.83. Per (row, token) the int32 sums (exact, any order) and float
 * steps of gemmQ8I16Rows8ByPair, so the same outputs bit for bit.
 */
export function gemmQ8I16Rows16x2(w: usize, w2: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const x1 = x0 + xStride;
  for (let t: usize = 0; t < 128; t += 16) v128.store(res + t, f32x4.splat(0));
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let a0 = i32x4.splat(0), b0 = i32x4.splat(0), c0 = i32x4.splat(0), d0 = i32x4.splat(0);
    let a1 = i32x4.splat(0), b1 = i32x4.splat(0), c1 = i32x4.splat(0), d1 = i32x4.splat(0);
    for (let j: usize = 0, k = xo; j < 256; j += 16, k += 4) {
      const wa = v128.load(w + j), wb = v128.load(w + j, 256), wc = v128.load(w2 + j), wd = v128.load(w2 + j, 256);
      let p = v128.load32_splat(x0 + k);
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(wa, p));
      b0 = i32x4.add(b0, i32x4.dot_i16x8_s(wb, p));
      c0 = i32x4.add(c0, i32x4.dot_i16x8_s(wc, p));
      d0 = i32x4.add(d0, i32x4.dot_i16x8_s(wd, p));
      p = v128.load32_splat(x1 + k);
      a1 = i32x4.add(a1, i32x4.dot_i16x8_s(wa, p));
      b1 = i32x4.add(b1, i32x4.dot_i16x8_s(wb, p));
      c1 = i32x4.add(c1, i32x4.dot_i16x8_s(wc, p));
      d1 = i32x4.add(d1, i32x4.dot_i16x8_s(wd, p));
    }
    const sa = v128.load(w, 512), sb = v128.load(w, 528), sc = v128.load(w2, 512), sd = v128.load(w2, 528);
    let x = v128.load32_splat(s0 + so);
    q8Accumulate(res, 0, a0, f32x4.mul(sa, x));
    q8Accumulate(res, 16, b0, f32x4.mul(sb, x));
    q8Accumulate(res, 64, c0, f32x4.mul(sc, x));
    q8Accumulate(res, 80, d0, f32x4.mul(sd, x));
    x = v128.load32_splat(s0 + sStride + so);
    q8Accumulate(res, 32, a1, f32x4.mul(sa, x));
    q8Accumulate(res, 48, b1, f32x4.mul(sb, x));
    q8Accumulate(res, 96, c1, f32x4.mul(sc, x));
    q8Accumulate(res, 112, d1, f32x4.mul(sd, x));
    w += TILE_Q8_I16;
    w2 += TILE_Q8_I16;
  }
}

/** One block's float step of a widened tile (w: its TILE_Q8_I16 tile, s: token 0's block scale): res[t][h] += f32(sum) · row scales · token t's scale. */
@inline function q8WideBlockStep(w: usize, s: usize, sStride: usize, a0: v128, b0: v128, a1: v128, b1: v128, a2: v128, b2: v128, a3: v128, b3: v128, res: usize): void {
  const sa = v128.load(w, 512), sb = v128.load(w, 528);
  let x = v128.load32_splat(s);
  q8Accumulate(res, 0, a0, f32x4.mul(sa, x));
  q8Accumulate(res, 16, b0, f32x4.mul(sb, x));
  x = v128.load32_splat(s + sStride);
  q8Accumulate(res, 32, a1, f32x4.mul(sa, x));
  q8Accumulate(res, 48, b1, f32x4.mul(sb, x));
  x = v128.load32_splat(s + 2 * sStride);
  q8Accumulate(res, 64, a2, f32x4.mul(sa, x));
  q8Accumulate(res, 80, b2, f32x4.mul(sb, x));
  x = v128.load32_splat(s + 3 * sStride);
  q8Accumulate(res, 96, a3, f32x4.mul(sa, x));
  q8Accumulate(res, 112, b3, f32x4.mul(sb, x));
}

/** res[o] += f32(sum) · scale: one block's step of gemvQ8, on an accumulator kept in memory. */
@inline function q8Accumulate(res: usize, o: usize, sum: v128, scale: v128): void {
  v128.store(res + o, fmadd(f32x4.convert_i32x4_s(sum), scale, v128.load(res + o)));
}

/**
 * q4: each 16-byte chunk of the tile is visited twice, once per pair of nibble
 * planes (the chunk shifted right by 0 or 8 bits puts planes 0,1 or 2,3 in the
 * low byte), so one pass keeps 8 activation splats live, not 16.
 */
export function gemmQ4(mode: i32, w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  if (RELAXED && mode == DOT_U8) {
    gemmQ4U8(w, x0, xStride, s0, sStride, nb, res);
    return;
  }
  let x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  const s1 = s0 + sStride, s2 = s1 + sStride, s3 = s2 + sStride;
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  for (let b = 0, so: usize = 0; b < nb; b++, so += 4) {
    let i0 = i32x4.splat(0), i1 = i32x4.splat(0), i2 = i32x4.splat(0), i3 = i32x4.splat(0);
    for (let h: u32 = 0; h < 8; h++) {
      const v = i16x8.shr_u(v128.load(w + (<usize>(h >> 1) << 4)), (h & 1) << 3);
      const lo = q4Plane(v, 0), hi = q4Plane(v, 1);
      const o = <usize>h << 3;
      i0 = i32x4.add(i0, i32x4.dot_i16x8_s(lo, xPair(x0, o)));
      i1 = i32x4.add(i1, i32x4.dot_i16x8_s(lo, xPair(x1, o)));
      i2 = i32x4.add(i2, i32x4.dot_i16x8_s(lo, xPair(x2, o)));
      i3 = i32x4.add(i3, i32x4.dot_i16x8_s(lo, xPair(x3, o)));
      i0 = i32x4.add(i0, i32x4.dot_i16x8_s(hi, xPair(x0, o + 4)));
      i1 = i32x4.add(i1, i32x4.dot_i16x8_s(hi, xPair(x1, o + 4)));
      i2 = i32x4.add(i2, i32x4.dot_i16x8_s(hi, xPair(x2, o + 4)));
      i3 = i32x4.add(i3, i32x4.dot_i16x8_s(hi, xPair(x3, o + 4)));
    }
    x0 += 64;
    x1 += 64;
    x2 += 64;
    x3 += 64;
    a0 = fmadd(f32x4.convert_i32x4_s(i0), q4Scale(w, s0 + so), a0);
    a1 = fmadd(f32x4.convert_i32x4_s(i1), q4Scale(w, s1 + so), a1);
    a2 = fmadd(f32x4.convert_i32x4_s(i2), q4Scale(w, s2 + so), a2);
    a3 = fmadd(f32x4.convert_i32x4_s(i3), q4Scale(w, s3 + so), a3);
    w += TILE_Q4;
  }
  v128.store(res, a0, 0);
  v128.store(res, a1, 16);
  v128.store(res, a2, 32);
  v128.store(res, a3, 48);
}

/**
 * q4, int16 dot, relaxed flavor: both halves of a row group × four tokens,
 * res = [token][8 rows] f32, as gemmQ8Rows8I16 for q8. Each pass over a
 * chunk pair decodes two nibble planes of each half once (q4Plane) for the
 * four tokens' two column-pair splats. Per (row, token) the sums and float
 * steps are gemmQ4's, so outputs stay bit-identical.
 */
export function gemmQ4Rows8I16(w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  for (let t: usize = 0; t < 128; t += 16) v128.store(res + t, f32x4.splat(0));
  for (let b = 0, so: usize = 0, xo: usize = 0; b < nb; b++, so += 4, xo += 64) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0);
    for (let h: u32 = 0; h < 8; h++) {
      const m = <usize>(h >> 1) << 4, sh = (h & 1) << 3;
      const va = i16x8.shr_u(v128.load(w + m), sh), vb = i16x8.shr_u(v128.load(w + HALF_Q4 + m), sh);
      const al = q4Plane(va, 0), ah = q4Plane(va, 1), bl = q4Plane(vb, 0), bh = q4Plane(vb, 1);
      const o = xo + (<usize>h << 3);
      let p = xPair(x0, o), q = xPair(x0, o + 4);
      a0 = i32x4.add(i32x4.add(a0, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b0 = i32x4.add(i32x4.add(b0, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
      p = xPair(x1, o);
      q = xPair(x1, o + 4);
      a1 = i32x4.add(i32x4.add(a1, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b1 = i32x4.add(i32x4.add(b1, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
      p = xPair(x2, o);
      q = xPair(x2, o + 4);
      a2 = i32x4.add(i32x4.add(a2, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b2 = i32x4.add(i32x4.add(b2, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
      p = xPair(x3, o);
      q = xPair(x3, o + 4);
      a3 = i32x4.add(i32x4.add(a3, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
      b3 = i32x4.add(i32x4.add(b3, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
    }
    const v = w + HALF_Q4;
    q8Accumulate(res, 0, a0, q4Scale(w, s0 + so));
    q8Accumulate(res, 16, b0, q4Scale(v, s0 + so));
    q8Accumulate(res, 32, a1, q4Scale(w, s0 + sStride + so));
    q8Accumulate(res, 48, b1, q4Scale(v, s0 + sStride + so));
    q8Accumulate(res, 64, a2, q4Scale(w, s0 + 2 * sStride + so));
    q8Accumulate(res, 80, b2, q4Scale(v, s0 + 2 * sStride + so));
    q8Accumulate(res, 96, a3, q4Scale(w, s0 + 3 * sStride + so));
    q8Accumulate(res, 112, b3, q4Scale(v, s0 + 3 * sStride + so));
    w += TILE_Q4;
  }
}

/**
 * Relaxed gemmQ4 in the u8 int8-dot mode: 4 tokens × one half tile. Each
 * chunk's nibble planes are unpacked once (q4Lo / q4Hi, gemv.ts) and, with
 * their bias dots, shared by the four tokens: per chunk and token two relaxed
 * dots. The same exact int32 block sums as gemvQ4 (q4TileSumU8). In the i7
 * mode (Node 22's pmaddubsw) this path measured 0.62× the int16 one's
 * prefill, so i7 keeps the int16 loop above.
 */
@inline function gemmQ4U8(w: usize, x0: usize, xStride: usize, s0: usize, sStride: usize, nb: i32, res: usize): void {
  const mode = DOT_U8;
  const k80 = q8BiasBytes();
  let x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  const s1 = s0 + sStride, s2 = s1 + sStride, s3 = s2 + sStride;
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  for (let b = 0, so: usize = 0; b < nb; b++, so += 4) {
    let i0 = i32x4.splat(0), i1 = i32x4.splat(0), i2 = i32x4.splat(0), i3 = i32x4.splat(0), c = i32x4.splat(0);
    for (let m: usize = 0; m < 64; m += 16) {
      const v = v128.load(w + m);
      const o = m >> 1;
      const lo = q4Lo(v);
      const la = q8WeightA(mode, lo), lb = q8WeightB(mode, lo);
      i0 = q8Dot(mode, la, lb, x0 + o, i0);
      i1 = q8Dot(mode, la, lb, x1 + o, i1);
      i2 = q8Dot(mode, la, lb, x2 + o, i2);
      i3 = q8Dot(mode, la, lb, x3 + o, i3);
      c = q8Bias(mode, lo, c, k80);
      const hi = q4Hi(v);
      const ha = q8WeightA(mode, hi), hb = q8WeightB(mode, hi);
      i0 = q8Dot(mode, ha, hb, x0 + o + 4, i0);
      i1 = q8Dot(mode, ha, hb, x1 + o + 4, i1);
      i2 = q8Dot(mode, ha, hb, x2 + o + 4, i2);
      i3 = q8Dot(mode, ha, hb, x3 + o + 4, i3);
      c = q8Bias(mode, hi, c, k80);
    }
    x0 += 64;
    x1 += 64;
    x2 += 64;
    x3 += 64;
    a0 = fmadd(f32x4.convert_i32x4_s(q8Unbias(mode, i0, c)), q4Scale(w, s0 + so), a0);
    a1 = fmadd(f32x4.convert_i32x4_s(q8Unbias(mode, i1, c)), q4Scale(w, s1 + so), a1);
    a2 = fmadd(f32x4.convert_i32x4_s(q8Unbias(mode, i2, c)), q4Scale(w, s2 + so), a2);
    a3 = fmadd(f32x4.convert_i32x4_s(q8Unbias(mode, i3, c)), q4Scale(w, s3 + so), a3);
    w += TILE_Q4;
  }
  v128.store(res, a0, 0);
  v128.store(res, a1, 16);
  v128.store(res, a2, 32);
  v128.store(res, a3, 48);
}

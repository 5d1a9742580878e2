// Integer dot micro-kernels of the K-quant tiles (kquant-layout.ts) with
// Q8_K-style activations (kquant-activation.ts), after llama.cpp's
// ggml_vec_dot_q4_K_q8_K / q5_K_q8_K / q6_K_q8_K: per superblock, exact
// int32 sums of code products (flavor.ts dotI8U7: the K-quant codes are
// unsigned, ≤ 63, so they are the 7-bit operand as they are), weighted by the integer sub-block scales, then two (Q4_K) or one
// (Q6_K) f32 multiply-adds per superblock:
//
//   Q4_K, Q5_K: acc += f32(Σ_s sc_s·Σ q·xq) · (d·dx) + f32(Σ_s m_s·bsum_s) · (dmin·(−dx))
//   Q6_K: acc += f32(Σ_t sc_t·(Σ q·xq − 32·bsum_t)) · (d·dx)
//   Q2_K (ggml_vec_dot_q2_K_q8_K): as Q4_K over 16 sub-blocks of 16
//   Q3_K (ggml_vec_dot_q3_K_q8_K): acc += f32(Σ_t sc_t·(Σ c·xq − 4·bsum_t)) · (d·dx)
//   IQ4_XS (ggml_vec_dot_iq4_xs_q8_K): acc += f32(Σ_s sc_s·Σ kv[q]·xq) · (d·dx)
//
// with dx the token's superblock scale and bsum the sums of its codes per 32
// (Q4_K sub-block) or 16 (Q6_K). All lanes = the quad's 4 rows.
//
//   gemv<F>(w, …):  one quad × one token → f32x4 (decode, leftover tokens)
//   gemm<F>(w, …):  one quad × 4 tokens → res[0..16) f32 as [token][row]
//
// Both do the same float steps per output in the same order, so a token's
// output does not depend on the batch it is in.
//
// Flavors. Relaxed: dotI8U7 on int8 activation codes, one i32x4 of row sums;
// Q4_K's, Q5_K's and Q6_K's "pairs" variants (gemv<F>Pairs, gemm<F>Pairs:
// where the relaxed dot lowers "saturating", x64 without AVX-VNNI) sum int8
// dots in int16 (dotI8U7Pairs: one pmaddubsw each) and widen once per 8 dots
// (Q4_K: |lane| ≤ 8 · 2 · 15 · 128 = 30720 < 2^15), per 4 (Q5_K: 4 · 2 · 31
// · 128 = 31744) or per 2 (Q6_K: 2 · 2 · 63 · 128 = 32256), where each
// dotI8U7 there would be five instructions. Q2_K and Q3_K (codes ≤ 7) do
// the same per 4 dots (lowPairs16: ≤ 7168). All five widen and scale in one
// pmaddwd against the rows' doubled sub-block scales (scalesDoubled) and take
// their mins or code offset once per superblock (q4kMinsDot, bsumDot).
// Baseline (SIMD128 has no int8 dot): the int16 activation codes
// (kquant-activation.ts XSHIFT) against the weight bytes widened to int16,
// i32x4.dot_i16x8_s into two accumulators of unreduced column-pair sums (rows
// 0-1 and rows 2-3), reduced to row sums once per sub-block (reducePairs) —
// not once per dot, as the generic dotI8U7 emulation would. Integer sums are exact: |Σ| ≤
// 8·63·(32·15·127) (Q4_K), 16·128·(16·63·127 + 32·16·127) (Q6_K), < 2^31.

import { RELAXED, dotI8U7, dotI8U7Pairs, fmadd } from "../runtime/flavor";
import { XSHIFT } from "./kquant-activation";
import {
  IQ4XS_CODES, IQ4XS_D, IQ4XS_SCALES, TILE_IQ4_XS, Q2K_CODES, Q2K_D, Q2K_DMIN, Q2K_MINS, Q2K_SCALES, Q3K_CODES, Q3K_D, Q3K_SCALES, Q4K_D, Q4K_DMIN, Q4K_SCALES, Q5K_D, Q5K_DMIN, Q5K_SCALES, Q6K_CODES, Q6K_D, Q6K_SCALES, QK_K,
  TILE_Q2_K, TILE_Q3_K, TILE_Q4_K, TILE_Q5_K, TILE_Q6_K, q45kCodeOffset, q5kHighOffset,
} from "./kquant-layout";

/** Bytes of a superblock of activation codes. */
const XBLOCK: usize = <usize>QK_K << XSHIFT;

/**
 * Byte masks read from memory once per call and passed down, never written as
 * v128 constants in the loops: V8 13 (Node 24) rematerializes a v128 constant
 * at every use inside a loop (movabs, vmovq, vpunpcklqdq: three instructions a
 * use), where V8 11–12 (Node 20, 22) keep it in a register; a loaded value
 * stays in a register or becomes one memory operand.
 *   +0: 0x0f (a nibble)   +16: 0x10 (Q5_K's 5th bit)   +32: 0x3f (Q6_K's 6 bits)
 *   +48: 0x03 (Q2_K / Q3_K's 2 low bits)   +64: 0x04 (Q3_K's third bit)
 *   +80: kvalues_iq4nl (IQ4_XS's 16 values, i8)   +96: their magnitudes   +112: 0xff where negative
 *   +128: 0x07 (Q3_K's 3-bit codes)
 */
const MASKS: usize = memory.data<u8>([
  0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f,
  0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
  0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f, 0x3f,
  0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03, 0x03,
  0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04,
  0x81, 0x98, 0xad, 0xbf, 0xcf, 0xdd, 0xea, 0xf6, 0x01, 0x0d, 0x19, 0x26, 0x35, 0x45, 0x59, 0x71,
  127, 104, 83, 65, 49, 35, 22, 10, 1, 13, 25, 38, 53, 69, 89, 113,
  0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07, 0x07,
], 16);

@inline function maskLow4(): v128 {
  return v128.load(MASKS);
}

@inline function maskBit4(): v128 {
  return v128.load(MASKS, 16);
}

@inline function maskLow6(): v128 {
  return v128.load(MASKS, 32);
}

@inline function maskLow2(): v128 {
  return v128.load(MASKS, 48);
}

@inline function maskBit2(): v128 {
  return v128.load(MASKS, 64);
}

@inline function maskLow3(): v128 {
  return v128.load(MASKS, 128);
}

/** Baseline: pair sums [r0, r0, r1, r1] (a) and [r2, r2, r3, r3] (b) → row sums [r0, r1, r2, r3]. */
@inline function reducePairs(a: v128, b: v128): v128 {
  return i32x4.add(i32x4.shuffle(a, b, 0, 2, 4, 6), i32x4.shuffle(a, b, 1, 3, 5, 7));
}

/** Baseline: acc + pair sums of rows 0-1 (lo = true) or 2-3 of the u8 codes w (4 rows × 4 columns) · 4 int16 codes xv (twice). */
@inline function pairDot(w: v128, lo: bool, xv: v128, acc: v128): v128 {
  return i32x4.add(acc, i32x4.dot_i16x8_s(lo ? i16x8.extend_low_i8x16_u(w) : i16x8.extend_high_i8x16_u(w), xv));
}

/** Baseline: 4 int16 activation codes at x splat twice. */
@inline function xs4w(x: usize, o: usize): v128 {
  return v128.load64_splat(x + o);
}

@inline function lowNibbles(v: v128, low4: v128): v128 {
  return v128.and(v, low4);
}

@inline function highNibbles(v: v128, low4: v128): v128 {
  return v128.and(i16x8.shr_u(v, 4), low4);
}

/** Four token-activation codes (columns o..o + 3 at x) splat over the lanes. */
@inline function xs4(x: usize, o: usize): v128 {
  return v128.load32_splat(x + o);
}

/** Q4_K / Q5_K sub-block s's 6-bit scales and mins (4 rows each) as i16x8 [sc0..3, m0..3]. */
@inline function q4kScaleMins(five: bool, w: usize, s: usize): v128 {
  return v128.load8x8_u(w + <usize>(five ? Q5K_SCALES : Q4K_SCALES) + (s << 3));
}

/** The 4- (Q4_K) or 5-bit (Q5_K: the 5th bits from the sub-block's plane H) codes of code vector jj's low or high nibbles. */
@inline function q45Codes(five: bool, v: v128, H: v128, jj: i32, high: bool, low4: v128, bit4: v128): v128 {
  const n = high ? highNibbles(v, low4) : lowNibbles(v, low4);
  if (!five) return n;
  // Bit 2jj (low) or 2jj + 1 (high) of each byte of H moved to bit 4.
  return v128.or(n, v128.and(i16x8.shl(i16x8.shr_u(H, jj << 1), high ? 3 : 4), bit4));
}

/** The superblock's float step for Q4_K / Q5_K (shared by gemv and gemm). */
@inline function q4kAccumulate(five: bool, w: usize, tot: v128, mins: v128, dx: f32, acc: v128): v128 {
  const d = f32x4.splat(dx);
  acc = fmadd(f32x4.convert_i32x4_s(tot), f32x4.mul(v128.load(w + <usize>(five ? Q5K_D : Q4K_D)), d), acc);
  return fmadd(f32x4.convert_i32x4_s(mins), f32x4.mul(v128.load(w + <usize>(five ? Q5K_DMIN : Q4K_DMIN)), f32x4.neg(d)), acc);
}

@inline function bsum32(xsum: usize, s: usize): v128 {
  return i32x4.splat(load<i32>(xsum + (s << 3)) + load<i32>(xsum + (s << 3), 4));
}

// ---- Q4_K, Q5_K ----------------------------------------------------------------
// One source for both (five = false: Q4_K): Q5_K adds the 5th bit of each code
// from its sub-block's bit plane and keeps its other fields 128 bytes higher.

/** Exact row sums of sub-block c (4 rows × 32 codes, 64 bytes; Q5_K bit plane at hp) · one token's 32 activation codes at x. */
@inline function q45kSub(five: bool, c: usize, hp: usize, x: usize, low4: v128, bit4: v128): v128 {
  const H = five ? v128.load(hp) : i32x4.splat(0);
  if (RELAXED) {
    let s0 = i32x4.splat(0), s1 = i32x4.splat(0);
    for (let j: usize = 0; j < 64; j += 16) {
      const v = v128.load(c + j);
      const jj = <i32>(j >> 4);
      s0 = dotI8U7(xs4(x, j >> 1), q45Codes(five, v, H, jj, false, low4, bit4), s0);
      s1 = dotI8U7(xs4(x, (j >> 1) + 4), q45Codes(five, v, H, jj, true, low4, bit4), s1);
    }
    return i32x4.add(s0, s1);
  }
  let a = i32x4.splat(0), b = i32x4.splat(0);
  for (let j: usize = 0; j < 64; j += 16) {
    const v = v128.load(c + j);
    const jj = <i32>(j >> 4);
    const lo = q45Codes(five, v, H, jj, false, low4, bit4), hi = q45Codes(five, v, H, jj, true, low4, bit4);
    const xl = xs4w(x, j), xh = xs4w(x, j + 8);
    a = pairDot(lo, true, xl, a);
    b = pairDot(lo, false, xl, b);
    a = pairDot(hi, true, xh, a);
    b = pairDot(hi, false, xh, b);
  }
  return reducePairs(a, b);
}

/**
 * q45kSub for 4 tokens (x + t·xStride) at once on the int16 dot (baseline flavor), each weight
 * vector decoded once; row sums to out[0..64) as [token][row]. The relaxed flavor's int8 dots
 * are gemmQ45K's own loop (its sums stay in registers).
 */
@inline function q45kSub4(five: bool, c: usize, hp: usize, x: usize, xStride: usize, out: usize, low4: v128, bit4: v128): void {
  const x1 = x + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  const H = five ? v128.load(hp) : i32x4.splat(0);
  let a0 = i32x4.splat(0), b0 = i32x4.splat(0), a1 = i32x4.splat(0), b1 = i32x4.splat(0);
  let a2 = i32x4.splat(0), b2 = i32x4.splat(0), a3 = i32x4.splat(0), b3 = i32x4.splat(0);
  for (let j: usize = 0; j < 64; j += 16) {
    const v = v128.load(c + j);
    for (let h: usize = 0; h < 16; h += 8) {
      // h = 0: the low nibbles (columns j/2 …), 8: the high nibbles (columns j/2 + 4 …).
      const n = q45Codes(five, v, H, <i32>(j >> 4), h != 0, low4, bit4);
      const wl = i16x8.extend_low_i8x16_u(n), wh = i16x8.extend_high_i8x16_u(n);
      let xv = xs4w(x, j + h);
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(wl, xv));
      b0 = i32x4.add(b0, i32x4.dot_i16x8_s(wh, xv));
      xv = xs4w(x1, j + h);
      a1 = i32x4.add(a1, i32x4.dot_i16x8_s(wl, xv));
      b1 = i32x4.add(b1, i32x4.dot_i16x8_s(wh, xv));
      xv = xs4w(x2, j + h);
      a2 = i32x4.add(a2, i32x4.dot_i16x8_s(wl, xv));
      b2 = i32x4.add(b2, i32x4.dot_i16x8_s(wh, xv));
      xv = xs4w(x3, j + h);
      a3 = i32x4.add(a3, i32x4.dot_i16x8_s(wl, xv));
      b3 = i32x4.add(b3, i32x4.dot_i16x8_s(wh, xv));
    }
  }
  v128.store(out, reducePairs(a0, b0), 0);
  v128.store(out, reducePairs(a1, b1), 16);
  v128.store(out, reducePairs(a2, b2), 32);
  v128.store(out, reducePairs(a3, b3), 48);
}

/** One quad's superblocks · one token's codes xq, scales xd, sums xsum. */
@inline function gemvQ45K(five: bool, w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  const low4 = maskLow4(), bit4 = maskBit4();
  let acc = f32x4.splat(0);
  const tile = <usize>(five ? TILE_Q5_K : TILE_Q4_K);
  for (let b = 0; b < nsb; b++, w += tile, xq += XBLOCK, xd += 4, xsum += 64) {
    let tot = i32x4.splat(0), mins = i32x4.splat(0);
    for (let s: usize = 0; s < 8; s++) {
      const sm = q4kScaleMins(five, w, s);
      tot = i32x4.add(tot, i32x4.mul(q45kSub(five, w + <usize>q45kCodeOffset(five, <i32>s), w + <usize>q5kHighOffset(<i32>s), xq + (s << (5 + XSHIFT)), low4, bit4), i32x4.extend_low_i16x8_u(sm)));
      mins = i32x4.add(mins, i32x4.mul(i32x4.extend_high_i16x8_u(sm), bsum32(xsum, s)));
    }
    acc = q4kAccumulate(five, w, tot, mins, load<f32>(xd), acc);
  }
  return acc;
}

/**
 * One quad · 4 tokens (token t: xq + t·xStride, xd + t·dStride, xsum + t·sStride) → res [4 tokens][4 rows] f32;
 * res[64..128) is scratch for the baseline's sub-block sums.
 */
@inline function gemmQ45K(five: bool, w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  const low4 = maskLow4(), bit4 = maskBit4();
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  const sums = res + 64;
  const tile = <usize>(five ? TILE_Q5_K : TILE_Q4_K);
  for (let b = 0; b < nsb; b++, w += tile, xq += XBLOCK, xd += 4, xsum += 64) {
    let t0 = i32x4.splat(0), t1 = i32x4.splat(0), t2 = i32x4.splat(0), t3 = i32x4.splat(0);
    for (let s: usize = 0; s < 8; s++) {
      const sc = i32x4.extend_low_i16x8_u(q4kScaleMins(five, w, s));
      const c = w + <usize>q45kCodeOffset(five, <i32>s), x = xq + (s << (5 + XSHIFT));
      if (RELAXED) {
        // The relaxed int8 dots (u8 / i7 modes): the sub-block's 8 code vectors × 4 tokens, the sums kept in
        // registers and scaled at once, not stored to `sums` and loaded back as the baseline's below.
        const x1 = x + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
        const H = five ? v128.load(w + <usize>q5kHighOffset(<i32>s)) : i32x4.splat(0);
        let i0 = i32x4.splat(0), i1 = i32x4.splat(0), i2 = i32x4.splat(0), i3 = i32x4.splat(0);
        for (let j: usize = 0; j < 64; j += 16) {
          const v = v128.load(c + j);
          const jj = <i32>(j >> 4);
          const lo = q45Codes(five, v, H, jj, false, low4, bit4), hi = q45Codes(five, v, H, jj, true, low4, bit4);
          const o = j >> 1;
          i0 = dotI8U7(xs4(x, o), lo, i0);
          i1 = dotI8U7(xs4(x1, o), lo, i1);
          i2 = dotI8U7(xs4(x2, o), lo, i2);
          i3 = dotI8U7(xs4(x3, o), lo, i3);
          i0 = dotI8U7(xs4(x, o + 4), hi, i0);
          i1 = dotI8U7(xs4(x1, o + 4), hi, i1);
          i2 = dotI8U7(xs4(x2, o + 4), hi, i2);
          i3 = dotI8U7(xs4(x3, o + 4), hi, i3);
        }
        t0 = i32x4.add(t0, i32x4.mul(i0, sc));
        t1 = i32x4.add(t1, i32x4.mul(i1, sc));
        t2 = i32x4.add(t2, i32x4.mul(i2, sc));
        t3 = i32x4.add(t3, i32x4.mul(i3, sc));
        continue;
      }
      q45kSub4(five, c, w + <usize>q5kHighOffset(<i32>s), x, xStride, sums, low4, bit4);
      t0 = i32x4.add(t0, i32x4.mul(v128.load(sums, 0), sc));
      t1 = i32x4.add(t1, i32x4.mul(v128.load(sums, 16), sc));
      t2 = i32x4.add(t2, i32x4.mul(v128.load(sums, 32), sc));
      t3 = i32x4.add(t3, i32x4.mul(v128.load(sums, 48), sc));
    }
    // The mins term Σ_s m_s · bsum_s once a superblock per token (q4kMinsDot: four pmaddwd on the pairs of
    // sub-blocks' mins, shared by the 4 tokens), not one broadcast and pmulld per sub-block and token: the same int32.
    const mp0 = q4kMinsPair(five, w, 0), mp1 = q4kMinsPair(five, w, 2), mp2 = q4kMinsPair(five, w, 4), mp3 = q4kMinsPair(five, w, 6);
    a0 = q4kAccumulate(five, w, t0, q4kMinsDot(xsum, mp0, mp1, mp2, mp3), load<f32>(xd), a0);
    a1 = q4kAccumulate(five, w, t1, q4kMinsDot(xsum + sStride, mp0, mp1, mp2, mp3), load<f32>(xd + dStride), a1);
    a2 = q4kAccumulate(five, w, t2, q4kMinsDot(xsum + 2 * sStride, mp0, mp1, mp2, mp3), load<f32>(xd + 2 * dStride), a2);
    a3 = q4kAccumulate(five, w, t3, q4kMinsDot(xsum + 3 * sStride, mp0, mp1, mp2, mp3), load<f32>(xd + 3 * dStride), a3);
  }
  v128.store(res, a0, 0);
  v128.store(res, a1, 16);
  v128.store(res, a2, 32);
  v128.store(res, a3, 48);
}

// Q4_K and Q5_K on the relaxed flavor's int16 pairs (gemv<F>Pairs, gemm<F>Pairs):
// a sub-block's pair dots summed in int16 (Q4_K all 8: |lane| ≤ 8 · 2 · 15 · 127
// = 30480; Q5_K each half's 4: 4 · 2 · 31 · 127 = 31496), then weighted by its
// scales with one i32x4.dot_i16x8_s against the 4 rows' scales each doubled
// (lanes 2r, 2r + 1 = sc_r: pmaddwd adds row r's two pair lanes and scales them
// at once), where q45kSub widens and multiplies (extadd, pmulld). The mins term
// Σ_s m_s · bsum_s takes four pmaddwd per superblock (q4kMinsDot) instead of one
// broadcast and pmulld per sub-block. The same exact int32 sums as gemvQ45K, so
// the outputs are bit-identical.

/**
 * The 4 rows' values in lanes 0-3 (!high) or 4-7 (high) of an i16x8, each doubled:
 * [v_r0, v_r0, v_r1, v_r1, …, v_r3, v_r3], so that pmaddwd scales row r's two pair lanes.
 * Takes a sub-block's scales from q4kScaleMins (lanes 0-3) or the pair t, t + 1 from
 * q6kScalePair / lowScalePair (lanes 0-3, 4-7).
 */
@inline function scalesDoubled(v: v128, high: bool): v128 {
  return high ? i16x8.shuffle(v, v, 4, 4, 5, 5, 6, 6, 7, 7) : i16x8.shuffle(v, v, 0, 0, 1, 1, 2, 2, 3, 3);
}

/** Sub-block s's scales, each doubled (scalesDoubled). */
@inline function q4kScalesDoubled(five: bool, w: usize, s: usize): v128 {
  return scalesDoubled(q4kScaleMins(five, w, s), false);
}

/** The mins of sub-blocks s and s + 1 interleaved: i16x8 [m_s r0, m_s+1 r0, m_s r1, …, m_s+1 r3] (punpckhwd). */
@inline function q4kMinsPair(five: bool, w: usize, s: usize): v128 {
  return i16x8.shuffle(q4kScaleMins(five, w, s), q4kScaleMins(five, w, s + 1), 4, 12, 5, 13, 6, 14, 7, 15);
}

/**
 * Σ_s m_s · bsum_s (lanes = rows) for one token's superblock sums xs (i32 [16] per 16 codes):
 * the per-32 sums (|·| ≤ 32 · 127) narrowed to int16, each pair splat against
 * q4kMinsPair (mp0 … mp3 for s = 0, 2, 4, 6).
 */
@inline function q4kMinsDot(xs: usize, mp0: v128, mp1: v128, mp2: v128, mp3: v128): v128 {
  const v0 = v128.load(xs), v1 = v128.load(xs, 16), v2 = v128.load(xs, 32), v3 = v128.load(xs, 48);
  const b03 = i32x4.add(i32x4.shuffle(v0, v1, 0, 2, 4, 6), i32x4.shuffle(v0, v1, 1, 3, 5, 7));
  const b47 = i32x4.add(i32x4.shuffle(v2, v3, 0, 2, 4, 6), i32x4.shuffle(v2, v3, 1, 3, 5, 7));
  const b = i16x8.narrow_i32x4_s(b03, b47);
  const m = i32x4.add(i32x4.dot_i16x8_s(mp0, pairSplat(b, 0)), i32x4.dot_i16x8_s(mp1, pairSplat(b, 1)));
  return i32x4.add(m, i32x4.add(i32x4.dot_i16x8_s(mp2, pairSplat(b, 2)), i32x4.dot_i16x8_s(mp3, pairSplat(b, 3))));
}

/** The superblock's float step with its mins taken by q4kMinsDot from the token's sums xs. */
@inline function q4kScaledAccumulate(five: bool, w: usize, tot: v128, xs: usize, dx: f32, acc: v128): v128 {
  const mins = q4kMinsDot(xs, q4kMinsPair(five, w, 0), q4kMinsPair(five, w, 2), q4kMinsPair(five, w, 4), q4kMinsPair(five, w, 6));
  return q4kAccumulate(five, w, tot, mins, dx, acc);
}

/** Lane k of the int16 vector b (a pair of int16 as one i32) splat: [b_2k, b_2k+1] four times. */
@inline function pairSplat(b: v128, k: i32): v128 {
  if (k == 0) return i32x4.shuffle(b, b, 0, 0, 0, 0);
  if (k == 1) return i32x4.shuffle(b, b, 1, 1, 1, 1);
  if (k == 2) return i32x4.shuffle(b, b, 2, 2, 2, 2);
  return i32x4.shuffle(b, b, 3, 3, 3, 3);
}

/**
 * One token's 4 pair dots over code vectors j0 / 16 and j0 / 16 + 1 of sub-block c (Q5_K: bit plane H)
 * in int16, lanes 2r, 2r + 1 = row r; the 16 codes they take in one load, splat by shuffles.
 */
@inline function q45kHalfPairs(five: bool, c: usize, H: v128, x: usize, j0: usize, low4: v128, bit4: v128): v128 {
  const xv = v128.load(x + (j0 >> 1));
  const jj = <i32>(j0 >> 4);
  const v = v128.load(c + j0), u = v128.load(c + j0, 16);
  let p = dotI8U7Pairs(pairSplat(xv, 0), q45Codes(five, v, H, jj, false, low4, bit4));
  p = i16x8.add(p, dotI8U7Pairs(pairSplat(xv, 1), q45Codes(five, v, H, jj, true, low4, bit4)));
  p = i16x8.add(p, dotI8U7Pairs(pairSplat(xv, 2), q45Codes(five, u, H, jj + 1, false, low4, bit4)));
  return i16x8.add(p, dotI8U7Pairs(pairSplat(xv, 3), q45Codes(five, u, H, jj + 1, true, low4, bit4)));
}

@inline function gemvQ45KScaledPairs(five: bool, w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  const low4 = maskLow4(), bit4 = maskBit4();
  let acc = f32x4.splat(0);
  const tile = <usize>(five ? TILE_Q5_K : TILE_Q4_K);
  for (let b = 0; b < nsb; b++, w += tile, xq += XBLOCK, xd += 4, xsum += 64) {
    let tot = i32x4.splat(0);
    for (let s: usize = 0; s < 8; s++) {
      const c = w + <usize>q45kCodeOffset(five, <i32>s), x = xq + (s << (5 + XSHIFT));
      const H = five ? v128.load(w + <usize>q5kHighOffset(<i32>s)) : i32x4.splat(0);
      const pa = q45kHalfPairs(five, c, H, x, 0, low4, bit4), pb = q45kHalfPairs(five, c, H, x, 32, low4, bit4);
      const scd = q4kScalesDoubled(five, w, s);
      tot = i32x4.add(tot, five ? i32x4.add(i32x4.dot_i16x8_s(pa, scd), i32x4.dot_i16x8_s(pb, scd)) : i32x4.dot_i16x8_s(i16x8.add(pa, pb), scd));
    }
    acc = q4kScaledAccumulate(five, w, tot, xsum, load<f32>(xd), acc);
  }
  return acc;
}

/** gemmQ45K's pairs path: 4 tokens, each weight vector's codes taken once for all of them. */
@inline function gemmQ45KScaledPairs(five: bool, w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  const low4 = maskLow4(), bit4 = maskBit4();
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  const tile = <usize>(five ? TILE_Q5_K : TILE_Q4_K);
  for (let b = 0; b < nsb; b++, w += tile, xq += XBLOCK, xd += 4, xsum += 64) {
    let t0 = i32x4.splat(0), t1 = i32x4.splat(0), t2 = i32x4.splat(0), t3 = i32x4.splat(0);
    for (let s: usize = 0; s < 8; s++) {
      const c = w + <usize>q45kCodeOffset(five, <i32>s);
      const H = five ? v128.load(w + <usize>q5kHighOffset(<i32>s)) : i32x4.splat(0);
      const x0 = xq + (s << (5 + XSHIFT)), x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
      const scd = q4kScalesDoubled(five, w, s);
      let p0 = i16x8.splat(0), p1 = i16x8.splat(0), p2 = i16x8.splat(0), p3 = i16x8.splat(0);
      for (let j: usize = 0; j < 64; j += 16) {
        const v = v128.load(c + j);
        const jj = <i32>(j >> 4);
        const lo = q45Codes(five, v, H, jj, false, low4, bit4), hi = q45Codes(five, v, H, jj, true, low4, bit4);
        const o = j >> 1;
        p0 = i16x8.add(p0, dotI8U7Pairs(xs4(x0, o), lo));
        p1 = i16x8.add(p1, dotI8U7Pairs(xs4(x1, o), lo));
        p2 = i16x8.add(p2, dotI8U7Pairs(xs4(x2, o), lo));
        p3 = i16x8.add(p3, dotI8U7Pairs(xs4(x3, o), lo));
        p0 = i16x8.add(p0, dotI8U7Pairs(xs4(x0, o + 4), hi));
        p1 = i16x8.add(p1, dotI8U7Pairs(xs4(x1, o + 4), hi));
        p2 = i16x8.add(p2, dotI8U7Pairs(xs4(x2, o + 4), hi));
        p3 = i16x8.add(p3, dotI8U7Pairs(xs4(x3, o + 4), hi));
        if (five ? (j & 16) != 0 : j == 48) {
          // Q5_K: each half's 4 dots; Q4_K: all 8.
          t0 = i32x4.add(t0, i32x4.dot_i16x8_s(p0, scd));
          t1 = i32x4.add(t1, i32x4.dot_i16x8_s(p1, scd));
          t2 = i32x4.add(t2, i32x4.dot_i16x8_s(p2, scd));
          t3 = i32x4.add(t3, i32x4.dot_i16x8_s(p3, scd));
          p0 = i16x8.splat(0);
          p1 = i16x8.splat(0);
          p2 = i16x8.splat(0);
          p3 = i16x8.splat(0);
        }
      }
    }
    a0 = q4kScaledAccumulate(five, w, t0, xsum, load<f32>(xd), a0);
    a1 = q4kScaledAccumulate(five, w, t1, xsum + sStride, load<f32>(xd + dStride), a1);
    a2 = q4kScaledAccumulate(five, w, t2, xsum + 2 * sStride, load<f32>(xd + 2 * dStride), a2);
    a3 = q4kScaledAccumulate(five, w, t3, xsum + 3 * sStride, load<f32>(xd + 3 * dStride), a3);
  }
  v128.store(res, a0, 0);
  v128.store(res, a1, 16);
  v128.store(res, a2, 32);
  v128.store(res, a3, 48);
}

export function gemvQ4K(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  return gemvQ45K(false, w, xq, xd, xsum, nsb);
}

/** gemvQ4K with the sub-block sums in int16 pairs (relaxed flavor, "saturating" lowering); the same exact sums. */
export function gemvQ4KPairs(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  return RELAXED ? gemvQ45KScaledPairs(false, w, xq, xd, xsum, nsb) : gemvQ4K(w, xq, xd, xsum, nsb);
}

export function gemvQ5K(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  return gemvQ45K(true, w, xq, xd, xsum, nsb);
}

/** gemvQ5K with int16 pair sums, as gemvQ4KPairs. */
export function gemvQ5KPairs(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  return RELAXED ? gemvQ45KScaledPairs(true, w, xq, xd, xsum, nsb) : gemvQ5K(w, xq, xd, xsum, nsb);
}

/**
 * Relaxed flavor (u8 / i7 modes), Q4_K: two quads (w and w + quadBytes, rows 8) · 4 tokens, as gemmQ45K
 * for each quad, but every activation splat feeds both quads' code vectors: per 16 code bytes of each
 * quad, 4 splats and 8 dots where gemmQ45K takes 8 and 8. res [4 tokens][4 rows] f32 for the first
 * quad at res, the second at res + 64, accumulated in memory there (zeroed here); res[128..256) holds
 * the superblock's int32 sums [quad][token]. Per output the same int32 sums and float steps as
 * gemmQ45K, so the same bits.
 */
export function gemmQ4KPairOfQuads(w: usize, quadBytes: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  const low4 = maskLow4();
  const ts = res + 128;
  for (let o: usize = 0; o < 128; o += 16) v128.store(res + o, f32x4.splat(0));
  for (let b = 0; b < nsb; b++, w += TILE_Q4_K, xq += XBLOCK, xd += 4, xsum += 64) {
    const w1 = w + quadBytes;
    for (let o: usize = 0; o < 128; o += 16) v128.store(ts + o, i32x4.splat(0));
    for (let s: usize = 0; s < 8; s++) {
      const c0 = w + <usize>q45kCodeOffset(false, <i32>s), c1 = w1 + <usize>q45kCodeOffset(false, <i32>s);
      const x0 = xq + (s << (5 + XSHIFT)), x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
      let i0 = i32x4.splat(0), i1 = i32x4.splat(0), i2 = i32x4.splat(0), i3 = i32x4.splat(0);
      let k0 = i32x4.splat(0), k1 = i32x4.splat(0), k2 = i32x4.splat(0), k3 = i32x4.splat(0);
      for (let j: usize = 0; j < 64; j += 16) {
        const v = v128.load(c0 + j), u = v128.load(c1 + j);
        const o = j >> 1;
        // The low nibbles (columns o … o + 3 of each row), then the high ones (o + 4 …).
        let p = lowNibbles(v, low4), q = lowNibbles(u, low4);
        let x = xs4(x0, o);
        i0 = dotI8U7(x, p, i0);
        k0 = dotI8U7(x, q, k0);
        x = xs4(x1, o);
        i1 = dotI8U7(x, p, i1);
        k1 = dotI8U7(x, q, k1);
        x = xs4(x2, o);
        i2 = dotI8U7(x, p, i2);
        k2 = dotI8U7(x, q, k2);
        x = xs4(x3, o);
        i3 = dotI8U7(x, p, i3);
        k3 = dotI8U7(x, q, k3);
        p = highNibbles(v, low4);
        q = highNibbles(u, low4);
        x = xs4(x0, o + 4);
        i0 = dotI8U7(x, p, i0);
        k0 = dotI8U7(x, q, k0);
        x = xs4(x1, o + 4);
        i1 = dotI8U7(x, p, i1);
        k1 = dotI8U7(x, q, k1);
        x = xs4(x2, o + 4);
        i2 = dotI8U7(x, p, i2);
        k2 = dotI8U7(x, q, k2);
        x = xs4(x3, o + 4);
        i3 = dotI8U7(x, p, i3);
        k3 = dotI8U7(x, q, k3);
      }
      const sa = i32x4.extend_low_i16x8_u(q4kScaleMins(false, w, s)), sb = i32x4.extend_low_i16x8_u(q4kScaleMins(false, w1, s));
      v128.store(ts, i32x4.add(v128.load(ts), i32x4.mul(i0, sa)));
      v128.store(ts, i32x4.add(v128.load(ts, 16), i32x4.mul(i1, sa)), 16);
      v128.store(ts, i32x4.add(v128.load(ts, 32), i32x4.mul(i2, sa)), 32);
      v128.store(ts, i32x4.add(v128.load(ts, 48), i32x4.mul(i3, sa)), 48);
      v128.store(ts, i32x4.add(v128.load(ts, 64), i32x4.mul(k0, sb)), 64);
      v128.store(ts, i32x4.add(v128.load(ts, 80), i32x4.mul(k1, sb)), 80);
      v128.store(ts, i32x4.add(v128.load(ts, 96), i32x4.mul(k2, sb)), 96);
      v128.store(ts, i32x4.add(v128.load(ts, 112), i32x4.mul(k3, sb)), 112);
    }
    pairOfQuadsStep(w, ts, xsum, sStride, xd, dStride, res);
    pairOfQuadsStep(w1, ts + 64, xsum, sStride, xd, dStride, res + 64);
  }
}

/** One quad's superblock float step for 4 tokens (gemmQ45K's, Q4_K): res[t] (f32, in memory) += its sums ts[t] and mins. */
@inline function pairOfQuadsStep(w: usize, ts: usize, xsum: usize, sStride: usize, xd: usize, dStride: usize, res: usize): void {
  const mp0 = q4kMinsPair(false, w, 0), mp1 = q4kMinsPair(false, w, 2), mp2 = q4kMinsPair(false, w, 4), mp3 = q4kMinsPair(false, w, 6);
  for (let t: usize = 0; t < 4; t++) {
    v128.store(res + (t << 4), q4kAccumulate(false, w, v128.load(ts + (t << 4)), q4kMinsDot(xsum + t * sStride, mp0, mp1, mp2, mp3), load<f32>(xd + t * dStride), v128.load(res + (t << 4))));
  }
}

export function gemmQ4K(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  gemmQ45K(false, w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
}

/** gemmQ4K with the sub-block sums in int16 pairs, as gemvQ4KPairs. */
export function gemmQ4KPairs(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  if (RELAXED) gemmQ45KScaledPairs(false, w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
  else gemmQ4K(w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
}

export function gemmQ5K(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  gemmQ45K(true, w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
}

/** gemmQ5K with int16 pair sums, as gemvQ4KPairs. */
export function gemmQ5KPairs(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  if (RELAXED) gemmQ45KScaledPairs(true, w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
  else gemmQ5K(w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
}

// ---- Q6_K ----------------------------------------------------------------------
// A sub-block is 16 columns × 4 rows in 48 bytes (kquant-layout.ts): code
// vectors 0-2 are the low 6 bits of A, B, C; code vector 3 is assembled from
// their bits 6-7. Sub-blocks go two at a time so that one 8-byte load gives
// both sub-blocks' scales.

/** Q6_K: code vector k (columns 4k … 4k + 3 of each row, u8 in [0, 63]) of the sub-block A, B, C; low6 = maskLow6(). */
@inline function q6kCode(A: v128, B: v128, C: v128, k: i32, low6: v128): v128 {
  if (k == 0) return v128.and(A, low6);
  if (k == 1) return v128.and(B, low6);
  if (k == 2) return v128.and(C, low6);
  // Bits 6-7 of A, B, C → bits 4-5, 2-3, 0-1 (masked first, so the 16-bit shifts move no bit across a byte).
  const t = v128.or(v128.or(v128.andnot(A, low6), i16x8.shr_u(v128.andnot(B, low6), 2)), i16x8.shr_u(v128.andnot(C, low6), 4));
  return i16x8.shr_u(t, 2);
}

/** The relaxed Σ q·xq − 32·bsum of q6kSum16 on the sub-block's code vectors q0 … q3 (q6kCode), decoded once by the caller. */
@inline function q6kSum16Codes(q0: v128, q1: v128, q2: v128, q3: v128, x: usize, bsum: i32): v128 {
  let s0 = dotI8U7(xs4(x, 0), q0, i32x4.splat(0));
  let s1 = dotI8U7(xs4(x, 4), q1, i32x4.splat(0));
  s0 = dotI8U7(xs4(x, 8), q2, s0);
  s1 = dotI8U7(xs4(x, 12), q3, s1);
  return i32x4.sub(i32x4.add(s0, s1), i32x4.splat(bsum << 5));
}

/** Σ q·xq − 32·bsum (lanes = rows) over the 16 columns of the sub-block at c, for the token codes at x (those 16 columns). */
@inline function q6kSum16(c: usize, x: usize, bsum: i32, low6: v128): v128 {
  const A = v128.load(c), B = v128.load(c, 16), C = v128.load(c, 32);
  if (RELAXED) return q6kSum16Codes(q6kCode(A, B, C, 0, low6), q6kCode(A, B, C, 1, low6), q6kCode(A, B, C, 2, low6), q6kCode(A, B, C, 3, low6), x, bsum);
  let q = q6kCode(A, B, C, 0, low6);
  let x4 = xs4w(x, 0);
  let a = pairDot(q, true, x4, i32x4.splat(0)), b = pairDot(q, false, x4, i32x4.splat(0));
  q = q6kCode(A, B, C, 1, low6);
  x4 = xs4w(x, 8);
  a = pairDot(q, true, x4, a);
  b = pairDot(q, false, x4, b);
  q = q6kCode(A, B, C, 2, low6);
  x4 = xs4w(x, 16);
  a = pairDot(q, true, x4, a);
  b = pairDot(q, false, x4, b);
  q = q6kCode(A, B, C, 3, low6);
  x4 = xs4w(x, 24);
  a = pairDot(q, true, x4, a);
  b = pairDot(q, false, x4, b);
  return i32x4.sub(reducePairs(a, b), i32x4.splat(bsum << 5));
}

/** Q6_K: the int8 scales of sub-blocks t and t + 1 (t even; 4 rows each) as i16x8 [t: rows 0-3, t + 1: rows 0-3]. */
@inline function q6kScalePair(w: usize, t: usize): v128 {
  return v128.load8x8_s(w + Q6K_SCALES + (t << 2));
}

/** Sub-block t's byte offset in a tile; its activation codes' offset in a superblock. */
@inline function q6kSub(t: usize): usize {
  return <usize>Q6K_CODES + t * 48;
}

@inline function q6kX(t: usize): usize {
  return t << (4 + XSHIFT);
}

/** One quad · one token; pairs (relaxed, "saturating" lowering): the int16 pair sums scaled by pmaddwd and the −32 offset per superblock. */
@inline function gemvQ6KWith(pairs: bool, w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  const low6 = maskLow6();
  let acc = f32x4.splat(0);
  for (let b = 0; b < nsb; b++, w += TILE_Q6_K, xq += XBLOCK, xd += 4, xsum += 64) {
    let tot = i32x4.splat(0);
    for (let t: usize = 0; t < 16; t += 2) {
      const sc = q6kScalePair(w, t);
      if (RELAXED && pairs) {
        tot = i32x4.add(tot, q6kScaledSum16(true, w + q6kSub(t), xq + q6kX(t), scalesDoubled(sc, false), low6));
        tot = i32x4.add(tot, q6kScaledSum16(true, w + q6kSub(t + 1), xq + q6kX(t + 1), scalesDoubled(sc, true), low6));
        continue;
      }
      const s = xsum + (t << 2);
      tot = i32x4.add(tot, i32x4.mul(q6kSum16(w + q6kSub(t), xq + q6kX(t), load<i32>(s), low6), i32x4.extend_low_i16x8_s(sc)));
      tot = i32x4.add(tot, i32x4.mul(q6kSum16(w + q6kSub(t + 1), xq + q6kX(t + 1), load<i32>(s, 4), low6), i32x4.extend_high_i16x8_s(sc)));
    }
    acc = q6kAccumulate(pairs, w, tot, xsum, load<f32>(xd), acc);
  }
  return acc;
}

// Q6_K on the relaxed flavor's int16 pairs (gemvQ6KPairs, gemmQ6KPairs), as Q4_K
// above: a sub-block's two int16 pair sums (codes 0-1 and 2-3, each |lane| ≤ 2 · 2
// · 63 · 127 = 32004) weighted by one i32x4.dot_i16x8_s each against the rows'
// doubled scales, and the −32 offset out of the sub-block loop: per superblock
//   Σ_t sc_t · (Σ q·xq − 32·bsum_t) = Σ_t sc_t · Σ q·xq − 32 · Σ_t sc_t · bsum_t,
// the last sum in eight pmaddwd (bsumDot). The same exact int32 total.

/** Activation codes 4k … 4k + 3 of x splat: from xv = the 16 codes in one load (once: the GEMVs, a pshufd), else a broadcast load (the GEMMs). */
@inline function xs4k(once: bool, xv: v128, x: usize, k: i32): v128 {
  return once ? pairSplat(xv, k) : xs4(x, <usize>k << 2);
}

/**
 * One token's Σ q·xq over Q6_K sub-block c (16 columns × 4 rows), weighted by sd = scalesDoubled: i32x4, lanes = rows.
 * once: the token's 16 codes in one load, splat by shuffles (the GEMV: four loads a sub-block where broadcasts take seven).
 */
@inline function q6kScaledSum16(once: bool, c: usize, x: usize, sd: v128, low6: v128): v128 {
  const A = v128.load(c), B = v128.load(c, 16), C = v128.load(c, 32), xv = once ? v128.load(x) : i32x4.splat(0);
  const p0 = i16x8.add(dotI8U7Pairs(xs4k(once, xv, x, 0), q6kCode(A, B, C, 0, low6)), dotI8U7Pairs(xs4k(once, xv, x, 1), q6kCode(A, B, C, 1, low6)));
  const p1 = i16x8.add(dotI8U7Pairs(xs4k(once, xv, x, 2), q6kCode(A, B, C, 2, low6)), dotI8U7Pairs(xs4k(once, xv, x, 3), q6kCode(A, B, C, 3, low6)));
  return i32x4.add(i32x4.dot_i16x8_s(p0, sd), i32x4.dot_i16x8_s(p1, sd));
}

/** The int8 (signed) or u8 values of sub-blocks t and t + 1 at s ([16 sub-blocks][4 rows] bytes) interleaved: i16x8 [v_t r0, v_t+1 r0, v_t r1, …, v_t+1 r3]. */
@inline function pairInterleaved(signed: bool, s: usize, t: usize): v128 {
  const sp = signed ? v128.load8x8_s(s + (t << 2)) : v128.load8x8_u(s + (t << 2));
  return i16x8.shuffle(sp, sp, 0, 4, 1, 5, 2, 6, 3, 7);
}

/**
 * Σ_t v_t · bsum_t (lanes = rows) over the 16 sub-blocks of 16 columns, for per-sub-block values
 * at s (Q6_K's and Q3_K's scales, signed; Q2_K's mins, u8) and one token's superblock sums xs
 * (i32 [16], |·| ≤ 16 · 127, narrowed to int16): eight pmaddwd.
 */
@inline function bsumDot(signed: bool, s: usize, xs: usize): v128 {
  const lo = i16x8.narrow_i32x4_s(v128.load(xs), v128.load(xs, 16)), hi = i16x8.narrow_i32x4_s(v128.load(xs, 32), v128.load(xs, 48));
  let m = i32x4.dot_i16x8_s(pairInterleaved(signed, s, 0), pairSplat(lo, 0));
  m = i32x4.add(m, i32x4.dot_i16x8_s(pairInterleaved(signed, s, 2), pairSplat(lo, 1)));
  m = i32x4.add(m, i32x4.dot_i16x8_s(pairInterleaved(signed, s, 4), pairSplat(lo, 2)));
  m = i32x4.add(m, i32x4.dot_i16x8_s(pairInterleaved(signed, s, 6), pairSplat(lo, 3)));
  m = i32x4.add(m, i32x4.dot_i16x8_s(pairInterleaved(signed, s, 8), pairSplat(hi, 0)));
  m = i32x4.add(m, i32x4.dot_i16x8_s(pairInterleaved(signed, s, 10), pairSplat(hi, 1)));
  m = i32x4.add(m, i32x4.dot_i16x8_s(pairInterleaved(signed, s, 12), pairSplat(hi, 2)));
  return i32x4.add(m, i32x4.dot_i16x8_s(pairInterleaved(signed, s, 14), pairSplat(hi, 3)));
}

/** The superblock's float step on tot, less 32 · Σ_t sc_t · bsum_t (token sums xs) where pairs left the −32 offset out of the sub-blocks. */
@inline function q6kAccumulate(pairs: bool, w: usize, tot: v128, xs: usize, dx: f32, acc: v128): v128 {
  const t = RELAXED && pairs ? i32x4.sub(tot, i32x4.shl(bsumDot(true, w + Q6K_SCALES, xs), 5)) : tot;
  return fmadd(f32x4.convert_i32x4_s(t), f32x4.mul(v128.load(w + Q6K_D), f32x4.splat(dx)), acc);
}

/** tot + sub-block t's sums for one token (codes x, sums s) weighted by its scales sc. */
@inline function q6kAddSub(tot: v128, c: usize, x: usize, s: usize, sc: v128, low6: v128): v128 {
  return i32x4.add(tot, i32x4.mul(q6kSum16(c, x, load<i32>(s), low6), sc));
}

@inline function gemmQ6KWith(pairs: bool, w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  const low6 = maskLow6();
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  for (let b = 0; b < nsb; b++, w += TILE_Q6_K, xq += XBLOCK, xd += 4, xsum += 64) {
    let t0 = i32x4.splat(0), t1 = i32x4.splat(0), t2 = i32x4.splat(0), t3 = i32x4.splat(0);
    for (let t: usize = 0; t < 16; t++) {
      const c = w + q6kSub(t);
      const x = xq + q6kX(t), s = xsum + (t << 2);
      if (RELAXED && pairs) {
        const sd = (t & 1) ? scalesDoubled(q6kScalePair(w, t - 1), true) : scalesDoubled(q6kScalePair(w, t), false);
        t0 = i32x4.add(t0, q6kScaledSum16(false, c, x, sd, low6));
        t1 = i32x4.add(t1, q6kScaledSum16(false, c, x + xStride, sd, low6));
        t2 = i32x4.add(t2, q6kScaledSum16(false, c, x + 2 * xStride, sd, low6));
        t3 = i32x4.add(t3, q6kScaledSum16(false, c, x + 3 * xStride, sd, low6));
        continue;
      }
      const sc = (t & 1) ? i32x4.extend_high_i16x8_s(q6kScalePair(w, t - 1)) : i32x4.extend_low_i16x8_s(q6kScalePair(w, t));
      if (RELAXED) {
        // The int8 dots (u8 / i7 modes): the sub-block's 4 code vectors decoded once for the 4 tokens
        // (q6kSum16 per token decodes them per token), the same int32 sums.
        const A = v128.load(c), B = v128.load(c, 16), C = v128.load(c, 32);
        const q0 = q6kCode(A, B, C, 0, low6), q1 = q6kCode(A, B, C, 1, low6), q2 = q6kCode(A, B, C, 2, low6), q3 = q6kCode(A, B, C, 3, low6);
        t0 = i32x4.add(t0, i32x4.mul(q6kSum16Codes(q0, q1, q2, q3, x, load<i32>(s)), sc));
        t1 = i32x4.add(t1, i32x4.mul(q6kSum16Codes(q0, q1, q2, q3, x + xStride, load<i32>(s + sStride)), sc));
        t2 = i32x4.add(t2, i32x4.mul(q6kSum16Codes(q0, q1, q2, q3, x + 2 * xStride, load<i32>(s + 2 * sStride)), sc));
        t3 = i32x4.add(t3, i32x4.mul(q6kSum16Codes(q0, q1, q2, q3, x + 3 * xStride, load<i32>(s + 3 * sStride)), sc));
        continue;
      }
      t0 = q6kAddSub(t0, c, x, s, sc, low6);
      t1 = q6kAddSub(t1, c, x + xStride, s + sStride, sc, low6);
      t2 = q6kAddSub(t2, c, x + 2 * xStride, s + 2 * sStride, sc, low6);
      t3 = q6kAddSub(t3, c, x + 3 * xStride, s + 3 * sStride, sc, low6);
    }
    a0 = q6kAccumulate(pairs, w, t0, xsum, load<f32>(xd), a0);
    a1 = q6kAccumulate(pairs, w, t1, xsum + sStride, load<f32>(xd + dStride), a1);
    a2 = q6kAccumulate(pairs, w, t2, xsum + 2 * sStride, load<f32>(xd + 2 * dStride), a2);
    a3 = q6kAccumulate(pairs, w, t3, xsum + 3 * sStride, load<f32>(xd + 3 * dStride), a3);
  }
  v128.store(res, a0, 0);
  v128.store(res, a1, 16);
  v128.store(res, a2, 32);
  v128.store(res, a3, 48);
}

export function gemvQ6K(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  return gemvQ6KWith(false, w, xq, xd, xsum, nsb);
}

/**
 * Bytes of a Q6_K tile widened for the prefill (widenQ6KQuad; Runtime kquantWide):
 * per sub-block t and column quad k (columns 16t + 4k … + 3), 32 bytes at
 * 128t + 32k: rows 0-1 then rows 2-3, each as 4 int16 codes sc·(q − 32); then
 * d (4 × f32) at 2048.
 */
export const TILE_Q6_K_I16: i32 = 2064;

/**
 * A quad's nsb Q6_K tiles at w → TILE_Q6_K_I16 tiles at dst. sc is int8 and
 * q − 32 ∈ [−32, 31], so sc·(q − 32) fits int16 (|·| ≤ 4096), and with the
 * activation codes (|x| ≤ 127) a pair sum stays under 2^21, a superblock's
 * sum under 2^28: the same exact integer as gemmQ6K's Σ sc·(Σ q·x − 32·Σx).
 */
export function widenQ6KQuad(w: usize, nsb: i32, dst: usize): void {
  const low6 = maskLow6(), k32 = i16x8.splat(32);
  for (let b = 0; b < nsb; b++, w += TILE_Q6_K, dst += TILE_Q6_K_I16) {
    for (let t: usize = 0; t < 16; t++) {
      const c = w + q6kSub(t);
      const A = v128.load(c), B = v128.load(c, 16), C = v128.load(c, 32);
      // Sub-block t's row scales (int8 at 4t + r) as int16 [r0 ×4, r1 ×4] and [r2 ×4, r3 ×4].
      const sc = i16x8.extend_low_i8x16_s(v128.load32_zero(w + Q6K_SCALES + (t << 2)));
      const s01 = i8x16.shuffle(sc, sc, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3);
      const s23 = i8x16.shuffle(sc, sc, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7);
      const d = dst + (t << 7);
      widenCodes(d, q6kCode(A, B, C, 0, low6), s01, s23, k32);
      widenCodes(d + 32, q6kCode(A, B, C, 1, low6), s01, s23, k32);
      widenCodes(d + 64, q6kCode(A, B, C, 2, low6), s01, s23, k32);
      widenCodes(d + 96, q6kCode(A, B, C, 3, low6), s01, s23, k32);
    }
    v128.store(dst, v128.load(w + Q6K_D), 2048);
  }
}

/** One column quad's codes q (u8, 4 rows × 4 columns) → sc·(q − zero) as int16 at d (zero: i16x8 of Q6_K's 32, or 0): rows 0-1 (scales s01), then rows 2-3 (s23). */
@inline function widenCodes(d: usize, q: v128, s01: v128, s23: v128, zero: v128): void {
  v128.store(d, i16x8.mul(i16x8.sub(i16x8.extend_low_i8x16_u(q), zero), s01));
  v128.store(d, i16x8.mul(i16x8.sub(i16x8.extend_high_i8x16_u(q), zero), s23), 16);
}

/**
 * Bytes of a Q4_K / Q5_K tile widened for the prefill (Runtime kquantWide)
 * (widenQ45KQuad): the codes sc·q as int16, laid out as TILE_Q6_K_I16's (per
 * column quad k of the superblock, columns 4k … 4k + 3, 32 bytes at 32k: rows
 * 0-1 then rows 2-3); d (4 × f32) at 2048, dmin at 2064, then sub-block s's
 * mins (4 rows × i32) at 2080 + 16s.
 */
export const TILE_Q45_K_I16: i32 = 2208;

/**
 * A quad's nsb Q4_K (five = false) or Q5_K tiles at w → TILE_Q45_K_I16 tiles at
 * dst. sc ≤ 63 and q ≤ 31, so sc·q fits int16 (≤ 1953), and with the activation
 * codes (|x| ≤ 127) a superblock's sum stays under 2^26: the same exact integer
 * as gemmQ4K's / gemmQ5K's Σ sc·Σ q·x.
 */
export function widenQ45KQuad(five: bool, w: usize, nsb: i32, dst: usize): void {
  const low4 = maskLow4(), bit4 = maskBit4(), k0 = i16x8.splat(0);
  const tile = <usize>(five ? TILE_Q5_K : TILE_Q4_K);
  for (let b = 0; b < nsb; b++, w += tile, dst += TILE_Q45_K_I16) {
    for (let s: usize = 0; s < 8; s++) {
      // Sub-block s's row scales as int16 [r0 ×4, r1 ×4] and [r2 ×4, r3 ×4]; its mins as i32x4.
      const sm = q4kScaleMins(five, w, s);
      const s01 = i8x16.shuffle(sm, sm, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3);
      const s23 = i8x16.shuffle(sm, sm, 4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7);
      v128.store(dst + (s << 4), i32x4.extend_high_i16x8_u(sm), 2080);
      const c = w + <usize>q45kCodeOffset(five, <i32>s);
      const H = five ? v128.load(w + <usize>q5kHighOffset(<i32>s)) : i32x4.splat(0);
      for (let j: usize = 0; j < 64; j += 16) {
        // Code vector j's low nibbles are column quad 8s + j/8, its high nibbles the next.
        const v = v128.load(c + j);
        const d = dst + (((s << 3) + (j >> 3)) << 5);
        const jj = <i32>(j >> 4);
        widenCodes(d, q45Codes(five, v, H, jj, false, low4, bit4), s01, s23, k0);
        widenCodes(d + 32, q45Codes(five, v, H, jj, true, low4, bit4), s01, s23, k0);
      }
    }
    v128.store(dst, v128.load(w + <usize>(five ? Q5K_D : Q4K_D)), 2048);
    v128.store(dst, v128.load(w + <usize>(five ? Q5K_DMIN : Q4K_DMIN)), 2064);
  }
}

/**
 * The widened prefill (baseline; relaxed under V8 < 13): gemmQ6K on a widened quad (widenQ6KQuad) × 4 tokens, res =
 * [token][4 rows] f32. Per column quad and token one splat and two dots on
 * plain loads, where gemmQ6K decodes the 6-bit codes for every 4-token tile and
 * takes eight extends, eight dots, the −32·Σx correction and a scale multiply
 * per sub-block and token. The same integer per superblock and the same float
 * step: outputs bit-identical.
 */
export function gemmQ6KWide(w: usize, x0: usize, xStride: usize, xd: usize, dStride: usize, nsb: i32, res: usize): void {
  gemmKWide(false, w, x0, xStride, xd, dStride, 0, 0, nsb, res);
}

/**
 * The widened prefill: gemmQ4K / gemmQ5K on a widened quad (widenQ45KQuad) × 4
 * tokens, res = [token][4 rows] f32: the codes as gemmQ6KWide's, then per
 * token the mins' Σ m_s·bsum_s and q4kAccumulate's two float steps. The same
 * integers and float steps as gemmQ4K's: outputs bit-identical.
 */
export function gemmQ45KWide(w: usize, x0: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  gemmKWide(true, w, x0, xStride, xd, dStride, xsum, sStride, nsb, res);
}

/**
 * Both widened kernels: mins = false for Q6_K tiles (TILE_Q6_K_I16), true for Q4_K / Q5_K (TILE_Q45_K_I16, with the token's code sums per 16 at xsum).
 * x0: int16 activation codes on both flavors (the relaxed quantizer's int16 copy, kquant-activation.ts xq16): sign-extending
 * int8 codes at every splat cost V8 12 four of about 34 instructions a step (one linear on Node 22, relaxed: Q4_K 1.05×, Q6_K 1.08×).
 */
@inline function gemmKWide(mins: bool, w: usize, x0: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  const x1 = x0 + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  const tile = <usize>(mins ? TILE_Q45_K_I16 : TILE_Q6_K_I16);
  let c0 = f32x4.splat(0), c1 = f32x4.splat(0), c2 = f32x4.splat(0), c3 = f32x4.splat(0);
  for (let b = 0, k: usize = 0; b < nsb; b++, w += tile, xd += 4, xsum += 64) {
    let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
    let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0);
    for (let j: usize = 0; j < 2048; j += 32, k += 8) {
      const lo = v128.load(w + j), hi = v128.load(w + j, 16);
      let x = wideX4(x0 + k);
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(lo, x));
      b0 = i32x4.add(b0, i32x4.dot_i16x8_s(hi, x));
      x = wideX4(x1 + k);
      a1 = i32x4.add(a1, i32x4.dot_i16x8_s(lo, x));
      b1 = i32x4.add(b1, i32x4.dot_i16x8_s(hi, x));
      x = wideX4(x2 + k);
      a2 = i32x4.add(a2, i32x4.dot_i16x8_s(lo, x));
      b2 = i32x4.add(b2, i32x4.dot_i16x8_s(hi, x));
      x = wideX4(x3 + k);
      a3 = i32x4.add(a3, i32x4.dot_i16x8_s(lo, x));
      b3 = i32x4.add(b3, i32x4.dot_i16x8_s(hi, x));
    }
    const d = v128.load(w, 2048);
    c0 = wideStep(mins, w, xsum, reducePairs(a0, b0), d, load<f32>(xd), c0);
    c1 = wideStep(mins, w, xsum + sStride, reducePairs(a1, b1), d, load<f32>(xd + dStride), c1);
    c2 = wideStep(mins, w, xsum + 2 * sStride, reducePairs(a2, b2), d, load<f32>(xd + 2 * dStride), c2);
    c3 = wideStep(mins, w, xsum + 3 * sStride, reducePairs(a3, b3), d, load<f32>(xd + 3 * dStride), c3);
  }
  v128.store(res, c0, 0);
  v128.store(res, c1, 16);
  v128.store(res, c2, 32);
  v128.store(res, c3, 48);
}

/**
 * gemmQ6KWide / gemmQ45KWide on two widened quads (w, w2: 8 rows) × two
 * tokens, res = [quad][token][4 rows] f32 (64 bytes: w's tokens at 0, w2's at
 * 32). Per column quad four weight vectors and two splats, each splat feeding
 * four dots, where the 4-token tile loads two and four for eight: the step
 * the int16 q8 prefill takes on V8 12 and 11 at 0.94–1.00 of the dot's rate
 * (tools/int16-dot-bound; the 4-token step 0.82–0.83). The float
 * accumulators live in res between superblocks (a memory round trip of an
 * f32 is exact), so the integers and float steps are gemmKWide's: outputs
 * bit-identical.
 */
export function gemmQ6KWide2x2(w: usize, w2: usize, x0: usize, xStride: usize, xd: usize, dStride: usize, nsb: i32, res: usize): void {
  gemmKWide2x2(false, w, w2, x0, xStride, xd, dStride, 0, 0, nsb, res);
}

/** The Q4_K / Q5_K twin of gemmQ6KWide2x2 (the mins step of gemmQ45KWide). */
export function gemmQ45KWide2x2(w: usize, w2: usize, x0: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  gemmKWide2x2(true, w, w2, x0, xStride, xd, dStride, xsum, sStride, nsb, res);
}

@inline function gemmKWide2x2(mins: bool, w: usize, w2: usize, x0: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  const x1 = x0 + xStride;
  const tile = <usize>(mins ? TILE_Q45_K_I16 : TILE_Q6_K_I16);
  for (let t: usize = 0; t < 64; t += 16) v128.store(res + t, f32x4.splat(0));
  for (let b = 0, k: usize = 0; b < nsb; b++, w += tile, w2 += tile, xd += 4, xsum += 64) {
    let a0 = i32x4.splat(0), b0 = i32x4.splat(0), c0 = i32x4.splat(0), d0 = i32x4.splat(0);
    let a1 = i32x4.splat(0), b1 = i32x4.splat(0), c1 = i32x4.splat(0), d1 = i32x4.splat(0);
    for (let j: usize = 0; j < 2048; j += 32, k += 8) {
      const lo = v128.load(w + j), hi = v128.load(w + j, 16), lo2 = v128.load(w2 + j), hi2 = v128.load(w2 + j, 16);
      let x = wideX4(x0 + k);
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(lo, x));
      b0 = i32x4.add(b0, i32x4.dot_i16x8_s(hi, x));
      c0 = i32x4.add(c0, i32x4.dot_i16x8_s(lo2, x));
      d0 = i32x4.add(d0, i32x4.dot_i16x8_s(hi2, x));
      x = wideX4(x1 + k);
      a1 = i32x4.add(a1, i32x4.dot_i16x8_s(lo, x));
      b1 = i32x4.add(b1, i32x4.dot_i16x8_s(hi, x));
      c1 = i32x4.add(c1, i32x4.dot_i16x8_s(lo2, x));
      d1 = i32x4.add(d1, i32x4.dot_i16x8_s(hi2, x));
    }
    const d = v128.load(w, 2048), d2 = v128.load(w2, 2048);
    const dx0 = load<f32>(xd), dx1 = load<f32>(xd + dStride);
    v128.store(res, wideStep(mins, w, xsum, reducePairs(a0, b0), d, dx0, v128.load(res)));
    v128.store(res, wideStep(mins, w, xsum + sStride, reducePairs(a1, b1), d, dx1, v128.load(res, 16)), 16);
    v128.store(res, wideStep(mins, w2, xsum, reducePairs(c0, d0), d2, dx0, v128.load(res, 32)), 32);
    v128.store(res, wideStep(mins, w2, xsum + sStride, reducePairs(c1, d1), d2, dx1, v128.load(res, 48)), 48);
  }
}

/** Four int16 activation codes at x, twice: [x0 … x3, x0 … x3]. */
@inline function wideX4(x: usize): v128 {
  return v128.load64_splat(x);
}

/** One token's superblock step on a widened tile w: Q6_K's acc + tot·(d·dx); Q4_K / Q5_K's q4kAccumulate with the mins Σ m_s·bsum_s of the token's sums at xsum. */
@inline function wideStep(mins: bool, w: usize, xsum: usize, tot: v128, d: v128, dx: f32, acc: v128): v128 {
  const dxv = f32x4.splat(dx);
  acc = fmadd(f32x4.convert_i32x4_s(tot), f32x4.mul(d, dxv), acc);
  if (!mins) return acc;
  let m = i32x4.splat(0);
  for (let s: usize = 0; s < 8; s++) m = i32x4.add(m, i32x4.mul(v128.load(w + (s << 4), 2080), bsum32(xsum, s)));
  return fmadd(f32x4.convert_i32x4_s(m), f32x4.mul(v128.load(w, 2064), f32x4.neg(dxv)), acc);
}

/** gemvQ6K with each two dots summed in int16 pairs (relaxed flavor, "saturating" lowering); the same exact sums. */
export function gemvQ6KPairs(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  return gemvQ6KWith(true, w, xq, xd, xsum, nsb);
}

export function gemmQ6K(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  gemmQ6KWith(false, w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
}

/** gemmQ6K with int16 pairs, as gemvQ6KPairs. */
export function gemmQ6KPairs(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  gemmQ6KWith(true, w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
}

// ---- Q2_K, Q3_K ----------------------------------------------------------------
// One source for both (three = false: Q2_K). A sub-block is 16 columns × 4 rows.
// Q2_K: one vector of 2-bit codes, code vector j = (v >> 2j) & 3 (columns 16t +
// 4j … + 3). Q3_K: a sub-block pair's 8 code vectors in three vectors A, B, C
// (kquant-layout.ts). Codes are ≤ 7, the 7-bit operand as they are. Integer
// sums are exact: |Σ| ≤ 16·15·(16·3·127) + 16·15·(16·127) (Q2_K), 16·32·(16·7·127 + 4·16·127) (Q3_K), < 2^31.

/** Q2_K: code vector j of a sub-block's code vector v. */
@inline function q2kCode(v: v128, j: i32, low2: v128): v128 {
  return v128.and(j == 0 ? v : i16x8.shr_u(v, j << 1), low2);
}

/**
 * Q3_K: code vector g (0..7) of a sub-block pair (A, B, C): g0..g5 one mask or
 * a shift and a mask; g6 / g7 their low bits from A / B's bits 6-7, bit 2 from
 * C's bit 6 / 7 (masked after each 16-bit shift, so no bit crosses a byte).
 */
@inline function q3kCode(A: v128, B: v128, C: v128, g: i32, low2: v128, bit2: v128, low3: v128): v128 {
  if (g < 6) {
    const v = g < 2 ? A : g < 4 ? B : C;
    return v128.and(g & 1 ? i16x8.shr_u(v, 3) : v, low3);
  }
  return v128.or(v128.and(i16x8.shr_u(g == 6 ? A : B, 6), low2), v128.and(i16x8.shr_u(C, g == 6 ? 4 : 5), bit2));
}

/** Row sums Σ c·xq of one sub-block's 4 code vectors q0..q3 · one token's 16 activation codes at x. */
/** Relaxed pairs: the 4 dots' pair sums in int16 (codes ≤ 7: |lane| ≤ 4 · 2 · 7 · 128 = 7168), lanes 2r, 2r + 1 = row r. */
@inline function lowPairs16(q0: v128, q1: v128, q2: v128, q3: v128, x: usize): v128 {
  return i16x8.add(i16x8.add(dotI8U7Pairs(xs4(x, 0), q0), dotI8U7Pairs(xs4(x, 4), q1)), i16x8.add(dotI8U7Pairs(xs4(x, 8), q2), dotI8U7Pairs(xs4(x, 12), q3)));
}

@inline function lowSum16(q0: v128, q1: v128, q2: v128, q3: v128, x: usize): v128 {
  if (RELAXED) {
    let s0 = dotI8U7(xs4(x, 0), q0, i32x4.splat(0));
    let s1 = dotI8U7(xs4(x, 4), q1, i32x4.splat(0));
    s0 = dotI8U7(xs4(x, 8), q2, s0);
    s1 = dotI8U7(xs4(x, 12), q3, s1);
    return i32x4.add(s0, s1);
  }
  let x4 = xs4w(x, 0);
  let a = pairDot(q0, true, x4, i32x4.splat(0)), b = pairDot(q0, false, x4, i32x4.splat(0));
  x4 = xs4w(x, 8);
  a = pairDot(q1, true, x4, a);
  b = pairDot(q1, false, x4, b);
  x4 = xs4w(x, 16);
  a = pairDot(q2, true, x4, a);
  b = pairDot(q2, false, x4, b);
  x4 = xs4w(x, 24);
  a = pairDot(q3, true, x4, a);
  b = pairDot(q3, false, x4, b);
  return reducePairs(a, b);
}

/** Sub-block t's scales and the next one's (t even), 4 rows each, as i16x8: Q2_K u8, Q3_K i8. */
@inline function lowScalePair(three: bool, w: usize, t: usize): v128 {
  return three ? v128.load8x8_s(w + Q3K_SCALES + (t << 2)) : v128.load8x8_u(w + Q2K_SCALES + (t << 2));
}

/** i32x4 of the scales of sub-block t (odd: the pair's second) from lowScalePair. */
@inline function lowScale(three: bool, sc: v128, odd: bool): v128 {
  if (three) return odd ? i32x4.extend_high_i16x8_s(sc) : i32x4.extend_low_i16x8_s(sc);
  return odd ? i32x4.extend_high_i16x8_u(sc) : i32x4.extend_low_i16x8_u(sc);
}

/** The superblock's float step: Q2_K as Q4_K's (scales, then mins), Q3_K as Q6_K's. */
@inline function lowAccumulate(three: bool, w: usize, tot: v128, mins: v128, dx: f32, acc: v128): v128 {
  const d = f32x4.splat(dx);
  if (three) return fmadd(f32x4.convert_i32x4_s(tot), f32x4.mul(v128.load(w + Q3K_D), d), acc);
  acc = fmadd(f32x4.convert_i32x4_s(tot), f32x4.mul(v128.load(w + Q2K_D), d), acc);
  return fmadd(f32x4.convert_i32x4_s(mins), f32x4.mul(v128.load(w + Q2K_DMIN), f32x4.neg(d)), acc);
}

/**
 * tot + sub-block sums for one token (codes x, code sums xs at sub-block t) weighted by sc; Q3_K's − 4·bsum included.
 * Relaxed pairs (x64 without AVX-VNNI): the int16 pair sums through one pmaddwd against sd, the
 * sub-block's scales doubled (scalesDoubled), as Q4_K's; Q3_K's −4·bsum and Q2_K's mins then
 * come once per superblock (lowSuperblock).
 */
@inline function lowAddSub(three: bool, pairs: bool, tot: v128, q0: v128, q1: v128, q2: v128, q3: v128, x: usize, xs: usize, sc: v128, sd: v128): v128 {
  if (RELAXED && pairs) return i32x4.add(tot, i32x4.dot_i16x8_s(lowPairs16(q0, q1, q2, q3, x), sd));
  let s = lowSum16(q0, q1, q2, q3, x);
  if (three) s = i32x4.sub(s, i32x4.splat(load<i32>(xs) << 2));
  return i32x4.add(tot, i32x4.mul(s, sc));
}

/** Relaxed pairs: a token's superblock float step after its sub-blocks, with Q3_K's −4·Σ sc·bsum or Q2_K's mins from its sums xs (bsumDot). */
@inline function lowSuperblock(three: bool, w: usize, tot: v128, xs: usize, dx: f32, acc: v128): v128 {
  if (three) return lowAccumulate(true, w, i32x4.sub(tot, i32x4.shl(bsumDot(true, w + Q3K_SCALES, xs), 2)), i32x4.splat(0), dx, acc);
  return lowAccumulate(false, w, tot, bsumDot(false, w + Q2K_MINS, xs), dx, acc);
}

/** Q2_K: mins + the sub-block pair (t, t + 1)'s mins mn (i16x8 from one load) · one token's code sums at xs (sub-block t). */
@inline function lowAddMins(mins: v128, mn: v128, xs: usize): v128 {
  mins = i32x4.add(mins, i32x4.mul(i32x4.extend_low_i16x8_u(mn), i32x4.splat(load<i32>(xs))));
  return i32x4.add(mins, i32x4.mul(i32x4.extend_high_i16x8_u(mn), i32x4.splat(load<i32>(xs, 4))));
}

/** One quad's superblocks · one token. */
@inline function gemvLowK(three: bool, pairs: bool, w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  const low2 = maskLow2(), bit2 = maskBit2(), low3 = maskLow3();
  let acc = f32x4.splat(0);
  const tile = <usize>(three ? TILE_Q3_K : TILE_Q2_K);
  for (let b = 0; b < nsb; b++, w += tile, xq += XBLOCK, xd += 4, xsum += 64) {
    let tot = i32x4.splat(0), mins = i32x4.splat(0);
    for (let t: usize = 0; t < 16; t += 2) {
      const scp = lowScalePair(three, w, t);
      if (three) {
        const A = v128.load(w + Q3K_CODES + t * 24), B = v128.load(w + Q3K_CODES + t * 24, 16), C = v128.load(w + Q3K_CODES + t * 24, 32);
        tot = lowAddSub(true, pairs, tot, q3kCode(A, B, C, 0, low2, bit2, low3), q3kCode(A, B, C, 1, low2, bit2, low3), q3kCode(A, B, C, 2, low2, bit2, low3),
          q3kCode(A, B, C, 3, low2, bit2, low3), xq + (t << (4 + XSHIFT)), xsum + (t << 2), lowScale(true, scp, false), scalesDoubled(scp, false));
        tot = lowAddSub(true, pairs, tot, q3kCode(A, B, C, 4, low2, bit2, low3), q3kCode(A, B, C, 5, low2, bit2, low3), q3kCode(A, B, C, 6, low2, bit2, low3),
          q3kCode(A, B, C, 7, low2, bit2, low3), xq + ((t + 1) << (4 + XSHIFT)), xsum + ((t + 1) << 2), lowScale(true, scp, true), scalesDoubled(scp, true));
        continue;
      }
      for (let u: usize = 0; u < 2; u++) {
        const v = v128.load(w + Q2K_CODES + ((t + u) << 4));
        tot = lowAddSub(false, pairs, tot, q2kCode(v, 0, low2), q2kCode(v, 1, low2), q2kCode(v, 2, low2), q2kCode(v, 3, low2),
          xq + ((t + u) << (4 + XSHIFT)), xsum + ((t + u) << 2), lowScale(false, scp, u == 1), scalesDoubled(scp, u == 1));
      }
      if (!three && !(RELAXED && pairs)) mins = lowAddMins(mins, v128.load8x8_u(w + Q2K_MINS + (t << 2)), xsum + (t << 2));
    }
    acc = RELAXED && pairs ? lowSuperblock(three, w, tot, xsum, load<f32>(xd), acc) : lowAccumulate(three, w, tot, mins, load<f32>(xd), acc);
  }
  return acc;
}

/**
 * One quad · 4 tokens (token k: xq + k·xStride, xd + k·dStride, xsum + k·sStride) → res [4 tokens][4 rows] f32.
 * Each sub-block's code vectors are decoded once for the 4 tokens; per token the
 * integer sums are exact and the float steps are gemvLowK's, so outputs do not
 * depend on the batch.
 */
@inline function gemmLowK(three: bool, pairs: bool, w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  const low2 = maskLow2(), bit2 = maskBit2(), low3 = maskLow3();
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  const tile = <usize>(three ? TILE_Q3_K : TILE_Q2_K);
  for (let b = 0; b < nsb; b++, w += tile, xq += XBLOCK, xd += 4, xsum += 64) {
    let t0 = i32x4.splat(0), t1 = i32x4.splat(0), t2 = i32x4.splat(0), t3 = i32x4.splat(0);
    let m0 = i32x4.splat(0), m1 = i32x4.splat(0), m2 = i32x4.splat(0), m3 = i32x4.splat(0);
    for (let t: usize = 0; t < 16; t += 2) {
      const scp = lowScalePair(three, w, t);
      if (three) {
        // The pair's 8 code vectors decoded once; each token adds sub-block t, then t + 1, as gemvLowK does.
        const A = v128.load(w + Q3K_CODES + t * 24), B = v128.load(w + Q3K_CODES + t * 24, 16), C = v128.load(w + Q3K_CODES + t * 24, 32);
        const c0 = q3kCode(A, B, C, 0, low2, bit2, low3), c1 = q3kCode(A, B, C, 1, low2, bit2, low3), c2 = q3kCode(A, B, C, 2, low2, bit2, low3), c3 = q3kCode(A, B, C, 3, low2, bit2, low3);
        const c4 = q3kCode(A, B, C, 4, low2, bit2, low3), c5 = q3kCode(A, B, C, 5, low2, bit2, low3), c6 = q3kCode(A, B, C, 6, low2, bit2, low3), c7 = q3kCode(A, B, C, 7, low2, bit2, low3);
        const s0 = lowScale(true, scp, false), s1 = lowScale(true, scp, true), d0 = scalesDoubled(scp, false), d1 = scalesDoubled(scp, true);
        const x = xq + (t << (4 + XSHIFT)), x1 = x + (16 << XSHIFT), xs = xsum + (t << 2);
        t0 = lowAddSub(true, pairs, lowAddSub(true, pairs, t0, c0, c1, c2, c3, x, xs, s0, d0), c4, c5, c6, c7, x1, xs + 4, s1, d1);
        t1 = lowAddSub(true, pairs, lowAddSub(true, pairs, t1, c0, c1, c2, c3, x + xStride, xs + sStride, s0, d0), c4, c5, c6, c7, x1 + xStride, xs + sStride + 4, s1, d1);
        t2 = lowAddSub(true, pairs, lowAddSub(true, pairs, t2, c0, c1, c2, c3, x + 2 * xStride, xs + 2 * sStride, s0, d0), c4, c5, c6, c7, x1 + 2 * xStride, xs + 2 * sStride + 4, s1, d1);
        t3 = lowAddSub(true, pairs, lowAddSub(true, pairs, t3, c0, c1, c2, c3, x + 3 * xStride, xs + 3 * sStride, s0, d0), c4, c5, c6, c7, x1 + 3 * xStride, xs + 3 * sStride + 4, s1, d1);
        continue;
      }
      for (let u: usize = 0; u < 2; u++) {
        const odd = u == 1;
        const v = v128.load(w + Q2K_CODES + ((t + u) << 4));
        const q0 = q2kCode(v, 0, low2), q1 = q2kCode(v, 1, low2), q2 = q2kCode(v, 2, low2), q3 = q2kCode(v, 3, low2);
        const sc = lowScale(false, scp, odd), sd = scalesDoubled(scp, odd);
        const x = xq + ((t + u) << (4 + XSHIFT)), xs = xsum + ((t + u) << 2);
        t0 = lowAddSub(three, pairs, t0, q0, q1, q2, q3, x, xs, sc, sd);
        t1 = lowAddSub(three, pairs, t1, q0, q1, q2, q3, x + xStride, xs + sStride, sc, sd);
        t2 = lowAddSub(three, pairs, t2, q0, q1, q2, q3, x + 2 * xStride, xs + 2 * sStride, sc, sd);
        t3 = lowAddSub(three, pairs, t3, q0, q1, q2, q3, x + 3 * xStride, xs + 3 * sStride, sc, sd);
      }
      if (!three && !(RELAXED && pairs)) {
        const mn = v128.load8x8_u(w + Q2K_MINS + (t << 2));
        const xs = xsum + (t << 2);
        m0 = lowAddMins(m0, mn, xs);
        m1 = lowAddMins(m1, mn, xs + sStride);
        m2 = lowAddMins(m2, mn, xs + 2 * sStride);
        m3 = lowAddMins(m3, mn, xs + 3 * sStride);
      }
    }
    if (RELAXED && pairs) {
      a0 = lowSuperblock(three, w, t0, xsum, load<f32>(xd), a0);
      a1 = lowSuperblock(three, w, t1, xsum + sStride, load<f32>(xd + dStride), a1);
      a2 = lowSuperblock(three, w, t2, xsum + 2 * sStride, load<f32>(xd + 2 * dStride), a2);
      a3 = lowSuperblock(three, w, t3, xsum + 3 * sStride, load<f32>(xd + 3 * dStride), a3);
      continue;
    }
    a0 = lowAccumulate(three, w, t0, m0, load<f32>(xd), a0);
    a1 = lowAccumulate(three, w, t1, m1, load<f32>(xd + dStride), a1);
    a2 = lowAccumulate(three, w, t2, m2, load<f32>(xd + 2 * dStride), a2);
    a3 = lowAccumulate(three, w, t3, m3, load<f32>(xd + 3 * dStride), a3);
  }
  v128.store(res, a0, 0);
  v128.store(res, a1, 16);
  v128.store(res, a2, 32);
  v128.store(res, a3, 48);
}

export function gemvQ2K(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  return gemvLowK(false, false, w, xq, xd, xsum, nsb);
}

/** gemvQ2K with int16 pair sums, as gemvQ4KPairs. */
export function gemvQ2KPairs(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  return gemvLowK(false, true, w, xq, xd, xsum, nsb);
}

export function gemvQ3K(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  return gemvLowK(true, false, w, xq, xd, xsum, nsb);
}

/** gemvQ3K with int16 pair sums, as gemvQ4KPairs. */
export function gemvQ3KPairs(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  return gemvLowK(true, true, w, xq, xd, xsum, nsb);
}

export function gemmQ2K(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  gemmLowK(false, false, w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
}

/** gemmQ2K with int16 pair sums, as gemvQ4KPairs. */
export function gemmQ2KPairs(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  gemmLowK(false, true, w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
}

export function gemmQ3K(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  gemmLowK(true, false, w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
}

/** gemmQ3K with int16 pair sums, as gemvQ4KPairs. */
export function gemmQ3KPairs(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  gemmLowK(true, true, w, xq, xStride, xd, dStride, xsum, sStride, nsb, res);
}

// ---- IQ4_XS --------------------------------------------------------------------
// Q4_K's code layout holding 4-bit indices into kvalues_iq4nl (signed, |v| ≤ 127),
// one i8 scale per sub-block of 32, no mins. Relaxed: the int8 dot wants one
// operand in [0, 127], so it takes the values' magnitudes (one swizzle) and
// the activation codes with the values' signs (a second swizzle gives the
// sign mask m; x ^ m − m negates where m = −1; |x| ≤ 127, so exact), as x86's
// maddubs kernels do. Baseline: the values (one swizzle) widened signed to
// int16 against the int16 codes. Integer sums are exact: |Σ| ≤ 8·32·(32·127·127) < 2^31.

/** Relaxed: acc + Σ kv[idx]·x per lane (idx: 16 nibble indices, xv: 4 int8 codes splat). */
@inline function iq4Dot(xv: v128, idx: v128, tab: v128, sgn: v128, acc: v128): v128 {
  const m = i8x16.swizzle(sgn, idx);
  return dotI8U7(i8x16.sub(v128.xor(xv, m), m), i8x16.swizzle(tab, idx), acc);
}

/** Baseline: acc pair sums (rows 0-1: a, rows 2-3: b) + kv[idx] widened · the 4 int16 codes xv. */
@inline function iq4PairDots(kv: v128, xv: v128, lo: bool, acc: v128): v128 {
  return i32x4.add(acc, i32x4.dot_i16x8_s(lo ? i16x8.extend_low_i8x16_s(kv) : i16x8.extend_high_i8x16_s(kv), xv));
}

/** Exact row sums Σ kv[q]·xq of sub-block c (4 rows × 32 indices, 64 bytes) · one token's 32 codes at x. kvt: values (baseline) or magnitudes (relaxed). */
@inline function iq4Sub(c: usize, x: usize, low4: v128, kvt: v128, sgn: v128): v128 {
  if (RELAXED) {
    let s0 = i32x4.splat(0), s1 = i32x4.splat(0);
    for (let j: usize = 0; j < 64; j += 16) {
      const v = v128.load(c + j);
      s0 = iq4Dot(xs4(x, j >> 1), lowNibbles(v, low4), kvt, sgn, s0);
      s1 = iq4Dot(xs4(x, (j >> 1) + 4), highNibbles(v, low4), kvt, sgn, s1);
    }
    return i32x4.add(s0, s1);
  }
  let a = i32x4.splat(0), b = i32x4.splat(0);
  for (let j: usize = 0; j < 64; j += 16) {
    const v = v128.load(c + j);
    const lo = i8x16.swizzle(kvt, lowNibbles(v, low4)), hi = i8x16.swizzle(kvt, highNibbles(v, low4));
    const xl = xs4w(x, j), xh = xs4w(x, j + 8);
    a = iq4PairDots(lo, xl, true, a);
    b = iq4PairDots(lo, xl, false, b);
    a = iq4PairDots(hi, xh, true, a);
    b = iq4PairDots(hi, xh, false, b);
  }
  return reducePairs(a, b);
}

/** iq4Sub for 4 tokens (x + t·xStride), each index vector looked up once; row sums to out[0..64) as [token][row]. */
@inline function iq4Sub4(c: usize, x: usize, xStride: usize, out: usize, low4: v128, kvt: v128, sgn: v128): void {
  const x1 = x + xStride, x2 = x1 + xStride, x3 = x2 + xStride;
  if (RELAXED) {
    let i0 = i32x4.splat(0), i1 = i32x4.splat(0), i2 = i32x4.splat(0), i3 = i32x4.splat(0);
    for (let j: usize = 0; j < 64; j += 16) {
      const v = v128.load(c + j);
      const o = j >> 1;
      for (let h: usize = 0; h < 2; h++) {
        const idx = h ? highNibbles(v, low4) : lowNibbles(v, low4);
        const m = i8x16.swizzle(sgn, idx), mag = i8x16.swizzle(kvt, idx);
        const oo = o + (h << 2);
        i0 = dotI8U7(i8x16.sub(v128.xor(xs4(x, oo), m), m), mag, i0);
        i1 = dotI8U7(i8x16.sub(v128.xor(xs4(x1, oo), m), m), mag, i1);
        i2 = dotI8U7(i8x16.sub(v128.xor(xs4(x2, oo), m), m), mag, i2);
        i3 = dotI8U7(i8x16.sub(v128.xor(xs4(x3, oo), m), m), mag, i3);
      }
    }
    v128.store(out, i0, 0);
    v128.store(out, i1, 16);
    v128.store(out, i2, 32);
    v128.store(out, i3, 48);
    return;
  }
  let a0 = i32x4.splat(0), b0 = i32x4.splat(0), a1 = i32x4.splat(0), b1 = i32x4.splat(0);
  let a2 = i32x4.splat(0), b2 = i32x4.splat(0), a3 = i32x4.splat(0), b3 = i32x4.splat(0);
  for (let j: usize = 0; j < 64; j += 16) {
    const v = v128.load(c + j);
    for (let h: usize = 0; h < 16; h += 8) {
      const kv = i8x16.swizzle(kvt, h ? highNibbles(v, low4) : lowNibbles(v, low4));
      const wl = i16x8.extend_low_i8x16_s(kv), wh = i16x8.extend_high_i8x16_s(kv);
      let xv = xs4w(x, j + h);
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(wl, xv));
      b0 = i32x4.add(b0, i32x4.dot_i16x8_s(wh, xv));
      xv = xs4w(x1, j + h);
      a1 = i32x4.add(a1, i32x4.dot_i16x8_s(wl, xv));
      b1 = i32x4.add(b1, i32x4.dot_i16x8_s(wh, xv));
      xv = xs4w(x2, j + h);
      a2 = i32x4.add(a2, i32x4.dot_i16x8_s(wl, xv));
      b2 = i32x4.add(b2, i32x4.dot_i16x8_s(wh, xv));
      xv = xs4w(x3, j + h);
      a3 = i32x4.add(a3, i32x4.dot_i16x8_s(wl, xv));
      b3 = i32x4.add(b3, i32x4.dot_i16x8_s(wh, xv));
    }
  }
  v128.store(out, reducePairs(a0, b0), 0);
  v128.store(out, reducePairs(a1, b1), 16);
  v128.store(out, reducePairs(a2, b2), 32);
  v128.store(out, reducePairs(a3, b3), 48);
}

/** Sub-block s's i8 scales (4 rows) as i32x4. */
@inline function iq4Scales(w: usize, s: usize): v128 {
  return i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v128.load32_zero(w + IQ4XS_SCALES + (s << 2))));
}

/** The IQ4_XS value table for this flavor: magnitudes (relaxed) or signed values (baseline). */
@inline function iq4Table(): v128 {
  return v128.load(MASKS, RELAXED ? 96 : 80);
}

@inline function iq4Signs(): v128 {
  return v128.load(MASKS, 112);
}

export function gemvIq4Xs(w: usize, xq: usize, xd: usize, nsb: i32): v128 {
  const low4 = maskLow4(), kvt = iq4Table(), sgn = iq4Signs();
  let acc = f32x4.splat(0);
  for (let b = 0; b < nsb; b++, w += TILE_IQ4_XS, xq += XBLOCK, xd += 4) {
    let tot = i32x4.splat(0);
    for (let s: usize = 0; s < 8; s++) tot = i32x4.add(tot, i32x4.mul(iq4Sub(w + IQ4XS_CODES + (s << 6), xq + (s << (5 + XSHIFT)), low4, kvt, sgn), iq4Scales(w, s)));
    acc = fmadd(f32x4.convert_i32x4_s(tot), f32x4.mul(v128.load(w + IQ4XS_D), f32x4.splat(load<f32>(xd))), acc);
  }
  return acc;
}

/** One quad · 4 tokens → res [4 tokens][4 rows] f32; res[64..128) is scratch. Same float steps per output as gemvIq4Xs. */
export function gemmIq4Xs(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, nsb: i32, res: usize): void {
  const low4 = maskLow4(), kvt = iq4Table(), sgn = iq4Signs();
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  const sums = res + 64;
  for (let b = 0; b < nsb; b++, w += TILE_IQ4_XS, xq += XBLOCK, xd += 4) {
    let t0 = i32x4.splat(0), t1 = i32x4.splat(0), t2 = i32x4.splat(0), t3 = i32x4.splat(0);
    for (let s: usize = 0; s < 8; s++) {
      iq4Sub4(w + IQ4XS_CODES + (s << 6), xq + (s << (5 + XSHIFT)), xStride, sums, low4, kvt, sgn);
      const sc = iq4Scales(w, s);
      t0 = i32x4.add(t0, i32x4.mul(v128.load(sums, 0), sc));
      t1 = i32x4.add(t1, i32x4.mul(v128.load(sums, 16), sc));
      t2 = i32x4.add(t2, i32x4.mul(v128.load(sums, 32), sc));
      t3 = i32x4.add(t3, i32x4.mul(v128.load(sums, 48), sc));
    }
    const d = v128.load(w + IQ4XS_D);
    a0 = fmadd(f32x4.convert_i32x4_s(t0), f32x4.mul(d, f32x4.splat(load<f32>(xd))), a0);
    a1 = fmadd(f32x4.convert_i32x4_s(t1), f32x4.mul(d, f32x4.splat(load<f32>(xd + dStride))), a1);
    a2 = fmadd(f32x4.convert_i32x4_s(t2), f32x4.mul(d, f32x4.splat(load<f32>(xd + 2 * dStride))), a2);
    a3 = fmadd(f32x4.convert_i32x4_s(t3), f32x4.mul(d, f32x4.splat(load<f32>(xd + 3 * dStride))), a3);
  }
  v128.store(res, a0, 0);
  v128.store(res, a1, 16);
  v128.store(res, a2, 32);
  v128.store(res, a3, 48);
}

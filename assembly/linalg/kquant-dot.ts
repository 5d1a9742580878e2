// Integer dot micro-kernels of the K-quant tiles (kquant-layout.ts) with
// Q8_K-style activations (kquant-activation.ts), after llama.cpp's
// ggml_vec_dot_q4_K_q8_K / ggml_vec_dot_q6_K_q8_K: per superblock, exact
// int32 sums of code products (flavor.ts dotI8U7: the K-quant codes are
// unsigned, ≤ 63, so they are the 7-bit operand as they are, on both
// flavors), weighted by the integer sub-block scales, then two (Q4_K) or one
// (Q6_K) f32 multiply-adds per superblock:
//
//   Q4_K: acc += f32(Σ_s sc_s·Σ q·xq) · (d·dx) + f32(Σ_s m_s·bsum_s) · (dmin·(−dx))
//   Q6_K: acc += f32(Σ_t sc_t·(Σ q·xq − 32·bsum_t)) · (d·dx)
//
// with dx the token's superblock scale and bsum the sums of its codes per 32
// (Q4_K sub-block) or 16 (Q6_K). All lanes = the quad's 4 rows.
//
//   gemv<F>(w, …):  one quad × one token → f32x4 (decode, leftover tokens)
//   gemm<F>(w, …):  one quad × 4 tokens → res[0..16) f32 as [token][row]
//
// Both do the same float steps per output in the same order, so a token's
// output does not depend on the batch it is in. Integer sums are exact: |Σ| ≤
// 8·63·(32·15·127) (Q4_K), 16·128·(16·63·127 + 32·16·127) (Q6_K), < 2^31.

import { dotI8U7, fmadd } from "../runtime/flavor";
import { Q4K_D, Q4K_DMIN, Q4K_SCALES, Q6K_D, Q6K_HIGH, Q6K_SCALES, QK_K, TILE_Q4_K, TILE_Q6_K } from "./kquant-layout";

@inline function lowNibbles(v: v128): v128 {
  return v128.and(v, i8x16.splat(15));
}

@inline function highNibbles(v: v128): v128 {
  return v128.and(i16x8.shr_u(v, 4), i8x16.splat(15));
}

/** Four token-activation codes (columns o..o + 3 at x) splat over the lanes. */
@inline function xs4(x: usize, o: usize): v128 {
  return v128.load32_splat(x + o);
}

/** Q4_K sub-block s's 6-bit scales and mins (4 rows each) as i16x8 [sc0..3, m0..3]. */
@inline function q4kScaleMins(w: usize, s: usize): v128 {
  return v128.load8x8_u(w + Q4K_SCALES + (s << 3));
}

/** Q6_K sub-block t's int8 scales (4 rows) as i32x4. */
@inline function q6kScales(w: usize, t: usize): v128 {
  return i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v128.load32_zero(w + Q6K_SCALES + (t << 2))));
}

/** Q6_K: the four 6-bit code vectors of 16 columns (code vectors v, u and their top bits H); q_k for k = 0..3. */
@inline function q6kCodes(v: v128, u: v128, H: v128, k: i32): v128 {
  const m4 = i8x16.splat(0x30);
  if (k == 0) return v128.or(lowNibbles(v), v128.and(i16x8.shl(H, 4), m4));
  if (k == 1) return v128.or(highNibbles(v), v128.and(i16x8.shl(H, 2), m4));
  if (k == 2) return v128.or(lowNibbles(u), v128.and(H, m4));
  return v128.or(highNibbles(u), v128.and(i16x8.shr_u(H, 2), m4));
}

/** The superblock's float step for Q4_K (shared by gemv and gemm). */
@inline function q4kAccumulate(w: usize, tot: v128, mins: v128, dx: f32, acc: v128): v128 {
  const d = f32x4.splat(dx);
  acc = fmadd(f32x4.convert_i32x4_s(tot), f32x4.mul(v128.load(w + Q4K_D), d), acc);
  return fmadd(f32x4.convert_i32x4_s(mins), f32x4.mul(v128.load(w + Q4K_DMIN), f32x4.neg(d)), acc);
}

@inline function bsum32(xsum: usize, s: usize): v128 {
  return i32x4.splat(load<i32>(xsum + (s << 3)) + load<i32>(xsum + (s << 3), 4));
}

// ---- Q4_K ----------------------------------------------------------------------

/** One quad's superblocks (stride TILE_Q4_K) · one token's codes xq, scales xd, sums xsum. */
export function gemvQ4K(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  let acc = f32x4.splat(0);
  for (let b = 0; b < nsb; b++, w += TILE_Q4_K, xq += QK_K, xd += 4, xsum += 64) {
    let tot = i32x4.splat(0), mins = i32x4.splat(0);
    for (let s: usize = 0; s < 8; s++) {
      const c = w + (s << 6), x = xq + (s << 5);
      let s0 = i32x4.splat(0), s1 = i32x4.splat(0);
      for (let j: usize = 0; j < 64; j += 16) {
        const v = v128.load(c + j);
        s0 = dotI8U7(xs4(x, j >> 1), lowNibbles(v), s0);
        s1 = dotI8U7(xs4(x, (j >> 1) + 4), highNibbles(v), s1);
      }
      const sm = q4kScaleMins(w, s);
      tot = i32x4.add(tot, i32x4.mul(i32x4.add(s0, s1), i32x4.extend_low_i16x8_u(sm)));
      mins = i32x4.add(mins, i32x4.mul(i32x4.extend_high_i16x8_u(sm), bsum32(xsum, s)));
    }
    acc = q4kAccumulate(w, tot, mins, load<f32>(xd), acc);
  }
  return acc;
}

/** One quad · 4 tokens (token t: xq + t·xStride, xd + t·dStride, xsum + t·sStride) → res [4 tokens][4 rows] f32. */
export function gemmQ4K(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  const x1 = xStride, x2 = xStride << 1, x3 = xStride * 3;
  for (let b = 0; b < nsb; b++, w += TILE_Q4_K, xq += QK_K, xd += 4, xsum += 64) {
    let t0 = i32x4.splat(0), t1 = i32x4.splat(0), t2 = i32x4.splat(0), t3 = i32x4.splat(0);
    let m0 = i32x4.splat(0), m1 = i32x4.splat(0), m2 = i32x4.splat(0), m3 = i32x4.splat(0);
    for (let s: usize = 0; s < 8; s++) {
      const c = w + (s << 6), x = xq + (s << 5);
      let i0 = i32x4.splat(0), i1 = i32x4.splat(0), i2 = i32x4.splat(0), i3 = i32x4.splat(0);
      for (let j: usize = 0; j < 64; j += 16) {
        const v = v128.load(c + j);
        const lo = lowNibbles(v), hi = highNibbles(v);
        const o = j >> 1;
        i0 = dotI8U7(xs4(x, o), lo, i0);
        i1 = dotI8U7(xs4(x + x1, o), lo, i1);
        i2 = dotI8U7(xs4(x + x2, o), lo, i2);
        i3 = dotI8U7(xs4(x + x3, o), lo, i3);
        i0 = dotI8U7(xs4(x, o + 4), hi, i0);
        i1 = dotI8U7(xs4(x + x1, o + 4), hi, i1);
        i2 = dotI8U7(xs4(x + x2, o + 4), hi, i2);
        i3 = dotI8U7(xs4(x + x3, o + 4), hi, i3);
      }
      const sm = q4kScaleMins(w, s);
      const sc = i32x4.extend_low_i16x8_u(sm), mn = i32x4.extend_high_i16x8_u(sm);
      t0 = i32x4.add(t0, i32x4.mul(i0, sc));
      t1 = i32x4.add(t1, i32x4.mul(i1, sc));
      t2 = i32x4.add(t2, i32x4.mul(i2, sc));
      t3 = i32x4.add(t3, i32x4.mul(i3, sc));
      m0 = i32x4.add(m0, i32x4.mul(mn, bsum32(xsum, s)));
      m1 = i32x4.add(m1, i32x4.mul(mn, bsum32(xsum + sStride, s)));
      m2 = i32x4.add(m2, i32x4.mul(mn, bsum32(xsum + 2 * sStride, s)));
      m3 = i32x4.add(m3, i32x4.mul(mn, bsum32(xsum + 3 * sStride, s)));
    }
    a0 = q4kAccumulate(w, t0, m0, load<f32>(xd), a0);
    a1 = q4kAccumulate(w, t1, m1, load<f32>(xd + dStride), a1);
    a2 = q4kAccumulate(w, t2, m2, load<f32>(xd + 2 * dStride), a2);
    a3 = q4kAccumulate(w, t3, m3, load<f32>(xd + 3 * dStride), a3);
  }
  v128.store(res, a0, 0);
  v128.store(res, a1, 16);
  v128.store(res, a2, 32);
  v128.store(res, a3, 48);
}

// ---- Q6_K ----------------------------------------------------------------------

/** Σ q·xq − 32·bsum over 16 columns (codes q0..q3 of q6kCodes) for the token codes at x (the 16 columns). */
@inline function q6kSum16(q0: v128, q1: v128, q2: v128, q3: v128, x: usize, bsum: i32): v128 {
  let s0 = dotI8U7(xs4(x, 0), q0, i32x4.splat(0));
  let s1 = dotI8U7(xs4(x, 4), q1, i32x4.splat(0));
  s0 = dotI8U7(xs4(x, 8), q2, s0);
  s1 = dotI8U7(xs4(x, 12), q3, s1);
  return i32x4.sub(i32x4.add(s0, s1), i32x4.splat(bsum << 5));
}

export function gemvQ6K(w: usize, xq: usize, xd: usize, xsum: usize, nsb: i32): v128 {
  let acc = f32x4.splat(0);
  for (let b = 0; b < nsb; b++, w += TILE_Q6_K, xq += QK_K, xd += 4, xsum += 64) {
    let tot = i32x4.splat(0);
    for (let t: usize = 0; t < 16; t++) {
      // Sub-block t = chunk t >> 1, half t & 1: code vectors at 64·chunk + 32·half, top bits at 32·chunk + 16·half.
      const c = w + ((t >> 1) << 6) + ((t & 1) << 5);
      const H = v128.load(w + Q6K_HIGH + ((t >> 1) << 5) + ((t & 1) << 4));
      const v = v128.load(c), u = v128.load(c, 16);
      const sum = q6kSum16(q6kCodes(v, u, H, 0), q6kCodes(v, u, H, 1), q6kCodes(v, u, H, 2), q6kCodes(v, u, H, 3), xq + (t << 4), load<i32>(xsum + (t << 2)));
      tot = i32x4.add(tot, i32x4.mul(sum, q6kScales(w, t)));
    }
    acc = fmadd(f32x4.convert_i32x4_s(tot), f32x4.mul(v128.load(w + Q6K_D), f32x4.splat(load<f32>(xd))), acc);
  }
  return acc;
}

export function gemmQ6K(w: usize, xq: usize, xStride: usize, xd: usize, dStride: usize, xsum: usize, sStride: usize, nsb: i32, res: usize): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  for (let b = 0; b < nsb; b++, w += TILE_Q6_K, xq += QK_K, xd += 4, xsum += 64) {
    let t0 = i32x4.splat(0), t1 = i32x4.splat(0), t2 = i32x4.splat(0), t3 = i32x4.splat(0);
    for (let t: usize = 0; t < 16; t++) {
      const c = w + ((t >> 1) << 6) + ((t & 1) << 5);
      const H = v128.load(w + Q6K_HIGH + ((t >> 1) << 5) + ((t & 1) << 4));
      const v = v128.load(c), u = v128.load(c, 16);
      const q0 = q6kCodes(v, u, H, 0), q1 = q6kCodes(v, u, H, 1), q2 = q6kCodes(v, u, H, 2), q3 = q6kCodes(v, u, H, 3);
      const sc = q6kScales(w, t);
      const x = xq + (t << 4), s = xsum + (t << 2);
      t0 = i32x4.add(t0, i32x4.mul(q6kSum16(q0, q1, q2, q3, x, load<i32>(s)), sc));
      t1 = i32x4.add(t1, i32x4.mul(q6kSum16(q0, q1, q2, q3, x + xStride, load<i32>(s + sStride)), sc));
      t2 = i32x4.add(t2, i32x4.mul(q6kSum16(q0, q1, q2, q3, x + 2 * xStride, load<i32>(s + 2 * sStride)), sc));
      t3 = i32x4.add(t3, i32x4.mul(q6kSum16(q0, q1, q2, q3, x + 3 * xStride, load<i32>(s + 3 * sStride)), sc));
    }
    const d = v128.load(w + Q6K_D);
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

// Register-blocked f32x4 microkernels of FlashAttention-2's two products on one
// (Q block × K/V tile): S = Q·Kᵀ and O += P·V. Rows of Q, O, S/P live in the
// thread's scratch; K/V rows are reached through row-address arrays (kv-tile.ts).
// D4 (the padded head dim) is a multiple of 4. Each step is flavor.ts fmadd: a
// mul and an add (SIMD128), one relaxed_madd (relaxed flavor). Accumulators stay in v128 locals: 8 per block, plus
// the operands, fits the 16 xmm registers V8 allocates on x64.

import { BC } from "./args";
import { F16_CONSTS, FP8_CONSTS, decodeF16x4With, e5m2AsF16x4, loadBf16x4, loadFp8E4M3x4With } from "../tensor/dtype";
import { fmadd } from "../runtime/flavor";

/**
 * 4 elements of a K/V row as f32x4, widened as loaded. The type parameter
 * names the stored format (folds at compile time): f32 = f32 rows (the cache
 * in place, or decoded tiles); u16 = bf16 (a shift); i16 = f16; u8 = fp8
 * e4m3; i8 = fp8 e5m2 (fp8 scales are applied outside: to q and to o).
 * `e` is the element index.
 */
@inline function load4<T>(row: usize, e: usize, f0: v128, f1: v128, f2: v128, f3: v128, f4: v128): v128 {
  if (sizeof<T>() == 4) return v128.load(row + (e << 2));
  if (sizeof<T>() == 2) return isSigned<T>() ? decodeF16x4With(v128.load16x4_s(row + (e << 1)), f0, f1, f2, f3) : loadBf16x4(row + (e << 1));
  return isSigned<T>() ? decodeF16x4With(e5m2AsF16x4(row + e), f0, f1, f2, f3) : loadFp8E4M3x4With(row + e, f0, f1, f2, f3, f4);
}

/**
 * Row `i` of the constants T's decoder takes (f0..f4 of load4), loaded once
 * per call: F16_CONSTS rows 0..3 for the f16 decoder (f16: i16, e5m2: i8),
 * FP8_CONSTS rows 0..4 for e4m3 (u8); zero (unused) otherwise.
 */
@inline function kvConst<T>(i: usize): v128 {
  if (isSigned<T>() && sizeof<T>() <= 2) return i < 4 ? v128.load(F16_CONSTS + (i << 4)) : i32x4.splat(0);
  if (sizeof<T>() == 1) return v128.load(FP8_CONSTS + (i << 4));
  return i32x4.splat(0);
}

/** [Σa, Σb, Σc, Σd]: the horizontal sums of four vectors in one vector. */
@inline function hsum4(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = f32x4.add(f32x4.shuffle(a, b, 0, 4, 1, 5), f32x4.shuffle(a, b, 2, 6, 3, 7));
  const cd = f32x4.add(f32x4.shuffle(c, d, 0, 4, 1, 5), f32x4.shuffle(c, d, 2, 6, 3, 7));
  return f32x4.add(f32x4.shuffle(ab, cd, 0, 1, 4, 5), f32x4.shuffle(ab, cd, 2, 3, 6, 7));
}

/**
 * S[r, j] = Q[r] · K[j] for r < R, j < n4 (a multiple of 4).
 *   qs    f32 [R, D4]   (the block's scaled query rows)
 *   kRows usize [n4]    K row addresses, each D4 f32
 *   s     f32 [R, BC]
 * Blocks of 2 query rows × 4 keys: 8 accumulators; per 4 dims 6 loads, 16 FLOP ops.
 */
export function qkTile(qs: usize, R: i32, D4: i32, kRows: usize, n4: i32, s: usize): void {
  const qStride = <usize>D4 << 2;
  const sStride = <usize>BC << 2;
  const dEnd = <usize>D4 << 2;
  let r = 0;
  for (; r + 2 <= R; r += 2) {
    const q0 = qs + <usize>r * qStride;
    const q1 = q0 + qStride;
    const s0 = s + <usize>r * sStride;
    for (let j = 0; j < n4; j += 4) {
      const kp = kRows + (<usize>j << 2);
      const k0 = load<usize>(kp), k1 = load<usize>(kp, 4), k2 = load<usize>(kp, 8), k3 = load<usize>(kp, 12);
      let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
      let b0 = f32x4.splat(0), b1 = f32x4.splat(0), b2 = f32x4.splat(0), b3 = f32x4.splat(0);
      for (let d: usize = 0; d < dEnd; d += 16) {
        const x0 = v128.load(k0 + d), x1 = v128.load(k1 + d), x2 = v128.load(k2 + d), x3 = v128.load(k3 + d);
        const y = v128.load(q0 + d);
        a0 = fmadd(y, x0, a0);
        a1 = fmadd(y, x1, a1);
        a2 = fmadd(y, x2, a2);
        a3 = fmadd(y, x3, a3);
        const z = v128.load(q1 + d);
        b0 = fmadd(z, x0, b0);
        b1 = fmadd(z, x1, b1);
        b2 = fmadd(z, x2, b2);
        b3 = fmadd(z, x3, b3);
      }
      v128.store(s0 + (<usize>j << 2), hsum4(a0, a1, a2, a3));
      v128.store(s0 + sStride + (<usize>j << 2), hsum4(b0, b1, b2, b3));
    }
  }
  if (r < R) {
    const q0 = qs + <usize>r * qStride;
    const s0 = s + <usize>r * sStride;
    for (let j = 0; j < n4; j += 4) {
      const kp = kRows + (<usize>j << 2);
      const k0 = load<usize>(kp), k1 = load<usize>(kp, 4), k2 = load<usize>(kp, 8), k3 = load<usize>(kp, 12);
      let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
      for (let d: usize = 0; d < dEnd; d += 16) {
        const y = v128.load(q0 + d);
        a0 = fmadd(y, v128.load(k0 + d), a0);
        a1 = fmadd(y, v128.load(k1 + d), a1);
        a2 = fmadd(y, v128.load(k2 + d), a2);
        a3 = fmadd(y, v128.load(k3 + d), a3);
      }
      v128.store(s0 + (<usize>j << 2), hsum4(a0, a1, a2, a3));
    }
  }
}

/**
 * O[r..r+NR−1] += Σ_{j<n} P[·, j] · V[j] for 2 ≤ NR ≤ 4 rows: blocks of NR rows ×
 * 8 dims (2·NR accumulators; per key 2 V loads, NR P splats, 2·NR fmadd),
 * then 4 dims if D4 % 8 ≠ 0. NR is a constant at every call. Each output
 * element adds its keys in order j = 0, 1, … whatever the blocking.
 */
@inline function pvRows<T>(NR: i32, p0: usize, vRows: usize, nEnd: usize, D4: i32, o0: usize, oStride: usize, f0: v128, f1: v128, f2: v128, f3: v128, f4: v128): void {
  let e: usize = 0;
  for (; e + 8 <= <usize>D4; e += 8) {
    const oa = o0 + (e << 2);
    let a0 = v128.load(oa), a1 = v128.load(oa, 16);
    let b0 = v128.load(oa + oStride), b1 = v128.load(oa + oStride, 16);
    let c0 = f32x4.splat(0), c1 = f32x4.splat(0), d0 = f32x4.splat(0), d1 = f32x4.splat(0);
    if (NR > 2) { c0 = v128.load(oa + 2 * oStride); c1 = v128.load(oa + 2 * oStride, 16); }
    if (NR > 3) { d0 = v128.load(oa + 3 * oStride); d1 = v128.load(oa + 3 * oStride, 16); }
    for (let jb: usize = 0; jb < nEnd; jb += 4) {
      const vp = load<usize>(vRows + jb);
      const x0 = load4<T>(vp, e, f0, f1, f2, f3, f4), x1 = load4<T>(vp, e + 4, f0, f1, f2, f3, f4);
      const pp = p0 + jb;
      const w0 = v128.load32_splat(pp);
      a0 = fmadd(w0, x0, a0);
      a1 = fmadd(w0, x1, a1);
      const w1 = v128.load32_splat(pp, BC * 4);
      b0 = fmadd(w1, x0, b0);
      b1 = fmadd(w1, x1, b1);
      if (NR > 2) {
        const w2 = v128.load32_splat(pp, BC * 8);
        c0 = fmadd(w2, x0, c0);
        c1 = fmadd(w2, x1, c1);
      }
      if (NR > 3) {
        const w3 = v128.load32_splat(pp, BC * 12);
        d0 = fmadd(w3, x0, d0);
        d1 = fmadd(w3, x1, d1);
      }
    }
    v128.store(oa, a0); v128.store(oa, a1, 16);
    v128.store(oa + oStride, b0); v128.store(oa + oStride, b1, 16);
    if (NR > 2) { v128.store(oa + 2 * oStride, c0); v128.store(oa + 2 * oStride, c1, 16); }
    if (NR > 3) { v128.store(oa + 3 * oStride, d0); v128.store(oa + 3 * oStride, d1, 16); }
  }
  if (e < <usize>D4) {
    const oa = o0 + (e << 2);
    let a0 = v128.load(oa), b0 = v128.load(oa + oStride);
    let c0 = f32x4.splat(0), d0 = f32x4.splat(0);
    if (NR > 2) c0 = v128.load(oa + 2 * oStride);
    if (NR > 3) d0 = v128.load(oa + 3 * oStride);
    for (let jb: usize = 0; jb < nEnd; jb += 4) {
      const x0 = load4<T>(load<usize>(vRows + jb), e, f0, f1, f2, f3, f4);
      const pp = p0 + jb;
      a0 = fmadd(v128.load32_splat(pp), x0, a0);
      b0 = fmadd(v128.load32_splat(pp, BC * 4), x0, b0);
      if (NR > 2) c0 = fmadd(v128.load32_splat(pp, BC * 8), x0, c0);
      if (NR > 3) d0 = fmadd(v128.load32_splat(pp, BC * 12), x0, d0);
    }
    v128.store(oa, a0);
    v128.store(oa + oStride, b0);
    if (NR > 2) v128.store(oa + 2 * oStride, c0);
    if (NR > 3) v128.store(oa + 3 * oStride, d0);
  }
}

/** O[r] += Σ_{j<n} P[r, j] · V[j] for one row: 16 dims at a time (4 accumulators), keys inner. */
@inline function pvRow<T>(p0: usize, vRows: usize, nEnd: usize, D4: i32, oa0: usize, f0: v128, f1: v128, f2: v128, f3: v128, f4: v128): void {
  let e: usize = 0;
  for (; e + 16 <= <usize>D4; e += 16) {
    const oa = oa0 + (e << 2);
    let a0 = v128.load(oa), a1 = v128.load(oa, 16), a2 = v128.load(oa, 32), a3 = v128.load(oa, 48);
    for (let jb: usize = 0; jb < nEnd; jb += 4) {
      const vp = load<usize>(vRows + jb);
      const w = v128.load32_splat(p0 + jb);
      a0 = fmadd(w, load4<T>(vp, e, f0, f1, f2, f3, f4), a0);
      a1 = fmadd(w, load4<T>(vp, e + 4, f0, f1, f2, f3, f4), a1);
      a2 = fmadd(w, load4<T>(vp, e + 8, f0, f1, f2, f3, f4), a2);
      a3 = fmadd(w, load4<T>(vp, e + 12, f0, f1, f2, f3, f4), a3);
    }
    v128.store(oa, a0); v128.store(oa, a1, 16); v128.store(oa, a2, 32); v128.store(oa, a3, 48);
  }
  for (; e < <usize>D4; e += 4) {
    const oa = oa0 + (e << 2);
    let a0 = v128.load(oa);
    for (let jb: usize = 0; jb < nEnd; jb += 4) {
      a0 = fmadd(v128.load32_splat(p0 + jb), load4<T>(load<usize>(vRows + jb), e, f0, f1, f2, f3, f4), a0);
    }
    v128.store(oa, a0);
  }
}

/**
 * O[r] += Σ_{j<n} P[r, j] · V[j] for r < R: blocks of 4 rows (pvRows), then
 * one block of the R % 4 rows left (G = 7: 4 + 3), so each V vector is loaded
 * and widened once per row block, not once per leftover row.
 *   p     f32 [R, BC]   probabilities of the tile
 *   vRows usize [n]     V row addresses, D4 elements of T each (see load4)
 *   os    f32 [R, D4]   accumulators
 */
export function pvTile<T>(p: usize, R: i32, vRows: usize, n: i32, D4: i32, os: usize): void {
  // The f16 / e5m2 / e4m3 decoder's constants, loaded once (see kvConst); other formats never read them.
  const f0 = kvConst<T>(0), f1 = kvConst<T>(1), f2 = kvConst<T>(2), f3 = kvConst<T>(3), f4 = kvConst<T>(4);
  const oStride = <usize>D4 << 2;
  const pStride = <usize>BC << 2;
  const nEnd = <usize>n << 2;
  let r = 0;
  for (; r + 4 <= R; r += 4) pvRows<T>(4, p + <usize>r * pStride, vRows, nEnd, D4, os + <usize>r * oStride, oStride, f0, f1, f2, f3, f4);
  const p0 = p + <usize>r * pStride, o0 = os + <usize>r * oStride;
  if (R - r == 3) pvRows<T>(3, p0, vRows, nEnd, D4, o0, oStride, f0, f1, f2, f3, f4);
  else if (R - r == 2) pvRows<T>(2, p0, vRows, nEnd, D4, o0, oStride, f0, f1, f2, f3, f4);
  else if (R - r == 1) pvRow<T>(p0, vRows, nEnd, D4, o0, f0, f1, f2, f3, f4);
}

/**
 * S[r..r+NR−1, j] and S[…, j+1] for one pair of keys: 2 ≤ NR ≤ 4 rows × 2 keys,
 * 2·NR accumulators (one per row and key, over all D4 dims), the pair's K
 * vectors loaded (and widened) once for the NR rows. NR is a constant at
 * every call (the unused accumulators fold away); a row's score does not
 * depend on NR or on which block it falls in.
 */
@inline function qkRowsPair<T>(NR: i32, q0: usize, qStride: usize, D4: i32, k0: usize, k1: usize, so: usize, sStride: usize, f0: v128, f1: v128, f2: v128, f3: v128, f4: v128): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  let b0 = f32x4.splat(0), b1 = f32x4.splat(0), b2 = f32x4.splat(0), b3 = f32x4.splat(0);
  for (let e: usize = 0; e < <usize>D4; e += 4) {
    const x = load4<T>(k0, e, f0, f1, f2, f3, f4), y = load4<T>(k1, e, f0, f1, f2, f3, f4);
    const qa = q0 + (e << 2);
    const u0 = v128.load(qa);
    a0 = fmadd(u0, x, a0);
    b0 = fmadd(u0, y, b0);
    if (NR > 1) {
      const u1 = v128.load(qa + qStride);
      a1 = fmadd(u1, x, a1);
      b1 = fmadd(u1, y, b1);
    }
    if (NR > 2) {
      const u2 = v128.load(qa + 2 * qStride);
      a2 = fmadd(u2, x, a2);
      b2 = fmadd(u2, y, b2);
    }
    if (NR > 3) {
      const u3 = v128.load(qa + 3 * qStride);
      a3 = fmadd(u3, x, a3);
      b3 = fmadd(u3, y, b3);
    }
  }
  const ca = hsum4(a0, a1, a2, a3); // S[r..r+3, j]
  const cb = hsum4(b0, b1, b2, b3); // S[r..r+3, j+1]
  store<f32>(so, f32x4.extract_lane(ca, 0));
  store<f32>(so, f32x4.extract_lane(cb, 0), 4);
  if (NR > 1) {
    store<f32>(so + sStride, f32x4.extract_lane(ca, 1));
    store<f32>(so + sStride, f32x4.extract_lane(cb, 1), 4);
  }
  if (NR > 2) {
    store<f32>(so + 2 * sStride, f32x4.extract_lane(ca, 2));
    store<f32>(so + 2 * sStride, f32x4.extract_lane(cb, 2), 4);
  }
  if (NR > 3) {
    store<f32>(so + 3 * sStride, f32x4.extract_lane(ca, 3));
    store<f32>(so + 3 * sStride, f32x4.extract_lane(cb, 3), 4);
  }
}

/** S[r, j] and S[r, j+1] for one row: two accumulators per key (even and odd 4-dim groups), for latency. */
@inline function qkRowPair<T>(q0: usize, D4: i32, k0: usize, k1: usize, so: usize, f0: v128, f1: v128, f2: v128, f3: v128, f4: v128): void {
  let a0 = f32x4.splat(0), b0 = f32x4.splat(0), a1 = f32x4.splat(0), b1 = f32x4.splat(0);
  let e: usize = 0;
  for (; e + 8 <= <usize>D4; e += 8) {
    const u0 = v128.load(q0 + (e << 2)), u1 = v128.load(q0 + (e << 2), 16);
    a0 = fmadd(u0, load4<T>(k0, e, f0, f1, f2, f3, f4), a0);
    b0 = fmadd(u0, load4<T>(k1, e, f0, f1, f2, f3, f4), b0);
    a1 = fmadd(u1, load4<T>(k0, e + 4, f0, f1, f2, f3, f4), a1);
    b1 = fmadd(u1, load4<T>(k1, e + 4, f0, f1, f2, f3, f4), b1);
  }
  if (e < <usize>D4) {
    const u0 = v128.load(q0 + (e << 2));
    a0 = fmadd(u0, load4<T>(k0, e, f0, f1, f2, f3, f4), a0);
    b0 = fmadd(u0, load4<T>(k1, e, f0, f1, f2, f3, f4), b0);
  }
  const c = hsum4(f32x4.add(a0, a1), f32x4.add(b0, b1), a0, a0);
  store<f32>(so, f32x4.extract_lane(c, 0));
  store<f32>(so, f32x4.extract_lane(c, 1), 4);
}

/**
 * S[r, j] = Q[r] · K[j] for few rows (R ≤ 8: decode, where the G heads of a
 * KV head are the rows), reading each K row once: keys outer in pairs, blocks
 * of 4 rows × 2 keys inner (qkRowsPair: 8 accumulators; per 4 dims 6 loads,
 * 8 fmadd), then one block of the R % 4 rows left (G = 7: 4 + 3; one row:
 * qkRowPair), so every K vector is loaded and widened at most twice; other
 * row blocks reread the pair from L1. K rows may be the cache in place (T: see load4).
 *   qs f32 [R, D4]; kRows [roundUp2(n)] rows of T; s f32 [R, BC] (lanes [n, roundUp2(n)) are padding)
 */
export function qkStream<T>(qs: usize, R: i32, D4: i32, kRows: usize, n: i32, s: usize): void {
  // The f16 / e5m2 / e4m3 decoder's constants, loaded once (see kvConst); other formats never read them.
  const f0 = kvConst<T>(0), f1 = kvConst<T>(1), f2 = kvConst<T>(2), f3 = kvConst<T>(3), f4 = kvConst<T>(4);
  const qStride = <usize>D4 << 2;
  const sStride = <usize>BC << 2;
  for (let j = 0; j < n; j += 2) {
    const k0 = load<usize>(kRows + (<usize>j << 2));
    const k1 = load<usize>(kRows + (<usize>j << 2), 4);
    const sc = s + (<usize>j << 2);
    let r = 0;
    for (; r + 4 <= R; r += 4) qkRowsPair<T>(4, qs + <usize>r * qStride, qStride, D4, k0, k1, sc + <usize>r * sStride, sStride, f0, f1, f2, f3, f4);
    const q0 = qs + <usize>r * qStride, so = sc + <usize>r * sStride;
    if (R - r == 3) qkRowsPair<T>(3, q0, qStride, D4, k0, k1, so, sStride, f0, f1, f2, f3, f4);
    else if (R - r == 2) qkRowsPair<T>(2, q0, qStride, D4, k0, k1, so, sStride, f0, f1, f2, f3, f4);
    else if (R - r == 1) qkRowPair<T>(q0, D4, k0, k1, so, f0, f1, f2, f3, f4);
  }
}

// The integer path for int8 K/V: the IFA design's "AntiQuant" (seed 001).
// Rather than dequantizing K and V, the small operand of each product is
// expanded into int8 rows and multiplied with the int8 cache by integer dot
// products; scales and offsets apply once per result, not per element:
//
//   s_j = Σ_d q_d·(k_jd + off_d)·sc_d  = Σ_d q'_d·k_jd + Σ_d q'_d·off_d,  q' = q·sc   (per-channel)
//   s_j = ks_j · Σ_d q_d·k_jd                                                   (per-token)
//   o_d = sc_d·(Σ_j p_j·v_jd + off_d·Σ_j p_j)                                   (per-channel)
//   o_d = Σ_j (p_j·vs_j)·v_jd                                                    (per-token)
//
// A row x (a query row q', or one tile's probabilities p') is expanded MSD
// style: with u = x·127/max|x| ∈ [−127, 127], A1 = round(u), A2 =
// round(254·(u − A1)), A3 = round(254·(254·(u − A1) − A2)), so that
// x ≈ (max|x| / 127)·(A1 + A2/254 + A3/254²). msdIterNum = 2 rows is the
// high-performance mode (x to 1/32258 of its max), 3 rows high-precision
// (≈ f32's own rounding). wasm's integer dot product is i32x4.dot_i16x8_s
// (i16 × i16 → i32), so the rows travel packed: hi = 254·A1 + A2 (= round(254·u),
// |hi| ≤ 32258) in one i16 lane, A3 in a second i16 row; the int8 cache is
// sign-extended to i16 as it loads (v128.load8x8_s). Σ hi·k is then exactly
// 254·Σ A1·k + Σ A2·k, with no overflow: |hi·k| ≤ 32258·128 and at most 256
// (Q·Kᵀ, over D) or 64 (P·V, over a tile) terms, < 2^31.
//
// Layouts (thread scratch, args.ts): q16 i16 [2][RMAX, D] (hi rows, then lo
// rows), qInfo f32 [2][RMAX] (hi unit, offset term), p16 i16 [2][RMAX, BC],
// pInfo f32 [2][RMAX] (hi unit, Σ p), s f32 [R, BC]. D % 8 == 0.

import { BC, RMAX } from "./args";

/** 127 · 254: |hi| ≤ QMAX. */
const QMAX: f32 = 32258;
/** Weight of one A(n+1) unit in A(n) units. */
const RES: f32 = 254;
const INV_RES: f32 = 1.0 / 254;

@inline function hmaxAbs(src: usize, len: i32): f32 {
  let mx = f32x4.splat(0);
  for (let e = 0; e < len; e += 4) mx = f32x4.max(mx, f32x4.abs(v128.load(src + (<usize>e << 2))));
  mx = f32x4.max(mx, f32x4.shuffle(mx, mx, 2, 3, 0, 1));
  mx = f32x4.max(mx, f32x4.shuffle(mx, mx, 1, 0, 3, 2));
  return f32x4.extract_lane(mx, 0);
}

/** Stores the 4 i32 lanes of v, narrowed to i16, at p (8 bytes). */
@inline function store4xI16(p: usize, v: v128): void {
  v128.store64_lane(p, i16x8.narrow_i32x4_s(v, v), 0);
}

/**
 * Expands `len` (a multiple of 4) f32 values at src into hi codes (i16 [len])
 * and, when lo ≠ 0, lo codes (i16 [len]); returns the value of one hi unit,
 * max|x| / QMAX (0 for an all-zero row, whose codes are 0).
 */
export function quantizeRow(src: usize, len: i32, hi: usize, lo: usize): f32 {
  const amax = hmaxAbs(src, len);
  if (!(amax > 0)) {
    memory.fill(hi, 0, <usize>len << 1);
    if (lo != 0) memory.fill(lo, 0, <usize>len << 1);
    return 0;
  }
  const inv = f32x4.splat(QMAX / amax);
  const res = f32x4.splat(RES);
  for (let e = 0; e < len; e += 4) {
    const t = f32x4.mul(v128.load(src + (<usize>e << 2)), inv);
    const h = f32x4.nearest(t);
    store4xI16(hi + (<usize>e << 1), i32x4.trunc_sat_f32x4_s(h));
    if (lo != 0) store4xI16(lo + (<usize>e << 1), i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(f32x4.sub(t, h), res))));
  }
  return amax / QMAX;
}

/**
 * The tile's probabilities as codes: per row r < R, p'_j = p[r, j] · tokSc[j]
 * (per-token V; tokSc = 0: p' = p) for j < n4, expanded into p16 hi (and lo)
 * rows; pInfo[r] = the hi unit, pInfo[RMAX + r] = Σ_j p[r, j] (for V offsets).
 * Pad lanes hold p = 0 and get code 0.
 */
export function quantizeProbs(s: usize, R: i32, n4: i32, tokSc: usize, p16: usize, lo: bool, pInfo: usize): void {
  const sStride = <usize>BC << 2;
  const pStride = <usize>BC << 1;
  const loBase = p16 + <usize>RMAX * pStride;
  for (let r = 0; r < R; r++) {
    const row = s + <usize>r * sStride;
    let sum = f32x4.splat(0);
    for (let j = 0; j < n4; j += 4) {
      const p = row + (<usize>j << 2);
      const x = v128.load(p);
      sum = f32x4.add(sum, x);
      if (tokSc != 0) v128.store(p, f32x4.mul(x, v128.load(tokSc + (<usize>j << 2))));
    }
    sum = f32x4.add(sum, f32x4.shuffle(sum, sum, 2, 3, 0, 1));
    sum = f32x4.add(sum, f32x4.shuffle(sum, sum, 1, 0, 3, 2));
    store<f32>(pInfo + ((<usize>RMAX + <usize>r) << 2), f32x4.extract_lane(sum, 0));
    const unit = quantizeRow(row, n4, p16 + <usize>r * pStride, lo ? loBase + <usize>r * pStride : 0);
    store<f32>(pInfo + (<usize>r << 2), unit);
  }
}

/** [Σa, Σb, Σc, Σd] of four i32x4. */
@inline function hsum4i(a: v128, b: v128, c: v128, d: v128): v128 {
  const ab = i32x4.add(v128.shuffle<i32>(a, b, 0, 4, 1, 5), v128.shuffle<i32>(a, b, 2, 6, 3, 7));
  const cd = i32x4.add(v128.shuffle<i32>(c, d, 0, 4, 1, 5), v128.shuffle<i32>(c, d, 2, 6, 3, 7));
  return i32x4.add(v128.shuffle<i32>(ab, cd, 0, 1, 4, 5), v128.shuffle<i32>(ab, cd, 2, 3, 6, 7));
}

@inline function dotAcc(acc: v128, a: v128, b: v128): v128 {
  return i32x4.add(acc, i32x4.dot_i16x8_s(a, b));
}

/** Writes 4 scores (rows r..r+3 of key column `col`) from integer sums `v`, scaled: v·unit (+ off) (· ks). */
@inline function storeScores4(col: usize, sStride: usize, v: v128, unit: v128, off: v128, ks: f32): void {
  let f = f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(v), unit), off);
  f = f32x4.mul(f, f32x4.splat(ks));
  store<f32>(col, f32x4.extract_lane(f, 0));
  store<f32>(col + sStride, f32x4.extract_lane(f, 1));
  store<f32>(col + 2 * sStride, f32x4.extract_lane(f, 2));
  store<f32>(col + 3 * sStride, f32x4.extract_lane(f, 3));
}

/**
 * S[r, j] = (unit_r · Σ_d q[r, d]·k[j, d] + off_r) · ks_j for r < R and j in
 * key pairs below roundUp2(n), with the query rows as hi codes only (2 int8
 * rows: high-performance). K rows are int8 in place (kRows: addresses).
 *   q16 i16 [R, D] (row stride D4 i16); qInfo f32 [2][RMAX]; kSc f32 [BC] or 0
 * Blocks of 4 rows × 2 keys: 8 i32x4 accumulators; per 8 dims 2 K loads
 * (load8x8_s), 4 Q loads, 8 dots, 8 adds.
 */
export function qkInt2(q16: usize, R: i32, D: i32, D4: i32, kRows: usize, n: i32, qInfo: usize, kSc: usize, s: usize): void {
  const qStride = <usize>D4 << 1;
  const sStride = <usize>BC << 2;
  const dEnd = <usize>D;
  for (let j = 0; j < n; j += 2) {
    const k0 = load<usize>(kRows + (<usize>j << 2));
    const k1 = load<usize>(kRows + (<usize>j << 2), 4);
    const ks0: f32 = kSc != 0 ? load<f32>(kSc + (<usize>j << 2)) : 1;
    const ks1: f32 = kSc != 0 ? load<f32>(kSc + (<usize>j << 2), 4) : 1;
    const sc = s + (<usize>j << 2);
    let r = 0;
    for (; r + 4 <= R; r += 4) {
      const q0 = q16 + <usize>r * qStride;
      let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
      let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0);
      for (let e: usize = 0; e < dEnd; e += 8) {
        const x = v128.load8x8_s(k0 + e), y = v128.load8x8_s(k1 + e);
        const qa = q0 + (e << 1);
        const u0 = v128.load(qa);
        a0 = dotAcc(a0, u0, x);
        b0 = dotAcc(b0, u0, y);
        const u1 = v128.load(qa + qStride);
        a1 = dotAcc(a1, u1, x);
        b1 = dotAcc(b1, u1, y);
        const u2 = v128.load(qa + 2 * qStride);
        a2 = dotAcc(a2, u2, x);
        b2 = dotAcc(b2, u2, y);
        const u3 = v128.load(qa + 3 * qStride);
        a3 = dotAcc(a3, u3, x);
        b3 = dotAcc(b3, u3, y);
      }
      const unit = v128.load(qInfo + (<usize>r << 2));
      const off = v128.load(qInfo + ((<usize>RMAX + <usize>r) << 2));
      const so = sc + <usize>r * sStride;
      storeScores4(so, sStride, hsum4i(a0, a1, a2, a3), unit, off, ks0);
      storeScores4(so + 4, sStride, hsum4i(b0, b1, b2, b3), unit, off, ks1);
    }
    for (; r < R; r++) {
      const q0 = q16 + <usize>r * qStride;
      let a0 = i32x4.splat(0), b0 = i32x4.splat(0), a1 = i32x4.splat(0), b1 = i32x4.splat(0);
      let e: usize = 0;
      for (; e + 16 <= dEnd; e += 16) {
        const u0 = v128.load(q0 + (e << 1)), u1 = v128.load(q0 + (e << 1), 16);
        a0 = dotAcc(a0, u0, v128.load8x8_s(k0 + e));
        b0 = dotAcc(b0, u0, v128.load8x8_s(k1 + e));
        a1 = dotAcc(a1, u1, v128.load8x8_s(k0 + e, 8));
        b1 = dotAcc(b1, u1, v128.load8x8_s(k1 + e, 8));
      }
      if (e < dEnd) {
        const u0 = v128.load(q0 + (e << 1));
        a0 = dotAcc(a0, u0, v128.load8x8_s(k0 + e));
        b0 = dotAcc(b0, u0, v128.load8x8_s(k1 + e));
      }
      const c = hsum4i(i32x4.add(a0, a1), i32x4.add(b0, b1), a0, a0);
      const unit = load<f32>(qInfo + (<usize>r << 2));
      const off = load<f32>(qInfo + ((<usize>RMAX + <usize>r) << 2));
      const so = sc + <usize>r * sStride;
      store<f32>(so, (<f32>i32x4.extract_lane(c, 0) * unit + off) * ks0);
      store<f32>(so, (<f32>i32x4.extract_lane(c, 1) * unit + off) * ks1, 4);
    }
  }
}

/**
 * qkInt2 with the query rows as hi and lo codes (3 int8 rows: high-precision):
 * S[r, j] = (unit_r · (Σ hi·k + Σ lo·k / 254) + off_r) · ks_j.
 * Blocks of 2 rows × 2 keys × (hi, lo): 8 accumulators.
 */
export function qkInt3(q16: usize, R: i32, D: i32, D4: i32, kRows: usize, n: i32, qInfo: usize, kSc: usize, s: usize): void {
  const qStride = <usize>D4 << 1;
  const loOff = <usize>RMAX * qStride;
  const sStride = <usize>BC << 2;
  const dEnd = <usize>D;
  for (let j = 0; j < n; j += 2) {
    const k0 = load<usize>(kRows + (<usize>j << 2));
    const k1 = load<usize>(kRows + (<usize>j << 2), 4);
    const ks0: f32 = kSc != 0 ? load<f32>(kSc + (<usize>j << 2)) : 1;
    const ks1: f32 = kSc != 0 ? load<f32>(kSc + (<usize>j << 2), 4) : 1;
    const sc = s + (<usize>j << 2);
    for (let r = 0; r < R; r += 2) {
      const two = r + 1 < R;
      const q0 = q16 + <usize>r * qStride;
      const q1 = two ? q0 + qStride : q0;
      let a0 = i32x4.splat(0), a1 = i32x4.splat(0), b0 = i32x4.splat(0), b1 = i32x4.splat(0);
      let c0 = i32x4.splat(0), c1 = i32x4.splat(0), d0 = i32x4.splat(0), d1 = i32x4.splat(0);
      for (let e: usize = 0; e < dEnd; e += 8) {
        const x = v128.load8x8_s(k0 + e), y = v128.load8x8_s(k1 + e);
        const h0 = v128.load(q0 + (e << 1)), l0 = v128.load(q0 + loOff + (e << 1));
        a0 = dotAcc(a0, h0, x);
        b0 = dotAcc(b0, h0, y);
        c0 = dotAcc(c0, l0, x);
        d0 = dotAcc(d0, l0, y);
        const h1 = v128.load(q1 + (e << 1)), l1 = v128.load(q1 + loOff + (e << 1));
        a1 = dotAcc(a1, h1, x);
        b1 = dotAcc(b1, h1, y);
        c1 = dotAcc(c1, l1, x);
        d1 = dotAcc(d1, l1, y);
      }
      // lanes: (row r, key j), (row r, key j+1), (row r+1, key j), (row r+1, key j+1)
      const hi = f32x4.convert_i32x4_s(hsum4i(a0, b0, a1, b1));
      const lo = f32x4.convert_i32x4_s(hsum4i(c0, d0, c1, d1));
      const v = f32x4.add(hi, f32x4.mul(lo, f32x4.splat(INV_RES)));
      const so = sc + <usize>r * sStride;
      const unit0 = load<f32>(qInfo + (<usize>r << 2));
      const off0 = load<f32>(qInfo + ((<usize>RMAX + <usize>r) << 2));
      store<f32>(so, (f32x4.extract_lane(v, 0) * unit0 + off0) * ks0);
      store<f32>(so, (f32x4.extract_lane(v, 1) * unit0 + off0) * ks1, 4);
      if (two) {
        const unit1 = load<f32>(qInfo + (<usize>(r + 1) << 2));
        const off1 = load<f32>(qInfo + ((<usize>RMAX + <usize>(r + 1)) << 2));
        store<f32>(so + sStride, (f32x4.extract_lane(v, 2) * unit1 + off1) * ks0);
        store<f32>(so + sStride, (f32x4.extract_lane(v, 3) * unit1 + off1) * ks1, 4);
      }
    }
  }
}

/** 8 int8 of V rows j and j+1 at byte e, interleaved (v_j[e], v_j+1[e], …) and sign-extended: dims e..e+3 and e+4..e+7 as i16 pairs. */
@inline function vPairLo(v0: v128, v1: v128): v128 {
  return i16x8.extend_low_i8x16_s(i8x16.shuffle(v0, v1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23));
}
@inline function vPairHi(v0: v128, v1: v128): v128 {
  return i16x8.extend_high_i8x16_s(i8x16.shuffle(v0, v1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23));
}

/** os[e..e+3] += (acc·unit (+ off·psum)) (· sc) for one row: the per-channel factors at chScale/chOffset (0: none). */
@inline function addOut(o: usize, acc: v128, unit: v128, e: usize, chScale: usize, chOffset: usize, psum: v128): void {
  let f = f32x4.mul(acc, unit);
  if (chScale != 0) f = f32x4.mul(f32x4.add(f, f32x4.mul(v128.load(chOffset + (e << 2)), psum)), v128.load(chScale + (e << 2)));
  v128.store(o + (e << 2), f32x4.add(v128.load(o + (e << 2)), f));
}

/** Row r's dims [e, e + 8) from the integer sums x0 (dims e..e+3) and x1 (e+4..e+7). */
@inline function finishRow(o: usize, x0: v128, x1: v128, pInfo: usize, r: i32, e: usize, chScale: usize, chOffset: usize): void {
  const unit = v128.load32_splat(pInfo + (<usize>r << 2));
  const psum = v128.load32_splat(pInfo + ((<usize>RMAX + <usize>r) << 2));
  addOut(o, f32x4.convert_i32x4_s(x0), unit, e, chScale, chOffset, psum);
  addOut(o, f32x4.convert_i32x4_s(x1), unit, e + 4, chScale, chOffset, psum);
}

/**
 * O[r, d] += unit_r · Σ_j p16[r, j]·v[j, d] for r < R, d < D, over key pairs
 * below roundUp2(n) (hi codes only: high-performance). Per-channel V
 * (chScale ≠ 0): O[r, d] += sc_d · (unit_r·Σ_j p·v + off_d · Σ_j p[r, j]).
 * V rows are int8 in place; two keys' rows are interleaved so each i16 lane
 * pair (v_jd, v_j+1,d) meets the pair (p_j, p_j+1).
 *   p16 i16 [R, BC]; pInfo f32 [2][RMAX]; os f32 [R, D4]
 * Blocks of 4 rows × 8 dims: 8 accumulators; per key pair 2 V loads, 1
 * shuffle, 2 extends, 4 P splats, 8 dots, 8 adds.
 */
export function pvInt2(p16: usize, R: i32, vRows: usize, n: i32, D: i32, D4: i32, pInfo: usize, chScale: usize, chOffset: usize, os: usize): void {
  const oStride = <usize>D4 << 2;
  const pStride = <usize>BC << 1;
  const nEnd = <usize>((n + 1) & ~1) << 2; // key pairs, in bytes of vRows
  let r = 0;
  for (; r + 4 <= R; r += 4) {
    const o0 = os + <usize>r * oStride;
    const p0 = p16 + <usize>r * pStride;
    for (let e: usize = 0; e < <usize>D; e += 8) {
      let a0 = i32x4.splat(0), a1 = i32x4.splat(0), b0 = i32x4.splat(0), b1 = i32x4.splat(0);
      let c0 = i32x4.splat(0), c1 = i32x4.splat(0), d0 = i32x4.splat(0), d1 = i32x4.splat(0);
      for (let jb: usize = 0; jb < nEnd; jb += 8) {
        const v0 = v128.load64_zero(load<usize>(vRows + jb) + e);
        const v1 = v128.load64_zero(load<usize>(vRows + jb, 4) + e);
        const lo = vPairLo(v0, v1), hi = vPairHi(v0, v1);
        const pp = p0 + (jb >> 1); // i16 pair (j, j+1) of row r
        const w0 = v128.load32_splat(pp);
        a0 = dotAcc(a0, lo, w0);
        a1 = dotAcc(a1, hi, w0);
        const w1 = v128.load32_splat(pp, BC * 2);
        b0 = dotAcc(b0, lo, w1);
        b1 = dotAcc(b1, hi, w1);
        const w2 = v128.load32_splat(pp, BC * 4);
        c0 = dotAcc(c0, lo, w2);
        c1 = dotAcc(c1, hi, w2);
        const w3 = v128.load32_splat(pp, BC * 6);
        d0 = dotAcc(d0, lo, w3);
        d1 = dotAcc(d1, hi, w3);
      }
      finishRow(o0, a0, a1, pInfo, r, e, chScale, chOffset);
      finishRow(o0 + oStride, b0, b1, pInfo, r + 1, e, chScale, chOffset);
      finishRow(o0 + 2 * oStride, c0, c1, pInfo, r + 2, e, chScale, chOffset);
      finishRow(o0 + 3 * oStride, d0, d1, pInfo, r + 3, e, chScale, chOffset);
    }
  }
  for (; r < R; r++) {
    const o = os + <usize>r * oStride;
    const p0 = p16 + <usize>r * pStride;
    for (let e: usize = 0; e < <usize>D; e += 8) {
      let a0 = i32x4.splat(0), a1 = i32x4.splat(0);
      for (let jb: usize = 0; jb < nEnd; jb += 8) {
        const v0 = v128.load64_zero(load<usize>(vRows + jb) + e);
        const v1 = v128.load64_zero(load<usize>(vRows + jb, 4) + e);
        const w = v128.load32_splat(p0 + (jb >> 1));
        a0 = dotAcc(a0, vPairLo(v0, v1), w);
        a1 = dotAcc(a1, vPairHi(v0, v1), w);
      }
      finishRow(o, a0, a1, pInfo, r, e, chScale, chOffset);
    }
  }
}

/**
 * pvInt2 with hi and lo probability codes (3 int8 rows: high-precision):
 * Σ_j p·v = unit · (Σ hi·v + Σ lo·v / 254). Blocks of 2 rows × 8 dims × (hi, lo).
 */
export function pvInt3(p16: usize, R: i32, vRows: usize, n: i32, D: i32, D4: i32, pInfo: usize, chScale: usize, chOffset: usize, os: usize): void {
  const oStride = <usize>D4 << 2;
  const pStride = <usize>BC << 1;
  const loOff = <usize>RMAX * pStride;
  const nEnd = <usize>((n + 1) & ~1) << 2;
  const invRes = f32x4.splat(INV_RES);
  for (let r = 0; r < R; r += 2) {
    const two = r + 1 < R;
    const p0 = p16 + <usize>r * pStride;
    const p1 = two ? p0 + pStride : p0;
    for (let e: usize = 0; e < <usize>D; e += 8) {
      let a0 = i32x4.splat(0), a1 = i32x4.splat(0), b0 = i32x4.splat(0), b1 = i32x4.splat(0);
      let c0 = i32x4.splat(0), c1 = i32x4.splat(0), d0 = i32x4.splat(0), d1 = i32x4.splat(0);
      for (let jb: usize = 0; jb < nEnd; jb += 8) {
        const v0 = v128.load64_zero(load<usize>(vRows + jb) + e);
        const v1 = v128.load64_zero(load<usize>(vRows + jb, 4) + e);
        const lo = vPairLo(v0, v1), hi = vPairHi(v0, v1);
        const h0 = v128.load32_splat(p0 + (jb >> 1)), l0 = v128.load32_splat(p0 + loOff + (jb >> 1));
        a0 = dotAcc(a0, lo, h0);
        a1 = dotAcc(a1, hi, h0);
        c0 = dotAcc(c0, lo, l0);
        c1 = dotAcc(c1, hi, l0);
        const h1 = v128.load32_splat(p1 + (jb >> 1)), l1 = v128.load32_splat(p1 + loOff + (jb >> 1));
        b0 = dotAcc(b0, lo, h1);
        b1 = dotAcc(b1, hi, h1);
        d0 = dotAcc(d0, lo, l1);
        d1 = dotAcc(d1, hi, l1);
      }
      const u0 = v128.load32_splat(pInfo + (<usize>r << 2));
      const s0 = v128.load32_splat(pInfo + ((<usize>RMAX + <usize>r) << 2));
      const o0 = os + <usize>r * oStride;
      addOut(o0, f32x4.add(f32x4.convert_i32x4_s(a0), f32x4.mul(f32x4.convert_i32x4_s(c0), invRes)), u0, e, chScale, chOffset, s0);
      addOut(o0, f32x4.add(f32x4.convert_i32x4_s(a1), f32x4.mul(f32x4.convert_i32x4_s(c1), invRes)), u0, e + 4, chScale, chOffset, s0);
      if (two) {
        const u1 = v128.load32_splat(pInfo + (<usize>(r + 1) << 2));
        const s1 = v128.load32_splat(pInfo + ((<usize>RMAX + <usize>(r + 1)) << 2));
        const o1 = o0 + oStride;
        addOut(o1, f32x4.add(f32x4.convert_i32x4_s(b0), f32x4.mul(f32x4.convert_i32x4_s(d0), invRes)), u1, e, chScale, chOffset, s1);
        addOut(o1, f32x4.add(f32x4.convert_i32x4_s(b1), f32x4.mul(f32x4.convert_i32x4_s(d1), invRes)), u1, e + 4, chScale, chOffset, s1);
      }
    }
  }
}

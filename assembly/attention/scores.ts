// What happens to a tile of raw scores before P·V (../shared/ARCHITECTURE.md,
// "Attention semantics"), in order: softcap, additive bias, ALiBi, then the
// exclusions (mask, causal/window/length range) to −Infinity; then the online
// softmax update of FlashAttention-2 (running max m, running sum l, the output
// accumulator rescaled by e^(m_old − m_new), no division until the end).
//
// Layout (thread scratch, see args.ts): s f32 [R, BC]; per row info i32 [R, 4]
// = (query index i, head h, first kept key lo, last kept key hi), keys counted
// from the sequence's first key. A tile covers keys [t0, t0 + n); lanes
// [n, n4) are padding and always end as −Infinity / probability 0.

import { AttnArgs, BC, ROW_H, ROW_HI, ROW_I, ROW_LO } from "./args";
import { EXP_CONSTS, expNeg, expNeg4At } from "./exp";

const NEG_INF: f32 = -Infinity;

@inline function softcapRow(sRow: usize, n4: i32, cap: f32): void {
  const inv: f32 = 1 / cap;
  for (let j = 0; j < n4; j++) {
    const p = sRow + (<usize>j << 2);
    store<f32>(p, cap * Mathf.tanh(load<f32>(p) * inv));
  }
}

@inline function biasRow(sRow: usize, n: i32, bRow: usize, sJ: i32): void {
  let j = 0;
  if (sJ == 1) {
    for (; j + 4 <= n; j += 4) {
      const p = sRow + (<usize>j << 2);
      v128.store(p, f32x4.add(v128.load(p), v128.load(bRow + (<usize>j << 2))));
    }
  }
  for (; j < n; j++) {
    const p = sRow + (<usize>j << 2);
    store<f32>(p, load<f32>(p) + load<f32>(bRow + ((<usize>j * <usize>sJ) << 2)));
  }
}

/** s_j −= slope · |diag − (t0 + j)| for j < n4. */
@inline function alibiRow(sRow: usize, n4: i32, slope: f32, diag: i32, t0: i32): void {
  const sl = f32x4.splat(slope);
  // dist_j = diag − t0 − j, exact in f32 for |dist| < 2^24.
  let dist = f32x4.sub(f32x4.splat(<f32>(diag - t0)), f32x4(0, 1, 2, 3));
  const four = f32x4.splat(4);
  for (let j = 0; j < n4; j += 4) {
    const p = sRow + (<usize>j << 2);
    v128.store(p, f32x4.sub(v128.load(p), f32x4.mul(sl, f32x4.abs(dist))));
    dist = f32x4.sub(dist, four);
  }
}

@inline function maskRow(sRow: usize, n: i32, mRow: usize, sJ: i32): void {
  let j = 0;
  const ninf = f32x4.splat(NEG_INF);
  if (sJ == 1) {
    for (; j + 4 <= n; j += 4) {
      const p = sRow + (<usize>j << 2);
      const m = i32x4.extend_low_i16x8_u(i16x8.extend_low_i8x16_u(v128.load32_zero(mRow + <usize>j)));
      v128.store(p, v128.bitselect(v128.load(p), ninf, i32x4.eq(m, i32x4.splat(0))));
    }
  }
  for (; j < n; j++) {
    if (load<u8>(mRow + <usize>j * <usize>sJ) != 0) store<f32>(sRow + (<usize>j << 2), NEG_INF);
  }
}

/** −Infinity for tile lanes outside [from, to) (lanes, not keys). */
@inline function excludeOutside(sRow: usize, n4: i32, from: i32, to: i32): void {
  const a = min(max(from, 0), n4);
  const b = max(min(to, n4), a);
  for (let j = 0; j < a; j++) store<f32>(sRow + (<usize>j << 2), NEG_INF);
  for (let j = b; j < n4; j++) store<f32>(sRow + (<usize>j << 2), NEG_INF);
}

/**
 * Applies the score options to tile rows [0, R) covering keys [t0, t0 + n).
 * `full`: every row keeps every key of the tile by range (causal/window/length),
 * so only the padding lanes need excluding.
 */
export function scoreOptions(a: AttnArgs, b: i32, diagShift: i32, s: usize, info: usize, R: i32, t0: i32, n: i32, n4: i32, full: bool): void {
  const sStride = <usize>BC << 2;
  for (let r = 0; r < R; r++) {
    const sRow = s + <usize>r * sStride;
    const ri = info + (<usize>r << 4);
    const i = load<i32>(ri, ROW_I << 2);
    const h = load<i32>(ri, ROW_H << 2);
    if (a.softcap > 0) softcapRow(sRow, n4, a.softcap);
    if (a.bias != 0) {
      const bRow = a.bias + ((<usize>b * <usize>a.bsB + <usize>h * <usize>a.bsH + <usize>i * <usize>a.bsI + <usize>t0 * <usize>a.bsJ) << 2);
      biasRow(sRow, n, bRow, a.bsJ);
    }
    if (a.alibi != 0) {
      const slope = load<f32>(a.alibi + ((<usize>b * <usize>a.alibiSB + <usize>h) << 2));
      alibiRow(sRow, n4, slope, i + diagShift, t0);
    }
    if (a.mask != 0) {
      const mRow = a.mask + <usize>b * <usize>a.msB + <usize>h * <usize>a.msH + <usize>i * <usize>a.msI + <usize>t0 * <usize>a.msJ;
      maskRow(sRow, n, mRow, a.msJ);
    }
    if (full) excludeOutside(sRow, n4, 0, n);
    else {
      const lo = load<i32>(ri, ROW_LO << 2);
      const hi = load<i32>(ri, ROW_HI << 2);
      excludeOutside(sRow, n4, lo - t0, min(hi - t0 + 1, n));
    }
  }
}

/**
 * Online softmax over tile rows [0, R): per row, m_new = max(m, max_j s_j),
 * p_j = e^(s_j − m_new) written over s, l = l·e^(m − m_new) + Σ p_j, and the
 * accumulator row O scaled by e^(m − m_new). A row with no kept key so far
 * (m_new = −Infinity) gets p = 0 and keeps l = 0, O = 0.
 *   s  f32 [R, BC], m, l f32 [R], os f32 [R, D4]
 */
export function softmaxUpdate(s: usize, R: i32, n4: i32, m: usize, l: usize, os: usize, D4: i32): void {
  const sStride = <usize>BC << 2;
  const oStride = <usize>D4 << 2;
  for (let r = 0; r < R; r++) {
    const sRow = s + <usize>r * sStride;
    let mx = f32x4.splat(NEG_INF);
    for (let j = 0; j < n4; j += 4) mx = f32x4.pmax(mx, v128.load(sRow + (<usize>j << 2)));
    mx = f32x4.pmax(mx, f32x4.shuffle(mx, mx, 2, 3, 0, 1));
    mx = f32x4.pmax(mx, f32x4.shuffle(mx, mx, 1, 0, 3, 2));
    const tileMax = f32x4.extract_lane(mx, 0);
    const mOld = load<f32>(m + (<usize>r << 2));
    const mNew = max(mOld, tileMax);
    if (mNew == NEG_INF) {
      for (let j = 0; j < n4; j += 4) v128.store(sRow + (<usize>j << 2), f32x4.splat(0));
      continue;
    }
    const mv = f32x4.splat(mNew);
    let sum = f32x4.splat(0);
    for (let j = 0; j < n4; j += 4) {
      const p = sRow + (<usize>j << 2);
      const e = expNeg4At(f32x4.sub(v128.load(p), mv), EXP_CONSTS);
      v128.store(p, e);
      sum = f32x4.add(sum, e);
    }
    sum = f32x4.add(sum, f32x4.shuffle(sum, sum, 2, 3, 0, 1));
    sum = f32x4.add(sum, f32x4.shuffle(sum, sum, 1, 0, 3, 2));
    const alpha = expNeg(mOld - mNew);
    store<f32>(l + (<usize>r << 2), load<f32>(l + (<usize>r << 2)) * alpha + f32x4.extract_lane(sum, 0));
    store<f32>(m + (<usize>r << 2), mNew);
    if (alpha != 1) {
      const av = f32x4.splat(alpha);
      const oRow = os + <usize>r * oStride;
      for (let d: usize = 0; d < oStride; d += 16) v128.store(oRow + d, f32x4.mul(v128.load(oRow + d), av));
    }
  }
}

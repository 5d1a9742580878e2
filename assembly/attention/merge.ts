// Merging attention states by log-sum-exp: the FlashDecoding combine of
// split-KV partials, and the public mergeStates of two states.
//
// A state (o, lse) over a key segment is o = Σ softmax(s)_j v_j and
// lse = ln Σ e^(s_j). Two segments merge as
//   m = max(lse_a, lse_b), w_x = e^(lse_x − m),
//   o = (w_a·o_a + w_b·o_b) / (w_a + w_b), lse = m + ln(w_a + w_b);
// an empty segment has lse = −Infinity and weight 0.

import { SEQ_FIELDS, SEQ_Q0, SEQ_SQ } from "./args";
import { expNeg } from "./exp";

@unmanaged class CombineArgs {
  /** Partials: o f32 [slots, H, partSq, D], lse f32 [slots, H, partSq]. */
  partO: usize;
  partLse: usize;
  H: i32;
  partSq: i32;
  D: i32;
  /** int32 [B, 2]: first slot and slot count of each sequence (count ≤ 1: nothing to combine). */
  chunks: usize;
  /** int32 [B, SEQ_FIELDS] (first query token q0 and Sq of each sequence). */
  seqs: usize;
  out: usize; osB: i32; osH: i32; osS: i32;
  /** 0 when lse is not requested. */
  lse: usize; lsB: i32; lsH: i32; lsS: i32;
}

/**
 * FlashDecoding combine, item = b·H + h: merges the sequence's split slots into
 * out[b, h, i] and lse[b, h, i] for every query i. Weights are taken relative to
 * the largest lse, so nothing overflows; slots that kept no key weigh 0.
 */
export function attention_combine_task(item: i32, tid: i32, args: usize): void {
  const a = changetype<CombineArgs>(args);
  const b = item / a.H;
  const h = item - b * a.H;
  const first = load<i32>(a.chunks + (<usize>(2 * b) << 2));
  const count = load<i32>(a.chunks + (<usize>(2 * b + 1) << 2));
  if (count <= 1) return;
  const Sq = load<i32>(a.seqs + (<usize>(b * SEQ_FIELDS + SEQ_SQ) << 2));
  const q0 = load<i32>(a.seqs + (<usize>(b * SEQ_FIELDS + SEQ_Q0) << 2));
  const D = a.D;
  const slotStride = <usize>a.H * <usize>a.partSq; // rows between consecutive slots
  for (let i = 0; i < Sq; i++) {
    const row0 = (<usize>first * <usize>a.H + <usize>h) * <usize>a.partSq + <usize>i;
    let mx: f32 = -Infinity;
    for (let c = 0; c < count; c++) mx = max(mx, load<f32>(a.partLse + ((row0 + <usize>c * slotStride) << 2)));
    const oDst = a.out + ((<usize>b * <usize>a.osB + <usize>h * <usize>a.osH + <usize>(q0 + i) * <usize>a.osS) << 2);
    const lseDst: usize = a.lse == 0 ? 0 : a.lse + ((<usize>b * <usize>a.lsB + <usize>h * <usize>a.lsH + <usize>(q0 + i) * <usize>a.lsS) << 2);
    if (mx == -Infinity) {
      memory.fill(oDst, 0, <usize>D << 2);
      if (lseDst != 0) store<f32>(lseDst, -Infinity);
      continue;
    }
    // o accumulates in the destination row: first slot assigns, the rest add.
    let wsum: f32 = 0;
    for (let c = 0; c < count; c++) {
      const row = row0 + <usize>c * slotStride;
      const w = expNeg(load<f32>(a.partLse + (row << 2)) - mx);
      const src = a.partO + ((row * <usize>D) << 2);
      const wv = f32x4.splat(w);
      let e = 0;
      if (c == 0) {
        for (; e + 4 <= D; e += 4) v128.store(oDst + (<usize>e << 2), f32x4.mul(wv, v128.load(src + (<usize>e << 2))));
        for (; e < D; e++) store<f32>(oDst + (<usize>e << 2), w * load<f32>(src + (<usize>e << 2)));
      } else if (w != 0) {
        for (; e + 4 <= D; e += 4) {
          const p = oDst + (<usize>e << 2);
          v128.store(p, f32x4.add(v128.load(p), f32x4.mul(wv, v128.load(src + (<usize>e << 2)))));
        }
        for (; e < D; e++) store<f32>(oDst + (<usize>e << 2), load<f32>(oDst + (<usize>e << 2)) + w * load<f32>(src + (<usize>e << 2)));
      }
      wsum += w;
    }
    const inv: f32 = 1 / wsum;
    const iv = f32x4.splat(inv);
    let e = 0;
    for (; e + 4 <= D; e += 4) v128.store(oDst + (<usize>e << 2), f32x4.mul(v128.load(oDst + (<usize>e << 2)), iv));
    for (; e < D; e++) store<f32>(oDst + (<usize>e << 2), load<f32>(oDst + (<usize>e << 2)) * inv);
    if (lseDst != 0) store<f32>(lseDst, mx + Mathf.log(wsum));
  }
}

@unmanaged class MergeArgs {
  /** f32 [rows, D] and f32 [rows] for each of a, b and the result (contiguous). */
  oA: usize;
  lseA: usize;
  oB: usize;
  lseB: usize;
  out: usize;
  lseOut: usize;
  rows: i32;
  D: i32;
  rowsPerItem: i32;
}

@inline function copyRow(src: usize, dst: usize, D: i32): void {
  if (src != dst) memory.copy(dst, src, <usize>D << 2);
}

/**
 * mergeStates, item = a run of rowsPerItem rows. Exact when either side is
 * empty: lse_a = −Infinity copies (o_b, lse_b) bit for bit, and vice versa;
 * both empty gives o = 0, lse = −Infinity.
 */
export function merge_states_task(item: i32, tid: i32, args: usize): void {
  const a = changetype<MergeArgs>(args);
  const D = a.D;
  const rowBytes = <usize>D << 2;
  const r0 = item * a.rowsPerItem;
  const r1 = min(a.rows, r0 + a.rowsPerItem);
  for (let r = r0; r < r1; r++) {
    const la = load<f32>(a.lseA + (<usize>r << 2));
    const lb = load<f32>(a.lseB + (<usize>r << 2));
    const oa = a.oA + <usize>r * rowBytes;
    const ob = a.oB + <usize>r * rowBytes;
    const od = a.out + <usize>r * rowBytes;
    const ld = a.lseOut + (<usize>r << 2);
    if (la == -Infinity && lb == -Infinity) {
      memory.fill(od, 0, rowBytes);
      store<f32>(ld, -Infinity);
    } else if (la == -Infinity) {
      copyRow(ob, od, D);
      store<f32>(ld, lb);
    } else if (lb == -Infinity) {
      copyRow(oa, od, D);
      store<f32>(ld, la);
    } else {
      const mx = max(la, lb);
      const wa = Mathf.exp(la - mx);
      const wb = Mathf.exp(lb - mx);
      const inv: f32 = 1 / (wa + wb);
      const ca = wa * inv;
      const cb = wb * inv;
      const va = f32x4.splat(ca);
      const vb = f32x4.splat(cb);
      let e = 0;
      for (; e + 4 <= D; e += 4) {
        const off = <usize>e << 2;
        v128.store(od + off, f32x4.add(f32x4.mul(va, v128.load(oa + off)), f32x4.mul(vb, v128.load(ob + off))));
      }
      for (; e < D; e++) {
        const off = <usize>e << 2;
        store<f32>(od + off, ca * load<f32>(oa + off) + cb * load<f32>(ob + off));
      }
      store<f32>(ld, mx + Mathf.log(wa + wb));
    }
  }
}

// Activation preparation for the linear kernels, once per call (not per row):
//   q8 / q4 weights: x quantized per block of 32 like GGUF Q8_0 —
//     d = max|x| / 127, q = round(x / d) ∈ [−127, 127] (nearest, ties to even),
//     xq [T][nb] blocks of 64 bytes and xs [T][nb] f32. For the int16 dot
//     (flavor.ts DOT_I16: the baseline flavor, and the relaxed flavor's i16
//     mode and int16 q4 kernels) the codes are widened to int16 (the block's
//     64 bytes), so the kernels feed i32x4.dot_i16x8_s directly; for the
//     relaxed dot they are int8 in the block's first 32 bytes, what
//     relaxed_dot_i8x16_i7x16 takes (DOT_I7), or code + 128 as u8 (DOT_U8,
//     gemv.ts q8Bias; the q4 GEMM wants each 8 in Q4_ORDER below).
//   f32 / bf16 weights: x copied to [T][nb · 32] f32 with zero padding, only when
//     cols is not a multiple of 32 or the rows are not packed.

import { BLOCK } from "./layout";
import { DOT_I7, DOT_U8, RELAXED } from "../runtime/flavor";

/**
 * The relaxed q4 kernels' activation order (gemv.ts q4Lo / q4Hi): each group
 * of 8 codes stored as columns 0, 4, 1, 5, 2, 6, 3, 7 of the group, the order
 * in which a q4 weight chunk's low and high nibble planes hold a row's columns.
 */
const Q4_ORDER: usize = memory.data<u8>([0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15], 16);

/** Where column i of a block goes in the relaxed q4 order (Q4_ORDER's inverse within each 8). */
@inline function q4Position(i: i32): i32 {
  return (i & ~7) | ((i & 3) << 1) | ((i >> 2) & 1);
}

/**
 * Stores 16 int32 codes (in [−127, 127]) as int16 (wide), int8 (relaxed)
 * or code + 128 as u8 (relaxed, u8: the int8-dot u8 mode, gemv.ts q8Bias;
 * code ^ 0x80 = code + 128 for these codes) at q + 16·i codes; relaxed with
 * q4: in Q4_ORDER (`order` = its 16 bytes).
 */
@inline function storeCodes(u8: bool, q4: bool, wide: bool, order: v128, q: usize, i: usize, a: v128, b: v128, c: v128, d: v128): void {
  const ab = i16x8.narrow_i32x4_s(a, b), cd = i16x8.narrow_i32x4_s(c, d);
  if (RELAXED && !wide) {
    let v = i8x16.narrow_i16x8_s(ab, cd);
    if (q4) v = i8x16.swizzle(v, order);
    v128.store(q + (i << 4), u8 ? v128.xor(v, i8x16.splat(-128)) : v);
  }
  else {
    v128.store(q + (i << 5), ab);
    v128.store(q + (i << 5), cd, 16);
  }
}

@unmanaged class ActArgs {
  /** f32 [T, cols], row stride xStride bytes, contiguous within a row. */
  x: usize;
  xStride: i32;
  cols: i32;
  nb: i32;
  /** Output rows: dst [T][nb · 32] (i16 for q8, f32 for pad), dstStride bytes apart. */
  dst: usize;
  dstStride: i32;
  /** f32 [T][nb] block scales (q8 only). */
  scales: usize;
  /** The integer dot the codes are for (flavor.ts): DOT_I16 int16, DOT_I7 int8, DOT_U8 code + 128 as u8 (the last two relaxed only). */
  dot: i32;
  /** Relaxed flavor, q4 weights in the u8 mode (T > 1): 1 stores each 8 codes in Q4_ORDER (gemm.ts gemmQ4U8), else 0. */
  q4: i32;
}

/** Item t quantizes token t's row: 32 values → 32 int16 codes and one scale. */
export function task_act_quantize_q8(item: i32, tid: i32, args: usize): void {
  const a = changetype<ActArgs>(args);
  // q4 order comes with the u8 mode only (gemm.ts gemmQ4U8).
  if (RELAXED && a.dot == DOT_U8 && a.q4 == 1) quantizeRow(true, true, false, item, args);
  else if (RELAXED && a.dot == DOT_U8) quantizeRow(true, false, false, item, args);
  else if (RELAXED && a.dot == DOT_I7) quantizeRow(false, false, false, item, args);
  else quantizeRow(false, false, true, item, args);
}

@inline function quantizeRow(u8: bool, q4: bool, wide: bool, item: i32, args: usize): void {
  const a = changetype<ActArgs>(args);
  const order = v128.load(Q4_ORDER);
  const x = a.x + <usize>item * <usize>a.xStride;
  const xq = a.dst + <usize>item * <usize>a.dstStride;
  const xs = a.scales + <usize>item * <usize>a.nb * 4;
  const full = a.cols / BLOCK;
  for (let b = 0; b < full; b++) {
    const p = x + (<usize>b << 7);
    const v0 = v128.load(p), v1 = v128.load(p, 16), v2 = v128.load(p, 32), v3 = v128.load(p, 48);
    const v4 = v128.load(p, 64), v5 = v128.load(p, 80), v6 = v128.load(p, 96), v7 = v128.load(p, 112);
    let m = f32x4.max(f32x4.max(f32x4.max(f32x4.abs(v0), f32x4.abs(v1)), f32x4.max(f32x4.abs(v2), f32x4.abs(v3))),
                      f32x4.max(f32x4.max(f32x4.abs(v4), f32x4.abs(v5)), f32x4.max(f32x4.abs(v6), f32x4.abs(v7))));
    const amax = max(max(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)), max(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)));
    const d: f32 = amax / 127;
    const id = f32x4.splat(d != 0 ? 1 / d : 0);
    const q = xq + (<usize>b << 6);
    storeCodes(u8, q4, wide, order, q, 0,
      i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v0, id))), i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v1, id))),
      i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v2, id))), i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v3, id))));
    storeCodes(u8, q4, wide, order, q, 1,
      i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v4, id))), i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v5, id))),
      i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v6, id))), i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v7, id))));
    store<f32>(xs + (<usize>b << 2), d);
  }
  if (full < a.nb) {
    // The last, partial block: zero past cols.
    const c0 = full * BLOCK;
    const n = a.cols - c0;
    let amax: f32 = 0;
    for (let i = 0; i < n; i++) amax = max(amax, abs(load<f32>(x + (<usize>(c0 + i) << 2))));
    const d: f32 = amax / 127;
    const id: f32 = d != 0 ? 1 / d : 0;
    const q = xq + (<usize>full << 6);
    for (let i = 0; i < BLOCK; i++) {
      const v: f32 = i < n ? nearest<f32>(load<f32>(x + (<usize>(c0 + i) << 2)) * id) : 0;
      if (RELAXED && !wide) store<i8>(q + <usize>(q4 ? q4Position(i) : i), <i8>(u8 ? <i32>v ^ 0x80 : <i32>v));
      else store<i16>(q + (<usize>i << 1), <i16>(<i32>v));
    }
    store<f32>(xs + (<usize>full << 2), d);
  }
}

/** Item t copies token t's row to a zero-padded row of nb · 32 f32. */
export function task_act_pad(item: i32, tid: i32, args: usize): void {
  const a = changetype<ActArgs>(args);
  const x = a.x + <usize>item * <usize>a.xStride;
  const dst = a.dst + <usize>item * <usize>a.dstStride;
  memory.copy(dst, x, <usize>a.cols << 2);
  memory.fill(dst + (<usize>a.cols << 2), 0, <usize>(a.nb * BLOCK - a.cols) << 2);
}

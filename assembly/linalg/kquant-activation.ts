// Activation preparation for the K-quant linear kernels, once per call: each
// token's row quantized per superblock of 256 like ggml's Q8_K (the
// activation type of llama.cpp's vec_dot_q4_K_q8_K / q6_K_q8_K):
//   d = max|x| / 127, q = round(x / d) (nearest, ties to even) as int8,
// plus the sums of the codes per 16 (Q8_K's bsums), which carry the K-quant
// mins (Q4_K) and the −32 offset (Q6_K) out of the inner loop.
//
// Output per token t: codes xq + t·(cols << XSHIFT), scales xd + 4·t·nsb
// (f32 [nsb]), sums xsum + 64·t·nsb (i32 [nsb · 16]). The codes are int8
// (relaxed: what relaxed_dot_i8x16_i7x16 takes) or int16 (baseline: what
// i32x4.dot_i16x8_s takes, widened once here rather than in every dot). The
// relaxed flavor's widened prefill (V8 < 13) asks for an int16 copy as well
// (xq16), so its 4-token tiles do not sign-extend every splat.

import { QK_K } from "./kquant-layout";
import { RELAXED } from "../runtime/flavor";

/** log2 of the bytes of one activation code: 0 (int8, relaxed) or 1 (int16, baseline). */
export const XSHIFT: usize = RELAXED ? 0 : 1;

@unmanaged class KquantActArgs {
  /** f32 [T, cols], rows xStride bytes apart, each contiguous; cols = nsb · 256. */
  x: usize;
  xStride: i32;
  nsb: i32;
  xq: usize;
  xd: usize;
  xsum: usize;
  /** Relaxed flavor: where to write the codes as int16 too, [T][nsb · 256] (the widened prefill kernels' form, kquant-dot.ts gemmKWide), or 0. Baseline: unused (its codes are int16). */
  xq16: usize;
}

/** Item t quantizes token t's row. */
export function task_act_quantize_q8k(item: i32, tid: i32, args: usize): void {
  const a = changetype<KquantActArgs>(args);
  const cols = <usize>a.nsb * QK_K;
  let x = a.x + <usize>item * <usize>a.xStride;
  let q = a.xq + <usize>item * (cols << XSHIFT);
  let q16 = a.xq16 + <usize>item * (cols << 1);
  let xd = a.xd + <usize>item * <usize>a.nsb * 4;
  let xs = a.xsum + <usize>item * <usize>a.nsb * 64;
  for (let b = 0; b < a.nsb; b++, x += QK_K * 4, q += <usize>QK_K << XSHIFT, q16 += <usize>QK_K << 1, xd += 4) {
    let m = f32x4.splat(0);
    for (let i = 0; i < QK_K * 4; i += 16) m = f32x4.max(m, f32x4.abs(v128.load(x + <usize>i)));
    const amax = max(max(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)), max(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)));
    const d: f32 = amax / 127;
    const id = f32x4.splat(d != 0 ? 1 / d : 0);
    store<f32>(xd, d);
    for (let g = 0; g < QK_K; g += 16, xs += 4) {
      const p = x + (<usize>g << 2);
      const c0 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p), id)));
      const c1 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p, 16), id)));
      const c2 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p, 32), id)));
      const c3 = i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p, 48), id)));
      const lo = i16x8.narrow_i32x4_s(c0, c1), hi = i16x8.narrow_i32x4_s(c2, c3);
      if (RELAXED) {
        v128.store(q + <usize>g, i8x16.narrow_i16x8_s(lo, hi));
        if (a.xq16) {
          v128.store(q16 + (<usize>g << 1), lo);
          v128.store(q16 + (<usize>g << 1), hi, 16);
        }
      } else {
        v128.store(q + (<usize>g << 1), lo);
        v128.store(q + (<usize>g << 1), hi, 16);
      }
      const s = i32x4.add(i32x4.add(c0, c1), i32x4.add(c2, c3));
      store<i32>(xs, i32x4.extract_lane(s, 0) + i32x4.extract_lane(s, 1) + i32x4.extract_lane(s, 2) + i32x4.extract_lane(s, 3));
    }
  }
}

// q5 weights (layout.ts: GGUF Q5_0 kept natively, 224-byte tiles of 8 rows ×
// 32 columns, ggml's 5-bit codes q ∈ [0, 31] three to a u16 lane) — the
// kernels that read them:
//
//   gemvQ5x2:      one token, both halves of a row group, int16 activation
//                  codes (the decode GEMV; T = 2, 3 repeat it per token);
//   unpackQ5Group: a row group's q5 tiles → q8 tiles (the codes q − 16 as
//                  int8, the same f32 scales) in per-thread scratch, which the
//                  q8 GEMM kernels then read for T ≥ 4 in any int8-dot mode.
//
// Both give, per block, the exact int32 sum Σ (q − 16)·x and then
// acc += f32(sum) · (w_scale · x_scale), what every q8 kernel does in the
// same block order (gemv.ts), so a token's output is bit-identical whichever
// path and mode computed it. The GEMV takes each column pair as int16 lanes in
// one operation (a mask or a logical shift: field 1 comes as 32·q, summed
// apart and divided exactly) and Σ (q − 16)·x as Σ q·x − 16·Σ x, with Σ x per
// block from q5BlockSums: one operation, one dot and one add per 8 weights, as
// q8's sign-extending loads take, over 7 bits a weight instead of 9.

import { HALF_Q5, HALF_Q8, Q5_SCALES, Q8_SCALES, TILE_Q5, TILE_Q8 } from "./layout";
import { fmadd } from "../runtime/flavor";

/** Static data: the u16 masks of field 0 (0x001f) and field 1 (0x03e0), loaded once per call (a v128 constant is rebuilt at each use in a loop). */
const Q5_MASKS: usize = memory.data<u16>([0x1f, 0x1f, 0x1f, 0x1f, 0x1f, 0x1f, 0x1f, 0x1f, 0x3e0, 0x3e0, 0x3e0, 0x3e0, 0x3e0, 0x3e0, 0x3e0, 0x3e0], 16);

@inline export function q5Mask0(): v128 {
  return v128.load(Q5_MASKS);
}

@inline export function q5Mask1(): v128 {
  return v128.load(Q5_MASKS, 16);
}

/**
 * 16 · Σ of each block's 32 int16 activation codes at xq [nb · 32] → sums[0..nb)
 * i32: the −16 of every Q5_0 code, taken once per block rather than per row.
 */
export function q5BlockSums(xq: usize, nb: i32, sums: usize): void {
  for (let b = 0; b < nb; b++, xq += 64, sums += 4) {
    // |Σ| ≤ 32 · 127 fits the int16 lanes of the adds.
    const v = i16x8.add(i16x8.add(v128.load(xq), v128.load(xq, 16)), i16x8.add(v128.load(xq, 32), v128.load(xq, 48)));
    const p = i32x4.extadd_pairwise_i16x8_s(v);
    store<i32>(sums, (i32x4.extract_lane(p, 0) + i32x4.extract_lane(p, 1) + i32x4.extract_lane(p, 2) + i32x4.extract_lane(p, 3)) << 4);
  }
}

/** A half's exact block sum Σ (q − 16)·x from its field sums s (fields 0, 2: q·x) and s32 (field 1: 32·q·x) and 16·Σx (x16, splat). */
@inline function q5Sum(s: v128, s32: v128, x16: v128): v128 {
  return i32x4.sub(i32x4.add(s, i32x4.shr_s(s32, 5)), x16);
}

/**
 * Decode (one token): both halves of a q5 row group's tile stream w · the
 * int16 activation codes xq [nb · 32] with block scales xs [nb] and 16·Σx per
 * block x16 [nb] (q5BlockSums) → res[0..8) f32.
 */
@inline export function gemvQ5x2(w: usize, xq: usize, xs: usize, x16: usize, nb: i32, res: usize): void {
  let acc = f32x4.splat(0), acd = f32x4.splat(0);
  const m0 = q5Mask0(), m1 = q5Mask1();
  for (let b = 0; b < nb; b++, w += TILE_Q5, xq += 64, xs += 4, x16 += 4) {
    const v = w + HALF_Q5;
    let s = i32x4.splat(0), s32 = i32x4.splat(0), t = i32x4.splat(0), t32 = i32x4.splat(0);
    for (let u: usize = 0; u < 5; u++) {
      const a = v128.load(w + (u << 4)), c = v128.load(v + (u << 4));
      const x = xq + u * 12;
      const x0 = v128.load32_splat(x), x1 = v128.load32_splat(x, 4), x2 = v128.load32_splat(x, 8);
      s = i32x4.add(s, i32x4.dot_i16x8_s(v128.and(a, m0), x0));
      t = i32x4.add(t, i32x4.dot_i16x8_s(v128.and(c, m0), x0));
      s32 = i32x4.add(s32, i32x4.dot_i16x8_s(v128.and(a, m1), x1));
      t32 = i32x4.add(t32, i32x4.dot_i16x8_s(v128.and(c, m1), x1));
      s = i32x4.add(s, i32x4.dot_i16x8_s(i16x8.shr_u(a, 10), x2));
      t = i32x4.add(t, i32x4.dot_i16x8_s(i16x8.shr_u(c, 10), x2));
    }
    const x15 = v128.load32_splat(xq, 60); // column pair 15: vector 5, field 0
    s = i32x4.add(s, i32x4.dot_i16x8_s(v128.load(w, 80), x15));
    t = i32x4.add(t, i32x4.dot_i16x8_s(v128.load(v, 80), x15));
    const x16b = v128.load32_splat(x16), xd = v128.load32_splat(xs);
    acc = fmadd(f32x4.convert_i32x4_s(q5Sum(s, s32, x16b)), f32x4.mul(v128.load(w, Q5_SCALES), xd), acc);
    acd = fmadd(f32x4.convert_i32x4_s(q5Sum(t, t32, x16b)), f32x4.mul(v128.load(v, Q5_SCALES), xd), acd);
  }
  v128.store(res, acc);
  v128.store(res, acd, 16);
}

/** Field f of a q5 code vector as int16 lanes q − 16 ∈ [−16, 15]. */
@inline function q5Codes(v: v128, f: i32, m0: v128, k16: v128): v128 {
  const q = f == 0 ? v128.and(v, m0) : f == 1 ? v128.and(i16x8.shr_u(v, 5), m0) : i16x8.shr_u(v, 10);
  return i16x8.sub(q, k16);
}

/**
 * A row group's nb q5 tiles at w → nb q8 tiles at dst (layout.ts: column 2j + s
 * of row r at byte 8j + 2r + s of its half, then the four f32 scales): the
 * codes q − 16 and the same scales, for the q8 GEMM kernels.
 */
export function unpackQ5Group(w: usize, nb: i32, dst: usize): void {
  const m0 = q5Mask0(), k16 = i16x8.splat(16);
  for (let b = 0; b < nb; b++, w += TILE_Q5, dst += TILE_Q8) {
    for (let k: usize = 0; k < 2; k++) {
      const h = w + k * HALF_Q5, d = dst + k * HALF_Q8;
      const v0 = v128.load(h), v1 = v128.load(h, 16), v2 = v128.load(h, 32), v3 = v128.load(h, 48), v4 = v128.load(h, 64);
      // Pairs (2m, 2m + 1) narrowed to 16 int8 at 16m: pair i is vector i / 3's field i % 3, pair 15 vector 5's field 0.
      v128.store(d, i8x16.narrow_i16x8_s(q5Codes(v0, 0, m0, k16), q5Codes(v0, 1, m0, k16)));
      v128.store(d, i8x16.narrow_i16x8_s(q5Codes(v0, 2, m0, k16), q5Codes(v1, 0, m0, k16)), 16);
      v128.store(d, i8x16.narrow_i16x8_s(q5Codes(v1, 1, m0, k16), q5Codes(v1, 2, m0, k16)), 32);
      v128.store(d, i8x16.narrow_i16x8_s(q5Codes(v2, 0, m0, k16), q5Codes(v2, 1, m0, k16)), 48);
      v128.store(d, i8x16.narrow_i16x8_s(q5Codes(v2, 2, m0, k16), q5Codes(v3, 0, m0, k16)), 64);
      v128.store(d, i8x16.narrow_i16x8_s(q5Codes(v3, 1, m0, k16), q5Codes(v3, 2, m0, k16)), 80);
      v128.store(d, i8x16.narrow_i16x8_s(q5Codes(v4, 0, m0, k16), q5Codes(v4, 1, m0, k16)), 96);
      v128.store(d, i8x16.narrow_i16x8_s(q5Codes(v4, 2, m0, k16), q5Codes(v128.load(h, 80), 0, m0, k16)), 112);
      v128.store(d + Q8_SCALES, v128.load(h + Q5_SCALES));
    }
  }
}

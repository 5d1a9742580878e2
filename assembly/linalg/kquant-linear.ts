// out[T, rows] = x[T, cols] · Wᵀ (+ bias) for native K-quant weights
// (kquant-layout.ts), the K-quant counterpart of linear.ts, partitioned the
// same way: work item i is quads [itemStarts[i], itemStarts[i + 1]) (4 rows
// each), all tokens. Tokens go four at a time through gemm<F> (the quad's tiles stay in
// L1/L2 across the token tiles), the rest (and decode, T = 1) one at a time
// through gemv<F>; both do the same float steps per output (kquant-dot.ts),
// so outputs are independent of T, the batch and the thread count.

import { gemmQ4KPairOfQuads, gemmIq4Xs, gemvIq4Xs, gemmQ2K, gemmQ2KPairs, gemmQ3K, gemmQ3KPairs, gemmQ4K, gemmQ4KPairs, gemmQ5K, gemmQ5KPairs, gemmQ6K, gemmQ6KPairs, gemvQ2K, gemvQ2KPairs, gemvQ3K, gemvQ3KPairs, gemvQ4K, gemvQ4KPairs, gemvQ5K, gemvQ5KPairs, gemvQ6K, gemvQ6KPairs, gemmQ6KWide, widenQ6KQuad, gemmQ45KWide, widenQ45KQuad, gemmQ6KWide2x2, gemmQ45KWide2x2 } from "./kquant-dot";
import { XSHIFT } from "./kquant-activation";
import { RELAXED } from "../runtime/flavor";
import { FMT_IQ4_XS, FMT_Q2_K, FMT_Q3_K, FMT_Q4_K, FMT_Q5_K, FMT_Q6_K, QK_K, QUAD, kquantTileBytes } from "./kquant-layout";

@unmanaged class KquantLinearArgs {
  /** Packed weight: [quads][nsb] tiles. */
  w: usize;
  nsb: i32;
  quads: i32;
  rows: i32;
  /** Prepared activation (kquant-activation.ts): codes [T][nsb · 256] (int8, baseline int16), f32 scales [T][nsb], i32 sums [T][nsb · 16]. */
  xq: usize;
  xd: usize;
  xsum: usize;
  tokens: i32;
  /** f32 [T, rows], row stride outStride bytes. */
  out: usize;
  outStride: i32;
  /** f32 [rows], or 0. */
  bias: usize;
  /** i32 [items + 1]: the first quad of each work item, then `quads`. */
  itemStarts: usize;
  /** Per-thread scratch (≥ 128 bytes each). */
  scratch: usize;
  scratchStride: i32;
  /** 1: Q2_K … Q6_K through their int16-pair sums (kquant-dot.ts gemvQ4KPairs), where the relaxed dot lowers "saturating"; same sums. */
  pairs: i32;
  /** Bytes of a widened superblock (TILE_Q45_K_I16 / TILE_Q6_K_I16): Q4_K, Q5_K, Q6_K run on codes widened to int16 (src/ops/kquant-linear.ts decides: the runtime's kquantWide, from WIDEN_KQUANT_TOKENS tokens); 0: on the codes as stored. */
  wide: i32;
  /** With `wide`: the activation codes as int16 [T][nsb · 256] (baseline: xq itself; relaxed: the quantizer's int16 copy), which the widened kernels read. */
  xq16: usize;
}

/** Stores the lanes of res (rows row0 … row0 + 3) into out, adding bias, never past `rows` (as linear.ts's storeRows). */
@inline function storeQuad(out: usize, row0: i32, rows: i32, res: v128, bias: usize): void {
  const p = out + (<usize>row0 << 2);
  const b = bias + (<usize>row0 << 2);
  if (row0 + QUAD <= rows) {
    v128.store(p, bias ? f32x4.add(res, v128.load(b)) : res);
    return;
  }
  const n = rows - row0;
  const r0 = f32x4.extract_lane(res, 0), r1 = f32x4.extract_lane(res, 1), r2 = f32x4.extract_lane(res, 2);
  store<f32>(p, bias ? r0 + load<f32>(b) : r0);
  if (n > 1) store<f32>(p, bias ? r1 + load<f32>(b, 4) : r1, 4);
  if (n > 2) store<f32>(p, bias ? r2 + load<f32>(b, 8) : r2, 8);
}

@inline function kquantLinear(format: i32, item: i32, tid: i32, args: usize): void {
  const a = changetype<KquantLinearArgs>(args);
  const q0 = load<i32>(a.itemStarts + (<usize>item << 2));
  const q1 = load<i32>(a.itemStarts + (<usize>item << 2), 4);
  const quadBytes = <usize>a.nsb * <usize>kquantTileBytes(format);
  const res = a.scratch + <usize>tid * <usize>a.scratchStride;
  const xStride = (<usize>a.nsb * QK_K) << XSHIFT, dStride = <usize>a.nsb << 2, sStride = <usize>a.nsb << 6;
  const x16Stride = (<usize>a.nsb * QK_K) << 1; // the widened kernels' int16 codes (args.xq16)
  const outStride = <usize>a.outStride;
  // The two-quad widened tiles need two quads' room past the results: a caller that sized less traps here, before any write.
  if (a.wide && <usize>a.scratchStride < 128 + 2 * <usize>a.nsb * <usize>a.wide) unreachable();
  // Tokens the two-quad tile has already taken for quad q (the second quad of a pair), 0 otherwise.
  let paired = 0;
  for (let q = q0; q < q1; q++) {
    const w = a.w + <usize>q * quadBytes;
    const row0 = q * QUAD;
    let t = paired;
    paired = 0;
    // Relaxed Q4_K on its int8 dots (not pairs, not widened): this quad and the next × 4 tokens at
    // once (gemmQ4KPairOfQuads); each quad's leftover tokens then go on below. The same outputs.
    if (RELAXED && format == FMT_Q4_K && !a.pairs && !a.wide && t == 0 && q + 1 < q1) {
      for (; t + 4 <= a.tokens; t += 4) {
        const ut = <usize>t;
        gemmQ4KPairOfQuads(w, quadBytes, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
        const out = a.out + ut * outStride;
        for (let k: usize = 0; k < 4; k++) {
          storeQuad(out + k * outStride, row0, a.rows, v128.load(res + (k << 4)), a.bias);
          storeQuad(out + k * outStride, row0 + QUAD, a.rows, v128.load(res + (k << 4), 64), a.bias);
        }
      }
      paired = t;
    }
    // Where the caller asks (args.wide), Q4_K, Q5_K and Q6_K quads are widened once to int16 codes (sc·q; Q6_K sc·(q − 32),
    // kquant-dot.ts widenQ45KQuad, widenQ6KQuad) in the thread's scratch past its first 128 bytes, and every 4-token tile
    // runs on them (the format test folds away in the other formats' tasks).
    const wide = a.wide && (format == FMT_Q4_K || format == FMT_Q5_K || format == FMT_Q6_K) ? res + 128 : 0;
    // Widened, with a next quad in this item: both quads × 2 tokens a tile (gemmQ45KWide2x2, gemmQ6KWide2x2), the next widened
    // past this one (the caller sizes the scratch for two); the last token of both goes on the GEMV below, and the next quad,
    // its tokens taken, is not widened again. The same outputs.
    const pair = wide != 0 && t == 0 && q + 1 < q1;
    if (wide && (pair || a.tokens - t >= 4)) {
      if (format == FMT_Q6_K) widenQ6KQuad(w, a.nsb, wide);
      else widenQ45KQuad(format == FMT_Q5_K, w, a.nsb, wide);
    }
    if (pair) {
      const wide2 = wide + <usize>a.nsb * <usize>a.wide;
      if (format == FMT_Q6_K) widenQ6KQuad(w + quadBytes, a.nsb, wide2);
      else widenQ45KQuad(format == FMT_Q5_K, w + quadBytes, a.nsb, wide2);
      for (; t + 2 <= a.tokens; t += 2) {
        const ut = <usize>t;
        if (format == FMT_Q6_K) gemmQ6KWide2x2(wide, wide2, a.xq16 + ut * x16Stride, x16Stride, a.xd + ut * dStride, dStride, a.nsb, res);
        else gemmQ45KWide2x2(wide, wide2, a.xq16 + ut * x16Stride, x16Stride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
        const out = a.out + ut * outStride;
        storeQuad(out, row0, a.rows, v128.load(res), a.bias);
        storeQuad(out + outStride, row0, a.rows, v128.load(res, 16), a.bias);
        storeQuad(out, row0 + QUAD, a.rows, v128.load(res, 32), a.bias);
        storeQuad(out + outStride, row0 + QUAD, a.rows, v128.load(res, 48), a.bias);
      }
      paired = t;
    }
    for (; t + 4 <= a.tokens; t += 4) {
      const ut = <usize>t;
      if (wide && format == FMT_Q6_K) gemmQ6KWide(wide, a.xq16 + ut * x16Stride, x16Stride, a.xd + ut * dStride, dStride, a.nsb, res);
      else if (wide) gemmQ45KWide(wide, a.xq16 + ut * x16Stride, x16Stride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      else if (format == FMT_Q4_K && a.pairs) gemmQ4KPairs(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      else if (format == FMT_Q4_K) gemmQ4K(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      else if (format == FMT_Q5_K && a.pairs) gemmQ5KPairs(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      else if (format == FMT_Q5_K) gemmQ5K(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      else if (format == FMT_Q2_K && a.pairs) gemmQ2KPairs(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      else if (format == FMT_Q2_K) gemmQ2K(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      else if (format == FMT_IQ4_XS) gemmIq4Xs(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.nsb, res);
      else if (format == FMT_Q3_K && a.pairs) gemmQ3KPairs(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      else if (format == FMT_Q3_K) gemmQ3K(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      else if (a.pairs) gemmQ6KPairs(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      else gemmQ6K(w, a.xq + ut * xStride, xStride, a.xd + ut * dStride, dStride, a.xsum + ut * sStride, sStride, a.nsb, res);
      const out = a.out + ut * outStride;
      storeQuad(out, row0, a.rows, v128.load(res), a.bias);
      storeQuad(out + outStride, row0, a.rows, v128.load(res, 16), a.bias);
      storeQuad(out + 2 * outStride, row0, a.rows, v128.load(res, 32), a.bias);
      storeQuad(out + 3 * outStride, row0, a.rows, v128.load(res, 48), a.bias);
    }
    for (; t < a.tokens; t++) {
      const ut = <usize>t;
      const r = format == FMT_Q4_K && a.pairs
        ? gemvQ4KPairs(w, a.xq + ut * xStride, a.xd + ut * dStride, a.xsum + ut * sStride, a.nsb)
        : format == FMT_Q4_K
        ? gemvQ4K(w, a.xq + ut * xStride, a.xd + ut * dStride, a.xsum + ut * sStride, a.nsb)
        : format == FMT_Q5_K && a.pairs
        ? gemvQ5KPairs(w, a.xq + ut * xStride, a.xd + ut * dStride, a.xsum + ut * sStride, a.nsb)
        : format == FMT_Q5_K
        ? gemvQ5K(w, a.xq + ut * xStride, a.xd + ut * dStride, a.xsum + ut * sStride, a.nsb)
        : format == FMT_Q2_K && a.pairs
        ? gemvQ2KPairs(w, a.xq + ut * xStride, a.xd + ut * dStride, a.xsum + ut * sStride, a.nsb)
        : format == FMT_Q2_K
        ? gemvQ2K(w, a.xq + ut * xStride, a.xd + ut * dStride, a.xsum + ut * sStride, a.nsb)
        : format == FMT_IQ4_XS
        ? gemvIq4Xs(w, a.xq + ut * xStride, a.xd + ut * dStride, a.nsb)
        : format == FMT_Q3_K && a.pairs
        ? gemvQ3KPairs(w, a.xq + ut * xStride, a.xd + ut * dStride, a.xsum + ut * sStride, a.nsb)
        : format == FMT_Q3_K
        ? gemvQ3K(w, a.xq + ut * xStride, a.xd + ut * dStride, a.xsum + ut * sStride, a.nsb)
        : a.pairs
        ? gemvQ6KPairs(w, a.xq + ut * xStride, a.xd + ut * dStride, a.xsum + ut * sStride, a.nsb)
        : gemvQ6K(w, a.xq + ut * xStride, a.xd + ut * dStride, a.xsum + ut * sStride, a.nsb);
      storeQuad(a.out + ut * outStride, row0, a.rows, r, a.bias);
    }
  }
}

export function task_linear_q4_k(item: i32, tid: i32, args: usize): void {
  kquantLinear(FMT_Q4_K, item, tid, args);
}

export function task_linear_q5_k(item: i32, tid: i32, args: usize): void {
  kquantLinear(FMT_Q5_K, item, tid, args);
}

export function task_linear_q6_k(item: i32, tid: i32, args: usize): void {
  kquantLinear(FMT_Q6_K, item, tid, args);
}

export function task_linear_q2_k(item: i32, tid: i32, args: usize): void {
  kquantLinear(FMT_Q2_K, item, tid, args);
}

export function task_linear_q3_k(item: i32, tid: i32, args: usize): void {
  kquantLinear(FMT_Q3_K, item, tid, args);
}

export function task_linear_iq4_xs(item: i32, tid: i32, args: usize): void {
  kquantLinear(FMT_IQ4_XS, item, tid, args);
}

// out[T, rows] = x[T, cols] · Wᵀ (+ bias), W packed as in layout.ts.
//
// Work item i = row groups [itemStarts[i], itemStarts[i + 1]) (8 rows each),
// all tokens; the runs shrink along the items (src/ops/partition.ts).
// T = 1 (decode): GEMV over each group's tile stream, both halves at once, one
// load a page two pages ahead (TOUCH_AHEAD).
// T > 1 (prefill, batched decode): for each half of each group, tokens four at
// a time with the register-blocked kernels of gemm.ts (the group's tiles stay
// in L1/L2 across the token tiles; q8 also eight at a time, on the relaxed
// u8 int8-dot mode both halves × four tokens, and relaxed f32 both halves ×
// three tokens, gemmF32Rows8x3), leftover tokens with the
// one-half GEMV kernel; q8 sweeps the groups once per block of 64 tokens,
// and its 1 to 3 leftover tokens (T = 2, 3: speculative verification, small
// batches) take both halves at once (gemvQ8x2, gemm-few.ts; in the u8 mode a
// last 4-token tile and its 1 leftover are one 5-token pass), as does a
// single leftover token on the other formats (their decode GEMVs). q5 (GGUF
// Q5_0, q5.ts) takes 1 to 3 tokens on its own GEMV and more on the q8 kernels,
// each row group unpacked to q8 tiles first (task_linear_q5). All paths do the
// same arithmetic in the same order per output, so outputs are independent
// of T, of the batch composition and of the thread count.

import { FMT_BF16, FMT_F32, FMT_Q4, FMT_Q5, FMT_Q8, GROUP, HALF, TILE_Q5, TILE_Q8, halfOffset, tileBytes } from "./layout";
import { gemvBf16, gemvBf16x2, gemvF32, gemvF32x2, gemvQ4, gemvQ4x2, gemvQ8, gemvQ8x2 } from "./gemv";
import { gemmBf16, gemmF32, gemmF32Rows8x3, gemmQ4, gemmQ4Rows8I16, gemmQ8, gemmQ8Rows8I16, gemmQ8Rows8U8, gemmQ8x8, gemmQ8I16Rows8, gemmQ8I16Rows8ByPair, gemmQ8I16Rows16x2, widenQ8Group, TILE_Q8_I16 } from "./gemm";
import { gemmQ8Rows8x2, gemmQ8Rows8x3, gemmQ8Rows8x5U8 } from "./gemm-few";
import { gemvQ5x2, q5BlockSums, unpackQ5Group } from "./q5";
import { DOT_I16, DOT_I7, DOT_U8, RELAXED } from "../runtime/flavor";

@unmanaged class LinearArgs {
  /** Packed weight: [groups][nb] tiles of 8 rows × 32 columns. */
  w: usize;
  nb: i32;
  groups: i32;
  rows: i32;
  /** Prepared activation rows, xStride bytes apart: f32 [nb · 32] (f32, bf16) or i16 codes (q8, q4). */
  x: usize;
  xStride: i32;
  /** f32 [T][nb] activation block scales (q8, q4). */
  xs: usize;
  tokens: i32;
  /** f32 [T, rows], row stride outStride bytes. */
  out: usize;
  outStride: i32;
  /** f32 [rows], or 0. */
  bias: usize;
  /** i32 [items + 1]: the first row group of each work item, then `groups`. */
  itemStarts: usize;
  /** Per-thread scratch (≥ 160 bytes each: gemmQ8Rows8x5U8's 5 tokens × 8 rows; q5: more from Q5_SCRATCH). */
  scratch: usize;
  scratchStride: i32;
  /** q8 / q4 / q5: the integer dot the activation codes were prepared for (flavor.ts DOT_I16, DOT_I7, DOT_U8). */
  dot: i32;
  /** Baseline flavor, 1: q8 widens at FEW_TOKENS tokens where rows have WIDEN_FEW_NB blocks or more (the caller says where it pays: V8 < 13). */
  widenFew: i32;
}

/** Stores the four lanes of res (rows row0 …) into out, adding bias, never past `rows`. */
@inline function storeRows(out: usize, row0: i32, rows: i32, res: v128, bias: usize): void {
  const p = out + (<usize>row0 << 2);
  const b = bias + (<usize>row0 << 2);
  if (row0 + HALF <= rows) {
    v128.store(p, bias ? f32x4.add(res, v128.load(b)) : res);
  } else if (row0 < rows) {
    // The last, partial half: only rows − row0 lanes exist in out and bias.
    const n = rows - row0;
    const r0 = f32x4.extract_lane(res, 0), r1 = f32x4.extract_lane(res, 1), r2 = f32x4.extract_lane(res, 2);
    store<f32>(p, bias ? r0 + load<f32>(b) : r0);
    if (n > 1) store<f32>(p, bias ? r1 + load<f32>(b, 4) : r1, 4);
    if (n > 2) store<f32>(p, bias ? r2 + load<f32>(b, 8) : r2, 8);
  }
}

/** res = [token][8 rows] f32 (32 bytes a token) for tokens t … t + n − 1 → rows row0 … row0 + 7 of their outputs (storeRows, both halves). */
@inline function storeTokens(a: LinearArgs, row0: i32, t: i32, n: i32, res: usize): void {
  for (let k = 0; k < n; k++) {
    const out = a.out + <usize>(t + k) * <usize>a.outStride;
    storeRows(out, row0, a.rows, v128.load(res + (<usize>k << 5)), a.bias);
    storeRows(out, row0 + HALF, a.rows, v128.load(res + (<usize>k << 5), 16), a.bias);
  }
}

/**
 * GEMV (T = 1) software prefetch: one load TOUCH_AHEAD bytes ahead per
 * PAGE_BYTES of weights read. wasm has no prefetch instruction, and hardware
 * prefetchers stop at 4 KiB page boundaries; on a VM with 4 KiB pages under
 * nested paging (this one: THP madvise-only, and V8 does not ask) each new
 * page of the stream then starts with a demand miss and a two-level page
 * walk. A load two pages ahead starts both early. Only one load a page, not
 * one a tile: a load that misses blocks retirement, and per-tile touches
 * (512 / 2048 bytes ahead) made decode 1.06× / 1.34× slower, where this made
 * it 0.97× (BENCHMARKS.md "gguf", 2026-11-27). Results are untouched.
 *
 * Where: q8 touches inside its GEMV's block loop, one load every 4032 bytes
 * of tiles (gemvQ8x2's Q8_TOUCH_TILES), in step with the stream. Issued all
 * at a row group's start, a down_proj group's (896 × 4864: 43.8 KB) eleven
 * touches missed together: spread, that GEMV reads 1.10× and the q8
 * Qwen2.5-0.5B decode step runs 1.06× faster. The other formats issue a
 * group's touches before it: the same spread touches made the q4 and q5
 * decode steps 0.74× and 0.81× as fast (BENCHMARKS.md "gguf", the page
 * touches in step with the stream).
 */
const PAGE_BYTES: usize = 4096;
const TOUCH_AHEAD: usize = 8192;

/** Tokens per sweep of the row groups for q8 (see linear): 64 tokens' codes of a 4864-column row are 311 KB (relaxed) to 622 KB. */
const Q8_TOKEN_BLOCK: i32 = 64;

/**
 * From this many tokens of a token block, q8 on the int16 dot widens each row
 * group's codes to int16 in the thread's scratch (past the q5 unpack, see
 * Q5_SCRATCH; the baseline flavor two groups, for gemmQ8I16Rows16x2) and runs
 * gemmQ8I16Rows8 / gemmQ8I16Rows16x2 / gemmQ8I16Rows8ByPair on them: the
 * widening is one pass over the group for every tile that reads it.
 */
const WIDEN_TOKENS: i32 = 8;

/** Up to this many tokens the baseline flavor's q8 takes the 8-row 4-token tiles (gemmQ8Rows8I16; see linear). */
const FEW_TOKENS: i32 = 16;

/**
 * From this many blocks a row (2048 columns) the baseline flavor's q8 widens
 * at FEW_TOKENS tokens too (the 16-sequence decode step): one linear, T = 16,
 * Node 22, against the 8-row tiles: [896, 4864] 1.07–1.10×, [1536, 8960]
 * 1.09–1.13×, [1024, 2816] 1.01–1.06× (Node 20: 1.09×, 1.14×); on shorter
 * rows it lost ([4864, 896] 0.89×, [2048, 1536] 0.97×), at T = 8 everywhere
 * (0.89–0.99×), and on V8 13 (Node 24, 0.92–0.95×), so there the caller
 * leaves it off (args.widenFew). Those readings were on the 8-row widened
 * tiles; on the 16-row ones (gemmQ8I16Rows16x2) [896, 4864] read 1.11× and
 * [4864, 896], [2048, 1536] 0.97×, 1.00× with the bound lifted, so it stands.
 */
const WIDEN_FEW_NB: i32 = 64;

/**
 * The same for f32 and bf16 (see linear): 64 tokens of a 1536-column row are
 * 393 KB. Unblocked, every half group re-read all T rows from L3: an
 * encoder step of 4982 tokens (embed suite, batch 256) ran its f32
 * projections at 13.5 GFLOP/s against 21–26 at 333 tokens (one thread).
 */
const FLOAT_TOKEN_BLOCK: i32 = 64;

/**
 * q5 weights: where in a thread's scratch, past the kernels' results, lie the
 * row group unpacked to q8 tiles (T ≥ Q5_GEMM_TOKENS) or 16·Σx per token and
 * block (i32 [T][nb], q5.ts q5BlockSums; fewer tokens).
 */
const Q5_SCRATCH: usize = 256;

/** From this many tokens q5 weights run the q8 GEMMs on each row group unpacked to q8 (q5.ts unpackQ5Group); fewer take gemvQ5x2 per token. */
const Q5_GEMM_TOKENS: i32 = 4;

/**
 * q5 = true: the weight is q5 (format is then FMT_Q8, the kernels that run):
 * each row group is unpacked to q8 tiles in the thread's scratch, once per
 * sweep, and the q8 kernels read those.
 */
@inline function linear(format: i32, mode: i32, item: i32, tid: i32, args: usize, q5: bool = false): void {
  const a = changetype<LinearArgs>(args);
  const g0 = load<i32>(a.itemStarts + (<usize>item << 2));
  const g1 = load<i32>(a.itemStarts + (<usize>item << 2), 4);
  const groupBytes = <usize>a.nb * <usize>tileBytes(format);
  const hb = <usize>halfOffset(format);
  const res = a.scratch + <usize>tid * <usize>a.scratchStride;
  const xStride = <usize>a.xStride;
  const sStride = <usize>a.nb << 2;
  const outStride = <usize>a.outStride;
  if (format == FMT_Q5) for (let t = 0; t < a.tokens; t++) q5BlockSums(a.x + <usize>t * xStride, a.nb, res + Q5_SCRATCH + <usize>t * sStride);
  if (a.tokens == 1) {
    // The weight stream's pages, touched TOUCH_AHEAD bytes ahead (see PAGE_BYTES).
    const last = a.w + <usize>a.groups * groupBytes - 4;
    let sink = 0;
    for (let g = g0; g < g1; g++) {
      const w = a.w + <usize>g * groupBytes;
      if (format != FMT_Q8) for (let o: usize = 0; o < groupBytes; o += PAGE_BYTES) sink ^= load<i32>(min(w + TOUCH_AHEAD + o, last));
      sink ^= bothHalves(format, mode, w, g * GROUP, 0, 1, a, res, TOUCH_AHEAD, last); // token 0, both halves: the decode GEMV
    }
    store<i32>(res, sink, 64); // keeps the touches (scratch past the 8 results)
    return;
  }
  // q8: tokens in blocks of Q8_TOKEN_BLOCK, each swept over the item's row
  // groups, so the block's activation codes stay in L2 while every group
  // reads them (all T tokens of a 512-token prefill's down_proj are 5 MB);
  // f32 and bf16 likewise (FLOAT_TOKEN_BLOCK).
  const tb = format == FMT_Q8 ? Q8_TOKEN_BLOCK : format == FMT_F32 || format == FMT_BF16 ? FLOAT_TOKEN_BLOCK : a.tokens;
  for (let t0 = 0; t0 < a.tokens; t0 += tb) {
    const tEnd = min(a.tokens, t0 + tb);
    for (let g = g0; g < g1; g++) {
      let wg = a.w + <usize>g * groupBytes;
      if (q5) {
        wg = res + Q5_SCRATCH;
        unpackQ5Group(a.w + <usize>g * <usize>a.nb * TILE_Q5, a.nb, wg);
      }
      // Relaxed q8 (u8 and i16 modes) and q4 (i16): both halves × 4 tokens at
      // once (gemm.ts gemmQ8Rows8U8, gemmQ8Rows8I16, gemmQ4Rows8I16), then per
      // half the leftovers. The baseline flavor keeps the 4-row tiles for
      // prefill: on V8 11 / 12 the q8 i16 kernel ran prefill at 0.84–1.02× of
      // them (Node 24: 1.10–1.24×). For a few tokens (FEW_TOKENS: decode
      // batches, speculative verification) it takes the 8-row kernel too: one
      // layer's q8 projections ran 1.05–1.25× as fast at T = 4–8 on Node 20
      // and 22, 1.08–1.25× at T = 4–64 on Node 24, and as fast at T = 12–16 on
      // Node 20 and 22 (0.97–1.04×; T = 32–64 on Node 20: 0.97–1.00×).
      let t8 = t0;
      // Relaxed f32: both halves × 3 tokens (gemm.ts gemmF32Rows8x3), leftovers below.
      if (RELAXED && format == FMT_F32) {
        const w = wg;
        for (; t8 + 3 <= tEnd; t8 += 3) {
          gemmF32Rows8x3(w, a.x + <usize>t8 * xStride, xStride, a.nb, res);
          storeTokens(a, g * GROUP, t8, 3, res);
        }
      }
      // q8 on the int16 dot from WIDEN_TOKENS tokens (baseline flavor: above
      // FEW_TOKENS, or at it on long rows, WIDEN_FEW_NB): the row group's codes
      // widened to int16 once (gemm.ts widenQ8Group), then on plain loads.
      // Relaxed: both halves × 4 tokens, two column pairs a step
      // (gemmQ8I16Rows8), the next group touched ahead (touchGroup). Baseline:
      // this group and the next widened together, 16 rows × 2 tokens a tile
      // (gemmQ8I16Rows16x2; Qwen2.5-0.5B Q8_0 512-token prefill 1.031× on
      // Node 22, 1.028× on Node 20, against the 8-row 4-token tile), their
      // last token on bothHalves; a last odd group takes both halves × 4
      // tokens, one column pair a step (gemmQ8I16Rows8ByPair; V8 12 and 11
      // spill the two-pair step). The same outputs; the last 1–3 tokens go on below.
      if (format == FMT_Q8 && mode == DOT_I16 && tEnd - t8 >= WIDEN_TOKENS && (RELAXED || a.tokens > FEW_TOKENS || (a.widenFew != 0 && a.tokens == FEW_TOKENS && a.nb >= WIDEN_FEW_NB))) {
        const w16 = res + Q5_SCRATCH + (q5 ? <usize>a.nb * TILE_Q8 : 0);
        widenQ8Group(wg, a.nb, w16);
        if (RELAXED && !q5 && g + 1 < g1) touchGroup(wg + groupBytes, groupBytes, res);
        if (!RELAXED && !q5 && g + 1 < g1) {
          const w16b = w16 + <usize>a.nb * TILE_Q8_I16;
          widenQ8Group(wg + groupBytes, a.nb, w16b);
          for (; t8 + 2 <= tEnd; t8 += 2) {
            gemmQ8I16Rows16x2(w16, w16b, a.x + <usize>t8 * xStride, xStride, a.xs + <usize>t8 * sStride, sStride, a.nb, res);
            storeTokens(a, g * GROUP, t8, 2, res);
            storeTokens(a, (g + 1) * GROUP, t8, 2, res + 64);
          }
          if (t8 < tEnd) {
            bothHalves(format, mode, wg, g * GROUP, t8, tEnd - t8, a, res);
            bothHalves(format, mode, wg + groupBytes, (g + 1) * GROUP, t8, tEnd - t8, a, res);
          }
          g++;
          continue;
        }
        for (; t8 + 4 <= tEnd; t8 += 4) {
          const xt = a.x + <usize>t8 * xStride, st = a.xs + <usize>t8 * sStride;
          if (RELAXED) gemmQ8I16Rows8(w16, xt, xStride, st, sStride, a.nb, res);
          else gemmQ8I16Rows8ByPair(w16, xt, xStride, st, sStride, a.nb, res);
          storeTokens(a, g * GROUP, t8, 4, res);
        }
      }
      const rows8 = RELAXED ? (format == FMT_Q8 && (mode == DOT_U8 || mode == DOT_I16)) || (format == FMT_Q4 && mode == DOT_I16) : format == FMT_Q8 && a.tokens <= FEW_TOKENS;
      if (rows8) {
        const w = wg;
        for (; t8 + 4 <= tEnd; t8 += 4) {
          const xt = a.x + <usize>t8 * xStride, st = a.xs + <usize>t8 * sStride;
          // u8: the last tile and its one leftover (T = 5: 4 drafts verified) in one pass, 1.13–1.22× as fast as 4 + 1.
          if (format == FMT_Q8 && mode == DOT_U8 && tEnd - t8 == 5) {
            gemmQ8Rows8x5U8(w, xt, xStride, st, sStride, a.nb, res);
            storeTokens(a, g * GROUP, t8, 5, res);
            t8 += 5;
            break;
          }
          if (format == FMT_Q4) gemmQ4Rows8I16(w, xt, xStride, st, sStride, a.nb, res);
          else if (mode == DOT_U8) gemmQ8Rows8U8(w, xt, xStride, st, sStride, a.nb, res);
          else gemmQ8Rows8I16(w, xt, xStride, st, sStride, a.nb, res);
          storeTokens(a, g * GROUP, t8, 4, res);
        }
      }
      // The per-half tiles below take whole tiles of 4 or 8 tokens. What they
      // leave over goes to `bothHalves`, both halves at once: on q8 all 1–3
      // tokens, on the other formats a single one (their x2 GEMVs; not q4's
      // u8 codes, which only its GEMM reads), the rest to the one-half GEMVs.
      const left = (tEnd - t8) & 3;
      // q5 takes 2 or 3 tokens here (Q5_GEMM_TOKENS), all in bothHalves.
      const tHalf = format == FMT_Q5 ? t8 : format == FMT_Q8 ? tEnd - left : left == 1 && !(format == FMT_Q4 && mode == DOT_U8) ? tEnd - 1 : tEnd;
      for (let h = 0; h < 2 && format != FMT_Q5; h++) {
        const row0 = g * GROUP + h * HALF;
        if (row0 >= a.rows) break;
        const w = wg + <usize>h * hb;
        let t = t8;
        // The 8-token q8 tile on the relaxed flavor only: V8 12 (Node 22) and
        // 11 (Node 20), which run the baseline flavor by default, place its 16
        // activation splats ahead of the arithmetic and spill 12 registers a
        // weight load (node --print-wasm-code); the 4-token tile does not
        // spill. Baseline q8 prefill: Node 22 1.33×, Node 20 1.26×, Node 24
        // 0.90× (BENCHMARKS.md "linalg"). Same sums, same outputs.
        if (format == FMT_Q8 && RELAXED) {
          for (; t + 8 <= tHalf; t += 8) {
            gemmQ8x8(w, a.x + <usize>t * xStride, xStride, a.xs + <usize>t * sStride, sStride, a.nb, res);
            const out = a.out + <usize>t * outStride;
            for (let k = 0; k < 8; k++) storeRows(out + <usize>k * outStride, row0, a.rows, v128.load(res + (<usize>k << 4)), a.bias);
          }
        }
        for (; t + 4 <= tHalf; t += 4) {
          const x = a.x + <usize>t * xStride;
          const xs = a.xs + <usize>t * sStride;
          if (format == FMT_F32) gemmF32(w, x, xStride, a.nb, res);
          else if (format == FMT_BF16) gemmBf16(w, x, xStride, a.nb, res);
          else if (format == FMT_Q8) gemmQ8(w, x, xStride, xs, sStride, a.nb, res);
          else gemmQ4(mode, w, x, xStride, xs, sStride, a.nb, res);
          const out = a.out + <usize>t * outStride;
          storeRows(out, row0, a.rows, v128.load(res), a.bias);
          storeRows(out + outStride, row0, a.rows, v128.load(res, 16), a.bias);
          storeRows(out + 2 * outStride, row0, a.rows, v128.load(res, 32), a.bias);
          storeRows(out + 3 * outStride, row0, a.rows, v128.load(res, 48), a.bias);
        }
        for (; t < tHalf; t++) {
          const x = a.x + <usize>t * xStride;
          const xs = a.xs + <usize>t * sStride;
          const r = format == FMT_F32 ? gemvF32(w, x, a.nb)
            : format == FMT_BF16 ? gemvBf16(w, x, a.nb)
            : format == FMT_Q8 ? gemvQ8(mode, w, x, xs, a.nb)
            : gemvQ4(mode, w, x, xs, a.nb);
          storeRows(a.out + <usize>t * outStride, row0, a.rows, r, a.bias);
        }
      }
      if (tHalf < tEnd) bothHalves(format, mode, wg, g * GROUP, tHalf, tEnd - tHalf, a, res);
    }
  }
}

/**
 * Loads one word of each 64-byte line of the `bytes` at w (the next row
 * group's q8 tiles), so they come into cache while the current group's tiles
 * run; the xor of the words goes to res + 156, inside every q8 scratch
 * (≥ 160 bytes) and read by no kernel, so the loads stay. wasm has no
 * prefetch instruction. Relaxed flavor, int16 dot, right after widenQ8Group
 * (one linear [4864, 896] and [896, 4864], two threads, Node 24 under
 * --no-enable-avx-vnni): T = 16 1.08–1.12×, T = 64 1.01–1.02×. Where it did
 * not pay, it is not called: before widenQ8Group 1.02× (its loads queue with
 * the widening's), after the first tile of the u8 tiles 0.98×, of the
 * baseline flavor's 8-row tiles (T = 16) 0.92×, and the baseline's widened
 * tiles 0.99–1.01×.
 */
@inline function touchGroup(w: usize, bytes: usize, res: usize): void {
  let sink = 0;
  for (let o: usize = 0; o < bytes; o += 64) sink ^= load<i32>(w + o);
  store<i32>(res, sink, 156);
}

/**
 * Tokens [t, t + n) of row group `g8 / 8` (stream w), both halves at once:
 * n = 1 on every format (the decode GEMVs: T = 1, and a single token the
 * tiles leave over), 2 or 3 on q8 (gemm-few.ts), 1 to 3 on q5 (one
 * gemvQ5x2 per token). One read of the group's
 * weights where one half per token read it 2n times. Same sums, same outputs.
 */
@inline function bothHalves(format: i32, mode: i32, w: usize, g8: i32, t: i32, n: i32, a: LinearArgs, res: usize, touchAhead: usize = 0, last: usize = 0): i32 {
  const xStride = <usize>a.xStride, sStride = <usize>a.nb << 2;
  const x = a.x + <usize>t * xStride, xs = a.xs + <usize>t * sStride;
  let sink = 0;
  if (format == FMT_F32) gemvF32x2(w, x, a.nb, res);
  else if (format == FMT_BF16) gemvBf16x2(w, x, a.nb, res);
  else if (format == FMT_Q4) gemvQ4x2(w, x, xs, a.nb, res);
  else if (format == FMT_Q5) {
    const x16 = res + Q5_SCRATCH + <usize>t * sStride;
    for (let k = 0; k < n; k++) gemvQ5x2(w, x + <usize>k * xStride, xs + <usize>k * sStride, x16 + <usize>k * sStride, a.nb, res + (<usize>k << 5));
  }
  else if (n == 1) sink = gemvQ8x2(mode, w, x, xs, a.nb, res, touchAhead, last);
  else if (n == 2) gemmQ8Rows8x2(mode, w, x, xStride, xs, sStride, a.nb, res);
  else gemmQ8Rows8x3(mode, w, x, xStride, xs, sStride, a.nb, res);
  storeTokens(a, g8, t, n, res);
  return sink;
}

export function task_linear_f32(item: i32, tid: i32, args: usize): void {
  linear(FMT_F32, DOT_I16, item, tid, args);
}

export function task_linear_bf16(item: i32, tid: i32, args: usize): void {
  linear(FMT_BF16, DOT_I16, item, tid, args);
}

/** q8: one instance of linear() per integer dot the flavor has (the baseline only DOT_I16). */
export function task_linear_q8(item: i32, tid: i32, args: usize): void {
  const dot = changetype<LinearArgs>(args).dot;
  if (RELAXED && dot == DOT_U8) linear(FMT_Q8, DOT_U8, item, tid, args);
  else if (RELAXED && dot == DOT_I7) linear(FMT_Q8, DOT_I7, item, tid, args);
  else linear(FMT_Q8, DOT_I16, item, tid, args);
}

/** q4: the relaxed dot only in the u8 mode with T > 1 (ops/linear.ts); every other call takes int16 codes. */
export function task_linear_q4(item: i32, tid: i32, args: usize): void {
  if (RELAXED && changetype<LinearArgs>(args).dot == DOT_U8) linear(FMT_Q4, DOT_U8, item, tid, args);
  else linear(FMT_Q4, DOT_I16, item, tid, args);
}

/**
 * q5: T < Q5_GEMM_TOKENS on its own GEMV with int16 codes (the decode
 * stream: 7 bits a weight); more tokens on the q8 kernels of the call's
 * int8-dot mode, each row group unpacked to q8 first (ops/linear.ts prepares
 * the codes for that mode). Same sums, same outputs either way.
 */
export function task_linear_q5(item: i32, tid: i32, args: usize): void {
  const a = changetype<LinearArgs>(args);
  if (a.tokens < Q5_GEMM_TOKENS) linear(FMT_Q5, DOT_I16, item, tid, args);
  else if (RELAXED && a.dot == DOT_U8) linear(FMT_Q8, DOT_U8, item, tid, args, true);
  else if (RELAXED && a.dot == DOT_I7) linear(FMT_Q8, DOT_I7, item, tid, args, true);
  else linear(FMT_Q8, DOT_I16, item, tid, args, true);
}

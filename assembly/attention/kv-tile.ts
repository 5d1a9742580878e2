// K/V tiles: where row j of (batch b, KV head) lives, and how a tile of rows is
// made readable as f32 rows of D4 = padD(D) floats.
//
// The microkernels read K/V through an array of row addresses (kRows/vRows),
// so the two questions stay separate:
//   - tileRows: the addresses of a tile's rows. A padded/strided cache has
//     row j at base + b·sB + kvh·sH + (k0 + j)·sS; a paged cache (vLLM's
//     PagedAttention, the IFA design's PageAttention with block_table) at
//     base + slot·sS + kvh·sH with slot = blockTable[b, p / blockSize] ·
//     blockSize + p % blockSize, p = k0 + j, looked up once per run of rows
//     inside one block. int8 per-token scales ([numSlots, Hkv]) are gathered
//     beside the addresses.
//   - fillTile: rows are decoded into the thread's tile scratch, zero-padded
//     to D4, dequantized as they load (ARCHITECTURE.md: x = (q + offset) ·
//     scale for int8, x = fp8(q) · scale for fp8). The dtype and mode switch
//     is taken once per tile, outside the row and element loops.
// Tile rows [n, roundUp4(n)) point at row 0 so the 4-key microkernels can read
// them; their scores are masked to −Infinity and never reach P·V.

import { AttnArgs, QUANT_PER_CHANNEL, QUANT_PER_TENSOR, QUANT_PER_TOKEN } from "./args";
import {
  DT_BF16, DT_F16, DT_F32, DT_FP8E4M3, DT_FP8E5M2, DT_INT8, F16_CONSTS, FP8_CONSTS, decodeF16x4With, dtypeBytes, e5m2AsF16x4, loadAsF32, loadBf16x4, loadFp8E4M3x4With, loadInt8x4,
} from "../tensor/dtype";

/**
 * Writes the addresses of rows [t0, t0 + n) of (b, kvh) to rows[0, n) and
 * points rows[n, roundUp4(n)) at the first row. `base` and the element strides
 * describe the K or V operand (paged: sS = slot stride, sB unused). With
 * tokScale ≠ 0 (int8 per-token, f32 [numSlots, Hkv]), the rows' scales go to
 * sc[0, n) and the pad lanes of sc get 0.
 */
export function tileRows(a: AttnArgs, base: usize, sB: i32, sH: i32, sS: i32, b: i32, kvh: i32, k0: i32, t0: i32, n: i32, rows: usize, tokScale: usize, sc: usize): void {
  const eb = <usize>dtypeBytes(a.kvDtype);
  const step = <usize>sS * eb;
  if (a.blockTable == 0) {
    const first = base + (<usize>b * <usize>sB + <usize>kvh * <usize>sH + <usize>(k0 + t0) * <usize>sS) * eb;
    for (let t = 0; t < n; t++) store<usize>(rows + (<usize>t << 2), first + <usize>t * step);
  } else {
    const bs = a.blockSize;
    const hkv = a.H / a.G;
    const table = a.blockTable + (<usize>b * <usize>a.btStride << 2);
    const head = base + <usize>kvh * <usize>sH * eb;
    let p = k0 + t0;
    let t = 0;
    while (t < n) {
      const blk = p / bs;
      const off = p - blk * bs;
      const run = min(n - t, bs - off);
      const slot0 = load<i32>(table + (<usize>blk << 2)) * bs + off;
      const first = head + <usize>slot0 * step;
      for (let r = 0; r < run; r++) store<usize>(rows + (<usize>(t + r) << 2), first + <usize>r * step);
      if (tokScale != 0) {
        const s0 = tokScale + ((<usize>slot0 * <usize>hkv + <usize>kvh) << 2);
        for (let r = 0; r < run; r++) store<f32>(sc + (<usize>(t + r) << 2), load<f32>(s0 + ((<usize>r * <usize>hkv) << 2)));
      }
      t += run;
      p += run;
    }
  }
  const n4 = (n + 3) & ~3;
  const row0 = load<usize>(rows);
  for (let t = n; t < n4; t++) store<usize>(rows + (<usize>t << 2), row0);
  if (tokScale != 0) for (let t = n; t < n4; t++) store<f32>(sc + (<usize>t << 2), 0);
}

/**
 * Decodes n rows (addresses in `rows`) of dtype DT and mode MODE into `tile`
 * (rows of dstStride bytes). Per-tensor: × scalar; per-channel: (x + off[e]) ·
 * sc[e] with chScale/chOffset the KV head's f32 [D] rows; per-token: × the
 * row's scale from tokSc. DT and MODE are compile-time constants at each call.
 */
@inline function decodeRows(DT: i32, MODE: i32, rows: usize, n: i32, D: i32, tile: usize, dstStride: usize, scalar: f32, chScale: usize, chOffset: usize, tokSc: usize): void {
  const sv = f32x4.splat(scalar);
  // The f16 / fp8 decoders' constants, read once here: V8 13 (Node 24) would
  // rebuild each splat at every use in the loop (tools/v128-const-audit.mjs).
  const fp8 = DT == DT_FP8E4M3;
  const k = fp8 ? FP8_CONSTS : F16_CONSTS;
  const c0 = v128.load(k), c1 = v128.load(k, 16), c2 = v128.load(k, 32), c3 = v128.load(k, 48);
  const c4 = fp8 ? v128.load(k, 64) : c3;
  for (let t = 0; t < n; t++) {
    const s = load<usize>(rows + (<usize>t << 2));
    const d = tile + <usize>t * dstStride;
    const rowScale: f32 = MODE == QUANT_PER_TOKEN ? load<f32>(tokSc + (<usize>t << 2)) : 1;
    const rv = f32x4.splat(rowScale);
    let e = 0;
    for (; e + 4 <= D; e += 4) {
      let x = DT == DT_F32
        ? v128.load(s + (<usize>e << 2))
        : DT == DT_F16
          ? decodeF16x4With(v128.load16x4_s(s + (<usize>e << 1)), c0, c1, c2, c3)
          : DT == DT_BF16
            ? loadBf16x4(s + (<usize>e << 1))
            : DT == DT_INT8
              ? loadInt8x4(s + <usize>e)
              : DT == DT_FP8E4M3
                ? loadFp8E4M3x4With(s + <usize>e, c0, c1, c2, c3, c4)
                : decodeF16x4With(e5m2AsF16x4(s + <usize>e), c0, c1, c2, c3);
      if (MODE == QUANT_PER_TENSOR) x = f32x4.mul(x, sv);
      else if (MODE == QUANT_PER_CHANNEL) x = f32x4.mul(f32x4.add(x, v128.load(chOffset + (<usize>e << 2))), v128.load(chScale + (<usize>e << 2)));
      else if (MODE == QUANT_PER_TOKEN) x = f32x4.mul(x, rv);
      v128.store(d + (<usize>e << 2), x);
    }
    for (; e < D; e++) {
      let x = loadAsF32(DT, s, <usize>e);
      if (MODE == QUANT_PER_TENSOR) x *= scalar;
      else if (MODE == QUANT_PER_CHANNEL) x = (x + load<f32>(chOffset + (<usize>e << 2))) * load<f32>(chScale + (<usize>e << 2));
      else if (MODE == QUANT_PER_TOKEN) x *= rowScale;
      store<f32>(d + (<usize>e << 2), x);
    }
  }
}

/**
 * Makes rows [j0, j0 + n) of one (b, kvh) readable as f32 rows: decodes the
 * rows at the addresses in rows[0, n) (from tileRows) into `tile` (BC rows of
 * D4 floats, zero-padded), dequantizing as they load, and overwrites
 * rows[0, roundUp4(n)) with the tile rows' addresses. f32 rows are copied too:
 * one sequential pass that the hardware prefetcher follows, after which the
 * microkernels' strided reads hit L1/L2 (reading the cache in place made P·V's
 * column-block order miss on every row).
 *   quant: QUANT_* of args.ts; scalar: the per-tensor scale; chScale/chOffset:
 *   the KV head's per-channel f32 [D] rows; tokSc: per-token scales f32 [n].
 */
export function fillTile(dtype: i32, quant: i32, rows: usize, n: i32, D: i32, D4: i32, tile: usize, scalar: f32, chScale: usize, chOffset: usize, tokSc: usize): void {
  const n4 = (n + 3) & ~3;
  const dst = <usize>D4 << 2;
  if (dtype == DT_F32) decodeRows(DT_F32, 0, rows, n, D, tile, dst, scalar, chScale, chOffset, tokSc);
  else if (dtype == DT_F16) decodeRows(DT_F16, 0, rows, n, D, tile, dst, scalar, chScale, chOffset, tokSc);
  else if (dtype == DT_BF16) decodeRows(DT_BF16, 0, rows, n, D, tile, dst, scalar, chScale, chOffset, tokSc);
  else if (dtype == DT_INT8 && quant == QUANT_PER_CHANNEL) decodeRows(DT_INT8, QUANT_PER_CHANNEL, rows, n, D, tile, dst, scalar, chScale, chOffset, tokSc);
  else if (dtype == DT_INT8) decodeRows(DT_INT8, QUANT_PER_TOKEN, rows, n, D, tile, dst, scalar, chScale, chOffset, tokSc);
  else if (dtype == DT_FP8E4M3) decodeRows(DT_FP8E4M3, QUANT_PER_TENSOR, rows, n, D, tile, dst, scalar, chScale, chOffset, tokSc);
  else decodeRows(DT_FP8E5M2, QUANT_PER_TENSOR, rows, n, D, tile, dst, scalar, chScale, chOffset, tokSc);
  if (D != D4) {
    // Zero the pad lanes so padded dot products and P·V add exact zeros.
    for (let t = 0; t < n; t++) {
      const d = tile + <usize>t * dst;
      for (let e = D; e < D4; e++) store<f32>(d + (<usize>e << 2), 0);
    }
  }
  for (let t = 0; t < n; t++) store<usize>(rows + (<usize>t << 2), tile + <usize>t * dst);
  for (let t = n; t < n4; t++) store<usize>(rows + (<usize>t << 2), tile);
}

/**
 * Reads one word per 64-byte line of the n rows at rows[0, n), `rowBytes`
 * bytes each: a software prefetch. wasm has no prefetch instruction, and on
 * the target VM (4 KiB pages under nested paging) the hardware prefetcher does
 * not keep a compute-paced stream fed (a Q·Kᵀ loop streaming K from DRAM
 * measured ≈ 5 GB/s), while a dense loop of independent loads keeps ~100 lines
 * in flight and reaches the core's read bandwidth (≈ 30 GB/s). Decode
 * therefore touches each tile first and then computes on it from cache.
 * Returns the xor of the words (store it so the loads stay).
 */
export function touchRows(rows: usize, n: i32, rowBytes: usize): i32 {
  let sink = 0;
  for (let t = 0; t < n; t++) {
    const row = load<usize>(rows + (<usize>t << 2));
    for (let o: usize = 0; o < rowBytes; o += 64) sink ^= load<i32>(row + o);
  }
  return sink;
}

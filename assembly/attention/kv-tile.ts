// K/V tiles: where row j of (batch b, KV head) lives, and how a tile of rows is
// made readable as f32 rows of D4 = padD(D) floats.
//
// The microkernels read K/V through an array of row addresses (kRows/vRows),
// so the two questions stay separate:
//   - rowAddress: the padded/strided caches here (base + b·sB + h·sH + j·sS);
//     a paged cache answers it with a block-table lookup instead.
//   - fillTile: rows are decoded (f32 copy; f16, bf16 via the loaders of
//     assembly/tensor/dtype.ts) into the thread's tile scratch, zero-padded to
//     D4. The dtype switch is taken once per tile, outside the row and element
//     loops; a new storage format adds one decodeRows variant.
// Tile rows [n, roundUp4(n)) point at row 0 so the 4-key microkernel can read
// them; their scores are masked to −Infinity and never reach P·V.

import { DT_F16, DT_F32, decodeBf16, decodeF16, dtypeBytes, loadBf16x4, loadF16x4 } from "../tensor/dtype";

/** Byte address of row j (0-based within the sequence, k0 = the sequence's first row index) of (b, kvh). */
@inline export function rowAddress(base: usize, dtype: i32, sB: i32, sH: i32, sS: i32, b: i32, kvh: i32, k0: i32, j: i32): usize {
  const elem = <usize>b * <usize>sB + <usize>kvh * <usize>sH + <usize>(k0 + j) * <usize>sS;
  return base + elem * <usize>dtypeBytes(dtype);
}

@inline function decodeRowsF32(src: usize, srcStride: usize, n: i32, D: i32, dst: usize, dstStride: usize): void {
  for (let t = 0; t < n; t++) {
    const s = src + <usize>t * srcStride;
    const d = dst + <usize>t * dstStride;
    let e = 0;
    for (; e + 4 <= D; e += 4) v128.store(d + (<usize>e << 2), v128.load(s + (<usize>e << 2)));
    for (; e < D; e++) store<f32>(d + (<usize>e << 2), load<f32>(s + (<usize>e << 2)));
  }
}

@inline function decodeRowsF16(src: usize, srcStride: usize, n: i32, D: i32, dst: usize, dstStride: usize): void {
  for (let t = 0; t < n; t++) {
    const s = src + <usize>t * srcStride;
    const d = dst + <usize>t * dstStride;
    let e = 0;
    for (; e + 4 <= D; e += 4) v128.store(d + (<usize>e << 2), loadF16x4(s + (<usize>e << 1)));
    for (; e < D; e++) store<f32>(d + (<usize>e << 2), decodeF16(<u32>load<u16>(s + (<usize>e << 1))));
  }
}

@inline function decodeRowsBf16(src: usize, srcStride: usize, n: i32, D: i32, dst: usize, dstStride: usize): void {
  for (let t = 0; t < n; t++) {
    const s = src + <usize>t * srcStride;
    const d = dst + <usize>t * dstStride;
    let e = 0;
    for (; e + 4 <= D; e += 4) v128.store(d + (<usize>e << 2), loadBf16x4(s + (<usize>e << 1)));
    for (; e < D; e++) store<f32>(d + (<usize>e << 2), decodeBf16(<u32>load<u16>(s + (<usize>e << 1))));
  }
}

/**
 * Makes rows [j0, j0 + n) of one (b, kvh) readable as f32 rows: streams them,
 * decoded, into `tile` (BC rows of D4 floats, zero-padded) and writes their
 * addresses to rows[0, roundUp4(n)). `first` is the address of row j0 and
 * `stride` the bytes between consecutive rows (a contiguous run of the cache).
 * f32 rows are copied too: one sequential pass that the hardware prefetcher
 * follows, after which the microkernels' strided reads hit L1/L2 (reading the
 * cache in place made P·V's column-block order miss on every row).
 */
export function fillTile(dtype: i32, first: usize, stride: usize, n: i32, D: i32, D4: i32, tile: usize, rows: usize): void {
  const n4 = (n + 3) & ~3;
  const dstStride = <usize>D4 << 2;
  if (dtype == DT_F32) decodeRowsF32(first, stride, n, D, tile, dstStride);
  else if (dtype == DT_F16) decodeRowsF16(first, stride, n, D, tile, dstStride);
  else decodeRowsBf16(first, stride, n, D, tile, dstStride);
  if (D != D4) {
    // Zero the pad lanes so padded dot products and P·V add exact zeros.
    for (let t = 0; t < n; t++) {
      const d = tile + <usize>t * dstStride;
      for (let e = D; e < D4; e++) store<f32>(d + (<usize>e << 2), 0);
    }
  }
  for (let t = 0; t < n; t++) store<usize>(rows + (<usize>t << 2), tile + <usize>t * dstStride);
  for (let t = n; t < n4; t++) store<usize>(rows + (<usize>t << 2), tile);
}

/**
 * Points rows[0, roundUp4(n)) at rows [j0, j0 + n) of the cache in place
 * (f32 or bf16 rows with D % 4 == 0, read by the microkernels directly).
 */
export function rowsInPlace(first: usize, stride: usize, n: i32, rows: usize): void {
  for (let t = 0; t < n; t++) store<usize>(rows + (<usize>t << 2), first + <usize>t * stride);
  const n4 = (n + 3) & ~3;
  for (let t = n; t < n4; t++) store<usize>(rows + (<usize>t << 2), first);
}

/**
 * Reads one word per 64-byte line of n rows of `rowBytes` bytes: a software
 * prefetch. wasm has no prefetch instruction, and on the target VM (4 KiB
 * pages under nested paging) the hardware prefetcher does not keep a
 * compute-paced stream fed (a Q·Kᵀ loop streaming K from DRAM measured
 * ≈ 5 GB/s), while a dense loop of independent loads keeps ~100 lines in
 * flight and reaches the core's read bandwidth (≈ 30 GB/s). Decode therefore
 * touches each tile first and then computes on it from cache. Returns the
 * xor of the words (store it so the loads stay).
 */
export function touchRows(first: usize, stride: usize, n: i32, rowBytes: usize): i32 {
  let sink = 0;
  for (let t = 0; t < n; t++) {
    const row = first + <usize>t * stride;
    for (let o: usize = 0; o < rowBytes; o += 64) sink ^= load<i32>(row + o);
  }
  return sink;
}

// Weight packing: a source matrix (f32, f16 or bf16 rows, as loaded from
// safetensors) → the tiled layout of layout.ts in one of the four formats, and
// the way back (one row → f32), which the embedding lookup and
// dequantization use (for q5 too, which only GGUF Q5_0 makes: ggml-pack.ts).
//
// Quantization, per row and block of 32 values x:
//   q8 (GGUF Q8_0): d = max|x| / 127, q = round(x / d) ∈ [−127, 127]
//   q4 (GGUF Q4_0): m = the x of largest magnitude (first one on ties),
//                   d = m / −8, q = clamp(round(x / d), −8, 7)   (m ↦ −8 exactly)
// with d = 0 → q = 0, and round = to nearest, ties to even.

import { load4AsF32, loadAsF32, dtypeBytes, encodeBf16, decodeBf16 } from "../tensor/dtype";
import { BLOCK, FMT_BF16, FMT_F32, FMT_Q5, FMT_Q8, GROUP, HALF, Q4_SCALES, Q5_SCALES, Q8_SCALES, halfOffset, q5Field, tileBytes } from "./layout";

/** tmp[0..32) (f32) = src row elements [c0, c0 + 32), zero past `n` valid ones. */
@inline function loadBlock(srcDt: i32, row: usize, c0: i32, n: i32, tmp: usize): void {
  if (n == BLOCK && srcDt <= 2) {
    for (let i = 0; i < BLOCK; i += 4) v128.store(tmp + (<usize>i << 2), load4AsF32(srcDt, row, <usize>(c0 + i)));
  } else {
    for (let i = 0; i < BLOCK; i++) store<f32>(tmp + (<usize>i << 2), i < n ? loadAsF32(srcDt, row, <usize>(c0 + i)) : 0);
  }
}

@inline function absMax(tmp: usize): f32 {
  let m = f32x4.abs(v128.load(tmp));
  for (let i = 16; i < BLOCK * 4; i += 16) m = f32x4.max(m, f32x4.abs(v128.load(tmp + i)));
  return max(max(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)), max(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)));
}

/** Rounds tmp[i] · id to nearest-even, clamped to [lo, hi], into 32 int8 at q. */
@inline function quantizeBlock(tmp: usize, id: f32, lo: i32, hi: i32, q: usize): void {
  const vid = f32x4.splat(id);
  const vlo = i32x4.splat(lo);
  const vhi = i32x4.splat(hi);
  for (let i = 0; i < BLOCK; i += 16) {
    const p = tmp + (<usize>i << 2);
    const a = i32x4.max_s(vlo, i32x4.min_s(vhi, i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p), vid)))));
    const b = i32x4.max_s(vlo, i32x4.min_s(vhi, i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p, 16), vid)))));
    const c = i32x4.max_s(vlo, i32x4.min_s(vhi, i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p, 32), vid)))));
    const d = i32x4.max_s(vlo, i32x4.min_s(vhi, i32x4.trunc_sat_f32x4_s(f32x4.nearest(f32x4.mul(v128.load(p, 48), vid)))));
    v128.store(q + <usize>i, i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(a, b), i16x8.narrow_i32x4_s(c, d)));
  }
}

/**
 * Writes lane `r` (a row) of one half of a tile from the 32 f32 values at tmp;
 * `tile` is already offset to the half (halfOffset); q is 32 bytes of scratch.
 */
function packTileRow(format: i32, tmp: usize, q: usize, tile: usize, r: i32): void {
  const lane = <usize>r;
  if (format == FMT_F32) {
    for (let k = 0; k < BLOCK; k++) store<f32>(tile + (<usize>k << 5) + (lane << 2), load<f32>(tmp + (<usize>k << 2)));
  } else if (format == FMT_BF16) {
    for (let j = 0; j < BLOCK / 2; j++) {
      const lo = encodeBf16(load<f32>(tmp + (<usize>j << 3)));
      const hi = encodeBf16(load<f32>(tmp + (<usize>j << 3) + 4));
      store<u32>(tile + (<usize>j << 5) + (lane << 2), lo | (hi << 16));
    }
  } else if (format == FMT_Q8) {
    const amax = absMax(tmp);
    const d = amax / 127;
    quantizeBlock(tmp, d != 0 ? 1 / d : 0, -127, 127, q);
    for (let j = 0; j < BLOCK / 2; j++) store<u16>(tile + (<usize>j << 3) + (lane << 1), load<u16>(q + (<usize>j << 1)));
    store<f32>(tile + Q8_SCALES + (lane << 2), d);
  } else {
    // Q4_0: the value of largest magnitude maps to −8 exactly.
    let amax: f32 = 0;
    let m: f32 = 0;
    for (let i = 0; i < BLOCK; i++) {
      const v = load<f32>(tmp + (<usize>i << 2));
      if (abs(v) > amax) {
        amax = abs(v);
        m = v;
      }
    }
    const d = m / -8;
    quantizeBlock(tmp, d != 0 ? 1 / d : 0, -8, 7, q);
    for (let c = 0; c < 4; c++) {
      // Chunk c: half s collects columns 2·(4c + k) + s in nibble k.
      let word: u32 = 0;
      for (let k = 0; k < 4; k++) {
        const e = (c * 4 + k) * 2;
        word |= ((<u32>load<i8>(q + <usize>e) & 15) << (4 * k)) | ((<u32>load<i8>(q + <usize>e + 1) & 15) << (16 + 4 * k));
      }
      store<u32>(tile + (<usize>c << 4) + (lane << 2), word);
    }
    store<f32>(tile + Q4_SCALES + (lane << 2), d);
  }
}

/** Element (lane r, column k) of a half of a tile (offset to the half), decoded to f32. */
@inline function tileValue(format: i32, tile: usize, lane: usize, k: i32): f32 {
  if (format == FMT_F32) return load<f32>(tile + (<usize>k << 5) + (lane << 2));
  if (format == FMT_BF16) return decodeBf16(<u32>load<u16>(tile + (<usize>(k >> 1) << 5) + (lane << 2) + (<usize>(k & 1) << 1)));
  if (format == FMT_Q8) {
    return <f32>load<i8>(tile + (<usize>(k >> 1) << 3) + (lane << 1) + <usize>(k & 1)) * load<f32>(tile + Q8_SCALES + (lane << 2));
  }
  const j = k >> 1;
  if (format == FMT_Q5) {
    const at = q5Field(k, <i32>lane); // value (q − 16)·scale
    return <f32>(((<i32>load<u16>(tile + <usize>(at & 0xff)) >> (at >> 8)) & 31) - 16) * load<f32>(tile + Q5_SCALES + (lane << 2));
  }
  const word = <i32>load<u16>(tile + (<usize>(j >> 2) << 4) + (lane << 2) + (<usize>(k & 1) << 1));
  const q = (word << (28 - 4 * (j & 3))) >> 28; // sign-extend nibble j & 3
  return <f32>q * load<f32>(tile + Q4_SCALES + (lane << 2));
}

/** dst[0..cols) (f32) = row `row` of the packed weight. */
export function unpackRow(format: i32, w: usize, nb: i32, cols: i32, row: i32, dst: usize): void {
  const tb = <usize>tileBytes(format);
  const lane = <usize>(row & (HALF - 1));
  let tile = w + <usize>(row >> 3) * <usize>nb * tb + <usize>((row >> 2) & 1) * <usize>halfOffset(format);
  for (let b = 0; b < nb; b++, tile += tb) {
    const c0 = b * BLOCK;
    const n = min(BLOCK, cols - c0);
    for (let k = 0; k < n; k++) store<f32>(dst + (<usize>(c0 + k) << 2), tileValue(format, tile, lane, k));
  }
}

@unmanaged class PackArgs {
  /** Source rows [srcRows, cols] of dtype srcDt (f32 | f16 | bf16), contiguous. */
  src: usize;
  srcDt: i32;
  srcRows: i32;
  cols: i32;
  /** Weight row that source row 0 becomes. */
  rowOffset: i32;
  /** Packed weight: [groups][nb] tiles of `format`. */
  w: usize;
  format: i32;
  nb: i32;
  /** Per-thread scratch, 256 bytes each. */
  scratch: usize;
  scratchStride: i32;
}

/**
 * Item i packs the source rows that fall in row group floor(rowOffset / 8) + i,
 * every block; lanes of other rows in the tile are left as they are, so
 * sources concatenated along rows pack with one launch each.
 */
export function task_weight_pack(item: i32, tid: i32, args: usize): void {
  const a = changetype<PackArgs>(args);
  const g = (a.rowOffset >> 3) + item;
  const rLo = max(g * GROUP, a.rowOffset);
  const rHi = min(g * GROUP + GROUP, a.rowOffset + a.srcRows);
  const tmp = a.scratch + <usize>tid * <usize>a.scratchStride;
  const q = tmp + 128;
  const tb = <usize>tileBytes(a.format);
  const rowBytes = <usize>a.cols * <usize>dtypeBytes(a.srcDt);
  for (let r = rLo; r < rHi; r++) {
    const src = a.src + <usize>(r - a.rowOffset) * rowBytes;
    let tile = a.w + <usize>g * <usize>a.nb * tb + <usize>((r >> 2) & 1) * <usize>halfOffset(a.format);
    for (let b = 0; b < a.nb; b++, tile += tb) {
      const c0 = b * BLOCK;
      loadBlock(a.srcDt, src, c0, min(BLOCK, a.cols - c0), tmp);
      packTileRow(a.format, tmp, q, tile, r & (HALF - 1));
    }
  }
}

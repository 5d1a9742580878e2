// The packed weight layout shared by every linear kernel (see src/ops/weight.ts
// for the full description and the round-trip error of each format).
//
// A Weight [rows, cols] is stored as tiles of 8 rows × 32 columns: rows are
// zero-padded to a multiple of 8 ("row groups"), columns to a multiple of 32
// ("blocks"). Tile (g, b) covers rows [8g, 8g + 8) × columns [32b, 32b + 32);
// tiles are stored g-major, [groups][blocks], so a run of row groups is one
// contiguous stream, read front to back by the decode GEMV — what the hardware
// prefetcher follows (two interleaved streams ran at half the speed or worse
// from DRAM). The 8 rows are two halves of 4 (rows 8g..8g+3, 8g+4..8g+7); a
// half's four rows are interleaved so that a SIMD vector holds the same
// column(s) of the four rows and a dot product leaves row r's sum in lane r,
// with no horizontal reduction. Byte offsets inside a tile, for half h, lane r:
//
//   f32   1024 B: column k at 32k + 16h + 4r (f32)
//   bf16   512 B: column pair j at 32j + 16h + 4r (u32 = bf16(2j) | bf16(2j + 1) << 16)
//   q8     288 B: half h at 144h: [16 col pairs][4 rows][2] int8 (q ∈ [−127, 127])
//                 = column 2j + s at 8j + 2r + s, then f32 scale[4 rows] at 128 + 4r
//   q4     160 B: half h at 80h: [4 chunks][4 rows][2 halves] u16, u16 nibble k of
//                 (chunk m, half s) at 16m + 4r + 2s is column 2·(4m + k) + s, a 4-bit
//                 two's-complement q ∈ [−8, 7]; then f32 scale[4 rows] at 64 + 4r
//   q5     224 B: half h at 112h: 6 vectors u of [4 rows][2 halves] u16, the u16 at
//                 16u + 4r + 2s holds ggml's 5-bit codes q ∈ [0, 31] (value
//                 (q − 16) · scale): u < 5: column 2·(3u + f) + s in bits 5f … 5f + 4
//                 (f = 0, 1, 2; bit 15 zero); u = 5: column 30 + s in bits 0 … 4 (the
//                 rest zero); then f32 scale[4 rows] at 96 + 4r. GGUF Q5_0 kept
//                 natively (ggml-pack.ts): 7 bits a weight where q8 takes 9. One
//                 operation takes a field as int16 lanes: a mask (f = 0: q; f = 1:
//                 32·q) or a logical shift (f = 2: q) (q5.ts).
//
// Value of a quantized element: q · scale[row] (one scale per row and block of 32).

export const BLOCK: i32 = 32;
/** Rows per half tile: the f32x4 lanes. */
export const HALF: i32 = 4;
/** Rows per row group (one tile row): two halves. */
export const GROUP: i32 = 8;

export const FMT_F32: i32 = 0;
export const FMT_BF16: i32 = 1;
export const FMT_Q8: i32 = 2;
export const FMT_Q4: i32 = 3;
/** After the K-quants' 4 … 9 (kquant-layout.ts). */
export const FMT_Q5: i32 = 10;

/** Bytes of a tile (8 rows × 32 columns). */
export const TILE_F32: i32 = 1024;
export const TILE_BF16: i32 = 512;
export const TILE_Q8: i32 = 288;
export const TILE_Q4: i32 = 160;
export const TILE_Q5: i32 = 224;

/**
 * Where column c (0..31) of lane r lies in a q5 half tile: the byte offset of
 * its u16 (vector u = pair / 3, pair 15: u = 5), then (<< 8) the shift of its
 * 5-bit field (5 · (pair % 3); pair 15: 0). Read by the packing and the decode.
 */
@inline export function q5Field(c: i32, r: i32): i32 {
  const i = c >> 1;
  const u = i < 15 ? i / 3 : 5, f = i < 15 ? i % 3 : 0;
  return ((u << 4) + (r << 2) + ((c & 1) << 1)) | ((5 * f) << 8);
}

/** Byte offset of half 1 inside a tile: f32/bf16 interleave the halves per column (pair), q8/q4/q5 split the tile. */
export const HALF_OFFSET_FLOAT: i32 = 16;
export const HALF_Q8: i32 = 144;
export const HALF_Q4: i32 = 80;
export const HALF_Q5: i32 = 112;

/** Byte offset of a half's four f32 scales inside its q8 / q4 / q5 half. */
export const Q8_SCALES: i32 = 128;
export const Q4_SCALES: i32 = 64;
export const Q5_SCALES: i32 = 96;

@inline export function tileBytes(format: i32): i32 {
  return format == FMT_F32 ? TILE_F32 : format == FMT_BF16 ? TILE_BF16 : format == FMT_Q8 ? TILE_Q8 : format == FMT_Q5 ? TILE_Q5 : TILE_Q4;
}

/** Where half 1 starts, relative to half 0, inside a tile. */
@inline export function halfOffset(format: i32): i32 {
  return format == FMT_Q8 ? HALF_Q8 : format == FMT_Q4 ? HALF_Q4 : format == FMT_Q5 ? HALF_Q5 : HALF_OFFSET_FLOAT;
}

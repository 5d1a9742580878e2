// The packed weight layout shared by every linear kernel (see src/ops/weight.ts
// for the full description and the round-trip error of each format).
//
// A Weight [rows, cols] is stored as tiles. Rows are taken four at a time
// ("row groups", GROUP = 4 = the f32x4 lanes) and columns 32 at a time
// ("blocks", BLOCK = 32); rows are zero-padded to a multiple of 4 and columns
// to a multiple of 32. Tile (g, b) covers rows [4g, 4g + 4) × columns
// [32b, 32b + 32) and tiles are stored g-major: [groups][blocks][tile], so one
// row group is one contiguous stream. Inside a tile the four rows are
// interleaved so that a SIMD vector holds the same column(s) of the four rows:
// a dot product leaves row r's sum in lane r, with no horizontal reduction.
//
//   f32   512 B: [32 cols][4 rows] f32
//   bf16  256 B: [16 col pairs][4 rows] u32, u32 = bf16(c) | bf16(c + 1) << 16
//   q8    144 B: [16 col pairs][4 rows][2] int8 (q ∈ [−127, 127]), then f32 scale[4 rows]
//   q4     80 B: [4 chunks][4 rows][2 halves] u16, then f32 scale[4 rows];
//               u16 nibble k of (chunk m, half s) is column 2·(4m + k) + s,
//               a 4-bit two's-complement q ∈ [−8, 7]
//
// Value of a quantized element: q · scale[row] (one scale per row and block of 32).

export const BLOCK: i32 = 32;
export const GROUP: i32 = 4;

export const FMT_F32: i32 = 0;
export const FMT_BF16: i32 = 1;
export const FMT_Q8: i32 = 2;
export const FMT_Q4: i32 = 3;

export const TILE_F32: i32 = 512;
export const TILE_BF16: i32 = 256;
export const TILE_Q8: i32 = 144;
export const TILE_Q4: i32 = 80;
/** Byte offset of the four f32 scales inside a q8 / q4 tile. */
export const Q8_SCALES: i32 = 128;
export const Q4_SCALES: i32 = 64;

@inline export function tileBytes(format: i32): i32 {
  return format == FMT_F32 ? TILE_F32 : format == FMT_BF16 ? TILE_BF16 : format == FMT_Q8 ? TILE_Q8 : TILE_Q4;
}

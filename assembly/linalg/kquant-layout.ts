// The packed layout of the native ggml K-quant weights (Q2_K … Q6_K), the
// K-quant counterpart of layout.ts. ggml's blocks (ggml-common.h: block_q4_K,
// block_q6_K) hold one row's 256 values ("superblock"); here the same codes,
// scales and f16-exact super-scales are regrouped so that four rows ("a quad")
// share each SIMD vector, lane r = row r, and the int8 dot product
// (flavor.ts dotI8U7: 4 consecutive columns of one row per 32-bit lane)
// leaves row r's sum in lane r, as the q8/q4 tiles do.
//
// Tile (quad g, superblock b) covers rows [4g, 4g + 4) × columns [256b, 256b + 256);
// tiles are stored [quads][superblocks], so a run of quads is one sequential
// stream (the decode GEMV's access pattern). Each tile starts with its scales
// and super-scales, then its codes: the GEMV reads the scales first, so a tile
// is read front to back. (With the scales last, each tile's first access jumped
// past its codes; the prefetcher, which follows the codes, had not fetched that
// line, and Q6_K's decode GEMV stalled there: one load in the GEMV held 36 % of
// its samples in perf. Scales first made a Q4_K_M decode step 1.11× faster,
// BENCHMARKS.md "gguf".) Byte offsets, lane r:
//
//   Q4_K  608 B   [0, 64): sub-block s (32 columns) at 8s: u8 scale[r] at +r, u8 min[r] at +4 + r
//                 [64, 80): f32 d[r];  [80, 96): f32 dmin[r]
//                 codes [96, 608): chunk c of 32 columns at 96 + 64c, vector j (0..3) at +16j;
//                 byte 4r + k holds column 32c + 8j + k in its low nibble and
//                 column 32c + 8j + 4 + k in its high nibble (k = 0..3): the 4-bit code q
//                 value = f32(d·scale)·q − f32(dmin·min)   (ggml dequantize_row_q4_K)
//   Q5_K  736 B   Q4_K's [0, 96); then sub-block s at 96 + 80s: 16 bytes of 5th bits (byte
//                 4r + k holds in bit 2j / 2j + 1 the top bit of code vector j's low / high
//                 nibble: column 32s + 8j + k / + 4), then its 64 code bytes as Q4_K's
//                 chunk s (the low 4 bits of q); the GEMV reads each sub-block's bits, then
//                 its codes, so this tile too is read front to back
//                 value = f32(d·scale)·q − f32(dmin·min)   (ggml dequantize_row_q5_K)
//   Q6_K  848 B   [0, 64): sub-block t (16 columns) at 4t: i8 scale[r] at +r
//                 [64, 80): f32 d[r]
//                 [80, 848): sub-block t (16 columns, 16t … 16t + 15) at 80 + 48t: vectors
//                 A, B, C at +0, +16, +32; byte 4r + k of A / B / C holds the 6-bit
//                 code of column 16t + k / + 4 + k / + 8 + k in bits 0-5, and in bits
//                 6-7 bits 4-5 / 2-3 / 0-1 of the code of column 16t + 12 + k
//                 (three bytes carry four codes: one mask each for three code
//                 vectors, eight operations for the fourth — kquant-dot.ts q6kCodes);
//                 value = f32(d·scale)·(q − 32)   (ggml dequantize_row_q6_K)
//   Q2_K  416 B   [0, 64): sub-block t (16 columns) at 4t: u8 scale[r] (0..15);
//                 [64, 128): the same for u8 min[r] (0..15);
//                 [128, 144): f32 d[r];  [144, 160): f32 dmin[r]
//                 [160, 416): sub-block t at 160 + 16t: byte 4r + k holds in bits 2j, 2j + 1
//                 the 2-bit code of column 16t + 4j + k (j = 0..3: code vector j is
//                 (byte >> 2j) & 3, one shift and one mask);
//                 value = f32(d·scale)·q − f32(dmin·min)   (ggml dequantize_row_q2_K)
//   Q3_K  464 B   [0, 64): sub-block t at 4t: i8 scale[r] (ggml's 6-bit scale − 32)
//                 [64, 80): f32 d[r]
//                 [80, 464): sub-blocks 2p, 2p + 1 (32 columns) at 80 + 48p, 3-bit codes c
//                 of their 8 code vectors g = 4·(t & 1) + j (columns 16t + 4j + k) in three
//                 vectors A, B, C at +0, +16, +32; byte 4r + k of A / B / C holds code g0 / g2 / g4
//                 in bits 0-2 and g1 / g3 / g5 in bits 3-5; A's bits 6-7 hold bits 0-1 of g6,
//                 B's those of g7, C's bit 6 / 7 bit 2 of g6 / g7 (eight codes in three bytes:
//                 a mask, or a shift and a mask, for six code vectors, five operations for
//                 the other two — kquant-dot.ts q3kCode);
//                 value = f32(d·scale)·(c − 4)   (ggml dequantize_row_q3_K)
//   IQ4_XS 560 B  [0, 32): sub-block s (32 columns) at 4s: i8 scale[r] (ggml's ls − 32)
//                 [32, 48): f32 d[r]
//                 [48, 560): 4-bit indices into kvalues_iq4nl, laid out as Q4_K's codes
//                 value = f32(d·scale)·kvalues_iq4nl[q]   (ggml dequantize_row_iq4_xs)
//
// Rows past the matrix (the last quad of a matrix whose rows are not a
// multiple of 4) hold zero codes and zero scales. d and dmin are ggml's f16
// scales widened to f32 (exact).

/** Values per superblock (ggml's QK_K). */
export const QK_K: i32 = 256;
/** Rows per tile (the f32x4 lanes). */
export const QUAD: i32 = 4;

export const FMT_Q4_K: i32 = 4;
export const FMT_Q6_K: i32 = 5;
export const FMT_Q5_K: i32 = 6;
export const FMT_Q2_K: i32 = 7;
export const FMT_Q3_K: i32 = 8;
export const FMT_IQ4_XS: i32 = 9;

export const TILE_Q4_K: i32 = 608;
export const TILE_Q5_K: i32 = 736;
export const TILE_Q6_K: i32 = 848;
export const TILE_Q2_K: i32 = 416;
export const TILE_Q3_K: i32 = 464;
export const TILE_IQ4_XS: i32 = 560;

export const IQ4XS_SCALES: i32 = 0;
export const IQ4XS_D: i32 = 32;
export const IQ4XS_CODES: i32 = 48;

export const Q2K_SCALES: i32 = 0;
export const Q2K_MINS: i32 = 64;
export const Q2K_D: i32 = 128;
export const Q2K_DMIN: i32 = 144;
export const Q2K_CODES: i32 = 160;

export const Q3K_SCALES: i32 = 0;
export const Q3K_D: i32 = 64;
export const Q3K_CODES: i32 = 80;

/** Q4_K and Q5_K: the same scales, mins, d and dmin; then the sub-blocks (q45kCodeOffset, q5kHighOffset). */
export const Q4K_SCALES: i32 = 0;
export const Q4K_D: i32 = 64;
export const Q4K_DMIN: i32 = 80;
export const Q45K_CODES: i32 = 96;
export const Q5K_SCALES: i32 = Q4K_SCALES;
export const Q5K_D: i32 = Q4K_D;
export const Q5K_DMIN: i32 = Q4K_DMIN;

/** Q4_K / Q5_K: byte offset, inside a tile, of sub-block s's 64 code bytes (Q5_K: after its 16 bytes of 5th bits). */
@inline export function q45kCodeOffset(five: bool, s: i32): i32 {
  return five ? Q45K_CODES + s * 80 + 16 : Q45K_CODES + (s << 6);
}

/** Q5_K: byte offset, inside a tile, of sub-block s's 16 bytes of 5th bits. */
@inline export function q5kHighOffset(s: i32): i32 {
  return Q45K_CODES + s * 80;
}

export const Q6K_SCALES: i32 = 0;
export const Q6K_D: i32 = 64;
export const Q6K_CODES: i32 = 80;

@inline export function kquantTileBytes(format: i32): i32 {
  return format == FMT_Q4_K ? TILE_Q4_K : format == FMT_Q5_K ? TILE_Q5_K : format == FMT_Q2_K ? TILE_Q2_K : format == FMT_Q3_K ? TILE_Q3_K : format == FMT_IQ4_XS ? TILE_IQ4_XS : TILE_Q6_K;
}

/** Q4_K / IQ4_XS: byte offset, inside a tile's code area (Q45K_CODES, IQ4XS_CODES), of the byte holding value v (0..255) of lane r; its nibble is (v >> 2) & 1. Q5_K: q45kCodeByte. */
@inline export function codeByte(v: i32, r: i32): i32 {
  return ((v >> 5) << 6) + nibbleByte(v, r);
}

/** The byte of value v, lane r, inside its 32-value chunk of 4-bit codes (vector (v >> 3) & 3, byte 4r + (v & 3)). */
@inline function nibbleByte(v: i32, r: i32): i32 {
  return (((v >> 3) & 3) << 4) + (r << 2) + (v & 3);
}

/** Q4_K (five = false) / Q5_K: byte offset, inside a tile, of the byte holding value v's 4 low code bits, lane r; its nibble is (v >> 2) & 1. */
@inline export function q45kCodeByte(five: bool, v: i32, r: i32): i32 {
  return q45kCodeOffset(five, v >> 5) + nibbleByte(v, r);
}

/** Q6_K: byte offset, inside a tile, of the byte whose bits 0-5 hold value v of lane r (columns 16t + k … 16t + 11 + k: v & 15 < 12). */
@inline export function q6kCodeByte(v: i32, r: i32): i32 {
  return Q6K_CODES + (v >> 4) * 48 + (((v >> 2) & 3) << 4) + (r << 2) + (v & 3);
}

/** Q2_K: byte offset, inside a tile, of the byte whose bits 2j, 2j + 1 (j = (v >> 2) & 3) hold the code of value v of lane r. */
@inline export function lowCodeByte(v: i32, r: i32): i32 {
  return Q2K_CODES + ((v >> 4) << 4) + (r << 2) + (v & 3);
}

/** Q3_K: the code vector (0..7) of value v within its sub-block pair, and the byte of lane r at vector A of that pair. */
@inline export function q3kGroup(v: i32): i32 {
  return (((v >> 4) & 1) << 2) + ((v >> 2) & 3);
}

@inline export function q3kByteA(v: i32, r: i32): i32 {
  return Q3K_CODES + (v >> 5) * 48 + (r << 2) + (v & 3);
}

// Native ggml weights: rows of ggml blocks as a GGUF file stores them →
// the packed layouts the linear kernels read, without requantizing:
//   Q8_0 → q8 tiles (layout.ts): the same codes, the f16 scale widened to f32 (exact);
//   Q5_0 → q5 tiles (layout.ts): the codes q − 16 as 5-bit two's complement, the f16 scale as f32;
//   IQ4_NL → q8 tiles: the codes as the values of ggml's kvalues_iq4nl table (int8), the f16 scale as f32;
//   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS → K-quant tiles (kquant-layout.ts): the same codes, scales and mins.
// And the way back for K-quant tiles (one row → f32, with ggml's own f32
// steps), which the embedding lookup and dequantizeWeight use.
//
// ggml blocks (ggml-common.h), one row's 256 values (32 for Q8_0):
//   block_q8_0 34 B:  f16 d · i8 qs[32]
//   block_q5_0 22 B:  f16 d · u32 qh (5th bits) · u8 qs[16] (codes j, j + 16 in a byte's nibbles); x = d·(q − 16)
//   block_q4_K 144 B: f16 d · f16 dmin · u8 scales[12] (6-bit scale and min of 8 sub-blocks,
//                     get_scale_min_k4) · u8 qs[128] (sub-blocks 2i, 2i + 1 share bytes 32i..32i+31:
//                     low nibble, high nibble)
//   block_q5_K 176 B: block_q4_K's fields with u8 qh[32] before qs: bit s of qh[l] is the
//                     5th bit of value 32s + l
//   block_q6_K 210 B: u8 ql[128] · u8 qh[64] · i8 scales[16] · f16 d
//   block_q2_K  84 B: u8 scales[16] (scale | min << 4 of sub-block t of 16) · u8 qs[64] · f16 d · f16 dmin;
//                     value v's code: (qs[32·(v >> 7) + (v & 31)] >> 2·((v >> 5) & 3)) & 3
//   block_q3_K 110 B: u8 hmask[32] · u8 qs[64] (low 2 bits, as Q2_K's) · u8 scales[12] (6-bit) · f16 d;
//                     value v's third bit: bit v >> 5 of hmask[v & 31]; x = d·(sc − 32)·(c − 4)
//   block_iq4_nl 18 B: f16 d · u8 qs[16] (value j: low nibble of qs[j], value j + 16: high); x = d·kv[nibble]
//   block_iq4_xs 136 B: f16 d · u16 scales_h · u8 scales_l[4] · u8 qs[128]: 8 blocks of 32 as iq4_nl's,
//                     block ib's scale ls = nibble ib of scales_l | bits 2ib.. of scales_h << 4; x = d·(ls − 32)·kv[nibble]

import { decodeF16 } from "../tensor/dtype";
import { BLOCK, GROUP, HALF_Q5, HALF_Q8, Q5_SCALES, Q8_SCALES, TILE_Q5, TILE_Q8, q5Field } from "./layout";
import {
  FMT_IQ4_XS, IQ4XS_CODES, IQ4XS_D, IQ4XS_SCALES, FMT_Q2_K, FMT_Q3_K, FMT_Q4_K, FMT_Q5_K, FMT_Q6_K, Q2K_D, Q2K_DMIN, Q2K_MINS, Q2K_SCALES, Q3K_D, Q3K_SCALES, Q4K_D, Q4K_DMIN, Q4K_SCALES,
  Q5K_D, Q5K_DMIN, Q5K_SCALES, Q6K_D, Q6K_SCALES, QK_K, QUAD, codeByte, kquantTileBytes, lowCodeByte, q3kByteA, q3kGroup, q45kCodeByte, q5kHighOffset, q6kCodeByte,
} from "./kquant-layout";

const Q8_0_BYTES: i32 = 34;
const Q5_0_BYTES: i32 = 22;
const Q4_K_BYTES: i32 = 144;
const Q5_K_BYTES: i32 = 176;
const Q6_K_BYTES: i32 = 210;
const Q2_K_BYTES: i32 = 84;
const Q3_K_BYTES: i32 = 110;
const IQ4_NL_BYTES: i32 = 18;
const IQ4_XS_BYTES: i32 = 136;

/** ggml type ids (ggml.h enum ggml_type). */
const GGML_Q5_0: i32 = 6;
const GGML_Q8_0: i32 = 8;
const GGML_Q4_K: i32 = 12;
const GGML_Q5_K: i32 = 13;
const GGML_Q6_K: i32 = 14;
const GGML_Q2_K: i32 = 10;
const GGML_Q3_K: i32 = 11;
const GGML_IQ4_NL: i32 = 20;
const GGML_IQ4_XS: i32 = 23;

/** ggml's kvalues_iq4nl: the 16 values an IQ4 nibble stands for. */
const KVALUES_IQ4NL: usize = memory.data<i8>([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113]);

@unmanaged class GgmlPackArgs {
  /** ggml rows [srcRows][nb blocks], contiguous. */
  src: usize;
  srcRows: i32;
  /** The weight row source row 0 becomes: a multiple of the tile rows (8 for q8, 4 for K-quants). */
  rowOffset: i32;
  /** Packed weight (layout.ts for q8, kquant-layout.ts for K-quants). */
  w: usize;
  /** The ggml type of the source blocks: Q8_0, IQ4_NL (→ q8), Q5_0 (→ q5), IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. */
  type: i32;
  /** Blocks per row: cols / 32 (Q8_0, Q5_0, IQ4_NL) or cols / 256 (K-quants, IQ4_XS). */
  nb: i32;
}

/** ggml's get_scale_min_k4: sub-block j's 6-bit scale (low 16 bits) and min (high 16 bits). */
@inline function scaleMinK4(j: i32, s: usize): u32 {
  if (j < 4) return (<u32>load<u8>(s + j) & 63) | ((<u32>load<u8>(s + j + 4) & 63) << 16);
  const sc = (<u32>load<u8>(s + j + 4) & 0xf) | ((<u32>load<u8>(s + j - 4) >> 6) << 4);
  const m = (<u32>load<u8>(s + j + 4) >> 4) | ((<u32>load<u8>(s + j) >> 6) << 4);
  return sc | (m << 16);
}

/** Sets the 4-bit code `q` of value v in its byte p of a tile (nibble (v >> 2) & 1; bytes start zeroed). */
@inline function putNibble(p: usize, v: i32, q: u32): void {
  store<u8>(p, load<u8>(p) | <u8>((q & 15) << (((v >> 2) & 1) << 2)));
}

/** One block_q4_K (five = false) or block_q5_K at p → lane r of a Q4_K / Q5_K tile. */
function packQ45K(five: bool, p: usize, tile: usize, r: i32): void {
  const scales = tile + <usize>(five ? Q5K_SCALES : Q4K_SCALES);
  store<f32>(tile + <usize>(five ? Q5K_D : Q4K_D) + (<usize>r << 2), decodeF16(<u32>load<u16>(p)));
  store<f32>(tile + <usize>(five ? Q5K_DMIN : Q4K_DMIN) + (<usize>r << 2), decodeF16(<u32>load<u16>(p, 2)));
  for (let s = 0; s < 8; s++) {
    const sm = scaleMinK4(s, p + 4);
    store<u8>(scales + (<usize>s << 3) + <usize>r, <u8>(sm & 0xffff));
    store<u8>(scales + (<usize>s << 3) + 4 + <usize>r, <u8>(sm >> 16));
  }
  const qs = p + (five ? 48 : 16);
  for (let v = 0; v < QK_K; v++) {
    const byte = <u32>load<u8>(qs + <usize>(((v >> 6) << 5) + (v & 31)));
    putNibble(tile + <usize>q45kCodeByte(five, v, r), v, (v >> 5) & 1 ? byte >> 4 : byte);
    if (five) {
      const bit = (<u32>load<u8>(p + 16 + <usize>(v & 31)) >> <u32>(v >> 5)) & 1;
      const h = tile + <usize>(q5kHighOffset(v >> 5) + (r << 2) + (v & 3));
      store<u8>(h, load<u8>(h) | <u8>(bit << <u32>((((v >> 3) & 3) << 1) + ((v >> 2) & 1))));
    }
  }
}

/** Q6_K: the 6-bit code q of value v, lane r, into a tile (bytes start zeroed; kquant-layout.ts). */
@inline function putQ6K(tile: usize, v: i32, r: i32, q: u32): void {
  if ((v & 15) < 12) {
    const p = tile + <usize>q6kCodeByte(v, r);
    store<u8>(p, load<u8>(p) | <u8>q);
    return;
  }
  // Column 16t + 12 + k: bits 4-5, 2-3, 0-1 of q into bits 6-7 of A, B, C (columns 16t + k, + 4, + 8).
  const a = tile + <usize>q6kCodeByte(v - 12, r);
  store<u8>(a, load<u8>(a) | <u8>(((q >> 4) & 3) << 6));
  store<u8>(a + 16, load<u8>(a + 16) | <u8>(((q >> 2) & 3) << 6));
  store<u8>(a + 32, load<u8>(a + 32) | <u8>((q & 3) << 6));
}

/** Q6_K: the 6-bit code of value v, lane r, of a tile. */
@inline function q6kCode(tile: usize, v: i32, r: i32): u32 {
  if ((v & 15) < 12) return <u32>load<u8>(tile + <usize>q6kCodeByte(v, r)) & 63;
  const a = tile + <usize>q6kCodeByte(v - 12, r);
  return ((<u32>load<u8>(a) >> 6) << 4) | ((<u32>load<u8>(a, 16) >> 6) << 2) | (<u32>load<u8>(a, 32) >> 6);
}

/** One block_q6_K at p → lane r of a Q6_K tile. */
function packQ6K(p: usize, tile: usize, r: i32): void {
  store<f32>(tile + Q6K_D + (<usize>r << 2), decodeF16(<u32>load<u16>(p, 208)));
  for (let t = 0; t < 16; t++) store<i8>(tile + Q6K_SCALES + (<usize>t << 2) + <usize>r, load<i8>(p + 192 + <usize>t));
  for (let v = 0; v < QK_K; v++) {
    // ggml: value 128n + 32·quarter + l takes ql[64n + l + 32·(quarter & 1)] nibble quarter >> 1, qh[32n + l] bits 2·quarter.
    const n = v >> 7, quarter = (v >> 5) & 3, l = v & 31;
    const lo = (<u32>load<u8>(p + <usize>((n << 6) + l + ((quarter & 1) << 5))) >> (<u32>(quarter >> 1) << 2)) & 15;
    const hi = (<u32>load<u8>(p + 128 + <usize>((n << 5) + l)) >> (<u32>quarter << 1)) & 3;
    putQ6K(tile, v, r, lo | (hi << 4));
  }
}

/** Q2_K: ORs the 2-bit code q of value v, lane r, into a tile's code area (bytes start zeroed). */
@inline function putLow2(tile: usize, v: i32, r: i32, q: u32): void {
  const p = tile + <usize>lowCodeByte(v, r);
  store<u8>(p, load<u8>(p) | <u8>((q & 3) << <u32>(((v >> 2) & 3) << 1)));
}

/** One block_q2_K (three = false) or block_q3_K at p → lane r of a Q2_K / Q3_K tile. */
function packLowK(three: bool, p: usize, tile: usize, r: i32): void {
  const qs = p + (three ? 32 : 16);
  if (three) {
    store<f32>(tile + Q3K_D + (<usize>r << 2), decodeF16(<u32>load<u16>(p, 108)));
    const s = p + 96;
    for (let t = 0; t < 16; t++) {
      // ggml's scale unpacking (dequantize_row_q3_K's kmask shuffle), one scale at a time.
      const lo = t < 8 ? <i32>load<u8>(s + <usize>t) & 15 : <i32>load<u8>(s + <usize>(t - 8)) >> 4;
      const hi = (<i32>load<u8>(s + 8 + <usize>(t & 3)) >> ((t >> 2) << 1)) & 3;
      store<i8>(tile + Q3K_SCALES + (<usize>t << 2) + <usize>r, <i8>((lo | (hi << 4)) - 32));
    }
  } else {
    store<f32>(tile + Q2K_D + (<usize>r << 2), decodeF16(<u32>load<u16>(p, 80)));
    store<f32>(tile + Q2K_DMIN + (<usize>r << 2), decodeF16(<u32>load<u16>(p, 82)));
    for (let t = 0; t < 16; t++) {
      const sc = <u32>load<u8>(p + <usize>t);
      store<u8>(tile + Q2K_SCALES + (<usize>t << 2) + <usize>r, <u8>(sc & 15));
      store<u8>(tile + Q2K_MINS + (<usize>t << 2) + <usize>r, <u8>(sc >> 4));
    }
  }
  for (let v = 0; v < QK_K; v++) {
    const low = <u32>load<u8>(qs + <usize>(((v >> 7) << 5) + (v & 31))) >> <u32>(((v >> 5) & 3) << 1);
    if (three) putQ3K(tile, v, r, (low & 3) | (((<u32>load<u8>(p + <usize>(v & 31)) >> <u32>(v >> 5)) & 1) << 2));
    else putLow2(tile, v, r, low);
  }
}

/** Q3_K: ORs the 3-bit code c of value v, lane r, into a tile (kquant-layout.ts; bytes start zeroed). */
function putQ3K(tile: usize, v: i32, r: i32, c: u32): void {
  const g = q3kGroup(v);
  const a = tile + <usize>q3kByteA(v, r);
  if (g < 6) {
    const at = a + <usize>((g >> 1) << 4);
    store<u8>(at, load<u8>(at) | <u8>(c << <u32>((g & 1) * 3)));
    return;
  }
  const at = a + <usize>((g - 6) << 4); // A for g6, B for g7
  store<u8>(at, load<u8>(at) | <u8>((c & 3) << 6));
  store<u8>(a + 32, load<u8>(a + 32) | <u8>((c >> 2) << <u32>g)); // C's bit 6 / 7
}

/** Q3_K: the 3-bit code of value v, lane r, of a tile. */
@inline function q3kCode(tile: usize, v: i32, r: i32): i32 {
  const g = q3kGroup(v);
  const a = tile + <usize>q3kByteA(v, r);
  if (g < 6) return (<i32>load<u8>(a + <usize>((g >> 1) << 4)) >> ((g & 1) * 3)) & 7;
  return (<i32>load<u8>(a + <usize>((g - 6) << 4)) >> 6) | (((<i32>load<u8>(a, 32) >> g) & 1) << 2);
}

/** Code c of a q8 tile (layout.ts) for `row`, with its half's scale at `half` + Q8_SCALES. */
@inline function putQ8(tile: usize, row: i32, c: i32, q: i32): void {
  const half = tile + <usize>(((row >> 2) & 1) * HALF_Q8);
  store<i8>(half + (<usize>(c >> 1) << 3) + (<usize>(row & 3) << 1) + <usize>(c & 1), <i8>q);
}

@inline function putQ8Scale(tile: usize, row: i32, d: f32): void {
  store<f32>(tile + <usize>(((row >> 2) & 1) * HALF_Q8) + Q8_SCALES + (<usize>(row & 3) << 2), d);
}

/** 16 bytes of IQ4 nibbles at qs → the 32 codes of `row` in a q8 tile: kvalues_iq4nl[nibble], value j low nibble of qs[j], j + 16 high. */
function packIq4(qs: usize, tile: usize, row: i32, d: f32): void {
  putQ8Scale(tile, row, d);
  for (let j = 0; j < 16; j++) {
    const b = <usize>load<u8>(qs + <usize>j);
    putQ8(tile, row, j, <i32>load<i8>(KVALUES_IQ4NL + (b & 15)));
    putQ8(tile, row, j + 16, <i32>load<i8>(KVALUES_IQ4NL + (b >> 4)));
  }
}

/** One block_iq4_xs at p → lane r of an IQ4_XS tile: the nibbles as Q4_K's codes, i8 scales ls − 32, f32 d. */
function packIq4Xs(p: usize, tile: usize, r: i32): void {
  store<f32>(tile + IQ4XS_D + (<usize>r << 2), decodeF16(<u32>load<u16>(p)));
  const sh = <i32>load<u16>(p, 2);
  for (let ib = 0; ib < 8; ib++) {
    const ls = ((<i32>load<u8>(p + 4 + <usize>(ib >> 1)) >> ((ib & 1) << 2)) & 15) | (((sh >> (ib << 1)) & 3) << 4);
    store<i8>(tile + IQ4XS_SCALES + (<usize>ib << 2) + <usize>r, <i8>(ls - 32));
  }
  for (let v = 0; v < QK_K; v++) {
    // ggml: value 32ib + j is the low nibble of qs[16ib + j] (j < 16), the high nibble of qs[16ib + j − 16] (j ≥ 16).
    const byte = <u32>load<u8>(p + 8 + <usize>(((v >> 5) << 4) + (v & 15)));
    putNibble(tile + IQ4XS_CODES + <usize>codeByte(v, r), v, (v & 16) ? byte >> 4 : byte);
  }
}

/**
 * One block_q8_0 at p → the lane of `row` in its half of a q8 tile (layout.ts):
 * the codes as they are (a −128, never written by ggml, becomes −127), the f16
 * scale as f32. Exact.
 */
function packQ8(p: usize, tile: usize, row: i32): void {
  putQ8Scale(tile, row, decodeF16(<u32>load<u16>(p)));
  for (let c = 0; c < BLOCK; c++) putQ8(tile, row, c, max<i32>(-127, <i32>load<i8>(p + 2 + <usize>c)));
}

/**
 * One block_q5_0 at p → the lane of `row` in its half of a q5 tile (bytes start
 * zeroed): ggml's codes q ∈ [0, 31] (value (q − 16)·d), the f16 scale d as f32. Exact.
 */
function packQ5(p: usize, tile: usize, row: i32): void {
  const half = tile + <usize>(((row >> 2) & 1) * HALF_Q5), r = row & 3;
  store<f32>(half + Q5_SCALES + (<usize>r << 2), decodeF16(<u32>load<u16>(p)));
  const qh = load<u32>(p, 2);
  for (let c = 0; c < BLOCK; c++) {
    // ggml: code j = qs[j] & 15, code j + 16 = qs[j] >> 4; bit 4 of code c is bit c of qh.
    const nib = (<i32>load<u8>(p + 6 + <usize>(c & 15)) >> ((c >> 4) << 2)) & 15;
    const q = nib | (<i32>((qh >> <u32>c) & 1) << 4);
    const at = q5Field(c, r);
    const u16 = half + <usize>(at & 0xff);
    store<u16>(u16, load<u16>(u16) | <u16>(q << (at >> 8)));
  }
}

/** The K-quant format of a ggml type, or -1 for those kept as q8 or q5. */
@inline function kquantFormatOf(type: i32): i32 {
  return type == GGML_Q4_K ? FMT_Q4_K : type == GGML_Q5_K ? FMT_Q5_K : type == GGML_Q6_K ? FMT_Q6_K : type == GGML_Q2_K ? FMT_Q2_K : type == GGML_Q3_K ? FMT_Q3_K : type == GGML_IQ4_XS ? FMT_IQ4_XS : -1;
}

@inline function ggmlBlockBytes(type: i32): i32 {
  return type == GGML_Q8_0 ? Q8_0_BYTES : type == GGML_Q5_0 ? Q5_0_BYTES : type == GGML_IQ4_NL ? IQ4_NL_BYTES : type == GGML_IQ4_XS ? IQ4_XS_BYTES
    : type == GGML_Q4_K ? Q4_K_BYTES : type == GGML_Q5_K ? Q5_K_BYTES : type == GGML_Q2_K ? Q2_K_BYTES : type == GGML_Q3_K ? Q3_K_BYTES : Q6_K_BYTES;
}

/**
 * Item i packs row group rowOffset / 8 + i (q8, q5: 8 rows) or quad rowOffset / 4 + i
 * (K-quants: 4 rows), every block, zeroing the tiles first so that rows past
 * the source stay zero.
 */
export function task_ggml_pack(item: i32, tid: i32, args: usize): void {
  const a = changetype<GgmlPackArgs>(args);
  const format = kquantFormatOf(a.type);
  const q8 = format < 0;
  const rowsPerItem = q8 ? GROUP : QUAD;
  const tb = <usize>(a.type == GGML_Q5_0 ? TILE_Q5 : q8 ? TILE_Q8 : kquantTileBytes(format));
  const tilesPerRow = <usize>a.nb;
  const srcBlock = <usize>ggmlBlockBytes(a.type);
  const tiles = a.w + <usize>(a.rowOffset / rowsPerItem + item) * tilesPerRow * tb;
  memory.fill(tiles, 0, tilesPerRow * tb);
  const r1 = min(rowsPerItem, a.srcRows - item * rowsPerItem);
  for (let r = 0; r < r1; r++) {
    const row = item * rowsPerItem + r;
    let p = a.src + <usize>row * <usize>a.nb * srcBlock;
    for (let b = 0; b < a.nb; b++, p += srcBlock) {
      const tile = tiles + <usize>b * tb;
      if (a.type == GGML_IQ4_NL) packIq4(p + 2, tile, row, decodeF16(<u32>load<u16>(p)));
      else if (a.type == GGML_Q5_0) packQ5(p, tile, row);
      else if (q8) packQ8(p, tile, row);
      else if (format == FMT_Q4_K) packQ45K(false, p, tile, r);
      else if (format == FMT_Q5_K) packQ45K(true, p, tile, r);
      else if (format == FMT_Q2_K) packLowK(false, p, tile, r);
      else if (format == FMT_Q3_K) packLowK(true, p, tile, r);
      else if (format == FMT_IQ4_XS) packIq4Xs(p, tile, r);
      else packQ6K(p, tile, r);
    }
  }
}

/** Value v of lane r of a K-quant tile, decoded with ggml's f32 steps. */
@inline function kquantValue(format: i32, tile: usize, v: i32, r: i32): f32 {
  if (format == FMT_IQ4_XS) {
    const q = (<usize>load<u8>(tile + IQ4XS_CODES + <usize>codeByte(v, r)) >> (<usize>((v >> 2) & 1) << 2)) & 15;
    const dl: f32 = load<f32>(tile + IQ4XS_D + (<usize>r << 2)) * <f32>load<i8>(tile + IQ4XS_SCALES + (<usize>(v >> 5) << 2) + <usize>r);
    return dl * <f32>load<i8>(KVALUES_IQ4NL + q);
  }
  if (format == FMT_Q2_K || format == FMT_Q3_K) {
    const t = <usize>(v >> 4);
    if (format == FMT_Q2_K) {
      const q = (<i32>load<u8>(tile + <usize>lowCodeByte(v, r)) >> (((v >> 2) & 3) << 1)) & 3;
      const dl: f32 = load<f32>(tile + Q2K_D + (<usize>r << 2)) * <f32>load<u8>(tile + Q2K_SCALES + (t << 2) + <usize>r);
      const ml: f32 = load<f32>(tile + Q2K_DMIN + (<usize>r << 2)) * <f32>load<u8>(tile + Q2K_MINS + (t << 2) + <usize>r);
      return dl * <f32>q - ml;
    }
    const q = q3kCode(tile, v, r);
    const dl: f32 = load<f32>(tile + Q3K_D + (<usize>r << 2)) * <f32>load<i8>(tile + Q3K_SCALES + (t << 2) + <usize>r);
    return dl * <f32>(q - 4);
  }
  if (format == FMT_Q4_K || format == FMT_Q5_K) {
    const lo = (<u32>load<u8>(tile + <usize>q45kCodeByte(format == FMT_Q5_K, v, r)) >> (<u32>((v >> 2) & 1) << 2)) & 15;
    const five = format == FMT_Q5_K;
    const s = <usize>(v >> 5);
    const scales = tile + <usize>(five ? Q5K_SCALES : Q4K_SCALES);
    const d1: f32 = load<f32>(tile + <usize>(five ? Q5K_D : Q4K_D) + (<usize>r << 2)) * <f32>load<u8>(scales + (s << 3) + <usize>r);
    const m1: f32 = load<f32>(tile + <usize>(five ? Q5K_DMIN : Q4K_DMIN) + (<usize>r << 2)) * <f32>load<u8>(scales + (s << 3) + 4 + <usize>r);
    const bit = five ? (<u32>load<u8>(tile + <usize>(q5kHighOffset(v >> 5) + (r << 2) + (v & 3))) >> <u32>((((v >> 3) & 3) << 1) + ((v >> 2) & 1))) & 1 : 0;
    return d1 * <f32>(lo | (bit << 4)) - m1;
  }
  const q = <i32>q6kCode(tile, v, r) - 32;
  const d1: f32 = load<f32>(tile + Q6K_D + (<usize>r << 2)) * <f32>load<i8>(tile + Q6K_SCALES + (<usize>(v >> 4) << 2) + <usize>r);
  return d1 * <f32>q;
}

@unmanaged class KquantRowsArgs {
  /** Packed K-quant weight [rows, nb · 256]. */
  w: usize;
  format: i32;
  nb: i32;
  /** int32 [T] row ids, or 0 for ids = item. */
  ids: usize;
  /** f32 [T, nb · 256], rows outStride bytes apart. */
  out: usize;
  outStride: i32;
}

/** Item t writes out[t, :] = W[ids[t], :] decoded (the embedding lookup of a K-quant weight). */
export function task_kquant_rows(item: i32, tid: i32, args: usize): void {
  const a = changetype<KquantRowsArgs>(args);
  const row = a.ids ? load<i32>(a.ids + (<usize>item << 2)) : item;
  const tb = <usize>kquantTileBytes(a.format);
  const r = row & (QUAD - 1);
  let tile = a.w + <usize>(row >> 2) * <usize>a.nb * tb;
  let out = a.out + <usize>item * <usize>a.outStride;
  for (let b = 0; b < a.nb; b++, tile += tb) {
    for (let v = 0; v < QK_K; v++, out += 4) store<f32>(out, kquantValue(a.format, tile, v, r));
  }
}

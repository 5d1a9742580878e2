/**
 * A Weight's packed CPU tiles → ggml blocks, the form the GPU keeps them in
 * (wgsl/quant-blocks.ts): the WebGPU runner uploads the DecoderWeights the
 * loaders built for the CPU (gpu-weights.ts), so a Q4_K matrix from a GGUF
 * file arrives in the CPU's SIMD tiles (assembly/linalg/kquant-layout.ts) and
 * goes up as the file had it, bit for bit: every field of the tile is one of
 * the block's (codes, 6- or 8-bit sub-block scales and mins, f16 super-scales
 * widened to f32 exactly, scales the CPU stored less 32 given their 32
 * back), regrouped back to ggml-common.h's block_q2_K … block_q6_K and
 * block_iq4_xs. kvflash's q4 (Q4_0 codes, f32 scales) goes up as Q4_0 blocks
 * with the scale kept in f32 (20 bytes).
 *
 *   Weight format  GPU block  bytes / 256 values   (f32: 1024)
 *   q4             q4_0       160
 *   q2_k           q2_k        84
 *   q3_k           q3_k       110
 *   q4_k           q4_k       144
 *   q5_k           q5_k       176
 *   q6_k           q6_k       210
 *   iq4_xs         iq4_xs     136
 *
 * Rows are independent: a block row is ⌈cols / values⌉ blocks, rows back to
 * back, so a matrix splits by rows into buffers anywhere.
 */
import { ArgumentError } from "../errors.js";
import type { StorageFormat } from "../ops/weight.js";
import { F16, decodeMiniFloat, encodeMiniFloat } from "../tensor/minifloat.js";
import { unpackQ8Rows } from "./q8-tile-rows.js";
import { GPU_BLOCK, type GpuBlockType } from "./wgsl/quant-blocks.js";

export type { GpuBlockType };
export const GPU_BLOCK_TYPES: readonly GpuBlockType[] = ["q4_0", "q4_k", "q5_k", "q6_k", "q2_k", "q3_k", "iq4_xs"];

const FROM_FORMAT: Partial<Record<StorageFormat, GpuBlockType>> = { q4: "q4_0", q4_k: "q4_k", q5_k: "q5_k", q6_k: "q6_k", q2_k: "q2_k", q3_k: "q3_k", iq4_xs: "iq4_xs" };

/** The GPU block type a Weight format goes up as, or null (f32, bf16 and q8 keep their own paths). */
export function gpuBlockType(format: StorageFormat): GpuBlockType | null {
  return FROM_FORMAT[format] ?? null;
}

/** Bytes of one row of `cols` values in `type`'s blocks. */
export function blockRowBytes(type: GpuBlockType, cols: number): number {
  return Math.ceil(cols / GPU_BLOCK[type].values) * GPU_BLOCK[type].bytes;
}

/** K-quant tiles: 4 rows × 256 columns (kquant-layout.ts). */
const KQ_TILE = { q4_k: 608, q5_k: 736, q6_k: 848, q2_k: 416, q3_k: 464, iq4_xs: 560 } as const;

/** The f16 code of an f32 that is exactly an f16 (a ggml super-scale the CPU widened); anything else is a broken tile. */
function f16Code(v: number): number {
  const code = encodeMiniFloat(F16, v);
  if (decodeMiniFloat(F16, code) !== v && !(Number.isNaN(v) && Number.isNaN(decodeMiniFloat(F16, code)))) throw new ArgumentError("weight", `holds a K-quant super-scale ${v} that is no f16 value`);
  return code;
}

/**
 * The ggml blocks of rows [r0, r0 + n) of a Weight of `format` from its tiles
 * (`blocks` column blocks a row: the Weight's `blocks`): [n, blockRowBytes].
 */
export function packBlockRows(tiles: Uint8Array, format: StorageFormat, blocks: number, r0: number, n: number): Uint8Array {
  const type = gpuBlockType(format);
  if (type === null) throw new ArgumentError("format", `has no GPU block type: ${format}`);
  const { bytes } = GPU_BLOCK[type];
  const out = new Uint8Array(n * blocks * bytes);
  const dst = new DataView(out.buffer);
  if (type === "q4_0") {
    const { codes, scales } = unpackQ8Rows(tiles, "q4", blocks, r0, n);
    for (let b = 0; b < n * blocks; b++) {
      dst.setFloat32(b * 20, scales[b]!, true);
      for (let j = 0; j < 16; j++) out[b * 20 + 4 + j] = ((codes[32 * b + j]! + 8) & 15) | (((codes[32 * b + j + 16]! + 8) & 15) << 4);
    }
    return out;
  }
  const tileBytes = KQ_TILE[type];
  const src = new DataView(tiles.buffer, tiles.byteOffset, tiles.byteLength);
  for (let i = 0; i < n; i++) {
    const row = r0 + i;
    const r = row & 3;
    for (let b = 0; b < blocks; b++) {
      const t = ((row >> 2) * blocks + b) * tileBytes;
      const o = (i * blocks + b) * bytes;
      if (type === "q6_k") q6kBlock(tiles, src, t, r, out, dst, o);
      else if (type === "q2_k") q2kBlock(tiles, src, t, r, out, dst, o);
      else if (type === "q3_k") q3kBlock(tiles, src, t, r, out, dst, o);
      else if (type === "iq4_xs") iq4xsBlock(tiles, src, t, r, out, dst, o);
      else q45kBlock(type, tiles, src, t, r, out, dst, o);
    }
  }
  return out;
}

/** Q4_K / Q5_K: the tile's lane r at t → block_q4_K / block_q5_K at o. */
function q45kBlock(type: "q4_k" | "q5_k", tiles: Uint8Array, src: DataView, t: number, r: number, out: Uint8Array, dst: DataView, o: number): void {
  const five = type === "q5_k";
  const sc = t; // scales and mins at 0, d at 64, dmin at 80, then sub-block s at 96 + 64s (Q5_K: 96 + 80s, its 5th bits first)
  dst.setUint16(o, f16Code(src.getFloat32(t + 64 + 4 * r, true)), true);
  dst.setUint16(o + 2, f16Code(src.getFloat32(t + 80 + 4 * r, true)), true);
  const s = (j: number) => tiles[sc + 8 * j + r]!;
  const m = (j: number) => tiles[sc + 8 * j + 4 + r]!;
  for (let j = 0; j < 4; j++) {
    out[o + 4 + j] = (s(j) & 63) | ((s(j + 4) >> 4) << 6);
    out[o + 8 + j] = (m(j) & 63) | ((m(j + 4) >> 4) << 6);
    out[o + 12 + j] = (s(j + 4) & 15) | ((m(j + 4) & 15) << 4);
  }
  const qs = o + (five ? 48 : 16);
  for (let v = 0; v < 256; v++) {
    // Tile: sub-block v/32's codes at 96 + 64·(v/32) (Q5_K: 96 + 80·(v/32) + 16), vector (v/8)%4 at +16, byte 4r + v%4, nibble (v/4)%2.
    const sub = five ? 96 + 80 * (v >> 5) + 16 : 96 + 64 * (v >> 5);
    const q = (tiles[t + sub + (((v >> 3) & 3) << 4) + (r << 2) + (v & 3)]! >> (4 * ((v >> 2) & 1))) & 15;
    const at = qs + 32 * (v >> 6) + (v & 31);
    out[at] = out[at]! | (q << (4 * ((v >> 5) & 1)));
    if (five) {
      // Tile: sub-block v/32's 5th bits at 96 + 80·(v/32), byte 4r + v%4, bit 2·((v/8)%4) + (v/4)%2.
      const hi = (tiles[t + 96 + 80 * (v >> 5) + (r << 2) + (v & 3)]! >> (2 * ((v >> 3) & 3) + ((v >> 2) & 1))) & 1;
      out[o + 16 + (v & 31)] = out[o + 16 + (v & 31)]! | (hi << (2 * (v >> 6) + ((v >> 5) & 1)));
    }
  }
}

/** Q6_K: the tile's lane r at t → block_q6_K at o. */
function q6kBlock(tiles: Uint8Array, src: DataView, t: number, r: number, out: Uint8Array, dst: DataView, o: number): void {
  for (let v = 0; v < 256; v++) {
    // Tile: sub-block v/16 at 80 + 48·(v/16); columns 0-11 of it in bits 0-5 of vectors A, B, C; column 12 + k
    // spread over bits 6-7 of byte k of A (bits 4-5), B (2-3), C (0-1).
    const base = t + 80 + 48 * (v >> 4) + (r << 2);
    const c = v & 15;
    const q = c < 12 ? tiles[base + 16 * (c >> 2) + (c & 3)]! & 63 : ((tiles[base + (c & 3)]! >> 6) << 4) | ((tiles[base + 16 + (c & 3)]! >> 6) << 2) | (tiles[base + 32 + (c & 3)]! >> 6);
    const n = v >> 7;
    const j = (v >> 5) & 3;
    const l = v & 31;
    const lo = o + 64 * n + 32 * (j & 1) + l;
    out[lo] = out[lo]! | ((q & 15) << (4 * (j >> 1)));
    out[o + 128 + 32 * n + l] = out[o + 128 + 32 * n + l]! | ((q >> 4) << (2 * j));
  }
  for (let s = 0; s < 16; s++) out[o + 192 + s] = tiles[t + 4 * s + r]!;
  dst.setUint16(o + 208, f16Code(src.getFloat32(t + 64 + 4 * r, true)), true);
}

/** Q2_K / Q3_K: the 2 low code bits of value v into qs at `qs` (bits 2j of qs[32n + l], v = 128n + 32j + l; bytes start zeroed). */
function putLow2(out: Uint8Array, qs: number, v: number, q: number): void {
  const at = qs + 32 * (v >> 7) + (v & 31);
  out[at] = out[at]! | ((q & 3) << (2 * ((v >> 5) & 3)));
}

/** Q2_K: the tile's lane r at t → block_q2_K at o. */
function q2kBlock(tiles: Uint8Array, src: DataView, t: number, r: number, out: Uint8Array, dst: DataView, o: number): void {
  for (let v = 0; v < 256; v++) {
    // Tile: sub-block v/16 at 160 + 16·(v/16), byte 4r + v%4, bits 2·((v/4)%4).
    putLow2(out, o + 16, v, tiles[t + 160 + 16 * (v >> 4) + (r << 2) + (v & 3)]! >> (2 * ((v >> 2) & 3)));
  }
  for (let s = 0; s < 16; s++) out[o + s] = tiles[t + 4 * s + r]! | (tiles[t + 64 + 4 * s + r]! << 4);
  dst.setUint16(o + 80, f16Code(src.getFloat32(t + 128 + 4 * r, true)), true);
  dst.setUint16(o + 82, f16Code(src.getFloat32(t + 144 + 4 * r, true)), true);
}

/** Q3_K: the tile's lane r at t → block_q3_K at o. */
function q3kBlock(tiles: Uint8Array, src: DataView, t: number, r: number, out: Uint8Array, dst: DataView, o: number): void {
  for (let v = 0; v < 256; v++) {
    // Tile: sub-block pair v/32 at 80 + 48·(v/32), byte 4r + v%4 of vectors A, B, C; code vector g = 4·((v/16)%2) + (v/4)%4:
    // g < 6 in bits 3·(g%2) of vector g/2, g6 / g7 bits 0-1 in bits 6-7 of A / B with bit 2 in bit g of C.
    const a = t + 80 + 48 * (v >> 5) + (r << 2) + (v & 3);
    const g = (((v >> 4) & 1) << 2) + ((v >> 2) & 3);
    const c = g < 6 ? (tiles[a + 16 * (g >> 1)]! >> (3 * (g & 1))) & 7 : (tiles[a + 16 * (g - 6)]! >> 6) | (((tiles[a + 32]! >> g) & 1) << 2);
    putLow2(out, o + 32, v, c);
    out[o + (v & 31)] = out[o + (v & 31)]! | ((c >> 2) << (v >> 5));
  }
  // ggml's 12 scale bytes (dequantize_row_q3_K's kmask shuffle inverted): sub-block s's 6-bit sc = i8 + 32, low 4
  // bits in nibble s/8 of byte s%8, high 2 at 2·(s/4) of byte 8 + s%4.
  for (let s = 0; s < 16; s++) {
    const sc = ((tiles[t + 4 * s + r]! << 24) >> 24) + 32;
    out[o + 96 + (s & 7)] = out[o + 96 + (s & 7)]! | ((sc & 15) << (4 * (s >> 3)));
    out[o + 104 + (s & 3)] = out[o + 104 + (s & 3)]! | ((sc >> 4) << (2 * (s >> 2)));
  }
  dst.setUint16(o + 108, f16Code(src.getFloat32(t + 64 + 4 * r, true)), true);
}

/** IQ4_XS: the tile's lane r at t → block_iq4_xs at o. */
function iq4xsBlock(tiles: Uint8Array, src: DataView, t: number, r: number, out: Uint8Array, dst: DataView, o: number): void {
  dst.setUint16(o, f16Code(src.getFloat32(t + 32 + 4 * r, true)), true);
  let high = 0;
  for (let ib = 0; ib < 8; ib++) {
    const ls = ((tiles[t + 4 * ib + r]! << 24) >> 24) + 32;
    out[o + 4 + (ib >> 1)] = out[o + 4 + (ib >> 1)]! | ((ls & 15) << (4 * (ib & 1)));
    high |= (ls >> 4) << (2 * ib);
  }
  dst.setUint16(o + 2, high, true);
  for (let v = 0; v < 256; v++) {
    // Tile: Q4_K's code layout from byte 48 (chunk v/32 at 48 + 64·(v/32), vector (v/8)%4 at +16, byte 4r + v%4,
    // nibble (v/4)%2); ggml: value 32ib + l in the low (l < 16) or high nibble of qs[16ib + l % 16].
    const q = (tiles[t + 48 + ((v >> 5) << 6) + (((v >> 3) & 3) << 4) + (r << 2) + (v & 3)]! >> (4 * ((v >> 2) & 1))) & 15;
    const at = o + 8 + 16 * (v >> 5) + (v & 15);
    out[at] = out[at]! | (q << (4 * ((v >> 4) & 1)));
  }
}

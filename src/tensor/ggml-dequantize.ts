/**
 * Reference dequantizers for the ggml tensor types kvflash reads, written for
 * clarity in float64 after ggml's `dequantize_row_*` (ggml-quants.c): each
 * block of `blockSize` values of a row decodes on its own.
 *
 *   Q8_0   32: f16 d · i8 q[32]                              x = d·q
 *   Q4_0   32: f16 d · u8 qs[16]                             x = d·(q − 8);   q[j] = qs[j] & 15, q[j+16] = qs[j] >> 4
 *   Q4_1   32: f16 d, f16 m · u8 qs[16]                      x = d·q + m
 *   Q5_0   32: f16 d · u32 qh · u8 qs[16]                    x = d·(q − 16);  bit 4 of q[j] is bit j of qh
 *   Q5_1   32: f16 d, f16 m · u32 qh · u8 qs[16]             x = d·q + m
 *   Q4_K  256: f16 d, f16 dmin · u8 scales[12] · u8 qs[128]  8 sub-blocks of 32: x = d·sc·q − dmin·m,
 *              6-bit sc, m packed in `scales` (getScaleMinK4); q 4-bit, sub-blocks 2i and 2i+1 share bytes
 *   Q5_K  256: Q4_K plus u8 qh[32] holding bit 4 of q (bit 2i / 2i+1 of qh[l] for sub-blocks 2i / 2i+1)
 *   Q6_K  256: u8 ql[128] · u8 qh[64] · i8 scales[16] · f16 d  16 sub-blocks of 16: x = d·sc·(q − 32), q 6-bit
 *   Q2_K  256: u8 scales[16] · u8 qs[64] · f16 d, f16 dmin     16 sub-blocks of 16: x = d·(s & 15)·q − dmin·(s >> 4),
 *              q 2-bit: value 128n + 32j + l is bits 2j, 2j+1 of qs[32n + l]
 *   Q3_K  256: u8 hmask[32] · u8 qs[64] · u8 scales[12] · f16 d  16 sub-blocks of 16: x = d·(sc − 32)·(q − 4),
 *              q's low 2 bits as Q2_K's, bit 2 is bit (v >> 5) of hmask[v & 31]; 6-bit sc (getScaleQ3K)
 *   IQ4_NL 32: f16 d · u8 qs[16]                            x = d·kvalues_iq4nl[nibble], nibbles as Q4_0's
 *   IQ4_XS 256: f16 d · u16 scales_h · u8 scales_l[4] · u8 qs[128]  8 blocks of 32 as IQ4_NL's, scale d·(ls − 32),
 *              ls = nibble ib of scales_l | bits 2ib, 2ib+1 of scales_h << 4
 */
import { ArgumentError } from "../errors.js";
import { F16, decodeMiniFloat } from "./minifloat.js";
import type { GgmlType } from "./ggml-types.js";

/** f16 bits → value, for all 65536 codes. */
const F16_TABLE = (() => {
  const t = new Float64Array(65536);
  for (let c = 0; c < 65536; c++) t[c] = decodeMiniFloat(F16, c);
  return t;
})();

function f16(b: Uint8Array, at: number): number {
  return F16_TABLE[b[at]! | (b[at + 1]! << 8)]!;
}

/** ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block's 12 scale bytes at `s`. */
export function getScaleMinK4(j: number, b: Uint8Array, s: number): [number, number] {
  if (j < 4) return [b[s + j]! & 63, b[s + j + 4]! & 63];
  return [(b[s + j + 4]! & 0xf) | ((b[s + j - 4]! >> 6) << 4), (b[s + j + 4]! >> 4) | ((b[s + j]! >> 6) << 4)];
}

/** ggml's kvalues_iq4nl: the value each IQ4 nibble stands for. */
export const KVALUES_IQ4NL: readonly number[] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/** Q3_K's 6-bit scale t (0..15) from its 12 scale bytes at `s` (dequantize_row_q3_K's kmask shuffle, one scale at a time): low 4 bits, then 2 high bits. */
export function getScaleQ3K(t: number, b: Uint8Array, s: number): number {
  const lo = t < 8 ? b[s + t]! & 15 : b[s + t - 8]! >> 4;
  return lo | (((b[s + 8 + (t & 3)]! >> (2 * (t >> 2))) & 3) << 4);
}

/** 16 bytes of IQ4 nibbles at `qs` → 32 values scaled by d. */
function iq4Block(b: Uint8Array, qs: number, d: number, out: Float32Array | Float64Array, o: number): void {
  for (let j = 0; j < 16; j++) {
    out[o + j] = d * KVALUES_IQ4NL[b[qs + j]! & 15]!;
    out[o + j + 16] = d * KVALUES_IQ4NL[b[qs + j]! >> 4]!;
  }
}

type BlockDecoder = (b: Uint8Array, at: number, out: Float32Array | Float64Array, o: number) => void;

const DECODERS: Readonly<Record<string, BlockDecoder>> = {
  Q8_0(b, at, out, o) {
    const d = f16(b, at);
    for (let j = 0; j < 32; j++) out[o + j] = d * ((b[at + 2 + j]! << 24) >> 24);
  },
  Q4_0(b, at, out, o) {
    const d = f16(b, at);
    for (let j = 0; j < 16; j++) {
      const q = b[at + 2 + j]!;
      out[o + j] = d * ((q & 15) - 8);
      out[o + j + 16] = d * ((q >> 4) - 8);
    }
  },
  Q4_1(b, at, out, o) {
    const d = f16(b, at);
    const m = f16(b, at + 2);
    for (let j = 0; j < 16; j++) {
      const q = b[at + 4 + j]!;
      out[o + j] = d * (q & 15) + m;
      out[o + j + 16] = d * (q >> 4) + m;
    }
  },
  Q5_0(b, at, out, o) {
    const d = f16(b, at);
    const qh = (b[at + 2]! | (b[at + 3]! << 8) | (b[at + 4]! << 16) | (b[at + 5]! << 24)) >>> 0;
    for (let j = 0; j < 16; j++) {
      const q = b[at + 6 + j]!;
      out[o + j] = d * (((q & 15) | (((qh >>> j) & 1) << 4)) - 16);
      out[o + j + 16] = d * (((q >> 4) | (((qh >>> (j + 16)) & 1) << 4)) - 16);
    }
  },
  Q5_1(b, at, out, o) {
    const d = f16(b, at);
    const m = f16(b, at + 2);
    const qh = (b[at + 4]! | (b[at + 5]! << 8) | (b[at + 6]! << 16) | (b[at + 7]! << 24)) >>> 0;
    for (let j = 0; j < 16; j++) {
      const q = b[at + 8 + j]!;
      out[o + j] = d * ((q & 15) | (((qh >>> j) & 1) << 4)) + m;
      out[o + j + 16] = d * ((q >> 4) | (((qh >>> (j + 16)) & 1) << 4)) + m;
    }
  },
  Q2_K(b, at, out, o) {
    const d = f16(b, at + 80);
    const dmin = f16(b, at + 82);
    for (let v = 0; v < 256; v++) {
      const sc = b[at + (v >> 4)]!;
      const q = (b[at + 16 + 32 * (v >> 7) + (v & 31)]! >> (2 * ((v >> 5) & 3))) & 3;
      out[o + v] = d * (sc & 15) * q - dmin * (sc >> 4);
    }
  },
  Q3_K(b, at, out, o) {
    const d = f16(b, at + 108);
    for (let v = 0; v < 256; v++) {
      const low = (b[at + 32 + 32 * (v >> 7) + (v & 31)]! >> (2 * ((v >> 5) & 3))) & 3;
      const high = (b[at + (v & 31)]! >> (v >> 5)) & 1;
      out[o + v] = d * (getScaleQ3K(v >> 4, b, at + 96) - 32) * ((low | (high << 2)) - 4);
    }
  },
  IQ4_NL(b, at, out, o) {
    iq4Block(b, at + 2, f16(b, at), out, o);
  },
  IQ4_XS(b, at, out, o) {
    const d = f16(b, at);
    const sh = b[at + 2]! | (b[at + 3]! << 8);
    for (let ib = 0; ib < 8; ib++) {
      const ls = ((b[at + 4 + (ib >> 1)]! >> (4 * (ib & 1))) & 15) | (((sh >> (2 * ib)) & 3) << 4);
      iq4Block(b, at + 8 + 16 * ib, d * (ls - 32), out, o + 32 * ib);
    }
  },
  Q4_K(b, at, out, o) {
    const d = f16(b, at);
    const dmin = f16(b, at + 2);
    const qs = at + 16;
    for (let i = 0; i < 4; i++) {
      const [sc1, m1] = getScaleMinK4(2 * i, b, at + 4);
      const [sc2, m2] = getScaleMinK4(2 * i + 1, b, at + 4);
      for (let l = 0; l < 32; l++) {
        const q = b[qs + 32 * i + l]!;
        out[o + 64 * i + l] = d * sc1 * (q & 15) - dmin * m1;
        out[o + 64 * i + 32 + l] = d * sc2 * (q >> 4) - dmin * m2;
      }
    }
  },
  Q5_K(b, at, out, o) {
    const d = f16(b, at);
    const dmin = f16(b, at + 2);
    const qh = at + 16;
    const qs = at + 48;
    for (let i = 0; i < 4; i++) {
      const [sc1, m1] = getScaleMinK4(2 * i, b, at + 4);
      const [sc2, m2] = getScaleMinK4(2 * i + 1, b, at + 4);
      for (let l = 0; l < 32; l++) {
        const q = b[qs + 32 * i + l]!;
        const h = b[qh + l]!;
        out[o + 64 * i + l] = d * sc1 * ((q & 15) | (((h >> (2 * i)) & 1) << 4)) - dmin * m1;
        out[o + 64 * i + 32 + l] = d * sc2 * ((q >> 4) | (((h >> (2 * i + 1)) & 1) << 4)) - dmin * m2;
      }
    }
  },
  Q6_K(b, at, out, o) {
    const ql = at;
    const qh = at + 128;
    const sc = at + 192;
    const d = f16(b, at + 208);
    const s = (i: number) => (b[sc + i]! << 24) >> 24;
    for (let n = 0; n < 2; n++) {
      for (let l = 0; l < 32; l++) {
        const is = 8 * n + (l >> 4);
        const lo = b[ql + 64 * n + l]!;
        const lo2 = b[ql + 64 * n + l + 32]!;
        const h = b[qh + 32 * n + l]!;
        out[o + 128 * n + l] = d * s(is) * (((lo & 15) | ((h & 3) << 4)) - 32);
        out[o + 128 * n + l + 32] = d * s(is + 2) * (((lo2 & 15) | (((h >> 2) & 3) << 4)) - 32);
        out[o + 128 * n + l + 64] = d * s(is + 4) * (((lo >> 4) | (((h >> 4) & 3) << 4)) - 32);
        out[o + 128 * n + l + 96] = d * s(is + 6) * (((lo2 >> 4) | (((h >> 6) & 3) << 4)) - 32);
      }
    }
  },
};

/**
 * Decodes `n` values of `type` (n a multiple of its block size) from `bytes`
 * into `out` starting at `outOffset`. Float types decode exactly.
 */
export function dequantize(type: GgmlType, bytes: Uint8Array, n: number, out: Float32Array | Float64Array, outOffset = 0): void {
  if (n % type.blockSize !== 0) throw new ArgumentError("n", `must be a multiple of ${type.name}'s block of ${type.blockSize}, got ${n}`);
  const need = (n / type.blockSize) * type.typeSize;
  if (bytes.length < need) throw new ArgumentError("bytes", `must hold ${need} bytes for ${n} ${type.name} values, got ${bytes.length}`);
  if (out.length < outOffset + n) throw new ArgumentError("out", `must hold ${outOffset + n} values, got ${out.length}`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (type.name) {
    case "F32":
      for (let i = 0; i < n; i++) out[outOffset + i] = view.getFloat32(4 * i, true);
      return;
    case "F16":
      for (let i = 0; i < n; i++) out[outOffset + i] = F16_TABLE[view.getUint16(2 * i, true)]!;
      return;
    case "BF16": {
      const f = new Float32Array(1);
      const u = new Uint32Array(f.buffer);
      for (let i = 0; i < n; i++) {
        u[0] = view.getUint16(2 * i, true) << 16;
        out[outOffset + i] = f[0]!;
      }
      return;
    }
    default: {
      const decode = DECODERS[type.name]!;
      for (let blk = 0; blk < n / type.blockSize; blk++) decode(bytes, blk * type.typeSize, out, outOffset + blk * type.blockSize);
    }
  }
}

/**
 * Quantizers for every ggml type kvflash reads, so tests and benchmarks can
 * write real GGUF files (writer.ts). They follow ggml's `quantize_row_*_ref`
 * block layouts (see tensor/ggml-dequantize.ts) with the plain round-to-nearest choices
 * of scales — valid blocks that llama.cpp reads, though not the
 * error-minimizing search of llama.cpp's own quantizer (imatrix, make_qkx2).
 *
 * Stated error per value (checked by test/sources/gguf-quant.test.ts), with d the
 * stored (f16-rounded) scale of the value's block or sub-block:
 *   Q8_0 |e| ≤ d/2;   Q4_0, Q5_0 |e| ≤ d (the largest-magnitude value is exact, its opposite may clamp);
 *   Q4_1, Q5_1 |e| ≤ d/2 + f16 rounding of the min;
 *   Q3_K, Q4_K, Q5_K, Q6_K |e| ≤ 1.5·step of the sub-block + max|x| of the super-block / 60
 *   (the sub-block scales and mins sit on a 6-bit, Q6_K 8-bit, grid of the super-block's largest);
 *   Q2_K the same with max|x| / 28 (4-bit scales and mins);
 *   IQ4_NL |e| ≤ 14/127·max|x| of the block (the largest-magnitude value maps to kvalues_iq4nl's
 *   −127, its opposite clamps at 113; the widest gap is 23), IQ4_XS that + max|x| of the super-block / 60.
 */
import { ArgumentError } from "../../errors.js";
import { BF16, F16, encodeMiniFloat, decodeMiniFloat } from "../../tensor/minifloat.js";
import { GGML_TYPES, type GgmlTypeName, ggmlRowBytes } from "../../tensor/ggml-types.js";
import { KVALUES_IQ4NL } from "../../tensor/ggml-dequantize.js";

function putF16(b: Uint8Array, at: number, x: number): number {
  const code = encodeMiniFloat(F16, x, true);
  b[at] = code & 255;
  b[at + 1] = code >> 8;
  return decodeMiniFloat(F16, code);
}

const round = (x: number): number => Math.round(x);
const clamp = (x: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, x));

/** Signed value of largest magnitude (the first one on ties). */
function signedMax(x: Float32Array | Float64Array, from: number, n: number): number {
  let m = 0;
  for (let i = from; i < from + n; i++) if (Math.abs(x[i]!) > Math.abs(m)) m = x[i]!;
  return m;
}

type BlockEncoder = (x: Float32Array | Float64Array, i: number, b: Uint8Array, at: number) => void;

/**
 * Q4_0/1, Q5_0/1 code layout after the block's scales (at `at`): for Q5 a u32
 * of fifth bits (bit j: code j, bit j + 16: code j + 16) first, then 16 bytes
 * of nibbles, byte j = code j | code (j + 16) << 4.
 */
function packCodes(q: (j: number) => number, b: Uint8Array, at: number, bits: 4 | 5): void {
  const qs = at + (bits === 5 ? 4 : 0);
  let qh = 0;
  for (let j = 0; j < 16; j++) {
    const a = q(j);
    const c = q(j + 16);
    b[qs + j] = (a & 15) | ((c & 15) << 4);
    qh |= ((a >> 4) << j) | ((c >> 4) << (j + 16));
  }
  if (bits === 5) new DataView(b.buffer, b.byteOffset).setUint32(at, qh >>> 0, true);
}

/** Q4_0/Q5_0: d = m / −2^(bits−1), q = clamp(round(x/d) + 2^(bits−1)). */
function symmetric(bits: 4 | 5): BlockEncoder {
  const half = 1 << (bits - 1);
  return (x, i, b, at) => {
    const d = putF16(b, at, signedMax(x, i, 32) / -half);
    const id = d === 0 ? 0 : 1 / d;
    packCodes((j) => clamp(round(x[i + j]! * id) + half, 0, 2 * half - 1), b, at + 2, bits);
  };
}

/** Q4_1/Q5_1: x ≈ d·q + m with m = min, d = (max − min)/(2^bits − 1). */
function affine(bits: 4 | 5): BlockEncoder {
  const top = (1 << bits) - 1;
  return (x, i, b, at) => {
    let lo = Infinity;
    let hi = -Infinity;
    for (let j = 0; j < 32; j++) {
      lo = Math.min(lo, x[i + j]!);
      hi = Math.max(hi, x[i + j]!);
    }
    const d = putF16(b, at, (hi - lo) / top);
    const m = putF16(b, at + 2, lo);
    const id = d === 0 ? 0 : 1 / d;
    packCodes((j) => clamp(round((x[i + j]! - m) * id), 0, top), b, at + 4, bits);
  };
}

/** Q4_K/Q5_K: 8 sub-blocks of 32 with 6-bit scale and min under f16 super-scales d, dmin. */
function kAffine(bits: 4 | 5): BlockEncoder {
  const top = (1 << bits) - 1;
  return (x, i, b, at) => {
    const scale = new Float64Array(8);
    const min = new Float64Array(8); // ≥ 0: the amount subtracted
    for (let s = 0; s < 8; s++) {
      let lo = 0; // ggml clamps the min at 0 so it is stored as a non-negative offset
      let hi = -Infinity;
      for (let l = 0; l < 32; l++) {
        lo = Math.min(lo, x[i + 32 * s + l]!);
        hi = Math.max(hi, x[i + 32 * s + l]!);
      }
      scale[s] = (hi - lo) / top;
      min[s] = -lo;
    }
    const d = putF16(b, at, Math.max(...scale) / 63);
    const dmin = putF16(b, at + 2, Math.max(...min) / 63);
    const sc = scale.map((v) => (d === 0 ? 0 : clamp(Math.ceil(v / d), 0, 63))); // round up: the range still fits
    const mn = min.map((v) => (dmin === 0 ? 0 : clamp(round(v / dmin), 0, 63)));
    const s = at + 4;
    for (let j = 0; j < 4; j++) {
      b[s + j] = sc[j]! | ((sc[j + 4]! >> 4) << 6);
      b[s + j + 4] = mn[j]! | ((mn[j + 4]! >> 4) << 6);
      b[s + j + 8] = (sc[j + 4]! & 15) | ((mn[j + 4]! & 15) << 4);
    }
    const qh = at + 16;
    const qs = at + (bits === 5 ? 48 : 16);
    if (bits === 5) b.fill(0, qh, qh + 32);
    for (let v = 0; v < 256; v++) {
      const sub = v >> 5;
      const ds = d * sc[sub]!;
      const q = ds === 0 ? 0 : clamp(round((x[i + v]! + dmin * mn[sub]!) / ds), 0, top);
      const chunk = v >> 6;
      const l = v & 31;
      const high = (v & 32) !== 0;
      const byte = qs + 32 * chunk + l;
      b[byte] = high ? (b[byte]! & 15) | ((q & 15) << 4) : (b[byte]! & 0xf0) | (q & 15);
      if (bits === 5 && q > 15) b[qh + l] = b[qh + l]! | (1 << (2 * chunk + (high ? 1 : 0)));
    }
  };
}

/** Q6_K: 16 sub-blocks of 16 with i8 scales under an f16 super-scale; q ∈ [−32, 31]. */
const q6k: BlockEncoder = (x, i, b, at) => {
  const sub = new Float64Array(16);
  for (let s = 0; s < 16; s++) sub[s] = signedMax(x, i + 16 * s, 16) / -32;
  const dMax = signedMax(sub, 0, 16);
  const d = putF16(b, at + 208, dMax / -128);
  const L = new Uint8Array(256);
  for (let s = 0; s < 16; s++) {
    const sc = d === 0 ? 0 : clamp(round(sub[s]! / d), -128, 127);
    b[at + 192 + s] = sc & 255;
    const ds = d * sc;
    for (let l = 0; l < 16; l++) L[16 * s + l] = ds === 0 ? 32 : clamp(round(x[i + 16 * s + l]! / ds), -32, 31) + 32;
  }
  for (let n = 0; n < 2; n++) {
    for (let l = 0; l < 32; l++) {
      const [q1, q2, q3, q4] = [L[128 * n + l]!, L[128 * n + l + 32]!, L[128 * n + l + 64]!, L[128 * n + l + 96]!];
      b[at + 64 * n + l] = (q1 & 15) | ((q3 & 15) << 4);
      b[at + 64 * n + l + 32] = (q2 & 15) | ((q4 & 15) << 4);
      b[at + 128 + 32 * n + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
    }
  }
};

/** Q2_K / Q3_K: the 2 low bits of code v (0..255) into qs at `qs` (bits 2j of qs[32·(v >> 7) + (v & 31)], j = (v >> 5) & 3); bytes start zeroed. */
function putLow2(b: Uint8Array, qs: number, v: number, q: number): void {
  b[qs + 32 * (v >> 7) + (v & 31)] |= (q & 3) << (2 * ((v >> 5) & 3));
}

/** Q2_K: 16 sub-blocks of 16, x ≈ d·sc·q − dmin·m with 4-bit sc, m under f16 d, dmin; q ∈ [0, 3]. */
const q2k: BlockEncoder = (x, i, b, at) => {
  const scale = new Float64Array(16);
  const min = new Float64Array(16);
  for (let s = 0; s < 16; s++) {
    let lo = 0;
    let hi = -Infinity;
    for (let l = 0; l < 16; l++) {
      lo = Math.min(lo, x[i + 16 * s + l]!);
      hi = Math.max(hi, x[i + 16 * s + l]!);
    }
    scale[s] = (hi - lo) / 3;
    min[s] = -lo;
  }
  const d = putF16(b, at + 80, Math.max(...scale) / 15);
  const dmin = putF16(b, at + 82, Math.max(...min) / 15);
  b.fill(0, at + 16, at + 80);
  for (let s = 0; s < 16; s++) {
    const sc = d === 0 ? 0 : clamp(Math.ceil(scale[s]! / d), 0, 15); // round up: the range still fits
    const m = dmin === 0 ? 0 : clamp(round(min[s]! / dmin), 0, 15);
    b[at + s] = sc | (m << 4);
    for (let l = 0; l < 16; l++) {
      const v = 16 * s + l;
      const ds = d * sc;
      putLow2(b, at + 16, v, ds === 0 ? 0 : clamp(round((x[i + v]! + dmin * m) / ds), 0, 3));
    }
  }
};

/** Q3_K: 16 sub-blocks of 16, x ≈ d·sc·(c − 4) with sc ∈ [−32, 31] (stored + 32, 6 bits) under an f16 d; c ∈ [0, 7]. */
const q3k: BlockEncoder = (x, i, b, at) => {
  const sub = new Float64Array(16);
  for (let s = 0; s < 16; s++) sub[s] = signedMax(x, i + 16 * s, 16) / -4;
  const d = putF16(b, at + 108, signedMax(sub, 0, 16) / -32);
  b.fill(0, at, at + 108);
  for (let s = 0; s < 16; s++) {
    const sc = d === 0 ? 0 : clamp(round(sub[s]! / d), -32, 31);
    const l6 = sc + 32;
    // Inverse of getScaleQ3K: low 4 bits in a nibble of bytes 0-7, high 2 bits in bytes 8-11.
    b[at + 96 + (s & 7)] |= (l6 & 15) << (s < 8 ? 0 : 4);
    b[at + 96 + 8 + (s & 3)] |= (l6 >> 4) << (2 * (s >> 2));
    const ds = d * sc;
    for (let l = 0; l < 16; l++) {
      const v = 16 * s + l;
      const c = ds === 0 ? 4 : clamp(round(x[i + v]! / ds), -4, 3) + 4;
      putLow2(b, at + 32, v, c);
      if (c & 4) b[at + (v & 31)] |= 1 << (v >> 5);
    }
  }
};

/** The index of the kvalues_iq4nl entry nearest to y (the first on ties). */
function nearestIq4(y: number): number {
  let best = 0;
  for (let k = 1; k < 16; k++) if (Math.abs(KVALUES_IQ4NL[k]! - y) < Math.abs(KVALUES_IQ4NL[best]! - y)) best = k;
  return best;
}

/** 32 values from x[i] → 16 bytes of IQ4 nibbles at `qs` under scale ds (value j low nibble of qs[j], j + 16 high). */
function iq4Nibbles(x: Float32Array | Float64Array, i: number, ds: number, b: Uint8Array, qs: number): void {
  const id = ds === 0 ? 0 : 1 / ds;
  for (let j = 0; j < 16; j++) b[qs + j] = nearestIq4(x[i + j]! * id) | (nearestIq4(x[i + j + 16]! * id) << 4);
}

/** IQ4_XS: 8 blocks of 32 as IQ4_NL's under scales d·(ls − 32), ls 6-bit. */
const iq4xs: BlockEncoder = (x, i, b, at) => {
  const sub = new Float64Array(8);
  for (let ib = 0; ib < 8; ib++) sub[ib] = signedMax(x, i + 32 * ib, 32) / KVALUES_IQ4NL[0]!;
  const d = putF16(b, at, signedMax(sub, 0, 8) / -32);
  let sh = 0;
  b.fill(0, at + 4, at + 8);
  for (let ib = 0; ib < 8; ib++) {
    const l = d === 0 ? 0 : clamp(round(sub[ib]! / d), -32, 31);
    const ls = l + 32;
    b[at + 4 + (ib >> 1)] |= (ls & 15) << (4 * (ib & 1));
    sh |= (ls >> 4) << (2 * ib);
    iq4Nibbles(x, i + 32 * ib, d * l, b, at + 8 + 16 * ib);
  }
  b[at + 2] = sh & 255;
  b[at + 3] = sh >> 8;
};

const ENCODERS: Readonly<Partial<Record<GgmlTypeName, BlockEncoder>>> = {
  Q8_0(x, i, b, at) {
    const d = putF16(b, at, Math.abs(signedMax(x, i, 32)) / 127);
    const id = d === 0 ? 0 : 1 / d;
    for (let j = 0; j < 32; j++) b[at + 2 + j] = clamp(round(x[i + j]! * id), -127, 127) & 255;
  },
  Q4_0: symmetric(4),
  Q5_0: symmetric(5),
  Q4_1: affine(4),
  Q5_1: affine(5),
  Q4_K: kAffine(4),
  Q5_K: kAffine(5),
  Q6_K: q6k,
  Q2_K: q2k,
  Q3_K: q3k,
  IQ4_NL(x, i, b, at) {
    iq4Nibbles(x, i, putF16(b, at, signedMax(x, i, 32) / KVALUES_IQ4NL[0]!), b, at + 2);
  },
  IQ4_XS: iq4xs,
};

/** Encodes a row-major [rows, cols] matrix (or a vector: rows = 1) as `type`. cols must be a multiple of the type's block. */
export function quantize(typeName: GgmlTypeName, x: Float32Array | Float64Array, cols: number): Uint8Array {
  const type = GGML_TYPES[typeName];
  if (cols % type.blockSize !== 0 || x.length % cols !== 0) {
    throw new ArgumentError("cols", `must divide the ${x.length} values and be a multiple of ${typeName}'s block of ${type.blockSize}, got ${cols}`);
  }
  const out = new Uint8Array(ggmlRowBytes(type, cols) * (x.length / cols));
  const view = new DataView(out.buffer);
  switch (typeName) {
    case "F32":
      x.forEach((v, i) => view.setFloat32(4 * i, v, true));
      return out;
    case "F16":
      x.forEach((v, i) => view.setUint16(2 * i, encodeMiniFloat(F16, v, true), true));
      return out;
    case "BF16":
      x.forEach((v, i) => view.setUint16(2 * i, encodeMiniFloat(BF16, v), true));
      return out;
    default: {
      const encode = ENCODERS[typeName]!;
      for (let blk = 0; blk < x.length / type.blockSize; blk++) encode(x, blk * type.blockSize, out, blk * type.typeSize);
      return out;
    }
  }
}

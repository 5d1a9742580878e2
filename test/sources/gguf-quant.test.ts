/**
 * ggml tensor types: the float64 reference dequantizers
 * (src/tensor/ggml-dequantize.ts) on blocks built by hand from ggml's struct
 * layouts, and the test quantizers (quantize.ts) round-tripping random rows
 * and awkward blocks (zeros, constants, one outlier, all negative) within each
 * format's stated error.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { dequantize } from "../../src/tensor/ggml-dequantize.js";
import { GGML_TYPES, type GgmlTypeName } from "../../src/tensor/ggml-types.js";
import { quantize } from "../../src/sources/gguf/quantize.js";
import { Prng } from "../../src/tensor/prng.js";

const f16One = [0x00, 0x3c]; // 1.0
const f16Half = [0x00, 0x38]; // 0.5
const f16Quarter = [0x00, 0x34]; // 0.25

function decode(type: GgmlTypeName, bytes: number[] | Uint8Array): Float64Array {
  const t = GGML_TYPES[type];
  const b = Uint8Array.from(bytes);
  const out = new Float64Array((b.length / t.typeSize) * t.blockSize).fill(NaN);
  dequantize(t, b, out.length, out);
  return out;
}

test("Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 blocks decode as ggml's structs say", () => {
  const q8 = decode("Q8_0", [...f16Half, ...Array.from({ length: 32 }, (_, j) => (j - 16) & 255)]);
  assert.deepEqual([...q8], Array.from({ length: 32 }, (_, j) => 0.5 * (j - 16)));
  const qs = Array.from({ length: 16 }, (_, j) => j | ((15 - j) << 4)); // low nibble → value j, high → value j + 16
  assert.deepEqual([...decode("Q4_0", [...f16One, ...qs])], [...Array.from({ length: 16 }, (_, j) => j - 8), ...Array.from({ length: 16 }, (_, j) => 7 - j)]);
  assert.deepEqual([...decode("Q4_1", [...f16Half, ...f16One, ...qs])], [...Array.from({ length: 16 }, (_, j) => 0.5 * j + 1), ...Array.from({ length: 16 }, (_, j) => 0.5 * (15 - j) + 1)]);
  const qh = [0b1010_1010, 0, 0, 0b1000_0000]; // bit 4 set for values 1, 3, 5, 7 and 31
  const high = (j: number) => ((j < 8 && j % 2 === 1) || j === 31 ? 16 : 0);
  const q5 = (j: number) => (j < 16 ? j : 31 - j) + high(j);
  assert.deepEqual([...decode("Q5_0", [...f16One, ...qh, ...qs])], Array.from({ length: 32 }, (_, j) => q5(j) - 16));
  assert.deepEqual([...decode("Q5_1", [...f16Quarter, ...f16Half, ...qh, ...qs])], Array.from({ length: 32 }, (_, j) => 0.25 * q5(j) + 0.5));
});

/** Packs 8 six-bit scales and mins the way ggml's get_scale_min_k4 reads them. */
function kScales(sc: number[], m: number[]): number[] {
  const s = new Array<number>(12).fill(0);
  for (let j = 0; j < 4; j++) {
    s[j] = (sc[j]! & 63) | ((sc[j + 4]! >> 4) << 6);
    s[j + 4] = (m[j]! & 63) | ((m[j + 4]! >> 4) << 6);
    s[j + 8] = (sc[j + 4]! & 15) | ((m[j + 4]! & 15) << 4);
  }
  return s;
}

test("Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins, x = d·sc·q − dmin·m", () => {
  const sc = [1, 2, 3, 63, 17, 33, 48, 5];
  const m = [0, 4, 63, 1, 31, 16, 47, 2];
  const q = (v: number) => (v * 7 + (v >> 5)) % 16; // any 4-bit pattern
  const qs = new Array<number>(128).fill(0);
  for (let v = 0; v < 256; v++) qs[32 * (v >> 6) + (v & 31)] |= q(v) << ((v & 32) !== 0 ? 4 : 0);
  const want4 = Array.from({ length: 256 }, (_, v) => 0.5 * sc[v >> 5]! * q(v) - 0.25 * m[v >> 5]!);
  assert.deepEqual([...decode("Q4_K", [...f16Half, ...f16Quarter, ...kScales(sc, m), ...qs])], want4);
  const hi = (v: number) => (v % 3 === 0 ? 1 : 0);
  const qh = new Array<number>(32).fill(0);
  for (let v = 0; v < 256; v++) qh[v & 31] |= hi(v) << (2 * (v >> 6) + ((v & 32) !== 0 ? 1 : 0));
  const want5 = Array.from({ length: 256 }, (_, v) => 0.5 * sc[v >> 5]! * (q(v) + 16 * hi(v)) - 0.25 * m[v >> 5]!);
  assert.deepEqual([...decode("Q5_K", [...f16Half, ...f16Quarter, ...kScales(sc, m), ...qh, ...qs])], want5);
});

test("Q6_K: 16 sub-blocks of 16 with i8 scales, x = d·sc·(q − 32), q split into ql nibbles and qh pairs", () => {
  const q = (v: number) => (v * 13 + 5) % 64;
  const scales = Array.from({ length: 16 }, (_, s) => (s % 2 === 0 ? s - 8 : 127 - s * 5));
  const ql = new Array<number>(128).fill(0);
  const qh = new Array<number>(64).fill(0);
  for (let v = 0; v < 256; v++) {
    const n = v >> 7; // half of the block
    const r = v & 127; // 0..127 within it: quarter k = r >> 5, lane l
    const k = r >> 5;
    const l = r & 31;
    ql[64 * n + l + (k & 1 ? 32 : 0)] |= (q(v) & 15) << (k >= 2 ? 4 : 0);
    qh[32 * n + l] |= (q(v) >> 4) << (2 * k);
  }
  const want = Array.from({ length: 256 }, (_, v) => 2 * scales[v >> 4]! * (q(v) - 32));
  assert.deepEqual([...decode("Q6_K", [...ql, ...qh, ...scales.map((s) => s & 255), 0x00, 0x40])], want);
});

test("Q2_K: 16 sub-blocks of 16, x = d·(s & 15)·q − dmin·(s >> 4), 2-bit q in 4 shifts of qs[32n + l]", () => {
  const q = (v: number) => (v * 5 + (v >> 4)) % 4;
  const sc = Array.from({ length: 16 }, (_, t) => (t * 7) % 16);
  const mn = Array.from({ length: 16 }, (_, t) => 15 - t);
  const qs = new Array<number>(64).fill(0);
  for (let v = 0; v < 256; v++) qs[32 * (v >> 7) + (v & 31)] |= q(v) << (2 * ((v >> 5) & 3)); // dequantize_row_q2_K: shift 2j for j = (v >> 5) & 3
  const want = Array.from({ length: 256 }, (_, v) => 0.5 * sc[v >> 4]! * q(v) - 0.25 * mn[v >> 4]!);
  assert.deepEqual([...decode("Q2_K", [...sc.map((s, t) => s | (mn[t]! << 4)), ...qs, ...f16Half, ...f16Quarter])], want);
});

test("Q3_K: x = d·(sc − 32)·(q − 4), q's 2 low bits as Q2_K's, bit 2 from hmask (set: +0, clear: −4), 6-bit scales split 4 + 2", () => {
  const q = (v: number) => (v * 3 + (v >> 5)) % 8;
  const sc = Array.from({ length: 16 }, (_, t) => (t * 21 + 5) % 64); // 6-bit, stored with + 32
  const hmask = new Array<number>(32).fill(0);
  const qs = new Array<number>(64).fill(0);
  for (let v = 0; v < 256; v++) {
    qs[32 * (v >> 7) + (v & 31)] |= (q(v) & 3) << (2 * ((v >> 5) & 3));
    hmask[v & 31] |= (q(v) >> 2) << (v >> 5);
  }
  // ggml's packing (the inverse of dequantize_row_q3_K's kmask shuffle): low nibbles of scales 0-7 in bytes 0-7, of 8-15 in their high nibbles; 2 high bits of scale t in byte 8 + (t & 3) at bit 2·(t >> 2).
  const packed = new Array<number>(12).fill(0);
  for (let t = 0; t < 16; t++) {
    packed[t & 7] |= (sc[t]! & 15) << (t < 8 ? 0 : 4);
    packed[8 + (t & 3)] |= (sc[t]! >> 4) << (2 * (t >> 2));
  }
  const want = Array.from({ length: 256 }, (_, v) => 2 * (sc[v >> 4]! - 32) * (q(v) - 4));
  assert.deepEqual([...decode("Q3_K", [...hmask, ...qs, ...packed, 0x00, 0x40])], want);
});

test("IQ4_NL and IQ4_XS: nibbles index kvalues_iq4nl; IQ4_XS's 8 blocks scaled d·(ls − 32), ls from scales_l nibbles and scales_h bit pairs", () => {
  const KV = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
  const nib = (j: number) => (j * 7 + 3) % 16;
  const qs = Array.from({ length: 16 }, (_, j) => nib(j) | (nib(j + 16) << 4));
  assert.deepEqual([...decode("IQ4_NL", [...f16Half, ...qs])], Array.from({ length: 32 }, (_, j) => 0.5 * KV[nib(j)]!));
  const ls = [0, 63, 32, 33, 17, 48, 1, 40];
  const scalesH = ls.reduce((h, l, ib) => h | ((l >> 4) << (2 * ib)), 0);
  const scalesL = [0, 1, 2, 3].map((k) => (ls[2 * k]! & 15) | ((ls[2 * k + 1]! & 15) << 4));
  const blocks = ls.flatMap((_, ib) => Array.from({ length: 16 }, (_, j) => nib(j + ib) | (nib(j + 16 + ib) << 4)));
  const want = Array.from({ length: 256 }, (_, v) => 0.25 * (ls[v >> 5]! - 32) * KV[nib((v & 31) + (v >> 5))]!);
  assert.deepEqual([...decode("IQ4_XS", [...f16Quarter, scalesH & 255, scalesH >> 8, ...scalesL, ...blocks])], want);
});

test("F32, F16 and BF16 decode exactly", () => {
  assert.deepEqual([...decode("F32", [0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0])], [1, -2]);
  assert.deepEqual([...decode("F16", [0x00, 0x3c, 0x00, 0xb8, 0x01, 0x00])], [1, -0.5, 2 ** -24]);
  assert.deepEqual([...decode("BF16", [0x80, 0x3f, 0x49, 0x40])], [1, 3.140625]);
});

/** Per-value bound for the test quantizers: a multiple of the block's step (its range over the levels). */
// Symmetric types span [−max|x|, max|x|] of their block; affine ones [min(0, x), max(0, x)].
const STEP_BOUND: Readonly<Record<string, { block: number; levels: number; k: number; symmetric: boolean }>> = {
  Q8_0: { block: 32, levels: 254, k: 0.5, symmetric: true },
  Q4_0: { block: 32, levels: 16, k: 1, symmetric: true },
  Q5_0: { block: 32, levels: 32, k: 1, symmetric: true },
  Q4_1: { block: 32, levels: 15, k: 0.55, symmetric: false },
  Q5_1: { block: 32, levels: 31, k: 0.55, symmetric: false },
  Q4_K: { block: 32, levels: 15, k: 1.5, symmetric: false },
  Q5_K: { block: 32, levels: 31, k: 1.5, symmetric: false },
  Q6_K: { block: 16, levels: 64, k: 1.5, symmetric: true },
  Q2_K: { block: 16, levels: 3, k: 1.5, symmetric: false },
  Q3_K: { block: 16, levels: 8, k: 1.5, symmetric: true },
  // The block's largest-magnitude value maps to kvalues_iq4nl's −127; its opposite clamps to 113: |e| ≤ 14/127·max|x| < 2·max|x|/18.
  IQ4_NL: { block: 32, levels: 18, k: 1, symmetric: true },
  IQ4_XS: { block: 32, levels: 18, k: 1, symmetric: true },
};

test("every type round-trips random rows and awkward blocks within its stated error", () => {
  const rng = new Prng(12);
  const normal = () => Math.sqrt(-2 * Math.log(1 - rng.nextFloat())) * Math.cos(2 * Math.PI * rng.nextFloat());
  const cols = 512;
  const rows: number[][] = [
    Array.from({ length: cols }, () => normal()),
    new Array<number>(cols).fill(0),
    new Array<number>(cols).fill(0.3),
    Array.from({ length: cols }, (_, i) => (i === 77 ? 40 : 0.02 * rng.nextFloat() - 0.01)),
    Array.from({ length: cols }, () => -Math.abs(normal()) - 1),
    Array.from({ length: cols }, () => 1000 * normal()),
  ];
  const x = Float32Array.from(rows.flat());
  for (const name of Object.keys(GGML_TYPES) as GgmlTypeName[]) {
    const bytes = quantize(name, x, cols);
    const out = new Float64Array(x.length).fill(NaN);
    dequantize(GGML_TYPES[name], bytes, x.length, out);
    const bound = STEP_BOUND[name];
    for (let i = 0; i < x.length; i += bound?.block ?? 1) {
      const n = bound?.block ?? 1;
      const block = [...x.subarray(i, i + n)];
      const lo = Math.min(0, ...block);
      const hi = Math.max(0, ...block);
      const absMax = Math.max(...block.map(Math.abs));
      // K-quants: the sub-block scale and min sit on a 6-bit (Q6_K: 8-bit) grid of the 256-value super-block's largest.
      // (Q2_K: a 4-bit grid; IQ4_XS: its 6-bit block scales likewise.)
      const superMax = name.endsWith("_K") || name === "IQ4_XS" ? Math.max(...[...x.subarray(i - (i % 256), i - (i % 256) + 256)].map(Math.abs)) / (name === "Q2_K" ? 28 : 60) : 0;
      const tol = superMax + (bound ? bound.k * ((bound.symmetric ? 2 * absMax : hi - lo) / bound.levels) * 1.01 + absMax * 2 ** -10 : name === "F32" ? 0 : name === "F16" ? Math.max(absMax * 2 ** -11, 2 ** -25) : absMax * 2 ** -8); // F16: half an ulp, subnormals 2^-25
      for (let j = 0; j < n; j++) {
        const e = Math.abs(out[i + j]! - x[i + j]!);
        assert.ok(e <= tol, `${name} value ${i + j}: ${x[i + j]} → ${out[i + j]}, error ${e} > ${tol}`);
      }
    }
  }
});

test("dequantize checks its sizes", () => {
  const t = GGML_TYPES.Q4_K;
  assert.throws(() => dequantize(t, new Uint8Array(144), 100, new Float32Array(256)), /n must be a multiple of Q4_K's block of 256, got 100/);
  assert.throws(() => dequantize(t, new Uint8Array(100), 256, new Float32Array(256)), /bytes must hold 144 bytes for 256 Q4_K values, got 100/);
  assert.throws(() => dequantize(t, new Uint8Array(144), 256, new Float32Array(10)), /out must hold 256 values, got 10/);
  assert.throws(() => quantize("Q8_0", new Float32Array(48), 48), /cols must divide the 48 values and be a multiple of Q8_0's block of 32, got 48/);
});

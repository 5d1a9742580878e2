/**
 * The one place ggml weight blocks decode in WGSL (as llama.cpp's Vulkan
 * shaders keep dequantization in one shared include, dequant_funcs.comp):
 * the blocks of a matrix lie in a buffer bound as `qw: array<u32>`, row r's
 * blocks back to back from byte r · blocksPerRow · BYTES, in ggml's layouts
 * (ggml-common.h; the float64 decoders are tensor/ggml-dequantize.ts):
 *
 *   type  values  bytes  layout (byte offsets in the block)
 *   q4_0    32     20    f32 d at 0 · u8 qs[16] at 4          x = d·(q − 8); q[j] = qs[j] & 15, q[j+16] = qs[j] >> 4
 *                        (ggml's block_q4_0 with d widened from f16 to f32: kvflash's q4 has f32
 *                        scales, and 20 bytes keep every block word-aligned)
 *   q4_k   256    144    f16 d, dmin at 0, 2 · u8 scales[12] at 4 · u8 qs[128] at 16
 *                        x = f32(d·sc)·q − f32(dmin·m), sub-block s = v / 32, 6-bit sc, m (get_scale_min_k4);
 *                        value 64i + l in the low nibble of qs[32i + l], 64i + 32 + l in its high nibble
 *   q5_k   256    176    q4_k's fields with u8 qh[32] at 16 and qs at 48: bit 2i (2i + 1) of qh[l] is
 *                        bit 4 of value 64i + l (64i + 32 + l)
 *   q6_k   256    210    u8 ql[128] at 0 · u8 qh[64] at 128 · i8 scales[16] at 192 · f16 d at 208
 *                        x = f32(d·sc)·(q − 32), sc = scales[v / 16]; value 128n + 32j + l: low 4 bits
 *                        nibble (j ≥ 2) of ql[64n + 32(j & 1) + l], high 2 bits at 2j of qh[32n + l]
 *   q2_k   256     84    u8 scales[16] at 0 · u8 qs[64] at 16 · f16 d at 80 · f16 dmin at 82
 *                        x = f32(d·(s & 15))·q − f32(dmin·(s >> 4)), s = scales[v / 16]; value
 *                        128n + 32j + l: bits 2j, 2j + 1 of qs[32n + l]
 *   q3_k   256    110    u8 hmask[32] at 0 · u8 qs[64] at 32 · u8 scales[12] at 96 · f16 d at 108
 *                        x = f32(d·(sc − 32))·(c − 4), c's low 2 bits as q2_k's (qs at 32), bit 2
 *                        bit v / 32 of hmask[v % 32]; 6-bit sc of sub-block v / 16 (scaleQ3K)
 *   iq4_xs 256    136    f16 d at 0 · u16 scales_h at 2 · u8 scales_l[4] at 4 · u8 qs[128] at 8
 *                        x = f32(d·(ls − 32))·kvalues_iq4nl[q], ls of sub-block ib = v / 32: nibble
 *                        ib of scales_l | bits 2ib, 2ib + 1 of scales_h << 4; value 32ib + l: low
 *                        nibble of qs[16ib + l] (l < 16), high nibble of qs[16ib + l − 16]
 *
 * q6_k's 210-byte and q3_k's 110-byte blocks are not word-aligned: every
 * offset read is even (210, 110 and the field offsets are), so a u16 never
 * straddles a word and a u32 is at most two words funnel-shifted (qWord).
 * f16 scales decode by their bits (f16Value), subnormals included:
 * unpack2x16float may flush them, and Q4_K super-scales of real models are
 * often subnormal (d ≈ 1e-5). kvalues_iq4nl is four u32 constants of packed
 * i8 values picked by selects (iq4nl), ALU only: no private array a compiler
 * may spill (llama.cpp's Vulkan shaders keep it in shared memory instead).
 */
import { BLOCK_GEOMETRY, type BlockTypeName } from "../../tensor/ggml-types.js";

/** The ggml block types the GPU reads in place, and their block geometry (one table: tensor/ggml-types.ts). */
export type GpuBlockType = BlockTypeName;
export const GPU_BLOCK = BLOCK_GEOMETRY;

/** The `blockType` codes of the kernels that switch on the type (GEMM, embedding). */
export const GPU_BLOCK_CODE: Readonly<Record<GpuBlockType, number>> = { q4_0: 0, q4_k: 1, q5_k: 2, q6_k: 3, q2_k: 4, q3_k: 5, iq4_xs: 6 };

/** ggml's kvalues_iq4nl (ggml-common.h): the 16 values an IQ4_NL / IQ4_XS nibble stands for. */
const KVALUES_IQ4NL: readonly number[] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];

/** kvalues_iq4nl as four u32 words of i8 values, value q in byte q % 4 of word q / 4. */
const KVALUES_IQ4NL_WORDS: readonly number[] = [0, 1, 2, 3].map((w) => KVALUES_IQ4NL.slice(4 * w, 4 * w + 4).reduce((acc, v, i) => acc + (v & 255) * 2 ** (8 * i), 0));

/** Byte, u16, u32 and f16 readers, and the scale and table look-ups of the K-quants, over `qw` (offsets in bytes; u16 and u32 at even offsets). */
export const BLOCK_READERS = `fn qByte(o: u32) -> u32 { return (qw[o >> 2u] >> ((o & 3u) << 3u)) & 0xffu; }
fn qHalf(o: u32) -> u32 { return (qw[o >> 2u] >> ((o & 2u) << 3u)) & 0xffffu; }
fn qWord(o: u32) -> u32 {
  let i = o >> 2u;
  if ((o & 2u) == 0u) { return qw[i]; }
  return (qw[i] >> 16u) | (qw[i + 1u] << 16u);
}
fn f16Value(h: u32) -> f32 {
  let e = (h >> 10u) & 31u;
  let m = h & 1023u;
  var a: f32;
  if (e == 0u) { a = f32(m) * 5.9604644775390625e-8; }                 // subnormal: m · 2^-24, exact
  else if (e == 31u) { a = bitcast<f32>(0x7f800000u | (m << 13u)); }
  else { a = bitcast<f32>(((e + 112u) << 23u) | (m << 13u)); }
  return select(a, -a, (h & 0x8000u) != 0u);
}
fn qF16(o: u32) -> f32 { return f16Value(qHalf(o)); }
// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7) from the 12 bytes at s.
fn scaleMinK4(s: u32, j: u32) -> vec2<f32> {
  if (j < 4u) { return vec2<f32>(f32(qByte(s + j) & 63u), f32(qByte(s + j + 4u) & 63u)); }
  let b = qByte(s + j + 4u);
  return vec2<f32>(f32((b & 15u) | ((qByte(s + j - 4u) >> 6u) << 4u)), f32((b >> 4u) | ((qByte(s + j) >> 6u) << 4u)));
}
// Q3_K's scale of sub-block t (0..15) from the 12 bytes at s, less 32 (dequantize_row_q3_K's kmask shuffle, one
// scale at a time): the low 4 bits in nibble t / 8 of byte t % 8, the high 2 at 2 · (t / 4) of byte 8 + t % 4.
fn scaleQ3K(s: u32, t: u32) -> f32 {
  let lo = (qByte(s + (t & 7u)) >> ((t >> 3u) << 2u)) & 15u;
  let hi = (qByte(s + 8u + (t & 3u)) >> ((t >> 2u) << 1u)) & 3u;
  return f32(i32(lo | (hi << 4u)) - 32);
}
// IQ4_XS's 6-bit scale ls of sub-block ib (0..7) of the block at o, less 32.
fn scaleIq4Xs(o: u32, ib: u32) -> f32 {
  let lo = (qByte(o + 4u + (ib >> 1u)) >> ((ib & 1u) << 2u)) & 15u;
  let hi = (qHalf(o + 2u) >> (2u * ib)) & 3u;
  return f32(i32(lo | (hi << 4u)) - 32);
}
// ggml's kvalues_iq4nl[q] (q = 0..15): the i8 values packed four a word, little-endian.
fn iq4nl(q: u32) -> f32 {
  let w = select(select(${KVALUES_IQ4NL_WORDS[0]}u, ${KVALUES_IQ4NL_WORDS[1]}u, (q & 4u) != 0u), select(${KVALUES_IQ4NL_WORDS[2]}u, ${KVALUES_IQ4NL_WORDS[3]}u, (q & 4u) != 0u), q >= 8u);
  return f32(bitcast<i32>(w << (24u - 8u * (q & 3u))) >> 24u);
}
// kvalues_iq4nl of the four nibbles at \`shift\` of the bytes of w.
fn iq4nlLanes(w: u32, shift: u32) -> vec4<f32> {
  let v = w >> shift;
  return vec4<f32>(iq4nl(v & 15u), iq4nl((v >> 8u) & 15u), iq4nl((v >> 16u) & 15u), iq4nl((v >> 24u) & 15u));
}
`;

/** The four values of the bytes of `w` (shifted right by `shift` first) masked with `mask`. */
export const BYTE_LANES = `fn lanes(w: u32, shift: u32, mask: u32) -> vec4<f32> {
  let v = (w >> shift);
  return vec4<f32>(f32(v & mask), f32((v >> 8u) & mask), f32((v >> 16u) & mask), f32((v >> 24u) & mask));
}
`;

/**
 * WGSL \`fn dequantValue(o: u32, v: u32) -> f32\`: value v of the block at
 * byte o, of the type \`P.blockType\` (a uniform branch, as kv-load.ts: one
 * pipeline serves every type, which keeps SwiftShader's compiles few). With
 * ggml's rounding steps: f32(d·sc), then ·q, then − f32(dmin·m).
 */
export const DEQUANT_VALUE = `fn dequantValue(o: u32, v: u32) -> f32 {
  if (P.blockType == ${GPU_BLOCK_CODE.q4_0}u) {
    let q = (qByte(o + 4u + (v & 15u)) >> ((v >> 4u) << 2u)) & 15u;
    return bitcast<f32>(qw[o >> 2u]) * f32(i32(q) - 8);
  }
  if (P.blockType == ${GPU_BLOCK_CODE.q2_k}u || P.blockType == ${GPU_BLOCK_CODE.q3_k}u) {
    let three = P.blockType == ${GPU_BLOCK_CODE.q3_k}u;
    let low = (qByte(o + select(16u, 32u, three) + 32u * (v >> 7u) + (v & 31u)) >> (2u * ((v >> 5u) & 3u))) & 3u;
    if (three) {
      let c = low | (((qByte(o + (v & 31u)) >> (v >> 5u)) & 1u) << 2u);
      return (qF16(o + 108u) * scaleQ3K(o + 96u, v >> 4u)) * f32(i32(c) - 4);
    }
    let s = qByte(o + (v >> 4u));
    return (qF16(o + 80u) * f32(s & 15u)) * f32(low) - qF16(o + 82u) * f32(s >> 4u);
  }
  if (P.blockType == ${GPU_BLOCK_CODE.iq4_xs}u) {
    let q = (qByte(o + 8u + 16u * (v >> 5u) + (v & 15u)) >> (((v >> 4u) & 1u) << 2u)) & 15u;
    return (qF16(o) * scaleIq4Xs(o, v >> 5u)) * iq4nl(q);
  }
  if (P.blockType == ${GPU_BLOCK_CODE.q6_k}u) {
    let n = v >> 7u;
    let j = (v >> 5u) & 3u;
    let l = v & 31u;
    let lo = (qByte(o + 64u * n + 32u * (j & 1u) + l) >> ((j >> 1u) << 2u)) & 15u;
    let hi = (qByte(o + 128u + 32u * n + l) >> (2u * j)) & 3u;
    let sc = f32(bitcast<i32>(qByte(o + 192u + (v >> 4u)) << 24u) >> 24u);
    return (qF16(o + 208u) * sc) * f32(i32(lo | (hi << 4u)) - 32);
  }
  let i = v >> 6u;
  let h = (v >> 5u) & 1u;
  let l = v & 31u;
  let sm = scaleMinK4(o + 4u, 2u * i + h);
  var q: u32;
  if (P.blockType == ${GPU_BLOCK_CODE.q4_k}u) {
    q = (qByte(o + 16u + 32u * i + l) >> (4u * h)) & 15u;
  } else {
    q = ((qByte(o + 48u + 32u * i + l) >> (4u * h)) & 15u) | (((qByte(o + 16u + l) >> (2u * i + h)) & 1u) << 4u);
  }
  return (qF16(o) * sm.x) * f32(q) - qF16(o + 2u) * sm.y;
}
`;

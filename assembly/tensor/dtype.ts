// Storage dtypes on the kernels' side: codes (same table as src/tensor/dtype.ts),
// scalar decode/encode and SIMD loaders that widen 4 stored elements to f32x4.
//
// Decoding is exact and keeps NaN payloads (mantissa << (23 − m)); encoding is
// round-to-nearest-even from f32 with the OCP FP8 overflow rules (see
// src/tensor/minifloat.ts); NaN encodes to the canonical positive quiet NaN.

export const DT_F32: i32 = 0;
export const DT_F16: i32 = 1;
export const DT_BF16: i32 = 2;
export const DT_INT8: i32 = 3;
export const DT_FP8E4M3: i32 = 4;
export const DT_FP8E5M2: i32 = 5;
export const DT_INT32: i32 = 6;
export const DT_UINT8: i32 = 7;

/** Bytes per element of a dtype code. */
@inline export function dtypeBytes(dt: i32): i32 {
  return dt == DT_F32 || dt == DT_INT32 ? 4 : dt == DT_F16 || dt == DT_BF16 ? 2 : 1;
}

// ---- scalar decode ---------------------------------------------------------

@inline export function decodeF16(h: u32): f32 {
  const em = h & 0x7fff;
  const bits = em << 13;
  const sign = (h & 0x8000) << 16;
  if (em >= 0x7c00) return reinterpret<f32>(sign | 0x7f800000 | bits);
  // Normals and subnormals alike: rebias by multiplying with 2^(127 − 15).
  return reinterpret<f32>(sign | reinterpret<u32>(reinterpret<f32>(bits) * reinterpret<f32>(0x77800000)));
}

@inline export function decodeBf16(h: u32): f32 {
  return reinterpret<f32>(h << 16);
}

@inline export function decodeFp8E4M3(b: u32): f32 {
  const em = b & 0x7f;
  const bits = em << 20;
  const sign = (b & 0x80) << 24;
  if (em == 0x7f) return reinterpret<f32>(sign | 0x7f800000 | bits);
  return reinterpret<f32>(sign | reinterpret<u32>(reinterpret<f32>(bits) * reinterpret<f32>(0x7b800000)));
}

@inline export function decodeFp8E5M2(b: u32): f32 {
  return decodeF16(b << 8);
}

/** Loads element `i` of an array of dtype `dt` at `p` as f32. */
export function loadAsF32(dt: i32, p: usize, i: usize): f32 {
  switch (dt) {
    case DT_F32: return load<f32>(p + (i << 2));
    case DT_F16: return decodeF16(<u32>load<u16>(p + (i << 1)));
    case DT_BF16: return decodeBf16(<u32>load<u16>(p + (i << 1)));
    case DT_INT8: return <f32>load<i8>(p + i);
    case DT_FP8E4M3: return decodeFp8E4M3(<u32>load<u8>(p + i));
    case DT_FP8E5M2: return decodeFp8E5M2(<u32>load<u8>(p + i));
    case DT_INT32: return <f32>load<i32>(p + (i << 2));
    default: return <f32>load<u8>(p + i);
  }
}

// ---- SIMD decode: 4 stored elements → f32x4 -----------------------------------

// The fp8 e4m3 SIMD decoder rebiases with integer adds and renormalizes
// subnormals by one f32 subtraction of normal numbers (F. Giesen's
// half_to_float): a multiply of the shifted bits by 2^k takes f32 subnormal
// operands for subnormal codes, which x86 handles in microcode (measured: fp8
// decode 35% slower with 3% subnormal codes). f16 (and e5m2, the top byte of
// an f16) takes the multiply all the same: a KV cache holds f16 subnormals
// only for |x| < 2^-14, and the multiply halves the decoder's work, which is
// what f16 decode's time goes to (BENCHMARKS.md, paged "KV dtypes").

/**
 * f16 codes, sign-extended to 32-bit lanes → f32x4, exact, NaN payloads kept.
 * Magic multiply (as in F. Giesen's half_to_float_fast): the code's sign to
 * bit 31 and its exponent and mantissa to bits 13..27 make an f32 equal to the
 * f16 value × 2^-112 (normals: exponent e − 15 + 127 − 112; subnormals:
 * m·2^-24·2^-112, an f32 subnormal); × 2^112 rebiases exactly and keeps the
 * sign. Inf and NaN (exponent 31, 143 after the multiply) get exponent 255 by
 * one OR, mantissa (NaN payload) untouched. 7 operations a vector.
 */
@inline export function decodeF16x4(h: v128): v128 {
  return decodeF16x4With(h, i32x4.splat(0x8fffe000), f32x4.splat(reinterpret<f32>(<u32>(127 + 112) << 23)), i32x4.splat(0x0f800000), i32x4.splat(0x7f800000));
}

/**
 * The f16 decoder's four constants as 16-byte rows, in decodeF16x4With's
 * argument order: a kernel loads them once per call and passes them down, so
 * its inner loop holds them in registers. V8 13 (Node 24) rebuilds a v128
 * constant at every use inside a loop (three instructions each; V8 11–12 keep
 * it in a register): tools/v128-const-audit.mjs counts them.
 */
export const F16_CONSTS: usize = memory.data<u32>([
  0x8fffe000, 0x8fffe000, 0x8fffe000, 0x8fffe000,
  (127 + 112) << 23, (127 + 112) << 23, (127 + 112) << 23, (127 + 112) << 23,
  0x0f800000, 0x0f800000, 0x0f800000, 0x0f800000,
  0x7f800000, 0x7f800000, 0x7f800000, 0x7f800000,
], 16);

/** decodeF16x4 with its constants given (F16_CONSTS rows 0..3): the same 7 operations and result. */
@inline export function decodeF16x4With(h: v128, mask: v128, scale: v128, expo: v128, inf: v128): v128 {
  const t = v128.and(i32x4.shl(h, 13), mask);
  const x = f32x4.mul(t, scale);
  const special = i32x4.eq(v128.and(t, expo), expo);
  return v128.or(x, v128.and(special, inf));
}

@inline export function loadF16x4(p: usize): v128 {
  return decodeF16x4(v128.load16x4_s(p));
}

@inline export function loadBf16x4(p: usize): v128 {
  return i32x4.shl(v128.load16x4_u(p), 16);
}

@inline function loadU8x4(p: usize): v128 {
  return i32x4.extend_low_i16x8_u(i16x8.extend_low_i8x16_u(v128.load32_zero(p)));
}

@inline export function loadFp8E4M3x4(p: usize): v128 {
  return loadFp8E4M3x4With(p, i32x4.splat(0x7f), i32x4.splat((127 - 7) << 23), i32x4.splat((127 - 6) << 23), i32x4.splat(0x08), i32x4.splat(0x7f800000));
}

/**
 * The e4m3 decoder's five constants as 16-byte rows, in loadFp8E4M3x4With's
 * argument order (see F16_CONSTS: loaded once per call, not rebuilt per use).
 */
export const FP8_CONSTS: usize = memory.data<u32>([
  0x7f, 0x7f, 0x7f, 0x7f,
  (127 - 7) << 23, (127 - 7) << 23, (127 - 7) << 23, (127 - 7) << 23,
  (127 - 6) << 23, (127 - 6) << 23, (127 - 6) << 23, (127 - 6) << 23,
  0x08, 0x08, 0x08, 0x08,
  0x7f800000, 0x7f800000, 0x7f800000, 0x7f800000,
], 16);

/**
 * 4 fp8 e4m3 codes at p → f32x4, exact, with its constants given (FP8_CONSTS
 * rows 0..4): em = code & 0x7f at bits 20..26 and rebiased by (127 − 7)·2^23
 * (normals); subnormals and zero as (em·2^20 + 2^-6 bits) − 2^-6, a
 * subtraction of normal numbers; S.1111.111 → NaN; the sign bit from bit 7.
 */
@inline export function loadFp8E4M3x4With(p: usize, c7f: v128, bias7: v128, bias6: v128, c8: v128, inf: v128): v128 {
  const b = loadU8x4(p);
  const em = v128.and(b, c7f);
  const bits = i32x4.shl(em, 20);
  const sign = i32x4.shl(i32x4.shr_u(b, 7), 31);
  const normal = i32x4.add(bits, bias7);
  // Subnormals and zero: 2^-6·(1 + m/8) − 2^-6 = m·2^-9.
  const sub = f32x4.sub(i32x4.add(bits, bias6), bias6);
  const finite = v128.bitselect(sub, normal, i32x4.lt_s(em, c8));
  // E4M3FN has no Inf: only S.1111.111 is NaN.
  const value = v128.bitselect(v128.or(bits, inf), finite, i32x4.eq(em, c7f));
  return v128.or(value, sign);
}

@inline export function loadFp8E5M2x4(p: usize): v128 {
  return decodeF16x4(e5m2AsF16x4(p));
}

/** 4 e5m2 codes at p as f16 codes in 32-bit lanes: e5m2 is the top byte of an f16, sign-extended and shifted into place. */
@inline export function e5m2AsF16x4(p: usize): v128 {
  return i32x4.shl(i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v128.load32_zero(p))), 8);
}

@inline export function loadInt8x4(p: usize): v128 {
  return f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(i16x8.extend_low_i8x16_s(v128.load32_zero(p))));
}

/** Loads elements [i, i + 4) of an array of dtype `dt` at `p` as f32x4. */
@inline export function load4AsF32(dt: i32, p: usize, i: usize): v128 {
  switch (dt) {
    case DT_F32: return v128.load(p + (i << 2));
    case DT_F16: return loadF16x4(p + (i << 1));
    case DT_BF16: return loadBf16x4(p + (i << 1));
    case DT_INT8: return loadInt8x4(p + i);
    case DT_FP8E4M3: return loadFp8E4M3x4(p + i);
    case DT_FP8E5M2: return loadFp8E5M2x4(p + i);
    default: return f32x4.splat(<f32>NaN);
  }
}

// ---- scalar encode -----------------------------------------------------------

/**
 * f32 → a small float format with E exponent bits, M mantissa bits and bias
 * BIAS, round to nearest even. IEEE formats overflow to Inf, E4M3FN (no Inf)
 * to NaN; with `sat`, overflow and ±Inf clamp to ±max finite (OCP saturation).
 */
@inline function encodeSmallFloat(x: f32, E: u32, M: u32, BIAS: i32, IEEE: bool, MAXCODE: u32, NANCODE: u32, sat: bool): u32 {
  const b = reinterpret<u32>(x);
  const a = b & 0x7fffffff;
  if (a > 0x7f800000) return NANCODE;
  const sign = (b >>> 31) << (E + M);
  const overflow = sat ? sign | MAXCODE : IEEE ? sign | (((<u32>1 << E) - 1) << M) : sign | NANCODE;
  if (a == 0x7f800000) return overflow;
  let code: u32;
  if (a < (<u32>(128 - BIAS) << 23)) {
    // Subnormal: adding 2^(24 − BIAS − M) makes the FPU round to the subnormal quantum.
    const magic = reinterpret<f32>(<u32>(151 - BIAS - <i32>M) << 23);
    code = reinterpret<u32>(reinterpret<f32>(a) + magic) - reinterpret<u32>(magic);
  } else {
    const s = 23 - M;
    const t = a + (<u32>(BIAS - 127) << 23) + ((<u32>1 << (s - 1)) - 1) + ((a >> s) & 1);
    code = t >> s;
  }
  return code > MAXCODE ? overflow : sign | code;
}

@inline export function encodeF16(x: f32): u32 {
  return encodeSmallFloat(x, 5, 10, 15, true, 0x7bff, 0x7e00, false);
}

@inline export function encodeBf16(x: f32): u32 {
  const b = reinterpret<u32>(x);
  if ((b & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  return (b + 0x7fff + ((b >> 16) & 1)) >> 16;
}

@inline export function encodeFp8E4M3(x: f32, sat: bool): u32 {
  return sat ? encodeSmallFloat(x, 4, 3, 7, false, 0x7e, 0x7f, true) : encodeSmallFloat(x, 4, 3, 7, false, 0x7e, 0x7f, false);
}

@inline export function encodeFp8E5M2(x: f32, sat: bool): u32 {
  return sat ? encodeSmallFloat(x, 5, 2, 15, true, 0x7b, 0x7e, true) : encodeSmallFloat(x, 5, 2, 15, true, 0x7b, 0x7e, false);
}

/** int8: round half to even, clamp to [−128, 127]; NaN → 0. */
@inline export function encodeInt8(x: f32): i32 {
  if (x != x) return 0;
  return <i32>min<f32>(127, max<f32>(-128, nearest<f32>(x)));
}

/** Stores `x` as element `i` of an array of dtype `dt` at `p`. */
export function storeFromF32(dt: i32, p: usize, i: usize, x: f32, sat: bool): void {
  switch (dt) {
    case DT_F32: store<f32>(p + (i << 2), x); break;
    case DT_F16: store<u16>(p + (i << 1), <u16>encodeF16(x)); break;
    case DT_BF16: store<u16>(p + (i << 1), <u16>encodeBf16(x)); break;
    case DT_INT8: store<i8>(p + i, <i8>encodeInt8(x)); break;
    case DT_FP8E4M3: store<u8>(p + i, <u8>encodeFp8E4M3(x, sat)); break;
    case DT_FP8E5M2: store<u8>(p + i, <u8>encodeFp8E5M2(x, sat)); break;
    case DT_INT32: store<i32>(p + (i << 2), <i32>x); break;
    default: store<u8>(p + i, <u8>min<f32>(255, max<f32>(0, nearest<f32>(x))));
  }
}

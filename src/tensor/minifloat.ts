/**
 * Exact codecs for the small float formats: IEEE binary16 (f16), bfloat16,
 * and the OCP 8-bit formats E4M3FN and E5M2 (OCP 8-bit Floating Point
 * Specification, rev 1.0).
 *
 * Encoding rounds to nearest, ties to even, directly from a float64 (no double
 * rounding through f32). Overflow follows the OCP rules:
 *   - non-saturating (the IEEE default): f16, bf16 and E5M2 overflow to ±Inf,
 *     E4M3FN (which has no Inf) overflows to NaN;
 *   - saturating (`saturate = true`, fp8 only, what vLLM's fp8 KV cache does):
 *     finite overflow and ±Inf clamp to ±max finite.
 * NaN encodes to the format's canonical positive quiet NaN (f16 0x7e00, bf16 0x7fc0,
 * E4M3FN 0x7f, E5M2 0x7e). Decoding is exact: every code maps to its value, and
 * `decodeBits` gives the f32 bit pattern (NaN payloads kept: mantissa << (23 − m)).
 */

export interface MiniFloatFormat {
  readonly name: string;
  readonly expBits: number;
  readonly manBits: number;
  readonly bias: number;
  /** IEEE-style specials: all-ones exponent holds Inf (mantissa 0) and NaN. */
  readonly ieee: boolean;
  /** Code of the largest finite magnitude. */
  readonly maxCode: number;
  /** Canonical NaN code (positive). */
  readonly nanCode: number;
}

export const F16: MiniFloatFormat = { name: "f16", expBits: 5, manBits: 10, bias: 15, ieee: true, maxCode: 0x7bff, nanCode: 0x7e00 };
export const BF16: MiniFloatFormat = { name: "bf16", expBits: 8, manBits: 7, bias: 127, ieee: true, maxCode: 0x7f7f, nanCode: 0x7fc0 };
export const FP8_E4M3: MiniFloatFormat = { name: "fp8e4m3", expBits: 4, manBits: 3, bias: 7, ieee: false, maxCode: 0x7e, nanCode: 0x7f };
export const FP8_E5M2: MiniFloatFormat = { name: "fp8e5m2", expBits: 5, manBits: 2, bias: 15, ieee: true, maxCode: 0x7b, nanCode: 0x7e };

const f64 = new Float64Array(1);
const f64hi = new Uint32Array(f64.buffer, 4, 1); // little-endian: high word at +4
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Round half to even, for y ≥ 0 computed exactly. */
function roundHalfEven(y: number): number {
  const f = Math.floor(y);
  const d = y - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** Encodes a float64 into `fmt` with round-to-nearest-even. */
export function encodeMiniFloat(fmt: MiniFloatFormat, x: number, saturate = false): number {
  if (Number.isNaN(x)) return fmt.nanCode;
  const signBit = 1 << (fmt.expBits + fmt.manBits);
  const sign = x < 0 || Object.is(x, -0) ? signBit : 0;
  const a = Math.abs(x);
  const overflow = saturate ? sign | fmt.maxCode : fmt.ieee ? sign | (((1 << fmt.expBits) - 1) << fmt.manBits) : sign | fmt.nanCode;
  if (a === Infinity) return overflow;
  const m = fmt.manBits;
  const minNormalExp = 1 - fmt.bias;
  let code: number;
  if (a < 2 ** minNormalExp) {
    // Subnormal (or rounds up to the smallest normal, whose code is exactly 2^m).
    code = roundHalfEven(a * 2 ** (m - minNormalExp));
  } else {
    f64[0] = a;
    let e = ((f64hi[0]! >>> 20) & 0x7ff) - 1023; // a ≥ 2^-126 here, so a is a normal double
    let r = roundHalfEven((a / 2 ** e - 1) * 2 ** m);
    if (r === 2 ** m) {
      e += 1;
      r = 0;
    }
    code = (e + fmt.bias) * 2 ** m + r;
  }
  if (code > fmt.maxCode) return overflow;
  return sign | code;
}

/** Decodes `code` of `fmt` to its exact value. */
export function decodeMiniFloat(fmt: MiniFloatFormat, code: number): number {
  const m = fmt.manBits;
  const sign = (code >> (fmt.expBits + m)) & 1 ? -1 : 1;
  const expMax = (1 << fmt.expBits) - 1;
  const exp = (code >> m) & expMax;
  const man = code & ((1 << m) - 1);
  if (fmt.ieee && exp === expMax) return man === 0 ? sign * Infinity : NaN;
  if (!fmt.ieee && exp === expMax && man === (1 << m) - 1) return NaN;
  if (exp === 0) return sign * man * 2 ** (1 - fmt.bias - m);
  return sign * (1 + man / 2 ** m) * 2 ** (exp - fmt.bias);
}

/** The f32 bit pattern of `code`'s value; NaNs keep sign and payload (mantissa << (23 − m)). */
export function decodeMiniFloatBits(fmt: MiniFloatFormat, code: number): number {
  const v = decodeMiniFloat(fmt, code);
  if (Number.isNaN(v)) {
    const m = fmt.manBits;
    const sign = (code >> (fmt.expBits + m)) & 1;
    return ((sign << 31) | 0x7f800000 | ((code & ((1 << m) - 1)) << (23 - m))) >>> 0;
  }
  f32[0] = v;
  return u32[0]!;
}

/**
 * Per-dtype scalar codecs and array conversions (TypeScript side). The kernels'
 * own load/store path is assembly/tensor/dtype.ts; the tests hold the two to the
 * same bits.
 */
import { ArgumentError } from "../errors.js";
import { type DType, DTYPE_BYTES } from "./dtype.js";
import {
  BF16,
  F16,
  FP8_E4M3,
  FP8_E5M2,
  type MiniFloatFormat,
  decodeMiniFloat,
  decodeMiniFloatBits,
  encodeMiniFloat,
} from "./minifloat.js";

/** The dtypes whose elements are codes of a float format narrower than f32. */
export type CodedFloatDType = "f16" | "bf16" | "fp8e4m3" | "fp8e5m2";

const FORMATS: Readonly<Record<CodedFloatDType, MiniFloatFormat>> = {
  f16: F16,
  bf16: BF16,
  fp8e4m3: FP8_E4M3,
  fp8e5m2: FP8_E5M2,
};

export function miniFloatFormat(dtype: CodedFloatDType): MiniFloatFormat {
  return FORMATS[dtype];
}

export interface EncodeOptions {
  /** fp8 only: clamp overflow and ±Inf to ±max finite (OCP saturation mode). Default false. */
  saturate?: boolean;
}

/** Round half to even; the int8 and integer quantizers use it. */
export function roundHalfEven(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

/** int8: round half to even, clamp to [-128, 127]; NaN → 0. */
export function encodeInt8(x: number): number {
  if (Number.isNaN(x)) return 0;
  return Math.max(-128, Math.min(127, roundHalfEven(x)));
}

/** Encodes one value into the code of `dtype` (for f32: the value rounded to f32). */
export function encodeValue(dtype: DType, x: number, options: EncodeOptions = {}): number {
  switch (dtype) {
    case "f32":
      return Math.fround(x);
    case "f16":
    case "bf16":
      return encodeMiniFloat(FORMATS[dtype], x, false);
    case "fp8e4m3":
    case "fp8e5m2":
      return encodeMiniFloat(FORMATS[dtype], x, options.saturate ?? false);
    case "int8":
      return encodeInt8(x);
    case "int32":
      return x | 0;
    case "uint8":
      return Math.max(0, Math.min(255, roundHalfEven(x)));
  }
}

/** Decodes one code of `dtype` to its exact value. */
export function decodeValue(dtype: DType, code: number): number {
  switch (dtype) {
    case "f16":
    case "bf16":
    case "fp8e4m3":
    case "fp8e5m2":
      return decodeMiniFloat(FORMATS[dtype], code);
    default:
      return code;
  }
}

/** The f32 bit pattern that the kernels' decoder produces for `code` (NaN payloads kept). */
export function decodeToF32Bits(dtype: CodedFloatDType, code: number): number {
  return decodeMiniFloatBits(FORMATS[dtype], code);
}

/** Typed array that holds the raw elements of `dtype`. */
export type StorageArray = Float32Array | Uint16Array | Int8Array | Uint8Array | Int32Array;

export function storageArray(dtype: DType, buffer: ArrayBufferLike, byteOffset: number, length: number): StorageArray {
  switch (dtype) {
    case "f32":
      return new Float32Array(buffer, byteOffset, length);
    case "f16":
    case "bf16":
      return new Uint16Array(buffer, byteOffset, length);
    case "int8":
      return new Int8Array(buffer, byteOffset, length);
    case "fp8e4m3":
    case "fp8e5m2":
    case "uint8":
      return new Uint8Array(buffer, byteOffset, length);
    case "int32":
      return new Int32Array(buffer, byteOffset, length);
  }
}

export function allocStorage(dtype: DType, length: number): StorageArray {
  return storageArray(dtype, new ArrayBuffer(length * DTYPE_BYTES[dtype]), 0, length);
}

/** Encodes `src` into `dst` (a storage array of `dtype`, same length). */
export function encodeInto(dtype: DType, src: ArrayLike<number>, dst: StorageArray, options: EncodeOptions = {}): void {
  if (dst.length !== src.length) {
    throw new ArgumentError("dst", `must have the length of src (${src.length}), got ${dst.length}`);
  }
  for (let i = 0; i < src.length; i++) dst[i] = encodeValue(dtype, src[i]!, options);
}

/** decodeValue of every code of a 16- or 8-bit float dtype, built once on first use (a whole cache decodes per lookup, not per bit field). */
const decodeTables = new Map<CodedFloatDType, Float64Array>();
function decodeTable(dtype: CodedFloatDType): Float64Array {
  let t = decodeTables.get(dtype);
  if (t === undefined) {
    t = Float64Array.from({ length: DTYPE_BYTES[dtype] === 2 ? 1 << 16 : 1 << 8 }, (_, code) => decodeValue(dtype, code));
    decodeTables.set(dtype, t);
  }
  return t;
}

/** Decodes a storage array of `dtype` into `dst` (Float32Array or Float64Array, same length). */
export function decodeInto(dtype: DType, src: ArrayLike<number>, dst: Float32Array | Float64Array): void {
  if (dst.length !== src.length) {
    throw new ArgumentError("dst", `must have the length of src (${src.length}), got ${dst.length}`);
  }
  if (isCodedFloat(dtype) && (DTYPE_BYTES[dtype] === 2 ? src instanceof Uint16Array : src instanceof Uint8Array)) {
    // Storage arrays hold only codes of the format's width: every one is in the table.
    const table = decodeTable(dtype);
    for (let i = 0; i < src.length; i++) dst[i] = table[src[i]!]!;
    return;
  }
  for (let i = 0; i < src.length; i++) dst[i] = decodeValue(dtype, src[i]!);
}

/** Encodes then decodes: the value `x` becomes once stored as `dtype`. */
export function roundTo(dtype: DType, x: number, options: EncodeOptions = {}): number {
  return decodeValue(dtype, encodeValue(dtype, x, options));
}

export function isCodedFloat(dtype: DType): dtype is CodedFloatDType {
  return dtype in FORMATS;
}

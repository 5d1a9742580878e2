/**
 * Storage dtypes. Compute is always f32; tensors may be stored in any of these.
 * The numeric codes are the ABI shared with the AssemblyScript kernels
 * (assembly/tensor/dtype.ts): keep the two tables identical.
 */
import { ArgumentError, show } from "../errors.js";

export type FloatDType = "f32" | "f16" | "bf16" | "fp8e4m3" | "fp8e5m2";
/** Every dtype a tensor can have: the float storage formats plus int8 and the index types. */
export type DType = FloatDType | "int8" | "int32" | "uint8";

export const DTYPE_CODE: Readonly<Record<DType, number>> = {
  f32: 0,
  f16: 1,
  bf16: 2,
  int8: 3,
  fp8e4m3: 4,
  fp8e5m2: 5,
  int32: 6,
  uint8: 7,
};

export const DTYPE_BYTES: Readonly<Record<DType, number>> = {
  f32: 4,
  f16: 2,
  bf16: 2,
  int8: 1,
  fp8e4m3: 1,
  fp8e5m2: 1,
  int32: 4,
  uint8: 1,
};

export const DTYPES = Object.keys(DTYPE_CODE) as DType[];

export function isDType(value: unknown): value is DType {
  return typeof value === "string" && Object.prototype.hasOwnProperty.call(DTYPE_CODE, value);
}

/** Throws unless `value` is one of `allowed` (default: any dtype). */
export function checkDType<T extends DType = DType>(
  argument: string,
  value: unknown,
  allowed: readonly T[] = DTYPES as T[],
): T {
  if (!isDType(value) || !(allowed as readonly string[]).includes(value)) {
    throw new ArgumentError(argument, `must be one of ${allowed.join(" | ")}, got ${show(value)}`);
  }
  return value as T;
}

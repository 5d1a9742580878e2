/**
 * Argument checks shared by every public entry point. Each throws an
 * ArgumentError naming the argument and the value it got.
 */
import { ArgumentError, show } from "../errors.js";

export interface IntRange {
  min?: number;
  max?: number;
}

/** An integer in [min, max]. Rejects fractions, NaN, ±Inf and non-numbers. */
export function checkInt(argument: string, value: unknown, range: IntRange = {}): number {
  if (typeof value !== "number" || !Number.isInteger(value)) {
    throw new ArgumentError(argument, `must be an integer, got ${show(value)}`);
  }
  if (range.min !== undefined && value < range.min) {
    throw new ArgumentError(argument, `must be ≥ ${range.min}, got ${value}`);
  }
  if (range.max !== undefined && value > range.max) {
    throw new ArgumentError(argument, `must be ≤ ${range.max}, got ${value}`);
  }
  return value;
}

/** A finite number in [min, max] (inclusive unless stated). */
export function checkNumber(
  argument: string,
  value: unknown,
  range: { min?: number; max?: number; minExclusive?: number } = {},
): number {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new ArgumentError(argument, `must be a finite number, got ${show(value)}`);
  }
  if (range.min !== undefined && value < range.min) throw new ArgumentError(argument, `must be ≥ ${range.min}, got ${value}`);
  if (range.max !== undefined && value > range.max) throw new ArgumentError(argument, `must be ≤ ${range.max}, got ${value}`);
  if (range.minExclusive !== undefined && value <= range.minExclusive) {
    throw new ArgumentError(argument, `must be > ${range.minExclusive}, got ${value}`);
  }
  return value;
}

export function checkBoolean(argument: string, value: unknown): boolean {
  if (typeof value !== "boolean") throw new ArgumentError(argument, `must be a boolean, got ${show(value)}`);
  return value;
}

/** One of a fixed set of strings. */
export function checkOneOf<T extends string>(argument: string, value: unknown, allowed: readonly T[]): T {
  if (typeof value !== "string" || !(allowed as readonly string[]).includes(value)) {
    throw new ArgumentError(argument, `must be one of ${allowed.map((a) => JSON.stringify(a)).join(" | ")}, got ${show(value)}`);
  }
  return value as T;
}

/** A shape: an array of non-negative integers. */
export function checkShapeArray(argument: string, shape: unknown): number[] {
  if (!Array.isArray(shape)) throw new ArgumentError(argument, `must be an array of dimensions, got ${show(shape)}`);
  shape.forEach((d, i) => checkInt(`${argument}[${i}]`, d, { min: 0 }));
  return shape as number[];
}

/**
 * Checks `shape` against `expected`, where a number pins a dimension and null
 * leaves it free. Names the first dimension that differs:
 *   `k.shape[2] must be 128 (headDim), got 64`.
 */
export function checkDims(
  argument: string,
  shape: readonly number[],
  expected: readonly (number | null)[],
  names: readonly string[] = [],
): void {
  if (shape.length !== expected.length) {
    throw new ArgumentError(`${argument}.shape`, `must have rank ${expected.length}${names.length ? ` [${names.join(", ")}]` : ""}, got ${show(shape)}`);
  }
  expected.forEach((e, i) => {
    if (e !== null && shape[i] !== e) {
      const what = names[i] ? ` (${names[i]})` : "";
      throw new ArgumentError(`${argument}.shape[${i}]`, `must be ${e}${what}, got ${shape[i]}`);
    }
  });
}

/** Row-major strides, in elements, of a contiguous tensor of `shape`. */
export function contiguousStrides(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i]!;
  }
  return strides;
}

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * Checks that `strides` (in elements) fit `shape`: same rank, non-negative
 * integers, and the furthest element inside `capacity` elements.
 */
export function checkStrides(argument: string, shape: readonly number[], strides: readonly unknown[], capacity?: number): number[] {
  if (strides.length !== shape.length) {
    throw new ArgumentError(`${argument}.strides`, `must have rank ${shape.length}, got ${show(strides)}`);
  }
  strides.forEach((s, i) => checkInt(`${argument}.strides[${i}]`, s, { min: 0 }));
  if (capacity !== undefined && numel(shape) > 0) {
    let last = 0;
    shape.forEach((d, i) => (last += (d - 1) * (strides[i] as number)));
    if (last >= capacity) {
      throw new ArgumentError(`${argument}.strides`, `reach element ${last}, beyond the ${capacity} elements of the buffer (strides ${show(strides)}, shape ${show(shape)})`);
    }
  }
  return strides as number[];
}

/**
 * Broadcasts `shape` to `target` the NumPy way (trailing-aligned; 1 stretches).
 * Returns the element strides to read `shape`'s contiguous buffer as `target`
 * (0 on broadcast dimensions), or throws naming the dimension that fails.
 */
export function broadcastStrides(argument: string, shape: readonly number[], target: readonly number[]): number[] {
  if (shape.length > target.length) {
    throw new ArgumentError(`${argument}.shape`, `${show(shape)} does not broadcast to ${show(target)}: too many dimensions`);
  }
  const own = contiguousStrides(shape);
  const out = new Array<number>(target.length).fill(0);
  const offset = target.length - shape.length;
  for (let i = 0; i < shape.length; i++) {
    const d = shape[i]!;
    const t = target[i + offset]!;
    if (d === t) out[i + offset] = d === 1 ? 0 : own[i]!;
    else if (d === 1) out[i + offset] = 0;
    else throw new ArgumentError(`${argument}.shape`, `${show(shape)} does not broadcast to ${show(target)}: dimension ${i} is ${d}, needs 1 or ${t}`);
  }
  return out;
}

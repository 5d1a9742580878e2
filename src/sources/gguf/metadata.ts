/**
 * Typed access to GGUF metadata (reader.ts) that names the file, the key and
 * the value on every error, as model/config.ts's Keys does for config.json.
 */
import { ArgumentError, show } from "../../errors.js";
import type { GgufValue } from "./value.js";

export class GgufMetadata {
  constructor(
    readonly map: ReadonlyMap<string, GgufValue>,
    readonly source: string,
  ) {}

  error(key: string, message: string): ArgumentError {
    return new ArgumentError(`${this.source} ${key}`, message);
  }

  has(key: string): boolean {
    return this.map.has(key);
  }

  string(key: string): string | null;
  string(key: string, fallback: string): string;
  string(key: string, fallback?: string): string | null {
    const v = this.map.get(key);
    if (v === undefined) return fallback ?? null;
    if (typeof v !== "string") throw this.error(key, `must be a string, got ${show(v)}`);
    return v;
  }

  /** An integer ≥ min; `fallback` when absent (required when undefined). */
  int(key: string, fallback?: number, min = 0): number {
    const v = this.map.get(key);
    if (v === undefined) {
      if (fallback === undefined) throw this.error(key, "is required, got nothing");
      return fallback;
    }
    if (typeof v !== "number" || !Number.isInteger(v)) throw this.error(key, `must be an integer, got ${show(v)}`);
    if (v < min) throw this.error(key, `must be ≥ ${min}, got ${v}`);
    return v;
  }

  optionalInt(key: string): number | null {
    return this.map.has(key) ? this.int(key) : null;
  }

  /** A positive finite number; `fallback` when absent. */
  positive(key: string, fallback: number): number {
    const v = this.map.get(key);
    if (v === undefined) return fallback;
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) throw this.error(key, `must be a positive number, got ${show(v)}`);
    return v;
  }

  bool(key: string, fallback: boolean): boolean {
    const v = this.map.get(key);
    if (v === undefined) return fallback;
    if (typeof v !== "boolean") throw this.error(key, `must be true or false, got ${show(v)}`);
    return v;
  }

  /** An array whose elements all pass `check` (e.g. typeof === "string"). */
  array<T>(key: string, what: string, check: (x: unknown) => x is T): T[] | null {
    const v = this.map.get(key);
    if (v === undefined) return null;
    if (!Array.isArray(v)) throw this.error(key, `must be an array of ${what}, got ${show(v)}`);
    for (let i = 0; i < v.length; i++) if (!check(v[i])) throw this.error(`${key}[${i}]`, `must be ${what}, got ${show(v[i])}`);
    return v as T[];
  }
}

export const isString = (x: unknown): x is string => typeof x === "string";
export const isNumber = (x: unknown): x is number => typeof x === "number";

/** An f32 metadata value as the shortest decimal that rounds to the same f32 (1e-6, not 9.99999997e-7), as config.json spells it. */
export function shortestDecimal(f32: number): number {
  for (let digits = 1; digits <= 9; digits++) {
    const d = Number(f32.toPrecision(digits));
    if (Math.fround(d) === Math.fround(f32)) return d;
  }
  return f32;
}

/**
 * Reference block quantizers (float64 code written for clarity, with every f32
 * rounding the kernels perform made explicit by Math.fround, so the kernels
 * can be held to them bit for bit):
 *
 *   q8 (GGUF Q8_0), weights and activations: per block of 32,
 *     d = f32(max|x| / 127), q = roundHalfEven(f32(x · f32(1/d))) ∈ [−127, 127]
 *   q4 (GGUF Q4_0), weights: m = the first x of largest magnitude,
 *     d = f32(m / −8), q = clamp(roundHalfEven(f32(x · f32(1/d))), −8, 7)
 *
 * with d = 0 giving q = 0. A row is zero-padded to a multiple of 32.
 */
import { roundHalfEven } from "../../tensor/codec.js";

export const BLOCK = 32;

export interface QuantizedRow {
  /** Codes [nb · 32] (zero past the row's length). */
  codes: Int8Array;
  /** One scale per block [nb], an f32 value. */
  scales: Float64Array;
}

function blocks(n: number): number {
  return Math.ceil(n / BLOCK);
}

/** Q8_0 of one row of f32 values. */
export function quantizeQ8(row: ArrayLike<number>): QuantizedRow {
  const nb = blocks(row.length);
  const codes = new Int8Array(nb * BLOCK);
  const scales = new Float64Array(nb);
  for (let b = 0; b < nb; b++) {
    let amax = 0;
    for (let i = b * BLOCK; i < Math.min(row.length, (b + 1) * BLOCK); i++) amax = Math.max(amax, Math.abs(row[i]!));
    const d = Math.fround(amax / 127);
    const id = d !== 0 ? Math.fround(1 / d) : 0;
    scales[b] = d;
    for (let i = b * BLOCK; i < Math.min(row.length, (b + 1) * BLOCK); i++) {
      codes[i] = Math.max(-127, Math.min(127, roundHalfEven(Math.fround(row[i]! * id))));
    }
  }
  return { codes, scales };
}

/** Q4_0 of one row of f32 values. */
export function quantizeQ4(row: ArrayLike<number>): QuantizedRow {
  const nb = blocks(row.length);
  const codes = new Int8Array(nb * BLOCK);
  const scales = new Float64Array(nb);
  for (let b = 0; b < nb; b++) {
    let amax = 0;
    let m = 0;
    for (let i = b * BLOCK; i < Math.min(row.length, (b + 1) * BLOCK); i++) {
      if (Math.abs(row[i]!) > amax) {
        amax = Math.abs(row[i]!);
        m = row[i]!;
      }
    }
    const d = Math.fround(m / -8);
    const id = d !== 0 ? Math.fround(1 / d) : 0;
    scales[b] = d;
    for (let i = b * BLOCK; i < Math.min(row.length, (b + 1) * BLOCK); i++) {
      codes[i] = Math.max(-8, Math.min(7, roundHalfEven(Math.fround(row[i]! * id))));
    }
  }
  return { codes, scales };
}

/** The values a quantized row stands for: f32(q · d), first `n` of them. */
export function dequantizeRow(q: QuantizedRow, n: number): Float64Array {
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.fround(q.codes[i]! * q.scales[Math.floor(i / BLOCK)]!);
  return out;
}

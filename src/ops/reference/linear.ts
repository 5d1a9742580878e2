/**
 * Reference linear layer in float64: out[t, r] = Σ_c x[t, c] · w[r, c] (+ bias[r]),
 * llm.c's matmul_forward_naive. For quantized weights the tests pass the
 * dequantized weights and (q8/q4) the activation as the kernels quantize it, so
 * the only difference left is the kernels' f32 accumulation.
 */
import { quantizeQ8, dequantizeRow } from "./quantize.js";

/** x [T, cols] · w [rows, cols]ᵀ + bias [rows] → [T, rows], all row-major. */
export function linearReference(
  x: ArrayLike<number>,
  w: ArrayLike<number>,
  shape: { tokens: number; rows: number; cols: number },
  bias?: ArrayLike<number>,
): Float64Array {
  const { tokens, rows, cols } = shape;
  const out = new Float64Array(tokens * rows);
  for (let t = 0; t < tokens; t++) {
    for (let r = 0; r < rows; r++) {
      let s = 0;
      for (let c = 0; c < cols; c++) s += x[t * cols + c]! * w[r * cols + c]!;
      out[t * rows + r] = s + (bias ? bias[r]! : 0);
    }
  }
  return out;
}

/** Σ_c |x[t, c] · w[r, c]| for each output: the scale of its rounding error. */
export function linearMagnitude(x: ArrayLike<number>, w: ArrayLike<number>, shape: { tokens: number; rows: number; cols: number }): Float64Array {
  const { tokens, rows, cols } = shape;
  const out = new Float64Array(tokens * rows);
  for (let t = 0; t < tokens; t++) {
    for (let r = 0; r < rows; r++) {
      let s = 0;
      for (let c = 0; c < cols; c++) s += Math.abs(x[t * cols + c]! * w[r * cols + c]!);
      out[t * rows + r] = s;
    }
  }
  return out;
}

/** x [T, cols] as the q8/q4 kernels see it: each row quantized per block of 32 (Q8_0) and decoded. */
export function quantizeActivationReference(x: ArrayLike<number>, tokens: number, cols: number): Float64Array {
  const out = new Float64Array(tokens * cols);
  for (let t = 0; t < tokens; t++) {
    const row = Array.from({ length: cols }, (_, c) => x[t * cols + c]!);
    out.set(dequantizeRow(quantizeQ8(row), cols), t * cols);
  }
  return out;
}

/** Reference SwiGLU activation in float64: silu(gate) · up, silu(x) = x / (1 + e^(−x)). */
export function siluReference(x: number): number {
  return x / (1 + Math.exp(-x));
}

export function swigluReference(gate: ArrayLike<number>, up: ArrayLike<number>): Float64Array {
  const out = new Float64Array(gate.length);
  for (let i = 0; i < gate.length; i++) out[i] = siluReference(gate[i]!) * up[i]!;
  return out;
}

/**
 * tanh GELU in float64: ½x(1 + tanh(u)), u = √(2/π)(x + 0.044715x³)
 * (PyTorch's gelu(approximate="tanh")), evaluated as the identical
 * x / (1 + e^(−2u)), which keeps its relative precision where 1 + tanh(u)
 * cancels (x ≪ 0).
 */
export function geluTanhReference(x: number): number {
  return x / (1 + Math.exp(-2 * Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
}

/** Reference GeGLU in float64: gelu_tanh(gate) · up. */
export function gegluReference(gate: ArrayLike<number>, up: ArrayLike<number>): Float64Array {
  const out = new Float64Array(gate.length);
  for (let i = 0; i < gate.length; i++) out[i] = geluTanhReference(gate[i]!) * up[i]!;
  return out;
}

/** Reference SwiGLU activation in float64: silu(gate) · up, silu(x) = x / (1 + e^(−x)). */
export function siluReference(x: number): number {
  return x / (1 + Math.exp(-x));
}

export function swigluReference(gate: ArrayLike<number>, up: ArrayLike<number>): Float64Array {
  const out = new Float64Array(gate.length);
  for (let i = 0; i < gate.length; i++) out[i] = siluReference(gate[i]!) * up[i]!;
  return out;
}

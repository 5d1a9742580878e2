/**
 * Reference LayerNorm in float64 (torch.nn.LayerNorm: biased variance, eps
 * inside the square root): out = (s − mean(s)) / sqrt(var(s) + eps) ⊙ w + b,
 * s = x (+ delta), per row of length d. The twin of ops/layernorm.ts.
 */
export function layerNormReference(x: ArrayLike<number>, delta: ArrayLike<number> | null, weight: ArrayLike<number>, bias: ArrayLike<number>, rows: number, d: number, eps: number): Float64Array {
  const out = new Float64Array(rows * d);
  const s = new Float64Array(d);
  for (let r = 0; r < rows; r++) {
    let sum = 0;
    for (let i = 0; i < d; i++) sum += s[i] = x[r * d + i]! + (delta === null ? 0 : delta[r * d + i]!);
    const mean = sum / d;
    let sq = 0;
    for (let i = 0; i < d; i++) sq += (s[i]! - mean) ** 2;
    const inv = 1 / Math.sqrt(sq / d + eps);
    for (let i = 0; i < d; i++) out[r * d + i] = (s[i]! - mean) * inv * weight[i]! + bias[i]!;
  }
  return out;
}

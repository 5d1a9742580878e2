/** Reference RMSNorm in float64: out = w ⊙ x / sqrt(mean(x²) + eps), per row of length d. */
export function rmsNormReference(x: ArrayLike<number>, weight: ArrayLike<number>, rows: number, d: number, eps: number): Float64Array {
  const out = new Float64Array(rows * d);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < d; i++) ss += x[r * d + i]! ** 2;
    const inv = 1 / Math.sqrt(ss / d + eps);
    for (let i = 0; i < d; i++) out[r * d + i] = weight[i]! * x[r * d + i]! * inv;
  }
  return out;
}

/**
 * Reference rotary embedding in float64, rotate-half convention: for each
 * token t, head and i < R/2, with θ = f32(f32(pos[t]) · invFreq[i]) (the f32
 * angle transformers computes):
 *   out[i] = x[i]·cos θ − x[i + R/2]·sin θ,  out[i + R/2] = x[i + R/2]·cos θ + x[i]·sin θ
 * x is [T, heads, headDim] row-major; dimensions ≥ R pass through.
 */
export function ropeReference(
  x: ArrayLike<number>,
  positions: ArrayLike<number>,
  invFreq: ArrayLike<number>,
  shape: { tokens: number; heads: number; headDim: number; rotaryDim: number },
): Float64Array {
  const { tokens, heads, headDim, rotaryDim } = shape;
  const half = rotaryDim / 2;
  const out = Float64Array.from(x as ArrayLike<number>);
  for (let t = 0; t < tokens; t++) {
    for (let h = 0; h < heads; h++) {
      const base = (t * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const theta = Math.fround(Math.fround(positions[t]!) * Math.fround(invFreq[i]!));
        const c = Math.cos(theta);
        const s = Math.sin(theta);
        const x1 = x[base + i]!;
        const x2 = x[base + i + half]!;
        out[base + i] = x1 * c - x2 * s;
        out[base + i + half] = x2 * c + x1 * s;
      }
    }
  }
  return out;
}

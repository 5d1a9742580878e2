/**
 * The elementwise steps of a BERT layer, on f32 rows over the runtime's
 * memory, run on the engine's thread: the residual add + LayerNorm of
 * post-LN BERT (Ba et al. 2016; torch.nn.LayerNorm: biased variance, eps
 * inside the square root) and GELU (Hendrycks & Gimpel 2016), exact (erf) or
 * its tanh approximation. They are O(T·h) and O(T·I) beside the projections'
 * O(T·h·I); the row statistics accumulate in f64.
 *
 * erf is Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7), under f32's own
 * rounding at the values GELU cares about.
 */
import type { GeluKind } from "./bert-config.js";
import type { LayerNormWeights } from "./bert-weights.js";

/**
 * x[t] = LayerNorm(x[t] + delta[t]) · weight + bias for each of T rows of h
 * (delta null: LayerNorm of x alone). x and delta: f32 [T, h], contiguous.
 */
export function addLayerNorm(x: Float32Array, delta: Float32Array | null, T: number, h: number, norm: LayerNormWeights, eps: number): void {
  const { weight, bias } = norm;
  for (let t = 0; t < T; t++) {
    const r = t * h;
    let sum = 0;
    if (delta !== null) for (let i = r; i < r + h; i++) sum += x[i] = x[i]! + delta[i]!;
    else for (let i = r; i < r + h; i++) sum += x[i]!;
    const mean = sum / h;
    let sq = 0;
    for (let i = r; i < r + h; i++) {
      const d = x[i]! - mean;
      sq += d * d;
    }
    const inv = 1 / Math.sqrt(sq / h + eps);
    for (let i = 0; i < h; i++) x[r + i] = (x[r + i]! - mean) * inv * weight[i]! + bias[i]!;
  }
}

/** erf(x), Abramowitz & Stegun 7.1.26: |error| ≤ 1.5e-7. */
export function erfApprox(x: number): number {
  const s = x < 0 ? -1 : 1;
  const a = Math.abs(x);
  const t = 1 / (1 + 0.3275911 * a);
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-a * a);
  return s * y;
}

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);

/** a[i] = GELU(a[i]) for i < n, in place: x·Φ(x) (erf), or 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))) (tanh). */
export function geluInPlace(a: Float32Array, n: number, kind: GeluKind): void {
  if (kind === "erf") {
    for (let i = 0; i < n; i++) {
      const x = a[i]!;
      a[i] = 0.5 * x * (1 + erfApprox(x * Math.SQRT1_2));
    }
  } else {
    for (let i = 0; i < n; i++) {
      const x = a[i]!;
      a[i] = 0.5 * x * (1 + Math.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
    }
  }
}

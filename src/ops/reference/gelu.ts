/**
 * Reference GELU in float64, the twin of ops/gelu.ts: exact x·Φ(x) with Φ(x)
 * = ½·erfc(−x/√2), erfc from erf's Maclaurin series for |z| < 3 and its
 * continued fraction (Lentz, evaluated from the back) beyond, ≈ 1e−15
 * relative; and the tanh form as ½x(1 + tanh u) = x / (1 + e^(−2u)).
 */
import { geluTanhReference } from "./swiglu.js";

/** erfc(z) for z ≥ 0 to ≈ 1e−15 relative. */
export function erfcReference(z: number): number {
  if (z < 3) {
    let term = z;
    let sum = z;
    for (let n = 1; n < 200; n++) {
      term *= (-z * z) / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return 1 - (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc(z) = e^(−z²)/√π · 1/(z + (1/2)/(z + 1/(z + (3/2)/(z + …)))).
  let f = z;
  for (let k = 200; k >= 1; k--) f = z + k / 2 / f;
  return Math.exp(-z * z) / Math.sqrt(Math.PI) / f;
}

/** GELU(x), exact: x·(1 − ½erfc(x/√2)) for x ≥ 0, x·½erfc(−x/√2) below (no cancellation). */
export function geluErfReference(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const h = 0.5 * erfcReference(Math.abs(x) / Math.SQRT2);
  return x * (x >= 0 ? 1 - h : h);
}

/** GELU of every element: "erf" (exact) or "tanh". */
export function geluReference(x: ArrayLike<number>, form: "erf" | "tanh"): Float64Array {
  return Float64Array.from({ length: x.length }, (_, i) => (form === "erf" ? geluErfReference(x[i]!) : geluTanhReference(x[i]!)));
}

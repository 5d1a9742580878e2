// Deterministic weights and activations for the A/B scripts: the same values on every build.

/** n values in ±0.06 from a fixed LCG (what bench/int8-dot.ts fills). */
export function values(n, seed) {
  const d = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    d[i] = ((s >>> 8) / 2 ** 24 - 0.5) * 0.12;
  }
  return d;
}

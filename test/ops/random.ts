// Seeded random inputs for the op conformance suites (not a test file of its own).

/** mulberry32: a small, fast, seeded PRNG in [0, 1). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** n standard-normal values (Box–Muller) times `scale`, rounded to f32. */
export function randn(n: number, seed: number, scale = 1): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const u = Math.max(r(), 1e-12);
    out[i] = scale * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
  }
  return out;
}

/** n values uniform in [lo, hi), rounded to f32. */
export function uniform(n: number, seed: number, lo = -1, hi = 1): Float32Array {
  const r = rng(seed);
  return Float32Array.from({ length: n }, () => lo + (hi - lo) * r());
}

/**
 * Fails unless |got[i] − want[i]| ≤ tol(i) for every i (NaN never passes),
 * naming the first offending index, both values and the bound.
 */
export function assertWithin(got: ArrayLike<number>, want: ArrayLike<number>, tol: (i: number) => number, what: string): void {
  if (got.length !== want.length) throw new Error(`${what}: length ${got.length}, expected ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    const err = Math.abs(got[i]! - want[i]!);
    if (!(err <= tol(i))) {
      throw new Error(`${what}: element ${i} is ${got[i]}, expected ${want[i]} ± ${tol(i)} (off by ${err})`);
    }
  }
}

/** Root-mean-square of a − b over root-mean-square of b. */
export function relRms(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < b.length; i++) {
    num += (a[i]! - b[i]!) ** 2;
    den += b[i]! ** 2;
  }
  return Math.sqrt(num / den);
}

/**
 * Speculative rejection sampling for a sampled draft (Leviathan et al. 2023,
 * "Fast Inference from Transformers via Speculative Decoding", Algorithm 1;
 * Chen et al. 2023, "Accelerating LLM Decoding with Speculative Sampling";
 * vLLM's rejection_sampler.py does the same per draft position):
 *
 *   draft x ~ q (the draft model's filtered distribution at this position)
 *   accept x          with probability min(1, p(x) / q(x))     (u · q(x) < p(x), u ~ U[0, 1))
 *   else output y ~ norm(max(0, p − q))                         (the residual)
 *
 * which makes the output token distributed as p exactly, for any q. The
 * engine calls it per position until the first rejection; if every draft is
 * kept it samples the bonus token from p as plain decoding does. Both
 * distributions are sparse: the kept ids in ascending order and their
 * probabilities (Sampler.distribution's form), in float64.
 */

/** A filtered next-token distribution: ids ascending, probabilities summing to 1 (ids not listed have 0). */
export interface TokenDistribution {
  ids: Int32Array;
  probs: Float64Array;
}

/** A uniform source in [0, 1) (the request's Prng). */
export interface UniformSource {
  nextFloat(): number;
}

/** d's probability: a binary search over d's ascending ids. */
export function probabilityOf(d: TokenDistribution, token: number): number {
  let lo = 0;
  let hi = d.ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (d.ids[mid]! < token) lo = mid + 1;
    else hi = mid;
  }
  return lo < d.ids.length && d.ids[lo] === token ? d.probs[lo]! : 0;
}

/**
 * Verifies one draft `draft` ~ q against the target's p: the draft itself
 * when accepted (one uniform: u · q(x) < p(x)), else a token from the
 * residual norm(max(0, p − q)) (a second uniform). q(draft) must be > 0 (it
 * was drawn from q).
 */
export function verifyDraft(p: TokenDistribution, q: TokenDistribution, draft: number, rng: UniformSource): { token: number; accepted: boolean } {
  const qx = probabilityOf(q, draft);
  const px = probabilityOf(p, draft);
  if (rng.nextFloat() * qx < px) return { token: draft, accepted: true };
  return { token: sampleResidual(p, q, rng.nextFloat()), accepted: false };
}

/**
 * A token from norm(max(0, p − q)) with the uniform u ∈ [0, 1): the residual
 * is walked over p's ids in ascending order (only ids where p > 0 can have
 * p − q > 0). If rounding left no residual mass (p = q), draws from p.
 */
export function sampleResidual(p: TokenDistribution, q: TokenDistribution, u: number): number {
  const n = p.ids.length;
  const r = new Float64Array(n); // [n] max(0, p − q) at p's ids
  let mass = 0;
  let j = 0; // merge cursor over q's ascending ids
  for (let i = 0; i < n; i++) {
    const id = p.ids[i]!;
    while (j < q.ids.length && q.ids[j]! < id) j++;
    const qx = j < q.ids.length && q.ids[j] === id ? q.probs[j]! : 0;
    r[i] = Math.max(0, p.probs[i]! - qx);
    mass += r[i]!;
  }
  const w = mass > 0 ? r : p.probs;
  let left = u * (mass > 0 ? mass : w.reduce((a, b) => a + b, 0));
  let last = -1;
  for (let i = 0; i < n; i++) {
    if (w[i]! <= 0) continue;
    last = i;
    left -= w[i]!;
    if (left < 0) return p.ids[i]!;
  }
  return p.ids[last === -1 ? 0 : last]!; // u landed on the rounding slack at the very end
}

/** One draw from d with the uniform u ∈ [0, 1), walked over d's ascending ids. */
export function sampleFrom(d: TokenDistribution, u: number): number {
  let left = u;
  for (let i = 0; i < d.ids.length; i++) {
    left -= d.probs[i]!;
    if (left < 0) return d.ids[i]!;
  }
  return d.ids[d.ids.length - 1]!;
}

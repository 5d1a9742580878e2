/**
 * Which engine of a data-parallel group takes a request: prefix affinity with
 * a load bound. The same rule as the HAProxy recipe (deploy/haproxy/haproxy.cfg),
 * in tokens rather than bytes: requests whose prompts begin alike (one system
 * prompt, one conversation) go to the engine whose prefix cache holds that
 * beginning, unless it already has `slack` more requests in flight than the
 * least loaded engine, which then takes the request (consistent hashing with
 * bounded loads, Mirrokni, Thorup and Zadimoghaddam 2018).
 *
 * The key is the first AFFINITY_TOKENS prompt tokens and the cache salt;
 * engines are ranked by rendezvous hashing (highest random weight, Thaler and
 * Ravishankar 1998), so a key keeps its engine whatever the others do.
 */

/** Prompt tokens that make the affinity key: a block-aligned system prompt's start. */
export const AFFINITY_TOKENS = 64;

/** FNV-1a over 32-bit words, then a final avalanche (murmur3's fmix32). */
function hashWords(words: readonly number[], seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (const w of words) {
    h = Math.imul(h ^ (w & 0xffff), 0x01000193) >>> 0;
    h = Math.imul(h ^ (w >>> 16), 0x01000193) >>> 0;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

function saltWords(salt: string | undefined): number[] {
  if (salt === undefined) return [];
  const out: number[] = [];
  for (let i = 0; i < salt.length; i++) out.push(salt.charCodeAt(i));
  return out;
}

/** The engine a prompt prefers, in [0, numEngines). */
export function affineEngine(promptTokenIds: readonly number[], cacheSalt: string | undefined, numEngines: number): number {
  const key = [...promptTokenIds.slice(0, AFFINITY_TOKENS), -1, ...saltWords(cacheSalt)];
  let best = 0;
  let bestScore = -1;
  for (let e = 0; e < numEngines; e++) {
    const score = hashWords(key, Math.imul(e + 1, 0x9e3779b9));
    if (score > bestScore) [best, bestScore] = [e, score];
  }
  return best;
}

/**
 * The engine for a request, given each engine's requests in flight: the affine
 * one, or the least loaded when the affine one has more than `slack` extra.
 */
export function pickEngine(promptTokenIds: readonly number[], cacheSalt: string | undefined, inFlight: readonly number[], slack: number): number {
  const affine = affineEngine(promptTokenIds, cacheSalt, inFlight.length);
  let least = 0;
  for (let e = 1; e < inFlight.length; e++) if (inFlight[e]! < inFlight[least]!) least = e;
  return inFlight[affine]! - inFlight[least]! > slack ? least : affine;
}

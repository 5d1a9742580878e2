/**
 * The sampler: one sequence's next token from its logits, in vLLM's order:
 *
 *   raw logprobs    log-softmax of the model's logits (before any processing), if asked for
 *   grammar mask    a constrained request's allowed tokens (XGrammar bitmask): the rest → −∞
 *   logit bias      OpenAI logit_bias
 *   penalties       repetition (HF, prompt + output), frequency and presence (OpenAI, output only)
 *   greedy          temperature 0: argmax (ties → the lowest id)
 *   temperature     p ∝ exp(l / T)
 *   min-p           keep p ≥ minP · p_max      ⇔ l ≥ l_max + T · ln(minP)
 *   top-k           keep l ≥ the k-th largest (ties with it kept, as HF's TopK warper)
 *   top-p           keep the smallest most-probable set with mass ≥ topP (ties at its edge kept)
 *   draw            u ~ U[0, mass) from the request's own Prng, walked over the kept ids in id order
 *
 * No full sort of the vocabulary: min-p, top-k and a negligible-mass cutoff
 * (p < e^-40 · p_max, under 5e-18 each) all become one logit threshold, top-k's
 * found in one pass with a size-k heap; top-p is a three-way partition search
 * on probability mass over what is left. All O(V) expected. In plain
 * JavaScript the cost is dominated by one Math.exp per surviving candidate. Per-request state (random stream, token counts) lives in
 * SamplingState, so sequences sample independently and a seeded request
 * reproduces whatever else is in the batch. A Sampler holds only scratch.
 */
import { ArgumentError, OutOfMemoryError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { Prng, randomSeed } from "../tensor/prng.js";
import { SamplerKernels, f32AtLeast } from "./sampler-kernels.js";
import { GREEDY_EPSILON, type ResolvedSamplingParams } from "./sampling-params.js";

/** Tokens more than this many temperature-scaled nats below the best one are never drawn. */
const NEGLIGIBLE_NATS = 40;
/** Logit buckets of the top-p search: a histogram pass narrows the nucleus edge to one bucket. */
const NUCLEUS_BUCKETS = 2048;

export interface TokenLogprob {
  token: number;
  logprob: number;
}

export interface SampleResult {
  token: number;
  /** log-softmax of the raw logits at `token` (null unless params.logprobs is set). */
  logprob: number | null;
  /** The params.logprobs highest raw logprobs, best first, ties by id (null unless asked for). */
  topLogprobs: TokenLogprob[] | null;
}

/** One request's sampling state: its parameters, random stream and token counts. */
export class SamplingState {
  readonly params: ResolvedSamplingParams;
  /** The seed actually used (params.seed, or a random one). */
  readonly seed: number;
  readonly rng: Prng;
  /** Distinct prompt tokens (for the repetition penalty). */
  readonly #prompt: Set<number>;
  /** Output token → times generated. */
  readonly #counts = new Map<number, number>();
  readonly outputIds: number[] = [];

  /** `rng`: a stream to draw from instead of a new one from the seed (a draft model's per-request stream). */
  constructor(params: ResolvedSamplingParams, promptIds: readonly number[] = [], rng?: Prng) {
    this.params = params;
    this.seed = params.seed ?? randomSeed();
    this.rng = rng ?? new Prng(this.seed);
    this.#prompt = params.repetitionPenalty !== 1 ? new Set(promptIds) : new Set();
  }

  /** Records a generated token (Sampler.sample does this for the token it returns). */
  accept(token: number): void {
    this.outputIds.push(token);
    this.#counts.set(token, (this.#counts.get(token) ?? 0) + 1);
  }

  /** Output token → count. */
  get counts(): ReadonlyMap<number, number> {
    return this.#counts;
  }

  /** Tokens the repetition penalty applies to: prompt ∪ output. */
  *seenTokens(): Generator<number> {
    yield* this.#prompt;
    for (const t of this.#counts.keys()) if (!this.#prompt.has(t)) yield t;
  }
}

export interface SamplerOptions {
  /**
   * Run the O(V) passes as wasm SIMD kernels over scratch in this runtime's
   * memory (sampler-kernels.ts) instead of in JavaScript. Throws if the
   * memory cannot hold the scratch (≈ 30 bytes a vocabulary entry).
   */
  runtime?: Runtime;
}

export class Sampler {
  readonly vocabSize: number;
  /** Where the O(V) passes run: "wasm" (SamplerOptions.runtime) or "js" (the float64 reference). */
  readonly passes: "wasm" | "js";
  readonly #kernels: SamplerKernels | null;
  readonly #scores: Float32Array; // [V] processed logits
  readonly #candIds: Int32Array; // [V] candidate ids, ascending
  readonly #candW: Float64Array; // [V] candidate weights exp((l − max)/T)
  readonly #work: Float64Array; // [V] selection scratch
  readonly #bucketMass = new Float64Array(NUCLEUS_BUCKETS);
  readonly #bucketOf: Uint16Array; // [V] each candidate's top-p bucket

  constructor(vocabSize: number, options: SamplerOptions = {}) {
    if (!Number.isInteger(vocabSize) || vocabSize < 1) throw new ArgumentError("vocabSize", `must be an integer ≥ 1, got ${show(vocabSize)}`);
    this.vocabSize = vocabSize;
    this.#kernels = options.runtime === undefined ? null : new SamplerKernels(options.runtime, vocabSize, NUCLEUS_BUCKETS);
    this.passes = this.#kernels === null ? "js" : "wasm";
    // The JavaScript passes' scratch (the wasm passes keep theirs in the runtime's memory).
    const js = this.#kernels === null ? vocabSize : 0;
    this.#scores = new Float32Array(js);
    this.#candIds = new Int32Array(js);
    this.#candW = new Float64Array(js);
    this.#work = new Float64Array(js);
    this.#bucketOf = new Uint16Array(js);
  }

  /** Frees the wasm passes' scratch (nothing for the JavaScript passes). The sampler is unusable after. */
  free(): void {
    this.#kernels?.free();
  }

  /**
   * Picks the next token of one sequence from its logits (f32 [V], read only:
   * a view of the decoder's output is fine) and records it in `state`.
   * `allowed`: a grammar's bitmask (Int32Array [ceil(V / 32)], bit t % 32 of
   * word t >> 5 set ⇔ token t allowed), or null for none.
   */
  sample(state: SamplingState, logits: Float32Array, allowed: Int32Array | null = null): SampleResult {
    this.#checkLogits(logits);
    const token = this.#greedyInPlace(state, logits, allowed) ?? this.#pick(state, this.processLogits(state, logits, allowed));
    state.accept(token);
    return this.resultFor(state, logits, token);
  }

  /**
   * The SampleResult of `token` chosen from `logits` by another rule (a
   * speculative draft's verification): its raw logprobs when params.logprobs
   * is set. Records nothing in `state`.
   */
  resultFor(state: SamplingState, logits: Float32Array, token: number): SampleResult {
    const p = state.params;
    if (p.logprobs === null) return { token, logprob: null, topLogprobs: null };
    const k = this.#kernels;
    const lse = k === null ? logSumExp(logits) : k.rawLogSumExp(logits);
    return {
      token,
      logprob: logits[token]! - lse,
      topLogprobs: (k === null ? topN(logits, p.logprobs) : k.topRaw(p.logprobs)).map((t) => ({ token: t, logprob: logits[t]! - lse })),
    };
  }

  #checkLogits(logits: Float32Array): void {
    if (!(logits instanceof Float32Array) || logits.length !== this.vocabSize) {
      throw new ArgumentError("logits", `must be a Float32Array of the vocabulary size ${this.vocabSize}, got ${show(logits)}`);
    }
  }

  /**
   * The distribution the next draw would use, without drawing: the kept ids
   * (ascending) and their probabilities (summing to 1). Greedy: the argmax with 1.
   * The arrays are copies.
   */
  distribution(state: SamplingState, logits: Float32Array, allowed: Int32Array | null = null): { ids: Int32Array; probs: Float64Array } {
    this.#checkLogits(logits);
    if (state.params.temperature < GREEDY_EPSILON) {
      const token = this.#greedyInPlace(state, logits, allowed) ?? this.#argmax(this.processLogits(state, logits, allowed));
      return { ids: Int32Array.of(token), probs: Float64Array.of(1) };
    }
    const scores = this.processLogits(state, logits, allowed);
    const k = this.#kernels;
    if (k !== null) {
      const n = this.#candidatesWasm(k, state, scores);
      if (n < 0) {
        const ids = overflowed(scores);
        return { ids, probs: new Float64Array(ids.length).fill(1 / ids.length) };
      }
      const { ids, w } = k.candidateArrays(n);
      let mass = 0;
      for (let j = 0; j < n; j++) mass += w[j]!;
      return { ids: ids.slice(), probs: Float64Array.from(w, (x) => x / mass) };
    }
    const n = this.#candidates(state, scores);
    let mass = 0;
    for (let j = 0; j < n; j++) mass += this.#candW[j]!;
    return { ids: this.#candIds.slice(0, n), probs: this.#candW.slice(0, n).map((w) => w / mass) };
  }

  /** Greedy (argmax) or a draw from processed scores, by the request's temperature. */
  #pick(state: SamplingState, scores: Float32Array): number {
    return state.params.temperature < GREEDY_EPSILON ? this.#argmax(scores) : this.#draw(state, scores);
  }

  /**
   * Greedy decoding with nothing to process (changesLogits) on the wasm
   * passes: the argmax of the logits read in place, where they lie in the
   * kernels' memory (the engine's view of the decoder's output), skipping the
   * copy processLogits makes (600 KB a row for a 150k vocabulary). null: take
   * the copy path (a temperature, logits elsewhere, JavaScript passes,
   * something to process, or a NaN / all −∞ row, whose error the copy path
   * names).
   */
  #greedyInPlace(state: SamplingState, logits: Float32Array, allowed: Int32Array | null): number | null {
    const p = state.params;
    if (p.temperature >= GREEDY_EPSILON || this.#kernels === null || changesLogits(p, allowed)) return null;
    return this.#kernels.argmaxInPlace(logits);
  }

  /**
   * The grammar mask, logit bias, then the repetition, frequency and presence
   * penalties. Returns `logits` itself when nothing changes it (JavaScript
   * passes), else the sampler's scratch copy (valid until the next call; the
   * wasm passes always work on their copy).
   */
  processLogits(state: SamplingState, logits: Float32Array, allowed: Int32Array | null = null): Float32Array {
    const p = state.params;
    const k = this.#kernels;
    if (k === null && !changesLogits(p, allowed)) return logits;
    const s = k === null ? this.#scores : k.loadScores(logits);
    if (k === null) s.set(logits);
    if (allowed !== null) applyTokenMask(s, allowed);
    for (const [id, bias] of p.logitBias) s[id] = s[id]! + bias;
    if (p.repetitionPenalty !== 1) {
      const r = p.repetitionPenalty;
      for (const id of state.seenTokens()) {
        const l = s[id]!;
        s[id] = l > 0 ? l / r : l * r;
      }
    }
    if (p.presencePenalty !== 0 || p.frequencyPenalty !== 0) {
      for (const [id, n] of state.counts) s[id] = s[id]! - p.frequencyPenalty * n - p.presencePenalty;
    }
    return s;
  }

  /** argmax(scores), by the kernels when they hold scores (the same errors: NaN, all −∞). */
  #argmax(scores: Float32Array): number {
    const k = this.#kernels;
    if (k === null) return argmax(scores);
    const max = k.maxScore();
    if (Number.isNaN(max) || max === -Infinity) return argmax(scores); // throws the error naming the element
    return k.firstAtLeast(max);
  }

  /**
   * #candidates by the kernels over their scores copy: leaves the n kept ids
   * and f32 weights in the kernels' scratch and returns n, or −1 when the
   * logits overflowed (+∞: the callers draw among those, see overflowed()).
   */
  #candidatesWasm(k: SamplerKernels, state: SamplingState, scores: Float32Array): number {
    const { temperature: T, topP } = state.params;
    const max = k.maxScore();
    if (Number.isNaN(max) || max === -Infinity) argmax(scores); // throws the error naming the element
    if (max === Infinity) return -1;
    const floor = candidateFloor(state.params, max, (kk, f) => k.kthLargest(Math.min(kk, this.vocabSize), f));
    if (topP >= 1) return k.candidates(floor, max, T, null).n;
    // Top-p: the mass histogram over NUCLEUS_BUCKETS logit buckets in [floor, max], then only the edge bucket is partitioned.
    const f = f32AtLeast(floor); // the floor the kernel compares and buckets with
    const scale = max > f ? NUCLEUS_BUCKETS / (max - f) : 0;
    const { n, mass } = k.candidates(floor, max, T, scale);
    const edge = edgeBucket(k.bucketMass, topP * mass);
    if (edge === null) return n; // rounding left the whole mass short of topP · mass: keep everything
    const work = k.bucketWeights(n, edge.b);
    return k.keepNucleus(n, edge.b, nucleusEdge(work, work.length, edge.need));
  }

  /** One draw from the request's stream over the candidates. */
  #draw(state: SamplingState, scores: Float32Array): number {
    const k = this.#kernels;
    if (k !== null) {
      const n = this.#candidatesWasm(k, state, scores);
      if (n >= 0) return k.draw(n, state.rng.nextFloat());
      const ids = overflowed(scores); // the +∞ logits share the mass equally, as in #candidates
      return ids[Math.min(ids.length - 1, Math.floor(state.rng.nextFloat() * ids.length))]!;
    }
    const n = this.#candidates(state, scores);
    const ids = this.#candIds;
    const w = this.#candW;
    let mass = 0;
    for (let j = 0; j < n; j++) mass += w[j]!;
    let u = state.rng.nextFloat() * mass;
    for (let j = 0; j < n; j++) {
      u -= w[j]!;
      if (u < 0) return ids[j]!;
    }
    return ids[n - 1]!; // u landed on the rounding slack at the very end
  }

  /**
   * Temperature, min-p, top-k and top-p: leaves the n kept ids (ascending) in
   * #candIds and their unnormalized weights exp((l − l_max)/T) in #candW; returns n.
   */
  #candidates(state: SamplingState, scores: Float32Array): number {
    const { temperature: T, topP } = state.params;
    const V = this.vocabSize;
    const max = scores[argmax(scores)]!;
    const ids = this.#candIds;
    const w = this.#candW;
    let n = 0;
    if (max === Infinity) {
      // Overflowed logits: the +∞ ones share all the mass.
      for (let i = 0; i < V; i++) if (scores[i] === Infinity) (ids[n] = i), (w[n++] = 1);
      return n;
    }
    const floor = candidateFloor(state.params, max, (k, f) => kthLargest(scores, k, f));
    for (let i = 0; i < V; i++) if (scores[i]! >= floor) ids[n++] = i;

    let mass = 0;
    if (topP >= 1) {
      for (let j = 0; j < n; j++) mass += w[j] = Math.exp((scores[ids[j]!]! - max) / T);
    } else {
      // With the weights, a histogram of their mass over NUCLEUS_BUCKETS logit buckets in [floor, max].
      const bucketOf = this.#bucketOf;
      const bucketMass = this.#bucketMass.fill(0);
      const scale = max > floor ? NUCLEUS_BUCKETS / (max - floor) : 0;
      for (let j = 0; j < n; j++) {
        const l = scores[ids[j]!]!;
        const x = Math.exp((l - max) / T);
        const b = Math.min(NUCLEUS_BUCKETS - 1, ((l - floor) * scale) | 0);
        w[j] = x;
        bucketOf[j] = b;
        bucketMass[b] += x;
        mass += x;
      }
      const edge = this.#nucleusEdge(n, topP * mass);
      let m = 0;
      for (let j = 0; j < n; j++) {
        if (w[j]! >= edge) {
          ids[m] = ids[j]!;
          w[m++] = w[j]!;
        }
      }
      n = m;
    }
    return n;
  }

  /**
   * The top-p edge over the n candidates, given the mass histogram #candidates
   * built: from the top bucket down, find the bucket where the mass crosses
   * `need`; only that bucket's weights are partitioned (nucleusEdge). No sort.
   */
  #nucleusEdge(n: number, need: number): number {
    const edge = edgeBucket(this.#bucketMass, need);
    if (edge === null) return 0; // rounding left the whole mass short of topP · mass: keep everything
    const work = this.#work;
    const bucketOf = this.#bucketOf;
    const w = this.#candW;
    let m = 0;
    for (let j = 0; j < n; j++) if (bucketOf[j] === edge.b) work[m++] = w[j]!;
    return nucleusEdge(work, m, edge.need);
  }
}

/**
 * The lowest logit a candidate keeps: the highest of the negligible-mass
 * cutoff (NEGLIGIBLE_NATS · T below max), min-p's threshold and top-k's k-th
 * largest score (`kth(k, floor)`, among those ≥ floor).
 */
/** Whether processLogits changes anything: a grammar mask, a logit bias or a penalty. */
function changesLogits(p: ResolvedSamplingParams, allowed: Int32Array | null): boolean {
  return allowed !== null || p.logitBias.size !== 0 || p.repetitionPenalty !== 1 || p.presencePenalty !== 0 || p.frequencyPenalty !== 0;
}

function candidateFloor(p: ResolvedSamplingParams, max: number, kth: (k: number, floor: number) => number): number {
  let floor = max - NEGLIGIBLE_NATS * p.temperature;
  if (p.minP > 0) floor = Math.max(floor, max + p.temperature * Math.log(p.minP));
  if (p.topK > 0) floor = Math.max(floor, kth(p.topK, floor));
  return floor;
}

/**
 * From the top bucket of a top-p mass histogram down, the bucket b where the
 * running mass reaches `need`, and the mass still needed inside it; null when
 * rounding leaves the whole histogram short of it.
 */
function edgeBucket(bucketMass: Float64Array, need: number): { b: number; need: number } | null {
  for (let b = bucketMass.length - 1; b >= 0; b--) {
    if (bucketMass[b]! >= need) return { b, need };
    need -= bucketMass[b]!;
  }
  return null;
}

/** Ids of the +∞ scores, ascending (logits that overflowed: they share all the mass). */
function overflowed(scores: Float32Array): Int32Array {
  const ids: number[] = [];
  for (let i = 0; i < scores.length; i++) if (scores[i] === Infinity) ids.push(i);
  return Int32Array.from(ids);
}

/**
 * A sampler whose O(V) passes run as wasm kernels in `runtime`'s memory when
 * one is given and its memory can hold their scratch, else in JavaScript (the
 * same distribution: see sampler-kernels.ts).
 */
export function createSampler(vocabSize: number, runtime: Runtime | undefined): Sampler {
  if (runtime === undefined) return new Sampler(vocabSize);
  try {
    return new Sampler(vocabSize, { runtime });
  } catch (e) {
    if (e instanceof OutOfMemoryError) return new Sampler(vocabSize);
    throw e;
  }
}

/**
 * Sets the logits of disallowed tokens to −∞ in place. mask: Int32Array
 * [ceil(V / 32)], bit t % 32 of word t >> 5 set ⇔ token t allowed (XGrammar's
 * layout); tokens past the mask are disallowed. Whole words are skipped or filled.
 */
export function applyTokenMask(logits: Float32Array, mask: Int32Array): void {
  const V = logits.length;
  const words = Math.min(mask.length, Math.ceil(V / 32));
  for (let w = 0; w < words; w++) {
    const bits = mask[w]!;
    if (bits === -1) continue;
    const base = w << 5;
    if (bits === 0) {
      logits.fill(-Infinity, base, Math.min(base + 32, V));
      continue;
    }
    const end = Math.min(32, V - base);
    for (let b = 0; b < end; b++) if (((bits >>> b) & 1) === 0) logits[base + b] = -Infinity;
  }
  if (words * 32 < V) logits.fill(-Infinity, words * 32);
}

/** Index of the largest value (the lowest index among ties). Throws on NaN, or when every value is −∞. */
export function argmax(x: Float32Array): number {
  let best = 0;
  let bestV = -Infinity;
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    if (v > bestV) {
      bestV = v;
      best = i;
    } else if (v !== v) throw new ArgumentError("logits", `contain NaN at index ${i}`);
  }
  if (bestV === -Infinity) throw new ArgumentError("logits", "are all −Infinity: every token is masked");
  return best;
}

/** log Σ exp(x), stable. */
export function logSumExp(x: Float32Array): number {
  let max = -Infinity;
  for (let i = 0; i < x.length; i++) if (x[i]! > max) max = x[i]!;
  if (max === -Infinity || max === Infinity) return max;
  let sum = 0;
  for (let i = 0; i < x.length; i++) sum += Math.exp(x[i]! - max);
  return max + Math.log(sum);
}

/** Ids of the n largest values, best first, ties by lower id: a size-n min-heap, O(V log n). */
export function topN(x: Float32Array, n: number): number[] {
  if (n <= 0) return [];
  const heap: number[] = []; // min-heap by (value, then higher id is "smaller": it is evicted first)
  const less = (a: number, b: number): boolean => x[a]! < x[b]! || (x[a] === x[b] && a > b);
  const up = (i: number): void => {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!less(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  };
  const down = (i: number): void => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && less(heap[l]!, heap[m]!)) m = l;
      if (r < heap.length && less(heap[r]!, heap[m]!)) m = r;
      if (m === i) return;
      [heap[i], heap[m]] = [heap[m]!, heap[i]!];
      i = m;
    }
  };
  for (let i = 0; i < x.length; i++) {
    if (heap.length < n) {
      heap.push(i);
      up(heap.length - 1);
    } else if (less(heap[0]!, i)) {
      heap[0] = i;
      down(0);
    }
  }
  return heap.sort((a, b) => (x[b]! - x[a]!) || a - b);
}

/**
 * The k-th largest value of x among those ≥ floor (floor itself if fewer than k
 * are), in one pass with a size-k min-heap: once the heap holds large values,
 * almost every element costs one comparison.
 */
export function kthLargest(x: Float32Array, k: number, floor = -Infinity): number {
  const heap = new Float64Array(k);
  let size = 0;
  for (let i = 0; i < x.length; i++) {
    const v = x[i]!;
    if (!(v >= floor)) continue;
    if (size < k) {
      let j = size++;
      while (j > 0) {
        const parent = (j - 1) >> 1;
        if (heap[parent]! <= v) break;
        heap[j] = heap[parent]!;
        j = parent;
      }
      heap[j] = v;
    } else if (v > heap[0]!) {
      let j = 0;
      for (;;) {
        const l = 2 * j + 1;
        if (l >= k) break;
        const c = l + 1 < k && heap[l + 1]! < heap[l]! ? l + 1 : l;
        if (heap[c]! >= v) break;
        heap[j] = heap[c]!;
        j = c;
      }
      heap[j] = v;
    }
  }
  return size < k ? floor : heap[0]!;
}

/**
 * The smallest weight w* such that the weights ≥ w* among a[0..n) sum to ≥ need
 * (the edge of the top-p nucleus), by three-way partitioning on weight. Reorders a.
 */
export function nucleusEdge(a: Float64Array, n: number, need: number): number {
  let lo = 0;
  let hi = n - 1;
  while (lo < hi) {
    const pivot = medianOf3(a[lo]!, a[(lo + hi) >> 1]!, a[hi]!);
    let lt = lo;
    let gt = hi;
    let i = lo;
    let above = 0;
    let equal = 0;
    while (i <= gt) {
      const v = a[i]!;
      if (v > pivot) {
        above += v;
        swap(a, lt++, i++);
      } else if (v < pivot) swap(a, i, gt--);
      else {
        equal += v;
        i++;
      }
    }
    if (above >= need && lt > lo) hi = lt - 1;
    else if (above + equal >= need || gt >= hi) return pivot;
    else {
      need -= above + equal;
      lo = gt + 1;
    }
  }
  return a[lo]!;
}

function medianOf3(a: number, b: number, c: number): number {
  return a < b ? (b < c ? b : a < c ? c : a) : a < c ? a : b < c ? c : b;
}

function swap(a: Float64Array, i: number, j: number): void {
  const t = a[i]!;
  a[i] = a[j]!;
  a[j] = t;
}

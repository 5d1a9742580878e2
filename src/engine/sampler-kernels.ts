/**
 * The sampler's O(V) passes as wasm SIMD kernels (assembly/ops/sampling.ts),
 * over scratch the sampler keeps in a runtime's memory: the processed scores,
 * the candidates (ids, f32 weights, top-p buckets), a heap for top-k and a
 * copy of the raw logits for logprobs. In plain JavaScript each pass costs
 * ~1 ns an element for a compare and ~11 ns for a Math.exp, so over a
 * 151936-token vocabulary temperature sampling took ~2.6 ms a token and
 * greedy ~0.2 ms (BENCHMARKS "sampler"); here the scans run 4 lanes at a time.
 *
 * The kernels run on the calling thread (direct exports, no fork–join) and
 * are the fast twin of Sampler's float64 JavaScript passes, which stay its
 * reference: same candidate sets (thresholds are compared in f32 exactly as
 * JavaScript compares them in f64, see f32AtLeast), weights e^((l − max)/T)
 * within ≈ 2 ulp of f32, masses summed in f64.
 */
import { ArgumentError } from "../errors.js";
import type { KernelExports } from "../runtime/module.js";
import type { Runtime } from "../runtime/runtime.js";

/** The smallest f32 ≥ x (x a finite number or ±Infinity): for f32 v, v ≥ x ⇔ v ≥ f32AtLeast(x). */
export function f32AtLeast(x: number): number {
  const f = Math.fround(x);
  if (f >= x || Number.isNaN(x)) return f;
  // f < x: step one f32 up.
  const bits = new Float32Array(1);
  const ints = new Int32Array(bits.buffer);
  bits[0] = f;
  if (f === 0) ints[0] = 1; // +0 or −0 below a tiny positive x: the smallest subnormal
  else ints[0] += f > 0 ? 1 : -1;
  return bits[0]!;
}

/** Byte addresses of the scratch regions (each padded to a multiple of 4 elements, plus 4). */
interface ScratchPtrs {
  scores: number;
  raw: number;
  ids: number;
  w: number;
  bucketOf: number;
  work: number;
  heap: number;
  bucketMass: number;
  out: number;
}

interface ScratchViews {
  scores: Float32Array;
  raw: Float32Array;
  ids: Int32Array;
  w: Float32Array;
  work: Float64Array;
  bucketMass: Float64Array;
  out: Float64Array;
}

export class SamplerKernels {
  readonly vocabSize: number;
  readonly #rt: Runtime;
  readonly #k: KernelExports;
  readonly #buckets: number;
  readonly #ptrs: ScratchPtrs;
  #buffer: ArrayBufferLike | null = null;
  #views!: ScratchViews;
  #freed = false;

  /** Allocates the scratch in `rt`'s memory (≈ 30 bytes a vocabulary entry); throws if it does not fit. */
  constructor(rt: Runtime, vocabSize: number, buckets: number) {
    const V = vocabSize;
    const V4 = Math.ceil(V / 4) * 4 + 4; // room for a kernel's last vector to read past V
    this.vocabSize = V;
    this.#rt = rt;
    this.#k = rt.exports;
    this.#buckets = buckets;
    const sizes: ScratchPtrs = { scores: 4 * V4, raw: 4 * V4, ids: 4 * V4, w: 4 * V4, bucketOf: 2 * V4, work: 8 * V4, heap: 4 * V4, bucketMass: 8 * buckets, out: 64 };
    const got: Partial<ScratchPtrs> = {};
    try {
      for (const [name, bytes] of Object.entries(sizes) as [keyof ScratchPtrs, number][]) got[name] = rt.heap.alloc(bytes, `sampler ${name}`);
    } catch (e) {
      for (const p of Object.values(got)) rt.heap.free(p);
      throw e;
    }
    this.#ptrs = got as ScratchPtrs;
  }

  /** Typed views over the scratch, remade when the memory has grown (a shared memory's buffer is replaced). */
  #v(): ScratchViews {
    if (this.#freed) throw new Error("SamplerKernels used after free()");
    const buf = this.#rt.memory.buffer;
    if (buf !== this.#buffer) {
      const p = this.#ptrs;
      const V = this.vocabSize;
      this.#views = {
        scores: new Float32Array(buf, p.scores, V),
        raw: new Float32Array(buf, p.raw, V),
        ids: new Int32Array(buf, p.ids, V),
        w: new Float32Array(buf, p.w, V),
        work: new Float64Array(buf, p.work, V),
        bucketMass: new Float64Array(buf, p.bucketMass, this.#buckets),
        out: new Float64Array(buf, p.out, 1),
      };
      this.#buffer = buf;
    }
    return this.#views;
  }

  /** Copies `logits` into the scores scratch and returns it. */
  loadScores(logits: Float32Array): Float32Array {
    const s = this.#v().scores;
    s.set(logits);
    return s;
  }

  /**
   * Greedy over raw logits in place, without the copy loadScores makes: the
   * first index of the largest logit, when `logits` (f32 [V]) lies in this
   * runtime's memory (a view of the decoder's output); null when it lies
   * elsewhere, or holds a NaN or only −Infinity (the copy path then names the
   * error). The same scans as maxScore and firstAtLeast, so the same token.
   */
  argmaxInPlace(logits: Float32Array): number | null {
    if (this.#freed) throw new Error("SamplerKernels used after free()");
    if (logits.buffer !== this.#rt.memory.buffer || logits.length !== this.vocabSize) return null;
    const max = this.#k["sample_max"]!(logits.byteOffset, this.vocabSize);
    if (Number.isNaN(max) || max === -Infinity) return null;
    return this.#k["sample_first_ge"]!(logits.byteOffset, this.vocabSize, max);
  }

  /** Largest score: NaN if any is NaN, −Infinity if all are. */
  maxScore(): number {
    return this.#k["sample_max"]!(this.#ptrs.scores, this.vocabSize);
  }

  /** First index of the largest score (call after maxScore gave a non-NaN `max`). */
  firstAtLeast(max: number): number {
    return this.#k["sample_first_ge"]!(this.#ptrs.scores, this.vocabSize, max);
  }

  /** The k-th largest score among those ≥ floor, or −Infinity when fewer than k are. */
  kthLargest(k: number, floor: number): number {
    if (!Number.isInteger(k) || k < 1 || k > this.vocabSize) throw new ArgumentError("k", `must be an integer in [1, ${this.vocabSize}], got ${k}`);
    return this.#k["sample_kth_largest"]!(this.#ptrs.scores, this.vocabSize, k, f32AtLeast(floor), this.#ptrs.heap);
  }

  /**
   * Candidates: the scores ≥ floor, in id order, with weights e^((l − max)/T);
   * with `bucketScale` (top-p) also their buckets and the buckets' masses.
   * Returns the count and the total mass.
   */
  candidates(floor: number, max: number, temperature: number, bucketScale: number | null): { n: number; mass: number } {
    const p = this.#ptrs;
    const f = f32AtLeast(floor);
    const n = this.#k["sample_candidates"]!(p.scores, this.vocabSize, f, max, 1 / temperature, p.ids, p.w, bucketScale === null ? 0 : p.bucketOf, p.bucketMass, bucketScale ?? 0, this.#buckets, p.out);
    return { n, mass: this.#v().out[0]! };
  }

  /** The candidates' bucket masses (f64 [buckets]) after candidates() with a bucket scale. */
  get bucketMass(): Float64Array {
    return this.#v().bucketMass;
  }

  /** The weights of bucket b's candidates, gathered as f64 (a view: valid until the next call). */
  bucketWeights(n: number, b: number): Float64Array {
    const p = this.#ptrs;
    const m = this.#k["sample_bucket_weights"]!(p.bucketOf, p.w, n, b, p.work);
    return this.#v().work.subarray(0, m);
  }

  /** Keeps the buckets above b and bucket b's weights ≥ edge; returns the new count. */
  keepNucleus(n: number, b: number, edge: number): number {
    const p = this.#ptrs;
    return this.#k["sample_keep_nucleus"]!(p.ids, p.w, p.bucketOf, n, b, f32AtLeast(edge));
  }

  /** The id drawn from the n candidates at fraction `frac` ∈ [0, 1) of their mass (n ≥ 1). */
  draw(n: number, frac: number): number {
    const j = this.#k["sample_draw"]!(this.#ptrs.w, n, frac);
    return this.#v().ids[j]!;
  }

  /** The n candidates' ids and weights (views: valid until the next call). */
  candidateArrays(n: number): { ids: Int32Array; w: Float32Array } {
    const v = this.#v();
    return { ids: v.ids.subarray(0, n), w: v.w.subarray(0, n) };
  }

  /** log Σ exp(logits) over a copy of `logits` kept for topRaw. NaN if any is NaN; ±Infinity if the largest is. */
  rawLogSumExp(logits: Float32Array): number {
    const raw = this.#v().raw;
    raw.set(logits);
    const max = this.#k["sample_max"]!(this.#ptrs.raw, this.vocabSize);
    if (Number.isNaN(max) || max === Infinity || max === -Infinity) return max;
    return max + Math.log(this.#k["sample_sum_exp"]!(this.#ptrs.raw, this.vocabSize, max, this.#ptrs.work));
  }

  /** Ids of the n largest raw logits (as rawLogSumExp last copied), best first, ties by lower id. */
  topRaw(n: number): number[] {
    if (n <= 0) return [];
    const V = this.vocabSize;
    const k = Math.min(n, V);
    const p = this.#ptrs;
    const th = this.#k["sample_kth_largest"]!(p.raw, V, k, -Infinity, p.heap);
    const v = this.#v();
    const ids: number[] = [];
    const m = this.#k["sample_select_ge"]!(p.raw, V, th, p.ids);
    for (let j = 0; j < m; j++) ids.push(v.ids[j]!);
    const raw = v.raw;
    ids.sort((a, b) => raw[b]! - raw[a]! || a - b);
    return ids.slice(0, k);
  }

  free(): void {
    if (this.#freed) return;
    this.#freed = true;
    for (const p of Object.values(this.#ptrs)) this.#rt.heap.free(p);
  }
}

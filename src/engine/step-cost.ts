/**
 * The cost of a draft token, measured: how much longer a decode step of
 * 1 + k query tokens takes than one of 1, on this machine, this model and
 * these kernels (the adaptive draft length's c_k, draft-length.ts).
 *
 * An engine given a clock (EngineOptions.stepClock; the default is the
 * assumed cost, for the reason given there) times each decode forward at
 * batch 1 (one sequence, its known token plus k drafts: query length
 * T = 1 + k) and reports it here; per T the
 * meter keeps the last WINDOW timings and takes their median as the step time
 * ms(T) (a median, not a mean: on a shared machine a step the OS preempted
 * takes several times as long, and one such step must not switch speculation
 * off). The cost of one draft at length k is then
 *
 *   c_k = (ms(1 + k) / ms(1) − 1) / k        plain steps, ≥ 0
 *
 * On a weight-bound CPU step (a q8 GEMV reading every weight once) c_k is
 * small, and shrinks with k as the weight read is shared; on a compute-bound
 * step (a small model, or a GEMM kernel slower per token at small T than the
 * GEMV) it nears 1. A length without MIN_SAMPLES timings of its own takes the
 * c of the nearest measured length (the shorter one on a tie). While plain
 * steps (T = 1) have too few timings, as when every step of a sequence
 * drafts, ms(1) is taken from a least-squares line ms(T) = a + b·T through the
 * measured lengths' medians, when two or more are measured (on the line,
 * c = b / (a + b) for every k: a token's cost against a 1-token step);
 * with one or none, the assumed cost (DRAFT_TOKEN_COST). Timings at batch
 * > 1 are not taken: there a step's cost depends on the batch, and speculation
 * mostly runs at small batches (disable_by_batch_size).
 *
 * vLLM and llama.cpp do not measure this (vLLM's num_speculative_tokens is
 * fixed). The assumed constant is 2–4× off on this machine (bench spec: a
 * 2-token q8 step at 1.3–1.8× a 1-token one), but what is measured here while
 * other processes share the cores moves more than that between runs.
 */
import { checkInt } from "../tensor/check.js";
import { DRAFT_TOKEN_COST } from "./draft-length.js";

/** Timings kept per query length (the median of these is its step time). */
export const WINDOW = 9;
/** Timings a query length needs before its median is used. */
export const MIN_SAMPLES = 3;

export class StepCostMeter {
  readonly maxDrafts: number;
  /** The cost of one draft assumed until one is measured. */
  readonly fallback: number;
  /** The last WINDOW timings of each T = 1 … 1 + maxDrafts, a ring per T: Float64Array [maxDrafts + 1, WINDOW]. */
  readonly #ms: Float64Array;
  /** Timings taken per T, at index T − 1 (the ring's next slot is n mod WINDOW). */
  readonly #n: Uint32Array;

  constructor(options: { maxDrafts: number; fallback?: number }) {
    this.maxDrafts = checkInt("maxDrafts", options.maxDrafts, { min: 1 });
    const fallback = options.fallback ?? DRAFT_TOKEN_COST;
    if (!(fallback >= 0 && Number.isFinite(fallback))) throw new RangeError(`fallback must be a finite number ≥ 0, got ${fallback}`);
    this.fallback = fallback;
    this.#ms = new Float64Array((this.maxDrafts + 1) * WINDOW);
    this.#n = new Uint32Array(this.maxDrafts + 1);
  }

  /** A batch-1 decode step of `queryLen` tokens (1 + its drafts) took `ms` milliseconds. Lengths outside 1 … 1 + maxDrafts and non-positive or non-finite times are ignored. */
  observe(queryLen: number, ms: number): void {
    const i = queryLen - 1;
    if (!Number.isInteger(i) || i < 0 || i > this.maxDrafts || !(ms > 0 && Number.isFinite(ms))) return;
    this.#ms[i * WINDOW + (this.#n[i]! % WINDOW)] = ms;
    this.#n[i]!++;
  }

  /** The median time of the last WINDOW steps of `queryLen` tokens, ms, or null while it has fewer than MIN_SAMPLES timings. */
  stepMs(queryLen: number): number | null {
    const i = queryLen - 1;
    if (!(Number.isInteger(i) && i >= 0 && i <= this.maxDrafts) || this.#n[i]! < MIN_SAMPLES) return null;
    const kept = this.#ms.slice(i * WINDOW, i * WINDOW + Math.min(WINDOW, this.#n[i]!)).sort();
    const h = kept.length >> 1;
    return kept.length % 2 === 1 ? kept[h]! : (kept[h - 1]! + kept[h]!) / 2;
  }

  /** c_k: the cost of one of k drafts verified together, in plain decode steps (see the module comment). */
  perDraft(k: number): number {
    const plain = this.stepMs(1) ?? this.#fittedPlainMs();
    if (plain === null) return this.fallback;
    for (let d = 0; d < this.maxDrafts; d++) {
      for (const j of [k - d, k + d]) {
        if (j < 1 || j > this.maxDrafts) continue;
        const ms = this.stepMs(1 + j);
        if (ms !== null) return Math.max(0, (ms / plain - 1) / j);
      }
    }
    return this.fallback;
  }

  /** ms(1) from the least-squares line through the measured lengths' medians (two or more), else null; null too when the line is not positive at T = 1. */
  #fittedPlainMs(): number | null {
    let n = 0, st = 0, sm = 0, stt = 0, stm = 0;
    for (let t = 2; t <= this.maxDrafts + 1; t++) {
      const ms = this.stepMs(t);
      if (ms === null) continue;
      (n += 1), (st += t), (sm += ms), (stt += t * t), (stm += t * ms);
    }
    if (n < 2) return null;
    const b = (n * stm - st * sm) / (n * stt - st * st);
    const a = (sm - b * st) / n;
    return a + b > 0 ? a + b : null;
  }
}

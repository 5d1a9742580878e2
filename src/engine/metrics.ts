/**
 * The engine's counters and latency histograms, with vLLM's metric names and
 * buckets (vllm/v1/metrics/loggers.py). The engine records into an
 * EngineMetrics; `snapshot()` is plain data (it crosses the worker boundary)
 * that the server renders as Prometheus text (server/metrics.ts).
 */
import type { FinishReason } from "./request.js";

/** vLLM's buckets, in seconds. */
export const TTFT_BUCKETS_S = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560];
export const ITL_BUCKETS_S = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
export const E2E_BUCKETS_S = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];

/** How a request ended, as counted by `vllm:request_success{finished_reason}` ("error": a failed forward or sampling). */
export type EngineFinishReason = FinishReason | "error";

export interface HistogramSnapshot {
  /** Upper bounds, ascending (the +Inf bucket is implied). */
  buckets: number[];
  /** Observations per bucket, not cumulative: counts[i] for buckets[i − 1] < x ≤ buckets[i]; counts[buckets.length] above the last. */
  counts: number[];
  sum: number;
  count: number;
}

export class Histogram {
  readonly buckets: readonly number[];
  readonly #counts: number[];
  #sum = 0;
  #count = 0;

  constructor(buckets: readonly number[]) {
    this.buckets = buckets;
    this.#counts = new Array<number>(buckets.length + 1).fill(0);
  }

  observe(x: number): void {
    let i = 0;
    while (i < this.buckets.length && x > this.buckets[i]!) i++;
    this.#counts[i]!++;
    this.#sum += x;
    this.#count++;
  }

  snapshot(): HistogramSnapshot {
    return { buckets: [...this.buckets], counts: [...this.#counts], sum: this.#sum, count: this.#count };
  }
}

/**
 * Speculative decoding counters (vLLM's SpecDecodingStats): verification
 * steps of a sequence that proposed drafts, draft tokens proposed, those
 * accepted, and accepted per draft position (index i: drafts accepted at
 * position i, counted from 0).
 */
export interface SpecDecodeSnapshot {
  numDrafts: number;
  numDraftTokens: number;
  numAcceptedTokens: number;
  acceptedPerPos: number[];
}

export class SpecDecodeMetrics {
  numDrafts = 0;
  numDraftTokens = 0;
  numAcceptedTokens = 0;
  readonly acceptedPerPos: number[];

  /** `numSpeculativeTokens`: the most drafts one step verifies (the per-position counters). */
  constructor(numSpeculativeTokens: number) {
    this.acceptedPerPos = new Array<number>(numSpeculativeTokens).fill(0);
  }

  /** One sequence's verification: `proposed` drafts, of which the first `accepted` were kept. */
  observe(proposed: number, accepted: number): void {
    this.numDrafts++;
    this.numDraftTokens += proposed;
    this.numAcceptedTokens += accepted;
    for (let i = 0; i < accepted; i++) this.acceptedPerPos[i]!++;
  }

  snapshot(): SpecDecodeSnapshot {
    return { numDrafts: this.numDrafts, numDraftTokens: this.numDraftTokens, numAcceptedTokens: this.numAcceptedTokens, acceptedPerPos: [...this.acceptedPerPos] };
  }
}

export interface EngineMetricsSnapshot {
  numRequestsRunning: number;
  numRequestsWaiting: number;
  /** Fraction of KV blocks held by requests, in [0, 1]. */
  kvCacheUsage: number;
  numBlocks: number;
  numFreeBlocks: number;
  /** Tokens looked up in / found in the prefix cache (counters). */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  numPreemptions: number;
  /** Prompt tokens of requests that produced a first token (counter). */
  promptTokens: number;
  generationTokens: number;
  requestSuccess: Record<EngineFinishReason, number>;
  /** Forwards that threw (their requests failed; the engine went on). */
  numFailedForwards: number;
  timeToFirstToken: HistogramSnapshot;
  interTokenLatency: HistogramSnapshot;
  e2eRequestLatency: HistogramSnapshot;
  /** Speculative decoding counters, or null when the engine does not speculate. */
  specDecode: SpecDecodeSnapshot | null;
}

/** The counters and histograms the engine records into. */
export class EngineMetrics {
  promptTokens = 0;
  generationTokens = 0;
  numFailedForwards = 0;
  readonly requestSuccess: Record<EngineFinishReason, number> = { stop: 0, length: 0, abort: 0, error: 0 };
  readonly timeToFirstToken = new Histogram(TTFT_BUCKETS_S);
  readonly interTokenLatency = new Histogram(ITL_BUCKETS_S);
  readonly e2eRequestLatency = new Histogram(E2E_BUCKETS_S);
  /** Set when the engine speculates. */
  specDecode: SpecDecodeMetrics | null = null;
}

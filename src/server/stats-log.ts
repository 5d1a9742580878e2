/**
 * The periodic throughput line while the server has load, as vLLM's
 * LoggingStatLogger writes it (vllm/v1/metrics/loggers.py) every
 * VLLM_LOG_STATS_INTERVAL seconds:
 *
 *   Avg prompt throughput: 412.0 tokens/s, Avg generation throughput: 38.5 tokens/s, Running: 3 reqs, Waiting: 0 reqs, KV cache usage: 4.2%, Prefix cache hit rate: 50.0%
 *
 * Throughputs are the engine's prompt and generation token counters over the
 * interval; the hit rate is the prefix cache's hits over its queries in the
 * interval. As in vLLM, an idle server writes nothing: a line is written when
 * this interval or the one before had tokens or requests, so the last line of
 * a burst shows the drop to zero.
 *
 * With speculative decoding, an interval that verified drafts adds vLLM's
 * SpecDecodingLogging line:
 *
 *   SpecDecoding metrics: Mean acceptance length: 2.75, Accepted throughput: 3.50 tokens/s, Drafted throughput: 6.00 tokens/s, Accepted: 35 tokens, Drafted: 60 tokens, Per-position acceptance rate: 0.800, 0.650, 0.300, Avg Draft acceptance rate: 58.3%
 */
import type { EngineMetricsSnapshot } from "../engine/metrics.js";

/** vLLM's default interval (VLLM_LOG_STATS_INTERVAL), seconds. */
export const DEFAULT_LOG_STATS_INTERVAL_S = 10;

type Counters = Pick<EngineMetricsSnapshot, "promptTokens" | "generationTokens" | "prefixCacheQueries" | "prefixCacheHits">;
type Sample = Counters & Pick<EngineMetricsSnapshot, "numRequestsRunning" | "numRequestsWaiting" | "kvCacheUsage"> & Partial<Pick<EngineMetricsSnapshot, "specDecode">>;

/** Whether an interval saw work: tokens computed, or requests running or waiting. */
function busy(prev: Counters, cur: Sample): boolean {
  return cur.promptTokens > prev.promptTokens || cur.generationTokens > prev.generationTokens || cur.numRequestsRunning > 0 || cur.numRequestsWaiting > 0;
}

/** The line for one interval of `seconds` between two snapshots. */
export function throughputLine(prev: Counters, cur: Sample, seconds: number): string {
  const rate = (a: number, b: number): string => ((b - a) / seconds).toFixed(1);
  const queries = cur.prefixCacheQueries - prev.prefixCacheQueries;
  const hitRate = queries > 0 ? (100 * (cur.prefixCacheHits - prev.prefixCacheHits)) / queries : 0;
  return (
    `Avg prompt throughput: ${rate(prev.promptTokens, cur.promptTokens)} tokens/s, ` +
    `Avg generation throughput: ${rate(prev.generationTokens, cur.generationTokens)} tokens/s, ` +
    `Running: ${cur.numRequestsRunning} reqs, Waiting: ${cur.numRequestsWaiting} reqs, ` +
    `KV cache usage: ${(100 * cur.kvCacheUsage).toFixed(1)}%, Prefix cache hit rate: ${hitRate.toFixed(1)}%`
  );
}

/**
 * The speculative decoding line for one interval (vLLM's SpecDecodingLogging),
 * or null when the interval verified no drafts. Mean acceptance length counts
 * the token each verification adds beyond its accepted drafts.
 */
export function specDecodeLine(prev: Sample, cur: Sample, seconds: number): string | null {
  const a = prev.specDecode;
  const b = cur.specDecode;
  if (a === undefined || b === undefined || a === null || b === null) return null;
  const drafts = b.numDrafts - a.numDrafts;
  if (drafts <= 0) return null;
  const drafted = b.numDraftTokens - a.numDraftTokens;
  const accepted = b.numAcceptedTokens - a.numAcceptedTokens;
  const perPos = b.acceptedPerPos.map((n, i) => ((n - (a.acceptedPerPos[i] ?? 0)) / drafts).toFixed(3));
  return (
    `SpecDecoding metrics: Mean acceptance length: ${(1 + accepted / drafts).toFixed(2)}, ` +
    `Accepted throughput: ${(accepted / seconds).toFixed(2)} tokens/s, Drafted throughput: ${(drafted / seconds).toFixed(2)} tokens/s, ` +
    `Accepted: ${accepted} tokens, Drafted: ${drafted} tokens, Per-position acceptance rate: ${perPos.join(", ")}, ` +
    `Avg Draft acceptance rate: ${drafted > 0 ? ((100 * accepted) / drafted).toFixed(1) : "0.0"}%`
  );
}

export interface StatsLoggerOptions {
  /** The engine's metrics now (null while it does not run: no line). */
  stats: () => Promise<EngineMetricsSnapshot | null>;
  write: (line: string) => void;
  /** Seconds between lines. Default DEFAULT_LOG_STATS_INTERVAL_S. */
  intervalS?: number;
}

/** Writes throughputLine every interval while there is load; stop() ends it. */
export class StatsLogger {
  readonly #options: StatsLoggerOptions;
  readonly #timer: NodeJS.Timeout;
  #prev: { sample: Sample; at: number } | null = null;
  #lastBusy = false;
  /** When a tick last found no engine (or the logger started). */
  #notRunningAt = performance.now();
  #ticking = false;

  constructor(options: StatsLoggerOptions) {
    this.#options = options;
    const intervalS = options.intervalS ?? DEFAULT_LOG_STATS_INTERVAL_S;
    if (!(intervalS > 0)) throw new RangeError(`intervalS must be > 0, got ${intervalS}`);
    const tick = (): void => void this.tick().catch(() => {}); // the engine went away: no line
    this.#timer = setInterval(tick, intervalS * 1000);
    this.#timer.unref();
    tick(); // the counters' starting point
  }

  /** One interval: reads the stats and writes the line if this or the last interval was busy. */
  async tick(): Promise<void> {
    if (this.#ticking) return; // a slow stats answer: skip rather than pile up
    this.#ticking = true;
    try {
      const cur = await this.#options.stats();
      const at = performance.now();
      if (cur === null) {
        this.#notRunningAt = at;
        return;
      }
      // The engine's counters start at zero when it starts, so the first snapshot is measured from
      // zero over the time since the last tick that found no engine: a burst served between the
      // engine's start and the first snapshot is reported, not taken as the starting point.
      const prev = this.#prev ?? { sample: { promptTokens: 0, generationTokens: 0, prefixCacheQueries: 0, prefixCacheHits: 0, numRequestsRunning: 0, numRequestsWaiting: 0, kvCacheUsage: 0 }, at: this.#notRunningAt };
      this.#prev = { sample: cur, at };
      const now = busy(prev.sample, cur);
      const seconds = Math.max(at - prev.at, 1) / 1000;
      if (now || this.#lastBusy) this.#options.write(throughputLine(prev.sample, cur, seconds));
      const spec = specDecodeLine(prev.sample, cur, seconds);
      if (spec !== null) this.#options.write(spec);
      this.#lastBusy = now;
    } finally {
      this.#ticking = false;
    }
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

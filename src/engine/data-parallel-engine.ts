/**
 * `kvflash serve --data-parallel-size N` (vLLM's flag): N engines on one
 * machine behind one HTTP front. Each is an EngineClient, so each runs in its
 * own worker with its own wasm memories, its own runtime threads and its own
 * paged KV cache and prefix cache; they share nothing but the server. This is
 * how a machine with more cores than one memory's threads scale to is used
 * (README "Scaling out"). Requests go to an engine by prefix affinity with a
 * load bound (prefix-affinity.ts); one client request's prompts stay together,
 * since a request may wait on another's prefill (EngineRequest.prefillAfter).
 */
import { availableParallelism } from "node:os";
import { ArgumentError } from "../errors.js";
import type { EngineRequest } from "./engine.js";
import { EngineClient, type EngineState, type OutputStream } from "./engine-client.js";
import type { EngineMetricsSnapshot, HistogramSnapshot, SpecDecodeSnapshot } from "./metrics.js";
import type { EmbedOutput, EmbedRequest } from "./embed-engine.js";
import { pickEngine } from "./prefix-affinity.js";
import type { EngineInfo, EngineWorkerConfig } from "./protocol.js";
import type { ServingEngine } from "./serving-engine.js";

/** Most engines one server runs: each holds a copy of the weights. */
export const MAX_DATA_PARALLEL_SIZE = 64;

export class DataParallelEngine implements ServingEngine {
  readonly ready: Promise<EngineInfo>;
  readonly #engines: readonly EngineClient[];
  #slack = 1;

  private constructor(engines: readonly EngineClient[]) {
    this.#engines = engines;
    this.ready = Promise.all(engines.map((e) => e.ready)).then((infos) => {
      const info = mergeInfo(infos);
      this.#slack = Math.max(1, infos[0]!.maxNumSeqs);
      return info;
    });
    this.ready.catch(() => {}); // reported through state
  }

  /**
   * Starts `size` engines with one config. `config.load.threads` is each engine's
   * thread count; by default the cores are shared out (at least 1 each).
   */
  static start(config: EngineWorkerConfig, size: number): DataParallelEngine {
    if (!Number.isInteger(size) || size < 1 || size > MAX_DATA_PARALLEL_SIZE) {
      throw new ArgumentError("--data-parallel-size", `must be an integer in [1, ${MAX_DATA_PARALLEL_SIZE}], got ${size}`);
    }
    const threads = config.load.threads ?? Math.max(1, Math.floor(availableParallelism() / size));
    return new DataParallelEngine(Array.from({ length: size }, () => EngineClient.start({ ...config, load: { ...config.load, threads } })));
  }

  /** Number of engines. */
  get size(): number {
    return this.#engines.length;
  }

  /** Each engine's requests in flight (the routing's load signal; also for tests). */
  get inFlightPerEngine(): number[] {
    return this.#engines.map((e) => e.numInFlight);
  }

  /** Failed if one failed, stopped if one stopped, ready when all are, else loading (progress summed). */
  get state(): EngineState {
    const states = this.#engines.map((e) => e.state);
    const failed = states.find((s) => s.state === "failed");
    if (failed) return failed;
    if (states.some((s) => s.state === "stopped")) return { state: "stopped" };
    if (states.every((s) => s.state === "ready")) return { state: "ready", info: mergeInfo(states.map((s) => (s as { info: EngineInfo }).info)) };
    // Every engine loads the same weights: one engine's total, times the engines; a ready one counts whole.
    const loading = states.find((s) => s.state === "loading" && s.progress !== null && s.progress.total > 0);
    const one = loading?.state === "loading" ? loading.progress!.total : 0;
    const total = one * states.length;
    let done = 0;
    for (const s of states) done += s.state === "ready" ? one : s.state === "loading" && s.progress !== null ? s.progress.done : 0;
    return { state: "loading", progress: total === 0 ? null : { done, total } };
  }

  get numInFlight(): number {
    return this.#engines.reduce((n, e) => n + e.numInFlight, 0);
  }

  async submit(request: EngineRequest): Promise<OutputStream> {
    return (await this.submitAll([request]))[0]!;
  }

  submitAll(requests: readonly EngineRequest[]): Promise<OutputStream[]> {
    const first = requests[0];
    if (first === undefined) return Promise.resolve([]);
    const e = pickEngine(first.promptTokenIds, first.cacheSalt, this.inFlightPerEngine, this.#slack);
    return this.#engines[e]!.submitAll(requests);
  }

  /** An embedding request goes to the engine with the fewest requests in flight. */
  embed(request: EmbedRequest): Promise<EmbedOutput> {
    const loads = this.inFlightPerEngine;
    return this.#engines[loads.indexOf(Math.min(...loads))]!.embed(request);
  }

  /** Each engine ignores ids it does not hold, so the abort goes to all. */
  abort(requestId: string): void {
    for (const e of this.#engines) e.abort(requestId);
  }

  async stats(): Promise<EngineMetricsSnapshot | null> {
    const all = await Promise.all(this.#engines.map((e) => e.stats()));
    if (all.some((s) => s === null)) return null;
    return mergeSnapshots(all as EngineMetricsSnapshot[]);
  }

  /** Each engine's own counters (the routing's effect, per engine). */
  statsPerEngine(): Promise<Array<EngineMetricsSnapshot | null>> {
    return Promise.all(this.#engines.map((e) => e.stats()));
  }

  async shutdown(): Promise<void> {
    await Promise.all(this.#engines.map((e) => e.shutdown()));
  }
}

/** The group as one engine: capacities add up (threads, KV blocks, sequences); the rest is the same in each. */
function mergeInfo(infos: readonly EngineInfo[]): EngineInfo {
  const sum = (f: (i: EngineInfo) => number): number => infos.reduce((n, i) => n + f(i), 0);
  const first = infos[0]!;
  return {
    ...first,
    threads: sum((i) => i.threads),
    numBlocks: sum((i) => i.numBlocks),
    maxNumSeqs: sum((i) => i.maxNumSeqs),
    loadSeconds: Math.max(...infos.map((i) => i.loadSeconds)),
    placement: `${infos.length} engines (data parallel), each ${first.threads} thread(s), ${first.numBlocks} KV blocks${first.placement === undefined ? "" : `; ${first.placement}`}`,
  };
}

function mergeHistograms(hs: readonly HistogramSnapshot[]): HistogramSnapshot {
  const first = hs[0]!;
  return {
    buckets: [...first.buckets],
    counts: first.counts.map((_, i) => hs.reduce((n, h) => n + h.counts[i]!, 0)),
    sum: hs.reduce((n, h) => n + h.sum, 0),
    count: hs.reduce((n, h) => n + h.count, 0),
  };
}

/** Counters and gauges add up; KV usage is blocks held over blocks in all pools. */
export function mergeSnapshots(snaps: readonly EngineMetricsSnapshot[]): EngineMetricsSnapshot {
  const sum = (f: (s: EngineMetricsSnapshot) => number): number => snaps.reduce((n, s) => n + f(s), 0);
  const numBlocks = sum((s) => s.numBlocks);
  const requestSuccess = { ...snaps[0]!.requestSuccess };
  for (const s of snaps.slice(1)) for (const [k, v] of Object.entries(s.requestSuccess)) requestSuccess[k as keyof typeof requestSuccess] += v;
  return {
    numRequestsRunning: sum((s) => s.numRequestsRunning),
    numRequestsWaiting: sum((s) => s.numRequestsWaiting),
    kvCacheUsage: numBlocks === 0 ? 0 : sum((s) => s.kvCacheUsage * s.numBlocks) / numBlocks,
    numBlocks,
    numFreeBlocks: sum((s) => s.numFreeBlocks),
    prefixCacheQueries: sum((s) => s.prefixCacheQueries),
    prefixCacheHits: sum((s) => s.prefixCacheHits),
    numPreemptions: sum((s) => s.numPreemptions),
    promptTokens: sum((s) => s.promptTokens),
    generationTokens: sum((s) => s.generationTokens),
    requestSuccess,
    numFailedForwards: sum((s) => s.numFailedForwards),
    timeToFirstToken: mergeHistograms(snaps.map((s) => s.timeToFirstToken)),
    interTokenLatency: mergeHistograms(snaps.map((s) => s.interTokenLatency)),
    e2eRequestLatency: mergeHistograms(snaps.map((s) => s.e2eRequestLatency)),
    specDecode: mergeSpecDecode(snaps.flatMap((s) => (s.specDecode === null ? [] : [s.specDecode]))),
  };
}

/** Speculative decoding counters add up, position by position (null when no engine speculates). */
function mergeSpecDecode(all: readonly SpecDecodeSnapshot[]): SpecDecodeSnapshot | null {
  if (all.length === 0) return null;
  const positions = Math.max(...all.map((s) => s.acceptedPerPos.length));
  return {
    numDrafts: all.reduce((n, s) => n + s.numDrafts, 0),
    numDraftTokens: all.reduce((n, s) => n + s.numDraftTokens, 0),
    numAcceptedTokens: all.reduce((n, s) => n + s.numAcceptedTokens, 0),
    acceptedPerPos: Array.from({ length: positions }, (_, i) => all.reduce((n, s) => n + (s.acceptedPerPos[i] ?? 0), 0)),
  };
}

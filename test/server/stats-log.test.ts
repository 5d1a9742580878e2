// The throughput line (server/stats-log.ts) from hand-made engine snapshots:
// rates over the interval, the prefix-cache hit rate of the interval, a line
// only while this or the previous interval was busy (vLLM's idle rule).
import assert from "node:assert/strict";
import { test } from "node:test";
import type { EngineMetricsSnapshot } from "../../src/engine/metrics.js";
import { StatsLogger, specDecodeLine, throughputLine } from "../../src/server/stats-log.js";

const EMPTY_HISTOGRAM = { buckets: [], counts: [0], sum: 0, count: 0 };

function snapshot(s: Partial<EngineMetricsSnapshot>): EngineMetricsSnapshot {
  return {
    numRequestsRunning: 0,
    numRequestsWaiting: 0,
    kvCacheUsage: 0,
    numBlocks: 64,
    numFreeBlocks: 64,
    prefixCacheQueries: 0,
    prefixCacheHits: 0,
    numPreemptions: 0,
    promptTokens: 0,
    generationTokens: 0,
    requestSuccess: { stop: 0, length: 0, abort: 0, error: 0 },
    numFailedForwards: 0,
    timeToFirstToken: EMPTY_HISTOGRAM,
    interTokenLatency: EMPTY_HISTOGRAM,
    e2eRequestLatency: EMPTY_HISTOGRAM,
    specDecode: null,
    ...s,
  };
}

test("throughputLine: tokens per second over the interval, the interval's hit rate, running, waiting and KV usage", () => {
  const prev = snapshot({ promptTokens: 100, generationTokens: 40, prefixCacheQueries: 200, prefixCacheHits: 50 });
  const cur = snapshot({ promptTokens: 350, generationTokens: 65, prefixCacheQueries: 300, prefixCacheHits: 80, numRequestsRunning: 3, numRequestsWaiting: 2, kvCacheUsage: 0.0421 });
  assert.equal(
    throughputLine(prev, cur, 2.5),
    "Avg prompt throughput: 100.0 tokens/s, Avg generation throughput: 10.0 tokens/s, Running: 3 reqs, Waiting: 2 reqs, KV cache usage: 4.2%, Prefix cache hit rate: 30.0%",
  );
  assert.match(throughputLine(cur, cur, 1), /Avg prompt throughput: 0\.0 tokens\/s, .* Prefix cache hit rate: 0\.0%$/);
});

test("specDecodeLine: vLLM's SpecDecoding metrics over the interval; none without speculation or without drafts", () => {
  const sd = (numDrafts: number, numDraftTokens: number, numAcceptedTokens: number, acceptedPerPos: number[]) => snapshot({ specDecode: { numDrafts, numDraftTokens, numAcceptedTokens, acceptedPerPos } });
  const prev = sd(10, 30, 20, [9, 7, 4]);
  const cur = sd(30, 90, 55, [25, 20, 10]);
  assert.equal(
    specDecodeLine(prev, cur, 10),
    "SpecDecoding metrics: Mean acceptance length: 2.75, Accepted throughput: 3.50 tokens/s, Drafted throughput: 6.00 tokens/s, Accepted: 35 tokens, Drafted: 60 tokens, " +
      "Per-position acceptance rate: 0.800, 0.650, 0.300, Avg Draft acceptance rate: 58.3%",
  );
  assert.equal(specDecodeLine(cur, cur, 10), null, "no drafts in the interval");
  assert.equal(specDecodeLine(snapshot({}), snapshot({}), 10), null, "no speculation");
});

test("StatsLogger writes while busy, once more as the load ends, then nothing while idle", async () => {
  const script = [
    snapshot({}), // the starting point
    snapshot({}), // idle
    snapshot({ promptTokens: 10, numRequestsRunning: 1 }), // busy
    snapshot({ promptTokens: 10, generationTokens: 5, numRequestsRunning: 1 }), // busy
    snapshot({ promptTokens: 10, generationTokens: 5, numRequestsWaiting: 1 }), // a request waits: busy
    snapshot({ promptTokens: 10, generationTokens: 5 }), // the load ended: one line showing zero
    snapshot({ promptTokens: 10, generationTokens: 5 }), // idle
    snapshot({ promptTokens: 10, generationTokens: 5 }), // idle
  ];
  let i = 0;
  const lines: string[] = [];
  const logger = new StatsLogger({ stats: async () => script[i++] ?? null, write: (l) => lines.push(l), intervalS: 3600 });
  try {
    await new Promise((r) => setImmediate(r)); // the constructor's first read
    const perTick: number[] = [];
    for (let t = 1; t < script.length; t++) {
      const n = lines.length;
      await logger.tick();
      perTick.push(lines.length - n);
    }
    assert.deepEqual(perTick, [0, 1, 1, 1, 1, 0, 0]);
    assert.match(lines[0]!, /^Avg prompt throughput: [1-9]\d*\.\d tokens\/s, Avg generation throughput: 0\.0 tokens\/s, Running: 1 reqs, Waiting: 0 reqs/);
    assert.match(lines[3]!, /^Avg prompt throughput: 0\.0 tokens\/s, Avg generation throughput: 0\.0 tokens\/s, Running: 0 reqs, Waiting: 0 reqs/);
    // An engine that is not running (null) writes nothing.
    await logger.tick();
    assert.equal(lines.length, 4);
  } finally {
    logger.stop();
  }
});

test("StatsLogger reports a burst served before its first snapshot of the engine: the engine's counters start at zero", async () => {
  // Not running (loading), then the first snapshot already counts a burst that came and went (a fast load, or a late timer).
  const script = [null, snapshot({ promptTokens: 16, generationTokens: 72 }), snapshot({ promptTokens: 16, generationTokens: 72 }), snapshot({ promptTokens: 16, generationTokens: 72 })];
  let i = 0;
  const lines: string[] = [];
  const logger = new StatsLogger({ stats: async () => script[i++] ?? null, write: (l) => lines.push(l), intervalS: 3600 });
  try {
    await new Promise((r) => setImmediate(r)); // the constructor's first read: null
    const perTick: number[] = [];
    for (let t = 1; t < script.length; t++) {
      const n = lines.length;
      await logger.tick();
      perTick.push(lines.length - n);
    }
    assert.deepEqual(perTick, [1, 1, 0]);
    assert.match(lines[0]!, /^Avg prompt throughput: [1-9]\d*\.\d tokens\/s, Avg generation throughput: [1-9]\d*\.\d tokens\/s, Running: 0 reqs/);
  } finally {
    logger.stop();
  }
});

test("StatsLogger refuses an interval that is not a positive number", () => {
  assert.throws(() => new StatsLogger({ stats: async () => null, write: () => {}, intervalS: 0 }), /intervalS must be > 0, got 0/);
});

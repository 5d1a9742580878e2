// Prometheus rendering: vLLM's names, counters with _total, cumulative
// histogram buckets ending in +Inf = count, labels escaped; parseMetrics reads it back.
import assert from "node:assert/strict";
import { test } from "node:test";
import { EngineMetrics, type EngineMetricsSnapshot, SpecDecodeMetrics } from "../../src/engine/metrics.js";
import { parseMetrics, renderMetrics } from "../../src/server/metrics.js";

test("counters, gauges and cumulative histograms under vLLM's names", () => {
  const m = new EngineMetrics();
  for (const x of [0.0005, 0.003, 0.003, 0.2, 5000]) m.timeToFirstToken.observe(x);
  m.requestSuccess.stop = 3;
  m.requestSuccess.abort = 1;
  const stats = {
    numRequestsRunning: 2,
    numRequestsWaiting: 1,
    kvCacheUsage: 0.25,
    numBlocks: 8,
    numFreeBlocks: 6,
    prefixCacheQueries: 100,
    prefixCacheHits: 32,
    numPreemptions: 4,
    promptTokens: 120,
    generationTokens: 77,
    requestSuccess: { ...m.requestSuccess },
    numFailedForwards: 0,
    timeToFirstToken: m.timeToFirstToken.snapshot(),
    interTokenLatency: m.interTokenLatency.snapshot(),
    e2eRequestLatency: m.e2eRequestLatency.snapshot(),
    specDecode: null,
  };
  const text = renderMetrics({ modelName: 'my "model"', stats, loadProgress: 1 });
  assert.doesNotMatch(text, /spec_decode/, "no speculative decoding counters when the engine does not speculate");
  assert.match(text, /^# TYPE vllm:num_preemptions_total counter$/m);
  assert.match(text, /^# TYPE vllm:time_to_first_token_seconds histogram$/m);
  const p = parseMetrics(text);
  const l = 'model_name="my \\"model\\""';
  assert.equal(p.get(`vllm:num_requests_running{${l}}`), 2);
  assert.equal(p.get(`vllm:kv_cache_usage_perc{${l}}`), 0.25);
  assert.equal(p.get(`vllm:prefix_cache_hits_total{${l}}`), 32);
  assert.equal(p.get(`vllm:num_preemptions_total{${l}}`), 4);
  assert.equal(p.get(`vllm:request_success_total{${l},finished_reason="stop"}`), 3);
  assert.equal(p.get(`vllm:request_success_total{${l},finished_reason="abort"}`), 1);
  assert.equal(p.get(`vllm:time_to_first_token_seconds_bucket{${l},le="0.001"}`), 1);
  assert.equal(p.get(`vllm:time_to_first_token_seconds_bucket{${l},le="0.005"}`), 3);
  assert.equal(p.get(`vllm:time_to_first_token_seconds_bucket{${l},le="0.25"}`), 4);
  assert.equal(p.get(`vllm:time_to_first_token_seconds_bucket{${l},le="2560.0"}`), 4);
  assert.equal(p.get(`vllm:time_to_first_token_seconds_bucket{${l},le="+Inf"}`), 5);
  assert.equal(p.get(`vllm:time_to_first_token_seconds_count{${l}}`), 5);
  assert.ok(Math.abs(p.get(`vllm:time_to_first_token_seconds_sum{${l}}`)! - 5000.2065) < 1e-9);
});

test("speculative decoding counters: vLLM's spec_decode names, accepted tokens per draft position", () => {
  const m = new EngineMetrics();
  const sd = (m.specDecode = new SpecDecodeMetrics(3));
  sd.observe(3, 2);
  sd.observe(2, 0);
  sd.observe(3, 3);
  const h = m.timeToFirstToken.snapshot();
  const stats: EngineMetricsSnapshot = {
    ...{ numRequestsRunning: 1, numRequestsWaiting: 0, kvCacheUsage: 0, numBlocks: 8, numFreeBlocks: 8, prefixCacheQueries: 0, prefixCacheHits: 0 },
    ...{ numPreemptions: 0, promptTokens: 0, generationTokens: 0, requestSuccess: { ...m.requestSuccess }, numFailedForwards: 0 },
    ...{ timeToFirstToken: h, interTokenLatency: h, e2eRequestLatency: h, specDecode: sd.snapshot() },
  };
  const p = parseMetrics(renderMetrics({ modelName: "m", stats, loadProgress: 1 }));
  const l = 'model_name="m"';
  assert.equal(p.get(`vllm:spec_decode_num_drafts_total{${l}}`), 3);
  assert.equal(p.get(`vllm:spec_decode_num_draft_tokens_total{${l}}`), 8);
  assert.equal(p.get(`vllm:spec_decode_num_accepted_tokens_total{${l}}`), 5);
  assert.deepEqual([0, 1, 2].map((i) => p.get(`vllm:spec_decode_num_accepted_tokens_per_pos_total{${l},position="${i}"}`)), [2, 2, 1]);
});

test("while loading: only the load gauges", () => {
  const p = parseMetrics(renderMetrics({ modelName: "m", stats: null, loadProgress: 0.5 }));
  assert.deepEqual([...p], [
    ['kvflash:model_loaded{model_name="m"}', 0],
    ['kvflash:load_progress{model_name="m"}', 0.5],
  ]);
});

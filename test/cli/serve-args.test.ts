// `kvflash serve` flags: vLLM's names, both --flag value and --flag=value,
// several served names, and errors that name the flag and the value.
import assert from "node:assert/strict";
import { test } from "node:test";
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
import { SERVE_USAGE, parseServeArgs } from "../../src/cli/serve-args.js";
import { resolveEngineConfig } from "../../src/engine/engine-config.js";

test("flags map to serve options", () => {
  const a = parseServeArgs(
    ["--model", "/m", "--port=9000", "--host", "0.0.0.0", "--kv-cache-gib", "0.5", "--kv-dtype", "int8", "--max-num-seqs", "8", "--weights", "q8",
      "--served-model-name", "a", "b", "--api-key", "k", "--cors-origin", "*", "--no-enable-prefix-caching", "--loader", "x/y.js", "--loader-options", '{"n":1}'],
    {},
  );
  assert.deepEqual(a, {
    shutdownTimeoutS: 10,
    maxWaitingRequests: 1024,
    logRequests: true,
    logStatsIntervalS: 10,
    model: "/m",
    port: 9000,
    host: "0.0.0.0",
    kvCacheBytes: 2 ** 29,
    kvDtype: "int8",
    maxNumSeqs: 8,
    weights: "q8",
    servedModelNames: ["a", "b"],
    apiKey: "k",
    corsOrigin: "*",
    enablePrefixCaching: false,
    loader: pathToFileURL(resolve("x/y.js")).href,
    loaderExtra: { n: 1 },
  });
  assert.equal(parseServeArgs([], { KVFLASH_API_KEY: "env-key" }).apiKey, "env-key");
});

test("request and throughput logging: vLLM's --disable-log-requests and --disable-log-stats, the interval from $KVFLASH_LOG_STATS_INTERVAL", () => {
  const off = parseServeArgs(["--disable-log-requests", "--disable-log-stats"], { KVFLASH_LOG_STATS_INTERVAL: "2" });
  assert.deepEqual([off.logRequests, off.logStatsIntervalS], [false, null]);
  assert.equal(parseServeArgs([], { KVFLASH_LOG_STATS_INTERVAL: "2.5" }).logStatsIntervalS, 2.5);
  assert.throws(() => parseServeArgs([], { KVFLASH_LOG_STATS_INTERVAL: "0" }), /KVFLASH_LOG_STATS_INTERVAL must be a number of seconds > 0, got "0"/);
  assert.throws(() => parseServeArgs([], { KVFLASH_LOG_STATS_INTERVAL: "often" }), /KVFLASH_LOG_STATS_INTERVAL must be a number of seconds > 0, got "often"/);
  assert.throws(() => parseServeArgs(["--disable-log-requests=yes"], {}), /--disable-log-requests takes no value/);
});

test("bad flags name themselves and the value", () => {
  assert.throws(() => parseServeArgs(["--port", "http"], {}), /--port must be an integer ≥ 0, got "http"/);
  assert.throws(() => parseServeArgs(["--port", "70000"], {}), /--port must be ≤ 65535, got 70000/);
  assert.throws(() => parseServeArgs(["--max-num-seqs", "0"], {}), /--max-num-seqs must be an integer ≥ 1, got "0"/);
  assert.throws(() => parseServeArgs(["--kv-cache-gib", "-1"], {}), /--kv-cache-gib must be a number > 0, got "-1"/);
  assert.throws(() => parseServeArgs(["--model"], {}), /--model needs a value/);
  assert.throws(() => parseServeArgs(["--model", "--port"], {}), /--model needs a value/);
  assert.throws(() => parseServeArgs(["--frobnicate"], {}), /--frobnicate is not a serve option/);
  // Settings are checked here, with their flag's name, before anything loads.
  assert.throws(() => parseServeArgs(["--kv-dtype", "q5"], {}), /^ArgumentError: --kv-dtype must be one of "f32" \| .*"fp8_e5m2", got "q5"$/);
  assert.throws(() => parseServeArgs(["--weights", "q5"], {}), /^ArgumentError: --weights must be one of "f32" \| "bf16" \| "q8" \| "q4" \| "auto", got "q5"$/);
  assert.throws(() => parseServeArgs(["--block-size", "512"], {}), /--block-size must be ≤ 256, got 512/);
});

test("--speculative-config: vLLM's JSON, resolved here; a bad field is named with the flag", () => {
  const a = parseServeArgs(["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}'], {});
  assert.deepEqual(a.speculativeConfig, { method: "ngram", numSpeculativeTokens: 4, promptLookupMin: 2, promptLookupMax: 4, disableByBatchSize: 8 });
  assert.throws(() => parseServeArgs(["--speculative-config", '{"num_speculative_tokens": 40}'], {}), /--speculative-config\.num_speculative_tokens must be ≤ 15, got 40/);
  assert.throws(() => parseServeArgs(["--speculative-config=ngram"], {}), /--speculative-config must be a JSON object, got "ngram"/);
  assert.match(SERVE_USAGE, /--speculative-config JSON .*\n.*\n.*draft model with the same tokenizer, .*"model": DIR_OR_SPEC.*\n.*disable_by_batch_size \(default 8\)/);
  assert.deepEqual(parseServeArgs(["--speculative-config", '{"model": "Qwen/Qwen2.5-0.5B", "num_speculative_tokens": 3}'], {}).speculativeConfig, { method: "draft_model", model: "Qwen/Qwen2.5-0.5B", numSpeculativeTokens: 3, disableByBatchSize: 8, draftSampling: "greedy" });
});

test("the usage text states the engine's own defaults", () => {
  assert.match(SERVE_USAGE, /--max-num-seqs N .*\(default 64\)/);
  assert.match(SERVE_USAGE, /--max-num-batched-tokens N .*\(default max\(512, --max-num-seqs\)\)/);
  assert.equal(resolveEngineConfig({}).maxNumSeqs, 64);
  assert.equal(resolveEngineConfig({}).maxNumBatchedTokens, 512);
  assert.equal(resolveEngineConfig({ maxNumSeqs: 600 }).maxNumBatchedTokens, 600);
});

test("--device takes cpu | webgpu | auto and names itself and the value otherwise", () => {
  for (const d of ["cpu", "webgpu", "auto"] as const) assert.equal(parseServeArgs(["--device", d], {}).device, d);
  assert.equal(parseServeArgs([], {}).device, undefined);
  assert.throws(() => parseServeArgs(["--device=gpu"], {}), /^ArgumentError: --device must be one of cpu \| webgpu \| auto, got "gpu"$/);
  assert.match(SERVE_USAGE, /--device DEVICE +cpu \| webgpu \| auto/);
});

test("--task: auto | generate | embed (vLLM's flag); another value is refused naming the flag and the value", () => {
  assert.equal(parseServeArgs(["--task", "embed"], {}).task, "embed");
  assert.equal(parseServeArgs(["--task=generate"], {}).task, "generate");
  assert.equal(parseServeArgs([], {}).task, undefined);
  assert.throws(() => parseServeArgs(["--task", "classify"], {}), /--task.*"classify"/);
  assert.match(SERVE_USAGE, /--task TASK +auto \| generate \| embed \| score/);
});

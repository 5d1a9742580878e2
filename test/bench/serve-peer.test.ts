// bench/serve-peer.ts and the llama.cpp harness's batch answer (bench/llamacpp-harness.ts
// parseBatchRun): the pure parts of the serve suite's comparison with llama.cpp (issue #30),
// with no llama.cpp and no timing: how a load is cut into batches, how bench.cpp's "batch"
// line is read, and kvflash_over_llamacpp per concurrency.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseBatchRun } from "../../bench/llamacpp-harness.js";
import { randomPrompts } from "../../bench/serve-load.js";
import { ratioOfMedians, waves } from "../../bench/serve-peer.js";

test("waves: a closed loop of equal requests at concurrency c is consecutive batches of c, the last shorter", () => {
  const ids = [10, 11, 12, 13, 14];
  assert.deepEqual(waves(ids, 1), [[10], [11], [12], [13], [14]]);
  assert.deepEqual(waves(ids, 2), [[10, 11], [12, 13], [14]]);
  assert.deepEqual(waves(ids, 16), [[10, 11, 12, 13, 14]]);
  assert.deepEqual(waves([], 4), []);
  assert.throws(() => waves(ids, 0), /size must be an integer ≥ 1, got 0/);
  assert.throws(() => waves(ids, 1.5), /got 1\.5/);
});

test("parseBatchRun: bench.cpp's batch line, every field read; a line missing one is an error naming it", () => {
  const r = parseBatchRun('{"wall_ms": 812.5, "prefill_ms": 120.25, "decode_ms": [20.5, 21, 19.75], "output_tokens": 16}');
  assert.deepEqual(r, { wallMs: 812.5, prefillMs: 120.25, decodeMs: [20.5, 21, 19.75], outputTokens: 16 });
  assert.deepEqual(parseBatchRun('{"wall_ms": 5, "prefill_ms": 5, "decode_ms": [], "output_tokens": 4}').decodeMs, []);
  assert.throws(() => parseBatchRun('{"prefill_ms": 1, "decode_ms": [], "output_tokens": 4}'), /"wall_ms"/);
  assert.throws(() => parseBatchRun('{"wall_ms": 1, "prefill_ms": 1, "decode_ms": [1, "x"], "output_tokens": 4}'), /"decode_ms"/);
  assert.throws(() => parseBatchRun('{"wall_ms": 1, "prefill_ms": 1, "decode_ms": [], "output_tokens": null}'), /"output_tokens"/);
  assert.throws(() => parseBatchRun('{"prefill_ms": 1, "decode_ms": [2]}'), /without a finite "wall_ms"/);
});

test("ratioOfMedians: kvflash_over_llamacpp is kvflash's median tok/s over llama.cpp's, per concurrency", () => {
  assert.equal(ratioOfMedians([30], [20]), 1.5);
  // Medians, not means: one slow run of either (the shared machine's load) does not move it.
  assert.equal(ratioOfMedians([33, 3, 36], [22, 24, 2]), 33 / 22);
  assert.equal(ratioOfMedians([10, 20], [10, 30]), 15 / 20);
  assert.throws(() => ratioOfMedians([], [1]), /at least one run, got 0 and 1/);
});

test("randomPrompts: what runLoad sends, so llama.cpp can be given the same ids: distinct, in range, the same for a seed", () => {
  const o = { requests: 16, promptTokens: 32, lowToken: 1000, highToken: 30000, seed: 16 };
  const a = randomPrompts(o);
  assert.deepEqual(randomPrompts(o), a);
  assert.equal(a.length, 16);
  assert.ok(a.every((p) => p.length === 32 && p.every((t) => Number.isInteger(t) && t >= 1000 && t < 30000)));
  assert.equal(new Set(a.map((p) => p.join(","))).size, 16);
  assert.notDeepEqual(randomPrompts({ ...o, seed: 116 }), a);
});

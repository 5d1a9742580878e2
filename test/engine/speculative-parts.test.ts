// The parts of speculative decoding without a model: prompt lookup (longest
// n-gram first, most recent occurrence, bounds), --speculative-config
// resolution (vLLM's keys and defaults, errors naming the field), the adaptive
// draft length (full length while drafts are accepted, pauses that double
// when they are not), and the scheduler's draft slots and rollback with exact
// block ids.
import assert from "node:assert/strict";
import { test } from "node:test";
import { DraftLength, draftGain } from "../../src/engine/draft-length.js";
import { KvCacheManager } from "../../src/engine/kv-cache-manager.js";
import { NgramProposer } from "../../src/engine/ngram-proposer.js";
import { Request } from "../../src/engine/request.js";
import { Scheduler } from "../../src/engine/scheduler.js";
import { type NgramSpeculativeConfig, resolveSpeculativeConfig } from "../../src/engine/speculative-config.js";

/** Resolves a config that must come out as prompt lookup. */
function ngram(v: unknown): NgramSpeculativeConfig {
  const c = resolveSpeculativeConfig(v);
  assert.equal(c.method, "ngram");
  return c as NgramSpeculativeConfig;
}

test("prompt lookup: the longest suffix n-gram in [min, max] wins, then the most recent occurrence; the draft is what followed", () => {
  const p = new NgramProposer({ promptLookupMin: 1, promptLookupMax: 3 });
  //           0  1  2  3  4  5  6  7  8  9 10 11 12
  const seq = [1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 1, 2, 3];
  assert.deepEqual(p.propose(seq, 3), [4, 5, 9], "suffix 1 2 3 matches at 0..2 (the 3-gram), not the later 2 3 at 6..7");
  assert.deepEqual(p.propose([5, 2, 3, 6, 1, 2, 3, 7, 2, 3], 2), [7, 2], "of two 2-gram matches the most recent");
  assert.deepEqual(p.propose([1, 2, 3], 4), [], "no earlier occurrence");
  assert.deepEqual(p.propose([4, 1, 2, 4], 5), [1, 2, 4], "the draft stops at the end of the sequence");
  assert.deepEqual(p.propose([7, 7, 7, 7], 3), [7], "overlapping matches: the most recent 3-gram ends at index 2");
  assert.deepEqual(p.propose(seq, 0), []);
  const strict = new NgramProposer({ promptLookupMin: 3, promptLookupMax: 4 });
  assert.deepEqual(strict.propose([5, 2, 3, 6, 1, 2, 3], 2), [], "only a 2-gram matches, min is 3");
  assert.deepEqual(strict.propose([9, 1, 2, 3, 6, 1, 2, 3], 2), [6, 1]);
  assert.throws(() => new NgramProposer({ promptLookupMin: 3, promptLookupMax: 2 }), /promptLookupMax must be ≥ 3, got 2/);
});

test("--speculative-config: vLLM's keys and defaults; errors name the field and the value", () => {
  assert.deepEqual(resolveSpeculativeConfig('{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}'), {
    method: "ngram",
    numSpeculativeTokens: 4,
    promptLookupMin: 2,
    promptLookupMax: 4,
    disableByBatchSize: 8,
  });
  const c = ngram({ num_speculative_tokens: 3, prompt_lookup_max: 6, disable_by_batch_size: 2 });
  assert.deepEqual([c.promptLookupMin, c.promptLookupMax, c.disableByBatchSize], [6, 6, 2], "min defaults to max");
  assert.deepEqual([ngram({ num_speculative_tokens: 1, prompt_lookup_min: 2 }).promptLookupMax], [2]);
  assert.deepEqual([ngram({ num_speculative_tokens: 1 }).promptLookupMin], [5], "both default to 5");
  assert.equal(resolveSpeculativeConfig(c), c, "idempotent");
  const bad: [unknown, RegExp][] = [
    ["{nope", /--speculative-config must be a JSON object, got "\{nope"/],
    ["[1]", /--speculative-config must be a JSON object, got \[1\]/],
    ['{"method":"eagle","num_speculative_tokens":2}', /--speculative-config\.method must be "ngram" \(prompt lookup\) or "draft_model", got "eagle"/],
    ['{"method":"ngram"}', /--speculative-config\.num_speculative_tokens is required/],
    ['{"num_speculative_tokens":0}', /--speculative-config\.num_speculative_tokens must be ≥ 1, got 0/],
    ['{"num_speculative_tokens":16}', /--speculative-config\.num_speculative_tokens must be ≤ 15, got 16/],
    ['{"num_speculative_tokens":2.5}', /--speculative-config\.num_speculative_tokens must be an integer, got 2\.5/],
    ['{"num_speculative_tokens":2,"prompt_lookup_min":4,"prompt_lookup_max":3}', /--speculative-config\.prompt_lookup_min must be ≤ prompt_lookup_max \(3\), got 4/],
    ['{"num_speculative_tokens":2,"prompt_lookup_max":"4"}', /--speculative-config\.prompt_lookup_max must be an integer, got "4"/],
    ['{"num_speculative_tokens":2,"lookahead":3}', /--speculative-config\.lookahead is not a speculative config field/],
    ['{"model":"","num_speculative_tokens":2}', /--speculative-config\.model must name the draft model \(a directory, \.gguf file or hub spec\), got ""/],
    ['{"model":"d","num_speculative_tokens":2,"prompt_lookup_max":3}', /--speculative-config\.prompt_lookup_max is a prompt lookup setting, not one of a draft model, got 3/],
    ['{"method":"ngram","model":"d","num_speculative_tokens":2}', /--speculative-config\.model names a draft model, but method is "ngram", got "d"/],
    ['{"num_speculative_tokens":2,"disable_by_batch_size":0}', /--speculative-config\.disable_by_batch_size must be ≥ 1, got 0/],
  ];
  for (const [v, re] of bad) assert.throws(() => resolveSpeculativeConfig(v, "--speculative-config"), re, String(v));
  const d = resolveSpeculativeConfig('{"model":"Qwen/Qwen2.5-0.5B-Instruct","num_speculative_tokens":5}');
  assert.deepEqual(d, { method: "draft_model", model: "Qwen/Qwen2.5-0.5B-Instruct", numSpeculativeTokens: 5, disableByBatchSize: 8, draftSampling: "greedy" }, "a model implies draft_model");
  assert.equal(resolveSpeculativeConfig(d), d, "idempotent");
  assert.deepEqual(resolveSpeculativeConfig({ method: "draft_model", model: "m", num_speculative_tokens: 2, disable_by_batch_size: 3 }), { method: "draft_model", model: "m", numSpeculativeTokens: 2, disableByBatchSize: 3, draftSampling: "greedy" });
  assert.equal(resolveSpeculativeConfig({ model: "m", num_speculative_tokens: 2, draft_sampling: "sampled" }).method === "draft_model" && (resolveSpeculativeConfig({ model: "m", num_speculative_tokens: 2, draft_sampling: "sampled" }) as { draftSampling?: string }).draftSampling, "sampled");
  assert.throws(() => resolveSpeculativeConfig('{"model":"m","num_speculative_tokens":2,"draft_sampling":"random"}', "--speculative-config"), /--speculative-config\.draft_sampling must be "greedy" or "sampled", got "random"/);
  assert.throws(() => resolveSpeculativeConfig('{"num_speculative_tokens":2,"draft_sampling":"sampled"}', "--speculative-config"), /--speculative-config\.draft_sampling is a draft model setting, not one of prompt lookup, got "sampled"/);
});

test("adaptive draft length: the full length while drafts are accepted, fewer as acceptance drops, pauses that double when none pay", () => {
  assert.ok(draftGain(0.9, 4) > draftGain(0.9, 1) && draftGain(0.1, 1) < 1.05, "the gain model");
  const d = new DraftLength(4);
  assert.equal(d.next(), 4, "a new sequence tries the full length");
  for (let i = 0; i < 5; i++) d.record(4, 4);
  assert.equal(d.next(), 4);
  for (let i = 0; i < 3; i++) d.record(4, 1);
  const k = d.next();
  assert.ok(k >= 1 && k < 4, `fewer drafts at acceptance ${d.acceptance.toFixed(2)}: ${k}`);
  for (let i = 0; i < 10; i++) d.record(k, 0);
  const pauses: number[] = [];
  for (let round = 0; round < 3; round++) {
    let steps = 1;
    assert.equal(d.next(), 0, "stops proposing");
    while (d.next() === 0) steps++;
    pauses.push(steps + 1);
    d.record(1, 0); // the probe after the pause is rejected
  }
  assert.deepEqual(pauses, [9, 17, 33], "each pause doubles (8, 16, 32 steps), then one probe");
  d.record(1, 1);
  d.record(1, 1);
  assert.ok(d.next() > 0, "accepted probes turn speculation back on");
  // A draft model's forward adds its cost to every draft: a draft as costly as the target never pays, even always right.
  const self = new DraftLength(4, 0.2 + 1);
  assert.equal(self.next(), 0, "draft as big as the target: no k beats plain decoding at acceptance 1");
  const small = new DraftLength(4, 0.2 + 0.15);
  assert.ok(small.next() >= 3, "a draft at 15 % of the target's cost drafts at full acceptance");
  assert.throws(() => new DraftLength(4, -1), /cost must be a finite number ≥ 0, got -1/);
});

test("scheduler: drafts are extra new tokens with lookahead slots; updateFromOutput rolls the rejected ones back (exact block ids)", () => {
  const kv = new KvCacheManager({ numBlocks: 8, blockSize: 4 });
  const s = new Scheduler({ kvCacheManager: kv, maxNumBatchedTokens: 64, maxNumSeqs: 4, maxModelLen: 32 });
  const r = new Request({ requestId: "r", promptTokenIds: [1, 2, 3, 4, 5, 6], maxTokens: 20 });
  s.addRequest(r);
  s.schedule();
  s.updateFromOutput(new Map([["r", [7]]])); // 7 tokens, 6 computed, blocks [0, 1]
  assert.deepEqual(kv.blockIds("r"), [0, 1]);

  const out = s.schedule(new Map([["r", [8, 9, 10, 11, 12]]]));
  const e = out.scheduled[0]!;
  assert.deepEqual([e.numComputedTokens, e.numNewTokens, e.sampling, e.specTokenIds, e.newBlockIds], [6, 6, true, [8, 9, 10, 11, 12], [2]]);
  assert.equal(r.numComputedTokens, 12);
  assert.throws(() => s.updateFromOutput(new Map([["r", [8, 5, 1]]])), /sampled\["r"\] must be accepted drafts \(a prefix of \[8, 9, 10, 11, 12\]\) and one token more, got \[8, 5, 1\]/);
  const [res] = s.updateFromOutput(new Map([["r", [8, 9, 4]]])); // two drafts accepted, then 4
  assert.deepEqual(res!.newTokenIds, [8, 9, 4]);
  assert.deepEqual([r.numTokens, r.numComputedTokens], [10, 9]);
  assert.deepEqual(kv.blockIds("r"), [0, 1, 2], "block 2 holds position 8, an accepted draft");
  assert.equal(kv.pool.numCachedBlocks, 1, "only block 0 (tokens 0..3) is cached: block 1 was full of accepted drafts only after the step");

  // Room: maxModelLen 32 and maxTokens 20 leave 20 − 4 − 1 = 15 drafts at most; the step's budget too.
  const out2 = s.schedule(new Map([["r", Array.from({ length: 30 }, (_, i) => 20 + i)]]));
  assert.equal(out2.scheduled[0]!.specTokenIds.length, 15);
  assert.deepEqual(kv.blockIds("r"), [0, 1, 2, 3, 4, 5, 6], "positions 9..24");
  s.updateFromOutput(new Map([["r", [3]]])); // every draft rejected
  assert.deepEqual(kv.blockIds("r"), [0, 1, 2], "blocks 3..6 held only drafts: freed");
  assert.equal(kv.pool.numCachedBlocks, 2, "block 1 (tokens 4..7, all known now) is cached; no draft block ever is");
  s.abort("r");
  assert.equal(kv.pool.numUsedBlocks, 0);
});

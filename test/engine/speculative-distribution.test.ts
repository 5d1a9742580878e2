// The sampled output distribution under speculative decoding matches the
// target's: a chi-square goodness-of-fit test of 4-token continuations drawn
// with prompt-lookup drafts (most steps verify drafts, some accepted, some
// rejected) against their exact probabilities under a tiny Markov model whose
// logits are known in closed form. 3000 seeded draws, 256 outcomes pooled to
// bins of expected count ≥ 5, significance α = 0.001 (Wilson–Hilferty
// critical value). The seeds are fixed, so the test is deterministic: a
// correct engine passes every run; a wrong acceptance rule (e.g. accepting
// a draft whenever p(draft) ≥ some threshold, or resampling without removing
// the draft) moves the statistic far past the critical value. The same test
// runs with a draft model (another Markov model, whose greedy drafts are right
// in some states and wrong in others) as the proposer, greedy and sampled: the
// sampled drafts x ~ q (q ≠ p in two of four states) go through the full rule
// (accept with min(1, p/q), else a draw from norm(max(0, p − q))). Replacing
// that residual by a draw from p moves the statistic past the critical value
// (checked by hand: chi-square 519.0 over 107 degrees of freedom against the
// critical value 158.0).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Engine, type EngineOptions } from "../../src/engine/engine.js";
import { Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { DraftModelProposer } from "../../src/engine/draft-model-proposer.js";
import { MarkovRunner, assertChiSquare } from "./markov-runner.js";

const dir = defaultModelDir();
const base = parseModelConfig(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")));
const tokenizer = Tokenizer.fromDir(dir);
const V = 16;
const STATES = [10, 11, 12, 13];
/** P(next | prev) over STATES, one row per prev in STATES order. */
const P = [
  [0.55, 0.25, 0.15, 0.05],
  [0.1, 0.2, 0.6, 0.1],
  [0.3, 0.3, 0.2, 0.2],
  [0.7, 0.05, 0.05, 0.2],
];

/** The draft's table: its argmax agrees with P's after 11 and 13, not after 10 and 12. */
const Q = [
  [0.2, 0.5, 0.2, 0.1],
  [0.1, 0.2, 0.6, 0.1],
  [0.1, 0.1, 0.2, 0.6],
  [0.7, 0.05, 0.05, 0.2],
];

/** The Markov target (P) or draft (another table) over STATES in a 16-token vocabulary. */
const markov = (table: readonly (readonly number[])[] = P) => new MarkovRunner({ ...base, vocabSize: V }, STATES, table);

test("sampled continuations under prompt-lookup speculation follow the target distribution (chi-square, α = 0.001)", () => {
  checkDistribution({ speculativeConfig: { method: "ngram", num_speculative_tokens: 3, prompt_lookup_min: 1, prompt_lookup_max: 2, disable_by_batch_size: 10_000 } });
});

test("sampled continuations with a draft model's greedy drafts follow the target distribution (chi-square, α = 0.001)", () => {
  const proposer = new DraftModelProposer({ runner: markov(Q), vocabLimit: V });
  checkDistribution({ speculativeConfig: { model: "markov-q", num_speculative_tokens: 3, disable_by_batch_size: 10_000 }, proposer });
  assert.equal(proposer.pool.numUsedBlocks, 0);
});

test("sampled continuations with a draft model's SAMPLED drafts (q ≠ p) follow the target distribution (chi-square, α = 0.001)", () => {
  const proposer = new DraftModelProposer({ runner: markov(Q), vocabLimit: V, sampled: true });
  const seqs = checkDistribution({ speculativeConfig: { model: "markov-q", num_speculative_tokens: 3, disable_by_batch_size: 10_000 }, proposer }, [0.4, 0.95]);
  assert.equal(proposer.pool.numUsedBlocks, 0);
  assert.equal(proposer.numSequences, 0);
  // Seeded requests are reproducible: the same seeds draw the same continuations again.
  const again = checkDistribution({ speculativeConfig: { model: "markov-q", num_speculative_tokens: 3, disable_by_batch_size: 10_000 }, proposer: new DraftModelProposer({ runner: markov(Q), vocabLimit: V, sampled: true }) }, [0.4, 0.95], 200);
  for (const [id, s] of again) assert.deepEqual(s, seqs.get(id), id);
});

test("a draft equal to the target at temperature 1: sampled drafts are all accepted, greedy ones only at p(argmax)", () => {
  const rate = (sampled: boolean) => {
    const engine = new Engine({ runner: markov(), tokenizer, eosTokenIds: [], speculativeConfig: { model: "markov-p", num_speculative_tokens: 3, disable_by_batch_size: 10_000 }, proposer: new DraftModelProposer({ runner: markov(P), vocabLimit: V, sampled }) });
    for (let i = 0; i < 200; i++) engine.addRequest({ requestId: `a${i}`, promptTokenIds: [10, 11, 12], params: resolveSamplingParams({ temperature: 1, maxTokens: 12, ignoreEos: true, seed: i }, V) });
    while (engine.hasUnfinishedRequests) engine.step();
    const sd = engine.stats().specDecode!;
    return sd.numAcceptedTokens / sd.numDraftTokens;
  };
  const [sampled, greedy] = [rate(true), rate(false)];
  assert.ok(sampled > 0.99, `sampled drafts from the target itself are accepted: ${sampled}`);
  assert.ok(greedy < 0.75, `greedy drafts are accepted at about p(argmax): ${greedy}`);
});

test("greedy requests stay token-identical to plain decoding with a sampling draft proposer", () => {
  const run = (spec: Pick<EngineOptions, "speculativeConfig" | "proposer">) => {
    const engine = new Engine({ runner: markov(), tokenizer, eosTokenIds: [], ...spec });
    for (let i = 0; i < 4; i++) engine.addRequest({ requestId: `g${i}`, promptTokenIds: [10 + i, 12, 11], params: resolveSamplingParams({ temperature: 0, maxTokens: 10, ignoreEos: true }, V) });
    const out = new Map<string, number[]>();
    while (engine.hasUnfinishedRequests) for (const o of engine.step()) out.set(o.requestId, [...(out.get(o.requestId) ?? []), ...o.tokenIds]);
    return out;
  };
  const plain = run({});
  const spec = run({ speculativeConfig: { model: "markov-q", num_speculative_tokens: 3, disable_by_batch_size: 10_000 }, proposer: new DraftModelProposer({ runner: markov(Q), vocabLimit: V, sampled: true }) });
  assert.deepEqual(spec, plain);
});

/**
 * Draws N seeded 4-token continuations with `spec`'s speculation and tests
 * them against their exact probabilities (the chi-square only for the full N);
 * `acceptance`: the bounds of accepted / draft tokens. Returns the continuations.
 */
function checkDistribution(spec: Pick<EngineOptions, "speculativeConfig" | "proposer">, acceptance: [number, number] = [0.2, 0.8], N = 3000): Map<string, number[]> {
  const LEN = 4;
  const promptIds = [10, 11, 12, 13, 10, 12, 11, 10];
  const engine = new Engine({ runner: markov(), tokenizer, eosTokenIds: [], ...spec });
  for (let i = 0; i < N; i++) {
    const params = resolveSamplingParams({ temperature: 1, maxTokens: LEN, ignoreEos: true, seed: 7000 + i }, V);
    engine.addRequest({ requestId: `s${i}`, promptTokenIds: promptIds, params });
  }
  const seqs = new Map<string, number[]>();
  while (engine.hasUnfinishedRequests) for (const o of engine.step()) seqs.set(o.requestId, [...(seqs.get(o.requestId) ?? []), ...o.tokenIds]);
  assert.equal(engine.kvCacheManager.pool.numUsedBlocks, 0);
  const sd = engine.stats().specDecode!;
  assert.ok(sd.numDrafts > N, `most requests verified drafts: ${JSON.stringify(sd)}`);
  assert.ok(sd.numAcceptedTokens > acceptance[0] * sd.numDraftTokens && sd.numAcceptedTokens < acceptance[1] * sd.numDraftTokens, `acceptance in between: ${JSON.stringify(sd)}`);
  if (N < 3000) return seqs;

  // Observed counts and exact probabilities of the 4^LEN continuations.
  const K = STATES.length;
  const observed = new Float64Array(K ** LEN);
  for (const s of seqs.values()) {
    assert.equal(s.length, LEN);
    observed[s.reduce((c, t) => c * K + STATES.indexOf(t), 0)]!++;
  }
  const expected = Array.from({ length: K ** LEN }, (_, c) => {
    let prev = STATES.indexOf(promptIds.at(-1)!);
    let p = 1;
    for (let i = LEN - 1; i >= 0; i--) {
      const next = Math.floor(c / K ** i) % K;
      p *= P[prev]![next]!;
      prev = next;
    }
    return p * N;
  });
  assertChiSquare(observed, expected, "sampled continuations");
  return seqs;
}

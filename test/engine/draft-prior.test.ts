// The adaptive draft length across requests (draft-prior.ts) and with a
// measured draft cost (step-cost.ts), in the engine on the toy runner, whose
// virtual clock makes step times a function of the batch: a workload whose
// drafts are always rejected stops proposing after the first request, not
// after a few steps of each; one whose drafts are always right proposes the
// full k from a later request's first step; a workload that turns good again
// gets speculation back within one pause; a draft that costs a whole step
// (measured) stops speculation that an assumed cost would keep; greedy output
// stays the toy's greedy continuation throughout. Plus the parts alone: the
// shared pause and the meter's arithmetic.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Engine } from "../../src/engine/engine.js";
import { DraftLength } from "../../src/engine/draft-length.js";
import { DraftPrior, FIRST_PAUSE, MAX_PAUSE } from "../../src/engine/draft-prior.js";
import { MIN_SAMPLES, StepCostMeter, WINDOW } from "../../src/engine/step-cost.js";
import { Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { toyGenerate } from "./toy-model.js";
import { ToyRunner } from "./toy-runner.js";

const dir = defaultModelDir();
const config = parseModelConfig(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")));
const tokenizer = Tokenizer.fromDir(dir);
const V = config.vocabSize;
const K = 4;
const SPEC = { method: "ngram", num_speculative_tokens: K, prompt_lookup_min: 1, prompt_lookup_max: 3, disable_by_batch_size: 64 };
const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => 3 + ((seed * 7919 + i * 104729) % (V - 3)));

/**
 * Proposes the toy's greedy continuation, or its successor at every draft
 * (always wrong) while `wrong`, or wrong at draft positions ≡ 0 mod `wrongEvery`.
 * Logs every call: the sequence's length and the k asked for.
 */
class ScriptedProposer {
  wrong = false;
  wrongEvery = 0;
  readonly calls: { length: number; k: number }[] = [];
  propose(tokens: readonly number[], k: number): number[] {
    this.calls.push({ length: tokens.length, k });
    return toyGenerate(tokens, k, V).map((t, j) => (this.wrong || (this.wrongEvery > 0 && (tokens.length + j) % this.wrongEvery === 0) ? (t + 1) % V : t));
  }
}

function setup(proposer: ScriptedProposer, stepMs?: (tokens: number) => number) {
  const runner = new ToyRunner({ config, numBlocks: 64, blockSize: 4, ...(stepMs === undefined ? {} : { stepMs }) });
  const engine = new Engine({ runner, tokenizer, eosTokenIds: [], speculativeConfig: SPEC, proposer, stepClock: () => runner.clock });
  return { runner, engine };
}

/** Runs requests to the end; returns their tokens, and checks each is the toy's greedy continuation. */
function run(engine: Engine<ToyRunner>, prompts: number[][], maxTokens: number, first = 0): void {
  const got = new Map<string, number[]>();
  prompts.forEach((p, i) => engine.addRequest({ requestId: `r${first + i}`, promptTokenIds: p, params: resolveSamplingParams({ temperature: 0, maxTokens, ignoreEos: true }, V) }));
  for (let i = 0; engine.hasUnfinishedRequests; i++) {
    assert.ok(i < 10_000, "the engine did not finish");
    for (const o of engine.step()) got.set(o.requestId, [...(got.get(o.requestId) ?? []), ...o.tokenIds]);
  }
  prompts.forEach((p, i) => assert.deepEqual(got.get(`r${first + i}`), toyGenerate(p, maxTokens, V), `r${first + i}: greedy output`));
  assert.equal(engine.kvCacheManager.pool.numUsedBlocks, 0);
}

test("always-wrong drafts, many short requests in a row: verifications are bounded by the first request's learning plus shared probes, not by the number of requests", () => {
  const counts: number[] = [];
  for (const n of [10, 40]) {
    const proposer = new ScriptedProposer();
    proposer.wrong = true;
    const { engine } = setup(proposer);
    const perRequest: number[] = [];
    for (let i = 0; i < n; i++) {
      const before = engine.stats().specDecode!.numDrafts;
      run(engine, [prompt(100 + i, 6)], 12, i);
      perRequest.push(engine.stats().specDecode!.numDrafts - before);
    }
    const sd = engine.stats().specDecode!;
    assert.equal(sd.numAcceptedTokens, 0);
    // 40 × 11 decode steps: the first request's 4 rejected verifications, then one probe per pause (8, 16, 32, … sequence-steps, shared).
    assert.ok(sd.numDrafts <= 10, `${sd.numDrafts} verifications in ${n} requests of 12 tokens: ${perRequest}`);
    assert.ok(sd.numDraftTokens <= 18, `${sd.numDraftTokens} draft tokens`);
    assert.ok(perRequest.slice(1).every((v) => v <= 1), `after the first request, at most a probe a request: ${perRequest}`);
    counts.push(sd.numDrafts);
  }
  assert.ok(counts[1]! - counts[0]! <= 3, `4× the requests add only the probes of longer pauses: ${counts}`);
});

test("always-wrong drafts, requests 4 at a time: the first batch learns, later ones start where it left off", () => {
  const proposer = new ScriptedProposer();
  proposer.wrong = true;
  const { engine } = setup(proposer);
  for (let b = 0; b < 10; b++) run(engine, [0, 1, 2, 3].map((i) => prompt(200 + 4 * b + i, 5 + i)), 12, 4 * b);
  const sd = engine.stats().specDecode!;
  assert.ok(sd.numDrafts <= 4 * 4 + 8, `${sd.numDrafts} verifications for 40 requests (4 concurrent) of 12 tokens`);
});

test("always-right drafts: a later request proposes the full k on its first decode step; after a wrong spell, speculation comes back within a pause", () => {
  const proposer = new ScriptedProposer();
  const { engine } = setup(proposer);
  /** Runs request i alone; returns the k its first decode step asked for (undefined: it did not propose). */
  const firstK = (p: number[], i: number) => {
    const from = proposer.calls.length;
    run(engine, [p], 16, i);
    return proposer.calls.slice(from).find((c) => c.length === p.length + 1)?.k;
  };
  for (let i = 0; i < 4; i++) assert.equal(firstK(prompt(300 + i, 7 + i), i), K, `request ${i}: full length from its first step`);
  assert.equal(engine.stats().specDecode!.numAcceptedTokens, engine.stats().specDecode!.numDraftTokens);

  proposer.wrong = true; // the workload changes: drafts stop paying, speculation stops
  for (let i = 4; i < 12; i++) run(engine, [prompt(300 + i, 7)], 16, i);
  assert.ok((firstK(prompt(399, 7), 12) ?? 0) <= 1, "a new request no longer proposes on its first step (or a probe)");

  proposer.wrong = false; // and back: a probe is accepted within a pause (≤ MAX_PAUSE sequence-steps), speculation resumes
  let back = -1;
  for (let i = 13; i < 13 + Math.ceil(MAX_PAUSE / 15) + 4 && back < 0; i++) {
    if (firstK(prompt(400 + i, 7), i) === K) back = i;
  }
  assert.ok(back > 0, "a later request proposes the full k again");
});

test("measured draft cost: a draft that costs a whole step (compute-bound) stops speculation that a cheap one keeps; output unchanged", () => {
  const drafted = (stepMs: (tokens: number) => number) => {
    const proposer = new ScriptedProposer();
    proposer.wrongEvery = 3; // acceptance about 1/2 of drafts: pays at a cost of 0.05 a draft, not at 1
    const { engine } = setup(proposer, stepMs);
    for (let i = 0; i < 6; i++) run(engine, [prompt(500 + i, 6)], 40, i);
    return engine.stats().specDecode!;
  };
  const cheap = drafted((t) => 10 + 0.5 * (t - 1));
  const costly = drafted((t) => 10 * t);
  assert.ok(cheap.numDrafts > 60, `cheap drafts: ${JSON.stringify(cheap)}`);
  assert.ok(costly.numDrafts < cheap.numDrafts / 3, `costly drafts stop: ${costly.numDrafts} verifications against ${cheap.numDrafts}`);
  const runner = new ToyRunner({ config, numBlocks: 8, blockSize: 4 });
  assert.throws(() => new Engine({ runner, tokenizer, eosTokenIds: [], speculativeConfig: SPEC, stepClock: 5 as unknown as () => number }), /stepClock must be a function returning milliseconds, or null, got 5/);
});

test("the prior: a new DraftLength starts from the engine's acceptance; sequences share one pause (8, 16, … steps) and its probe", () => {
  const prior = new DraftPrior();
  const a = new DraftLength(K, 0.2, prior);
  assert.equal(a.next(), K, "a fresh engine is optimistic");
  for (let i = 0; i < 4; i++) a.record(K, 0);
  assert.ok(prior.acceptance < 0.25, `the prior follows: ${prior.acceptance}`);
  const b = new DraftLength(K, 0.2, prior);
  assert.equal(b.acceptance, prior.acceptance, "a new sequence starts from the prior");
  // a and b stop proposing and count steps of one pause, whoever steps: the 9th sequence-step probes.
  const ks: number[] = [];
  for (let s = 0; s < FIRST_PAUSE + 1; s++) ks.push((s % 2 === 0 ? a : b).next());
  assert.deepEqual(ks, [0, 0, 0, 0, 0, 0, 0, 0, 1]);
  b.record(1, 0);
  assert.equal(prior.nextPause, 2 * FIRST_PAUSE, "a rejected probe: the next pause doubles");
  const c = new DraftLength(K, 0.2, prior);
  assert.equal(c.next(), 0, "a sequence that arrives now waits out the shared pause");
  c.record(1, 1);
  c.record(1, 1);
  assert.ok(c.next() > 0 && prior.nextPause === FIRST_PAUSE, "accepted drafts: it proposes again, and the next pause starts short");
  assert.throws(() => new DraftLength(K, Number.NaN, prior), /cost must be a finite number ≥ 0, got NaN/);
  // A function cost is asked per k.
  const asked: number[] = [];
  new DraftLength(K, (k) => (asked.push(k), 0.2)).next();
  assert.deepEqual(asked, [1, 2, 3, 4]);
});

test("the step-cost meter: c_k = (ms(1 + k) / ms(1) − 1) / k, ms(T) the median of recent timings; the nearest measured length or a fitted line otherwise", () => {
  const m = new StepCostMeter({ maxDrafts: K, fallback: 0.7 });
  assert.equal(m.perDraft(2), 0.7, "nothing measured: the assumed cost");
  for (let i = 0; i < MIN_SAMPLES; i++) m.observe(3, 14);
  assert.equal(m.perDraft(2), 0.7, "no plain step and one length: the assumed cost");
  for (let i = 0; i < MIN_SAMPLES; i++) m.observe(5, 18);
  // Line through (3, 14), (5, 18): ms(T) = 8 + 2T, ms(1) = 10.
  assert.ok(Math.abs(m.perDraft(2) - 0.2) < 1e-12 && Math.abs(m.perDraft(4) - 0.2) < 1e-12, `fitted: ${m.perDraft(2)}, ${m.perDraft(4)}`);
  for (let i = 0; i < MIN_SAMPLES - 1; i++) m.observe(1, 7);
  assert.ok(Math.abs(m.perDraft(2) - 0.2) < 1e-12, "plain steps below MIN_SAMPLES are not used yet");
  m.observe(1, 7);
  assert.ok(Math.abs(m.perDraft(2) - 0.5) < 1e-12, `(14 / 7 − 1) / 2: ${m.perDraft(2)}`);
  assert.ok(Math.abs(m.perDraft(1) - 0.5) < 1e-12, "k = 1 unmeasured: the nearest, k = 2");
  assert.ok(Math.abs(m.perDraft(3) - 0.5) < 1e-12, "k = 3: a tie between 2 and 4, the shorter");
  assert.ok(Math.abs(m.perDraft(4) - (18 / 7 - 1) / 4) < 1e-12);
  // A median of the last WINDOW timings: one preempted step does not move it, a lasting change does.
  m.observe(5, 180);
  assert.equal(m.stepMs(5), 18, "18, 18, 18, 180: the median of four");
  for (let i = 0; i < WINDOW; i++) m.observe(5, 30 + i);
  assert.equal(m.stepMs(5), 34, "the last WINDOW timings 30 … 38");
  for (const [t, ms] of [[0, 5], [6, 5], [1.5, 5], [1, -1], [1, Number.NaN], [1, Infinity]] as const) m.observe(t, ms);
  assert.equal(m.stepMs(1), 7, "bad lengths and times are ignored");
  assert.throws(() => new StepCostMeter({ maxDrafts: 0 }), /maxDrafts/);
});

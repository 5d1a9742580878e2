// Speculative decoding in the engine, on the toy runner (its logits depend on
// the whole prefix through the paged cache, so a stale or misplaced K/V slot
// after a rollback changes the output): greedy and seeded-sampled outputs are
// token for token those of plain decoding — alone, batched, under chunked
// prefill and preemption — with an oracle proposer whose drafts are right
// except at chosen positions (every accepted-run length happens), and with
// prompt lookup; stops, max_tokens and logprobs inside an accepted run; the
// rejected drafts' blocks go back to the pool and never into the prefix
// cache; aborts in the middle of a verification; metrics; adaptivity.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Engine, type EngineOutput, type EngineOptions } from "../../src/engine/engine.js";
import type { DraftProposer } from "../../src/engine/ngram-proposer.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import { type SamplingParams, Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { toyGenerate } from "./toy-model.js";
import { ToyRunner, type ToyRunnerOptions } from "./toy-runner.js";

const dir = defaultModelDir();
const config = parseModelConfig(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")));
const tokenizer = Tokenizer.fromDir(dir);
const V = config.vocabSize;
const SPEC = { method: "ngram", num_speculative_tokens: 4, prompt_lookup_min: 1, prompt_lookup_max: 3, disable_by_batch_size: 64 };

/** Proposes the toy's greedy continuation, with draft j wrong where (position + j) % period === wrongAt. */
class OracleProposer implements DraftProposer {
  calls = 0;
  constructor(readonly period = 5, readonly wrongAt = 3) {}
  propose(tokens: readonly number[], k: number): number[] {
    this.calls++;
    return toyGenerate(tokens, k, V).map((t, j) => ((tokens.length + j) % this.period === this.wrongAt ? (t + 1) % V : t));
  }
}

function setup(runner: Partial<ToyRunnerOptions> = {}, engine: Omit<Partial<EngineOptions>, "runner"> = {}) {
  const r = new ToyRunner({ config, numBlocks: 64, blockSize: 4, ...runner });
  const e = new Engine({ runner: r, tokenizer, eosTokenIds: [], stepClock: () => r.clock, ...engine }); // the draft cost measured on the toy's virtual clock
  return { runner: r, engine: e };
}

const params = (p: SamplingParams = {}) => resolveSamplingParams({ temperature: 0, maxTokens: 24, ignoreEos: true, ...p }, V);
const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => 3 + ((seed * 7919 + i * 104729) % (V - 3)));
const tokensOf = (outs: readonly EngineOutput[]) => outs.flatMap((o) => o.tokenIds);
const textOf = (outs: readonly EngineOutput[]) => outs.map((o) => o.text).join("");

function runAll(engine: Engine<ToyRunner>, onStep?: () => void): Map<string, EngineOutput[]> {
  const by = new Map<string, EngineOutput[]>();
  for (let i = 0; engine.hasUnfinishedRequests; i++) {
    assert.ok(i < 10_000, "the engine did not finish");
    for (const out of engine.step()) {
      const list = by.get(out.requestId) ?? [];
      assert.ok(list.every((o) => o.finishReason === null), `output after the last one for ${out.requestId}`);
      if (out.logprobs !== null) assert.equal(out.logprobs.length, out.tokenIds.length, "one logprob per token");
      list.push(out);
      by.set(out.requestId, list);
    }
    // Between steps: a decoding request has exactly its last sampled token left to compute, and holds no block past its KV.
    for (const id of engine.scheduler.runningRequestIds()) {
      const r = engine.scheduler.getRequest(id)!;
      if (r.numComputedTokens >= r.numPromptTokens) assert.equal(r.numComputedTokens, r.numTokens - 1, `${id}: computed tokens after a verification`);
      assert.equal(engine.kvCacheManager.blockIds(id).length, Math.ceil(r.numComputedTokens / engine.kvCacheManager.blockSize), `${id}: blocks`);
    }
    onStep?.();
  }
  return by;
}

/** Runs the prompts through a plain engine and a speculating one (same options otherwise); returns both outputs. */
/** `proposer` null: the config's own (prompt lookup). */
function both(prompts: number[][], p: SamplingParams, runner: Partial<ToyRunnerOptions> = {}, engine: Partial<EngineOptions> = {}, proposer: DraftProposer | null = new OracleProposer()) {
  const run = (spec: boolean) => {
    const { engine: e, runner: r } = setup(runner, spec ? { ...engine, speculativeConfig: SPEC, ...(proposer === null ? {} : { proposer }) } : engine);
    prompts.forEach((q, i) => e.addRequest({ requestId: `r${i}`, promptTokenIds: q, params: params({ seed: 100 + i, ...p }) }));
    const by = runAll(e);
    assert.equal(e.kvCacheManager.pool.numUsedBlocks, 0, "every block back in the pool");
    return { by, engine: e, forwards: r.forwards };
  };
  return { plain: run(false), spec: run(true) };
}

function assertSameOutputs(a: Map<string, EngineOutput[]>, b: Map<string, EngineOutput[]>) {
  assert.deepEqual([...b.keys()].sort(), [...a.keys()].sort());
  for (const [id, outs] of a) {
    const got = b.get(id)!;
    assert.deepEqual(tokensOf(got), tokensOf(outs), `${id}: tokens`);
    assert.equal(textOf(got), textOf(outs), `${id}: text`);
    const [x, y] = [outs.at(-1)!, got.at(-1)!];
    assert.deepEqual([y.finishReason, y.stopReason, y.numOutputTokens], [x.finishReason, x.stopReason, x.numOutputTokens], `${id}: finish`);
    assert.deepEqual(got.flatMap((o) => o.logprobs ?? []), outs.flatMap((o) => o.logprobs ?? []), `${id}: logprobs`);
  }
}

test("greedy: output equals plain decoding token for token, alone and batched; accepted runs of every length happen", () => {
  const alone = both([prompt(1, 7)], { logprobs: 2 });
  assertSameOutputs(alone.plain.by, alone.spec.by);
  const batched = both([prompt(1, 7), prompt(2, 3), prompt(3, 12), prompt(4, 1)], { logprobs: 2 });
  assertSameOutputs(batched.plain.by, batched.spec.by);
  assert.deepEqual(tokensOf(batched.spec.by.get("r0")!), tokensOf(alone.spec.by.get("r0")!));
  const sd = batched.spec.engine.stats().specDecode!;
  assert.ok(sd.numDrafts > 0 && sd.numAcceptedTokens > 0 && sd.numAcceptedTokens < sd.numDraftTokens, `drafts accepted in part: ${JSON.stringify(sd)}`);
  assert.ok(sd.acceptedPerPos.every((n) => n > 0), `every draft position accepted some time: ${sd.acceptedPerPos}`);
  const generated = (e: Engine) => e.stats().generationTokens;
  assert.equal(generated(batched.spec.engine), generated(batched.plain.engine));
  assert.ok(batched.spec.forwards < 0.6 * batched.plain.forwards, `fewer steps: ${batched.spec.forwards} forwards against ${batched.plain.forwards}`);
});

test("greedy under chunked prefill and preemption: the same tokens as plain decoding", () => {
  const prompts = Array.from({ length: 6 }, (_, i) => prompt(10 + i, 6 + 3 * i));
  const chunked = both(prompts, { maxTokens: 20 }, {}, { maxNumBatchedTokens: 7 });
  assertSameOutputs(chunked.plain.by, chunked.spec.by);
  const tight = both(prompts, { maxTokens: 20 }, { numBlocks: 14, blockSize: 4 });
  assert.ok(tight.spec.engine.stats().numPreemptions > 0, "expected preemptions");
  assertSameOutputs(tight.plain.by, tight.spec.by);
  assert.equal(tight.spec.engine.stats().numFreeBlocks, 14);
});

test("seeded sampling: the same tokens and logprobs with and without speculation (one uniform per output token)", () => {
  const prompts = [prompt(21, 5), prompt(22, 9), prompt(23, 2)];
  const r = both(prompts, { temperature: 1, topK: 50, maxTokens: 30, logprobs: 1 });
  assertSameOutputs(r.plain.by, r.spec.by);
  const sd = r.spec.engine.stats().specDecode!;
  assert.ok(sd.numAcceptedTokens > 0 && sd.numAcceptedTokens < sd.numDraftTokens, JSON.stringify(sd));
  const greedy = both(prompts, { maxTokens: 30 });
  assert.notDeepEqual(tokensOf(r.spec.by.get("r0")!), tokensOf(greedy.spec.by.get("r0")!), "temperature 1 is not greedy");
});

test("stop token, stop string and max_tokens inside an accepted run end the output exactly where plain decoding does", () => {
  const p = prompt(31, 6);
  const want = toyGenerate(p, 24, V);
  const full = tokenizer.decode([...p, ...want], { skipSpecialTokens: true }).slice(tokenizer.decode(p, { skipSpecialTokens: true }).length);
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 3);
  for (const extra of [{ stopTokenIds: [want[9]!] }, { stop: [stop] }, { maxTokens: 7 }, { maxTokens: 11 }] as SamplingParams[]) {
    const r = both([p], { logprobs: 0, ...extra }, {}, {}, new OracleProposer(1000, -1)); // drafts always right: every stop falls inside a run
    assertSameOutputs(r.plain.by, r.spec.by);
  }
});

test("rejected drafts: their blocks go back to the pool and never into the prefix cache", () => {
  const wrong: DraftProposer = { propose: (tokens, k) => toyGenerate(tokens, k, V).map((t) => (t + 1) % V) };
  const e2 = setup({}, { speculativeConfig: { ...SPEC, num_speculative_tokens: 7 }, proposer: wrong }).engine;
  const p = prompt(41, 4); // one full block
  e2.addRequest({ requestId: "w", promptTokenIds: p, params: params({ maxTokens: 20 }) });
  e2.step(); // prefill: 4 tokens, 1 block; first token sampled
  const kv = e2.kvCacheManager;
  assert.deepEqual(kv.blockIds("w").length, 1);
  e2.step(); // verify 1 + 7 tokens at positions 4..11: 3 blocks during the step, then all drafts rejected
  assert.equal(e2.stats().specDecode!.numDraftTokens, 7);
  assert.equal(e2.stats().specDecode!.numAcceptedTokens, 0);
  assert.deepEqual(kv.blockIds("w").length, 2, "the block holding position 4 stays; the ones holding only drafts are freed");
  assert.equal(kv.pool.numCachedBlocks, 1, "only the prompt's full block is cached");
  runAll(e2);
  assert.equal(kv.pool.numUsedBlocks, 0);
});

test("aborts in the middle of a verification (during the forward) and between steps: block accounting returns to zero", () => {
  let engineRef: Engine | null = null;
  const victims = ["a1", "a3"];
  class AbortingRunner extends ToyRunner {
    override forward(batch: ForwardBatch): Float32Array {
      const out = super.forward(batch);
      // Once the batch verifies drafts (more logit rows than sequences), abort a victim inside the step.
      if (batch.logitIndices.length > batch.seqLens.length && victims.length > 0) engineRef!.abort(victims.shift()!);
      return out;
    }
  }
  const runner = new AbortingRunner({ config, numBlocks: 64, blockSize: 4 });
  const engine = new Engine({ runner, tokenizer, eosTokenIds: [], speculativeConfig: SPEC, proposer: new OracleProposer(), stepClock: () => runner.clock });
  engineRef = engine;
  for (let i = 0; i < 5; i++) engine.addRequest({ requestId: `a${i}`, promptTokenIds: prompt(50 + i, 5 + i), params: params({ maxTokens: 30 }) });
  let stepped = 0;
  const by = runAll(engine, () => {
    if (++stepped === 6) assert.equal(engine.abort("a0"), true);
  });
  assert.deepEqual(["a0", "a1", "a3"].map((id) => by.get(id)!.at(-1)!.finishReason), ["abort", "abort", "abort"]);
  for (const id of ["a2", "a4"]) assert.deepEqual(tokensOf(by.get(id)!), toyGenerate(prompt(50 + Number(id[1]), 5 + Number(id[1])), 30, V));
  assert.equal(engine.kvCacheManager.pool.numUsedBlocks, 0);
  assert.equal([...engine.kvCacheManager.requestIds()].length, 0);
});

test("prompt lookup on the toy runner: drafts come from repeats in the sequence, and output equals plain decoding", () => {
  // A prompt that repeats its own greedy continuation, so lookups find it and drafts are accepted.
  const head = prompt(61, 6);
  const cont = toyGenerate(head, 12, V);
  const p = [...head, ...cont, ...head];
  const r = both([p, prompt(62, 9)], { maxTokens: 30 }, {}, {}, null);
  assertSameOutputs(r.plain.by, r.spec.by);
  assert.ok(r.spec.engine.stats().specDecode!.numDraftTokens > 0);
});

test("adaptivity: a proposer that is always wrong stops proposing after a few steps; above disable_by_batch_size nobody speculates", () => {
  const wrong = { calls: 0, propose(tokens: readonly number[], k: number) {
    this.calls++;
    return toyGenerate(tokens, k, V).map((t) => (t + 1) % V);
  } };
  const { engine } = setup({ numBlocks: 128 }, { speculativeConfig: SPEC, proposer: wrong });
  engine.addRequest({ requestId: "x", promptTokenIds: prompt(71, 5), params: params({ maxTokens: 200 }) });
  runAll(engine);
  const sd = engine.stats().specDecode!;
  assert.equal(sd.numAcceptedTokens, 0);
  assert.ok(sd.numDrafts <= 12, `${sd.numDrafts} verifications of 199 decode steps`);
  assert.ok(sd.numDraftTokens <= 20, `${sd.numDraftTokens} draft tokens`);

  const many = setup({}, { speculativeConfig: { ...SPEC, disable_by_batch_size: 3 }, proposer: new OracleProposer() }).engine;
  for (let i = 0; i < 3; i++) many.addRequest({ requestId: `m${i}`, promptTokenIds: prompt(80 + i, 4), params: params({ maxTokens: 10 }) });
  runAll(many);
  assert.equal(many.stats().specDecode!.numDrafts, 0);
});

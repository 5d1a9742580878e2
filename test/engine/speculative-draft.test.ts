// The draft-model proposer (draft-model-proposer.ts) in the engine, on toy
// runners as target and draft (each with its own toy paged cache, whose
// entries hash the whole prefix, so a stale draft slot after a rollback
// changes the draft): greedy and seeded-sampled outputs are token for token
// those of plain decoding — alone, batched, under chunked prefill and
// preemption; a draft identical to the target has every draft accepted (its
// cache follows the accepted tokens exactly); a draft that errs at chosen
// positions is accepted in part; the draft's blocks return to zero after
// aborts in the middle of a verification; a short draft pool and a failing
// draft forward cost drafts, never tokens; vocabularies are checked.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Engine, type EngineOutput, type EngineOptions } from "../../src/engine/engine.js";
import { DraftModelProposer, checkSameVocabulary } from "../../src/engine/draft-model-proposer.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import { type SamplingParams, Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { llama2TokenizerDir } from "../../src/testing/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { toyGenerate } from "./toy-model.js";
import { ToyRunner, type ToyRunnerOptions } from "./toy-runner.js";

const dir = defaultModelDir();
const config = parseModelConfig(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")));
const tokenizer = Tokenizer.fromDir(dir);
const V = config.vocabSize;
const SPEC = { model: "toy-draft", num_speculative_tokens: 4, disable_by_batch_size: 64 };

/** A toy draft that errs where the drafted position p has p % period === wrongAt (its argmax moves one id up). */
class ErringDraft extends ToyRunner {
  constructor(options: ToyRunnerOptions, readonly period = 5, readonly wrongAt = 3, readonly failAfter = Infinity) {
    super(options);
  }
  override forward(batch: ForwardBatch): Float32Array {
    if (this.forwards >= this.failAfter) throw new Error("draft forward failed on purpose");
    const out = super.forward(batch);
    batch.logitIndices.forEach((t, row) => {
      if ((batch.positions[t]! + 1) % this.period !== this.wrongAt) return;
      const logits = out.subarray(row * V, (row + 1) * V);
      const top = logits.indexOf(Math.max(...logits));
      logits[(top + 1) % V] = 100;
    });
    return out;
  }
}

const draftOf = (opts: Partial<ToyRunnerOptions> = {}, period = 5, wrongAt = 3, failAfter = Infinity) =>
  new DraftModelProposer({ runner: new ErringDraft({ config, numBlocks: 64, blockSize: 4, ...opts }, period, wrongAt, failAfter), vocabLimit: V, maxBatchTokens: 8 });

const params = (p: SamplingParams = {}) => resolveSamplingParams({ temperature: 0, maxTokens: 24, ignoreEos: true, ...p }, V);
const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => 3 + ((seed * 7919 + i * 104729) % (V - 3)));
const tokensOf = (outs: readonly EngineOutput[]) => outs.flatMap((o) => o.tokenIds);

function runAll(engine: Engine<ToyRunner>): Map<string, EngineOutput[]> {
  const by = new Map<string, EngineOutput[]>();
  for (let i = 0; engine.hasUnfinishedRequests; i++) {
    assert.ok(i < 10_000, "the engine did not finish");
    for (const out of engine.step()) by.set(out.requestId, [...(by.get(out.requestId) ?? []), out]);
  }
  return by;
}

/** Plain decoding and decoding with `proposer`, same prompts and options; both outputs. */
function both(prompts: number[][], p: SamplingParams, proposer: DraftModelProposer, runner: Partial<ToyRunnerOptions> = {}, engine: Omit<Partial<EngineOptions>, "runner"> = {}) {
  const run = (spec: boolean) => {
    const r = new ToyRunner({ config, numBlocks: 64, blockSize: 4, ...runner });
    const e = new Engine({ runner: r, tokenizer, eosTokenIds: [], stepClock: () => r.clock, ...engine, ...(spec ? { speculativeConfig: SPEC, proposer } : {}) }); // the draft cost timed on the toy's virtual clock
    prompts.forEach((q, i) => e.addRequest({ requestId: `r${i}`, promptTokenIds: q, params: params({ seed: 100 + i, ...p }) }));
    const by = runAll(e);
    assert.equal(e.kvCacheManager.pool.numUsedBlocks, 0, "every target block back in the pool");
    return { by, engine: e, forwards: r.forwards };
  };
  const plain = run(false);
  const spec = run(true);
  assert.equal(proposer.pool.numUsedBlocks, 0, "every draft block back in the draft's pool");
  assert.equal(proposer.numSequences, 0);
  for (const [id, outs] of plain.by) {
    assert.deepEqual(tokensOf(spec.by.get(id)!), tokensOf(outs), `${id}: tokens`);
    assert.deepEqual(spec.by.get(id)!.flatMap((o) => o.logprobs ?? []), outs.flatMap((o) => o.logprobs ?? []), `${id}: logprobs`);
    assert.equal(spec.by.get(id)!.at(-1)!.finishReason, outs.at(-1)!.finishReason);
  }
  return { plain, spec, sd: spec.engine.stats().specDecode! };
}

test("draft model, greedy: output equals plain decoding alone and batched; a draft equal to the target has every draft accepted", () => {
  const exact = both([prompt(1, 7)], { logprobs: 2, maxTokens: 30 }, draftOf({}, 1, -1));
  assert.ok(exact.sd.numDraftTokens > 20, JSON.stringify(exact.sd));
  assert.equal(exact.sd.numAcceptedTokens, exact.sd.numDraftTokens, "a draft with the target's weights is always right: its cache follows the accepted tokens");
  assert.ok(exact.spec.forwards <= Math.ceil(30 / 5) + 1, `${exact.spec.forwards} target forwards for 30 tokens at k = 4`);
  const batched = both([prompt(1, 7), prompt(2, 3), prompt(3, 12), prompt(4, 1)], { logprobs: 2 }, draftOf());
  assert.ok(batched.sd.numAcceptedTokens > 0 && batched.sd.numAcceptedTokens < batched.sd.numDraftTokens, JSON.stringify(batched.sd));
  assert.ok(batched.sd.acceptedPerPos.every((n) => n > 0), `every position accepted some time: ${batched.sd.acceptedPerPos}`);
  assert.ok(batched.spec.forwards < 0.7 * batched.plain.forwards, `${batched.spec.forwards} against ${batched.plain.forwards} forwards`);
});

test("draft model, greedy under chunked prefill (the draft's catch-up chunked too) and preemption: the same tokens", () => {
  const prompts = Array.from({ length: 6 }, (_, i) => prompt(10 + i, 6 + 3 * i));
  both(prompts, { maxTokens: 20 }, draftOf(), {}, { maxNumBatchedTokens: 7 });
  const tight = both(prompts, { maxTokens: 20 }, draftOf(), { numBlocks: 14, blockSize: 4 });
  assert.ok(tight.spec.engine.stats().numPreemptions > 0, "expected preemptions");
});

test("draft model, seeded sampling: the same tokens and logprobs as plain sampling (greedy drafts are point masses)", () => {
  const r = both([prompt(21, 5), prompt(22, 9), prompt(23, 2)], { temperature: 1, topK: 50, maxTokens: 30, logprobs: 1 }, draftOf());
  assert.ok(r.sd.numDraftTokens > 0, JSON.stringify(r.sd));
});

test("draft model: a short draft pool drafts less, never wrongly; a failing draft forward drops its states and decoding goes on", () => {
  const prompts = [prompt(31, 9), prompt(32, 11), prompt(33, 5)];
  const short = draftOf({ numBlocks: 9, blockSize: 4 });
  const r = both(prompts, { maxTokens: 24 }, short);
  assert.ok(r.sd.numDraftTokens > 0);
  const failing = draftOf({}, 5, 3, 14);
  const f = both(prompts, { maxTokens: 24 }, failing);
  assert.ok(failing.failures > 0 && /on purpose/.test(failing.lastError!), `${failing.failures} failures`);
  assert.ok(f.sd.numDraftTokens > 0, "drafts before the failure");
});

test("draft model: aborts in the middle of a verification and between steps return the draft's blocks to zero", () => {
  let engineRef: Engine | null = null;
  const victims = ["a1", "a3"];
  class AbortingRunner extends ToyRunner {
    override forward(batch: ForwardBatch): Float32Array {
      const out = super.forward(batch);
      if (batch.logitIndices.length > batch.seqLens.length && victims.length > 0) engineRef!.abort(victims.shift()!);
      return out;
    }
  }
  const proposer = draftOf();
  const engine = new Engine({ runner: new AbortingRunner({ config, numBlocks: 64, blockSize: 4 }), tokenizer, eosTokenIds: [], speculativeConfig: SPEC, proposer });
  engineRef = engine;
  for (let i = 0; i < 5; i++) engine.addRequest({ requestId: `a${i}`, promptTokenIds: prompt(50 + i, 5 + i), params: params({ maxTokens: 30 }) });
  let steps = 0;
  const by = new Map<string, EngineOutput[]>();
  while (engine.hasUnfinishedRequests) {
    for (const out of engine.step()) by.set(out.requestId, [...(by.get(out.requestId) ?? []), out]);
    if (++steps === 4) {
      assert.ok(proposer.pool.numUsedBlocks > 0, "the draft holds blocks mid-run");
      assert.equal(engine.abort("a0"), true);
      assert.equal(proposer.numSequences, 2, "a0's draft state freed at once (a1 and a3 went mid-verification)");
    }
  }
  assert.deepEqual(["a0", "a1", "a3"].map((id) => by.get(id)!.at(-1)!.finishReason), ["abort", "abort", "abort"]);
  for (const id of ["a2", "a4"]) assert.deepEqual(tokensOf(by.get(id)!), toyGenerate(prompt(50 + Number(id[1]), 5 + Number(id[1])), 30, V));
  assert.equal(engine.kvCacheManager.pool.numUsedBlocks, 0);
  assert.equal(proposer.pool.numUsedBlocks, 0);
  assert.equal(proposer.numSequences, 0);
});

test("draft model: the engine asks for a proposer; the vocabularies of draft and target must agree id for id", () => {
  const runner = new ToyRunner({ config, numBlocks: 8, blockSize: 4 });
  assert.throws(() => new Engine({ runner, tokenizer, eosTokenIds: [], speculativeConfig: SPEC }), /proposer is required for the draft model "toy-draft"/);
  checkSameVocabulary({ name: "target", tokenizer }, { name: "draft", tokenizer: Tokenizer.fromDir(dir) });
  assert.throws(
    () => checkSameVocabulary({ name: "models/default", tokenizer }, { name: "llama2", tokenizer: Tokenizer.fromDir(llama2TokenizerDir()) }),
    /speculativeConfig\.model the draft model llama2 must share the target model models\/default's tokenizer: its vocabulary has 32000 tokens, the target's 4096/,
  );
  assert.throws(() => new DraftModelProposer({ runner, vocabLimit: V + 1 }), /vocabLimit must be ≤ 4096, got 4097/);
});

// Speculative decoding on the real decoder and the embedded default model
// (trained weights, so prompt-lookup drafts are accepted in part): greedy
// output is token for token that of plain decoding, for requests alone and
// batched, with chunked prefill (a step budget below the prompts) and with
// preemption (a KV pool too small for all of them), and verification rows
// (1 + k query tokens a sequence) go through the paged attention's decode path.
// The same with a draft model: the default model loaded a second time with its
// own paged KV cache, drafting for itself: nearly every draft is accepted,
// with a repetition penalty too (the drafts follow the request's penalties).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Engine, type EngineOptions } from "../../src/engine/engine.js";
import { type LoadedModel, type Runtime, createRuntime, loadModel, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { DraftModelProposer, createDraftProposer } from "../../src/engine/draft-model-proposer.js";

let rt: Runtime;
let small: LoadedModel;
let tight: LoadedModel;
let draft: LoadedModel;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  small = loadModel(rt, defaultModelDir(), { blockSize: 4, numBlocks: 512, progress: false });
  tight = loadModel(rt, defaultModelDir(), { blockSize: 4, numBlocks: 40, progress: false });
  draft = loadModel(rt, defaultModelDir(), { blockSize: 8, numBlocks: 128, progress: false });
});
after(async () => {
  small.runner.dispose();
  tight.runner.dispose();
  draft.runner.dispose();
  await rt.dispose();
});

const SPEC = { method: "ngram", num_speculative_tokens: 5, prompt_lookup_min: 1, prompt_lookup_max: 4, disable_by_batch_size: 64 };
const QUESTIONS = [
  "What is a river? A river is a river in the southeast of the Brazil. What is a river?",
  "Hello Hello Hello",
  "What does brisk mean?",
  "Hi! What does brisk mean? What does brisk mean?",
  "Hello",
];

function run(m: LoadedModel, spec: boolean, questions: readonly string[], engine: Omit<Partial<EngineOptions>, "runner"> = {}, sampling = {}) {
  const e = new Engine({ runner: m.runner, tokenizer: m.tokenizer, eosTokenIds: m.eosTokenIds, runtime: rt, ...(spec ? { speculativeConfig: SPEC } : {}), ...engine });
  const tok = m.tokenizer;
  questions.forEach((q, i) => {
    const ids = tok.encode(tok.applyChatTemplate([{ role: "user", content: q }], { addGenerationPrompt: true }), { addSpecialTokens: false });
    e.addRequest({ requestId: `q${i}`, promptTokenIds: ids, params: resolveSamplingParams({ temperature: 0, maxTokens: 40, ignoreEos: true, logprobs: 1, ...sampling }, m.config.vocabSize) });
  });
  const out = new Map<string, { ids: number[]; lps: number[] }>();
  while (e.hasUnfinishedRequests) {
    for (const o of e.step()) {
      const r = out.get(o.requestId) ?? { ids: [], lps: [] };
      r.ids.push(...o.tokenIds);
      r.lps.push(...o.logprobs!.map((l) => l.logprob));
      out.set(o.requestId, r);
    }
  }
  assert.equal(e.kvCacheManager.pool.numUsedBlocks, 0);
  e.dispose();
  return { out, stats: e.stats() };
}

function assertSame(a: ReturnType<typeof run>, b: ReturnType<typeof run>) {
  for (const [id, x] of a.out) {
    const y = b.out.get(id)!;
    assert.deepEqual(y.ids, x.ids, `${id}: tokens`);
    // Logprobs: the target's at every position; verification rows are computed in a wider step, so equal to rounding.
    x.lps.forEach((lp, i) => assert.ok(Math.abs(lp - y.lps[i]!) < 1e-3, `${id} token ${i}: logprob ${y.lps[i]} vs ${lp}`));
  }
}

test("default model, greedy: the same tokens with prompt lookup as without, alone and batched; drafts accepted in part", () => {
  const plain = run(small, false, QUESTIONS);
  const spec = run(small, true, QUESTIONS);
  assertSame(plain, spec);
  const sd = spec.stats.specDecode!;
  assert.ok(sd.numAcceptedTokens > 20 && sd.numAcceptedTokens < sd.numDraftTokens, JSON.stringify(sd));
  const alone = run(small, true, [QUESTIONS[0]!]);
  assert.deepEqual(alone.out.get("q0")!.ids, plain.out.get("q0")!.ids);
});

test("default model, greedy: the same tokens under chunked prefill and under preemption", () => {
  const chunked = { maxNumBatchedTokens: 16 };
  assertSame(run(small, false, QUESTIONS, chunked), run(small, true, QUESTIONS, chunked));
  const plain = run(tight, false, QUESTIONS);
  const spec = run(tight, true, QUESTIONS);
  assert.ok(spec.stats.numPreemptions > 0, "the 40-block pool preempts");
  assertSame(plain, spec);
});

test("default model drafting for itself (its own paged KV): the same tokens as plain decoding, alone, batched, chunked and preempted", () => {
  // draftCost 0: draft every step (by default a draft as big as the target costs a whole step per draft, and adaptivity stops it).
  const proposer = createDraftProposer({ name: "target", tokenizer: small.tokenizer, runner: small.runner }, { name: "draft", tokenizer: draft.tokenizer, runner: draft.runner }, { maxBatchTokens: 16, draftCost: 0 });
  const withDraft = { speculativeConfig: { model: defaultModelDir(), num_speculative_tokens: 4, disable_by_batch_size: 64 }, proposer };
  const plain = run(small, false, QUESTIONS);
  const spec = run(small, false, QUESTIONS, withDraft);
  assertSame(plain, spec);
  const sd = spec.stats.specDecode!;
  assert.ok(sd.numAcceptedTokens > 0.9 * sd.numDraftTokens && sd.numDraftTokens > 100, `greedy at penalty 1: ${JSON.stringify(sd)}`);
  assert.deepEqual(run(small, false, [QUESTIONS[2]!], withDraft).out.get("q0")!.ids, plain.out.get("q2")!.ids, "alone");
  const penalized = run(small, false, QUESTIONS, withDraft, { repetitionPenalty: 1.2 });
  assertSame(run(small, false, QUESTIONS, {}, { repetitionPenalty: 1.2 }), penalized);
  const pd = penalized.stats.specDecode!;
  assert.ok(pd.numAcceptedTokens > 0.9 * pd.numDraftTokens, `drafts under the request's repetition penalty: ${JSON.stringify(pd)}`);
  const biased = { repetitionPenalty: 1.1, frequencyPenalty: 0.5, presencePenalty: 0.3, logitBias: { "13": 3 } };
  const withPenalties = run(small, false, QUESTIONS, withDraft, biased);
  assertSame(run(small, false, QUESTIONS, {}, biased), withPenalties);
  const bd = withPenalties.stats.specDecode!;
  assert.ok(bd.numAcceptedTokens > 0.9 * bd.numDraftTokens, `drafts under penalties and a logit bias: ${JSON.stringify(bd)}`);
  assertSame(run(small, false, QUESTIONS, { maxNumBatchedTokens: 16 }), run(small, false, QUESTIONS, { ...withDraft, maxNumBatchedTokens: 16 }));
  const tightSpec = run(tight, false, QUESTIONS, withDraft);
  assert.ok(tightSpec.stats.numPreemptions > 0, "the 40-block pool preempts");
  assertSame(run(tight, false, QUESTIONS), tightSpec);
  assert.equal(proposer.pool.numUsedBlocks, 0, "the draft's blocks are all back");
  assert.ok(proposer instanceof DraftModelProposer && proposer.failures === 0);
});

test("default model drafting for itself with SAMPLED drafts at temperature 1: nearly every draft kept, seeded runs reproducible, greedy unchanged", () => {
  const make = (sampled: boolean) => createDraftProposer({ name: "target", tokenizer: small.tokenizer, runner: small.runner }, { name: "draft", tokenizer: draft.tokenizer, runner: draft.runner }, { maxBatchTokens: 16, draftCost: 0, sampled });
  const spec = (sampled: boolean) => ({ speculativeConfig: { model: defaultModelDir(), num_speculative_tokens: 4, disable_by_batch_size: 64 }, proposer: make(sampled) });
  const sampling = { temperature: 1, topP: 0.95, topK: 50, repetitionPenalty: 1.1, logitBias: { "13": 1 }, seed: 11 };
  const a = run(small, false, QUESTIONS, spec(true), sampling);
  const sd = a.stats.specDecode!;
  // q and p come from the same weights; the verification rows are computed in a wider step, so they agree to rounding.
  assert.ok(sd.numDraftTokens > 100 && sd.numAcceptedTokens > 0.95 * sd.numDraftTokens, `sampled drafts: ${JSON.stringify(sd)}`);
  const g = run(small, false, QUESTIONS, spec(false), sampling).stats.specDecode!;
  assert.ok(g.numAcceptedTokens / g.numDraftTokens < sd.numAcceptedTokens / sd.numDraftTokens, `greedy drafts accepted less at temperature 1: ${JSON.stringify(g)}`);
  const b = run(small, false, QUESTIONS, spec(true), sampling);
  for (const [id, x] of a.out) assert.deepEqual(b.out.get(id)!.ids, x.ids, `${id}: a seeded request draws the same tokens again`);
  assertSame(run(small, false, QUESTIONS), run(small, false, QUESTIONS, spec(true)));
});

test("a draft as big as its target costs a step per draft: by default adaptivity keeps it to rare probes, and output is unchanged", () => {
  const proposer = createDraftProposer({ name: "target", tokenizer: small.tokenizer, runner: small.runner }, { name: "draft", tokenizer: draft.tokenizer, runner: draft.runner });
  assert.equal(proposer.draftCost, 1, "the same model: params ratio 1");
  const spec = run(small, false, QUESTIONS, { speculativeConfig: { model: "itself", num_speculative_tokens: 4 }, proposer });
  assertSame(run(small, false, QUESTIONS), spec);
  const sd = spec.stats.specDecode!;
  assert.ok(sd.numDraftTokens > 0 && sd.numDraftTokens <= 3 * QUESTIONS.length, `probes only: ${JSON.stringify(sd)} for ${spec.stats.generationTokens} tokens`);
});

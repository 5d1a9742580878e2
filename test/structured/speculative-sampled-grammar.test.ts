// Constrained requests under speculative decoding with SAMPLED drafts
// (draft_sampling "sampled": drafts x ~ q from the draft model, verified by
// Leviathan / Chen's rule against the target's p, rejection-sampler.ts).
// With a grammar, p is the target's grammar-masked distribution: a draft the
// grammar forbids has p(x) = 0 and is always rejected, and the residual
// norm(max(0, p − q)) only has mass where p does, so no forbidden token is
// ever output and the output law is p's, whatever q is.
//
// - The embedded default model (trained weights) drafting for itself: regex
//   and JSON-schema requests over many seeds all end with "stop" and match
//   their grammar; their logprobs are the target's own for the returned
//   tokens (a teacher-forced forward over prompt + output, |Δ| ≤ 1e-3: the
//   verification rows run the decode path with qLen 1 + k, the oracle the
//   prefill path). The draft drafts under the grammar masks the target's
//   rows are verified under, so q = p up to rounding and over 90% of the
//   drafts are kept (drafting from the unmasked q kept 5 of 35, and the
//   adaptive draft length turned drafting off).
// - A Markov target (closed-form p) with a regex allowing 2, 3, 3 and 4 of its
//   4 tokens at positions 1–4, drafted by another Markov model q (≠ p, with
//   mass on forbidden tokens): 3000 seeded 4-token continuations pass a
//   chi-square test against the grammar-masked p at α = 0.001, and every
//   returned logprob (and top-2) equals plain decoding's for the same token
//   after the same prefix (|Δ| ≤ 1e-6).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Engine, type EngineOptions, type EngineOutput, type EngineRequest } from "../../src/engine/engine.js";
import { type LoadedModel, type Runtime, createRuntime, loadModel, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import type { SyncModelRunner } from "../../src/model/model-runner.js";
import { DraftModelProposer, createDraftProposer } from "../../src/engine/draft-model-proposer.js";
import { GrammarBackend } from "../../src/structured/grammar-backend.js";
import type { GrammarSpec } from "../../src/structured/grammar-spec.js";
import { MarkovRunner, assertChiSquare } from "../engine/markov-runner.js";

let rt: Runtime;
let target: LoadedModel;
let draft: LoadedModel;
let oracle: LoadedModel;
let backend: GrammarBackend;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  const dir = defaultModelDir();
  target = loadModel(rt, dir, { blockSize: 4, numBlocks: 1024, progress: false });
  draft = loadModel(rt, dir, { blockSize: 8, numBlocks: 512, progress: false });
  oracle = loadModel(rt, dir, { blockSize: 16, numBlocks: 64, progress: false });
  backend = await GrammarBackend.create({ tokenizer: target.tokenizer, vocabSize: target.config.vocabSize, stopTokenIds: target.eosTokenIds });
});
after(async () => {
  backend.dispose();
  for (const m of [target, draft, oracle]) m.runner.dispose();
  await rt.dispose();
});

const REGEX: GrammarSpec = { type: "regex", pattern: "[a-z]{2,8}( [a-z]{2,8}){0,3}-[0-9]{2}" };
const SCHEMA_OBJECT = { type: "object", properties: { kind: { enum: ["river", "lake", "sea"] }, depth: { type: "integer", minimum: 0, maximum: 999 } }, required: ["kind", "depth"], additionalProperties: false };
const SCHEMA: GrammarSpec = { type: "json", schema: JSON.stringify(SCHEMA_OBJECT) };
const QUESTIONS = ["What is a river?", "Hello", "What does brisk mean?", "Name a lake."];

function drain<R extends SyncModelRunner>(engine: Engine<R>, requests: readonly EngineRequest[]): Map<string, EngineOutput[]> {
  for (const r of requests) assert.equal(engine.addRequest(r), "accepted");
  const by = new Map<string, EngineOutput[]>();
  for (let i = 0; engine.hasUnfinishedRequests; i++) {
    assert.ok(i < 20_000, "the engine did not finish");
    for (const o of engine.step()) by.set(o.requestId, [...(by.get(o.requestId) ?? []), o]);
  }
  assert.equal(engine.kvCacheManager.pool.numUsedBlocks, 0);
  return by;
}
const tokensOf = (outs: readonly EngineOutput[]) => outs.flatMap((o) => o.tokenIds);
const textOf = (outs: readonly EngineOutput[]) => outs.map((o) => o.text).join("");

/** log-softmax of the target's logits at each output token: one prefill forward over prompt + output[0..n−1) (teacher forcing). */
function teacherForced(runner: SyncModelRunner, prompt: readonly number[], output: readonly number[]): number[] {
  const seq = [...prompt, ...output.slice(0, -1)];
  const T = seq.length;
  const bs = runner.kvCache.blockSize;
  const nb = Math.ceil(T / bs);
  const batch: ForwardBatch = {
    tokens: Int32Array.from(seq),
    positions: Int32Array.from(seq, (_, i) => i),
    cuSeqlensQ: Int32Array.of(0, T),
    seqLens: Int32Array.of(T),
    blockTable: Int32Array.from({ length: nb }, (_, i) => i),
    maxBlocksPerSeq: nb,
    slotMapping: Int32Array.from(seq, (_, i) => i),
    logitIndices: Int32Array.from(output, (_, j) => prompt.length - 1 + j),
  };
  const logits = runner.forward(batch);
  const V = runner.vocabSize;
  return output.map((tok, j) => {
    const row = logits.subarray(j * V, (j + 1) * V);
    let max = -Infinity;
    for (const x of row) max = Math.max(max, x);
    let sum = 0;
    for (const x of row) sum += Math.exp(x - max);
    return row[tok]! - max - Math.log(sum);
  });
}

test("sampled drafts under a regex or JSON schema: every output of many seeds matches its grammar, and its logprobs are the target's", async (t) => {
  await backend.prepare(REGEX);
  await backend.prepare(SCHEMA);
  const tok = target.tokenizer;
  const V = target.config.vocabSize;
  const requests: EngineRequest[] = Array.from({ length: 24 }, (_, i) => ({
    requestId: `r${i}`,
    promptTokenIds: tok.encode(tok.applyChatTemplate([{ role: "user", content: QUESTIONS[i % QUESTIONS.length]! }], { addGenerationPrompt: true }), { addSpecialTokens: false }),
    params: resolveSamplingParams({ temperature: i % 3 === 2 ? 0.7 : 1, ...(i % 4 === 3 ? { topP: 0.9 } : {}), seed: 1000 + i, maxTokens: 64, logprobs: 0 }, V),
    grammar: i % 2 === 0 ? REGEX : SCHEMA,
  }));
  const proposer = createDraftProposer({ name: "target", tokenizer: tok, runner: target.runner }, { name: "draft", tokenizer: draft.tokenizer, runner: draft.runner }, { sampled: true, draftCost: 0 }); // cost 0: a draft as big as its target still drafts
  const engine = new Engine({ runner: target.runner, tokenizer: tok, eosTokenIds: target.eosTokenIds, runtime: rt, grammar: backend, speculativeConfig: { model: "default", num_speculative_tokens: 4, disable_by_batch_size: 64, draft_sampling: "sampled" }, proposer });
  const by = drain(engine, requests);
  for (const r of requests) {
    const outs = by.get(r.requestId)!;
    const text = textOf(outs);
    assert.equal(outs.at(-1)!.finishReason, "stop", `${r.requestId} completes its grammar: ${JSON.stringify(text)}`);
    if (r.grammar === REGEX) assert.match(text, /^[a-z]{2,8}( [a-z]{2,8}){0,3}-[0-9]{2}$/, r.requestId);
    else {
      const v = JSON.parse(text) as { kind: string; depth: number };
      assert.deepEqual(Object.keys(v).sort(), ["depth", "kind"], text);
      assert.ok(["river", "lake", "sea"].includes(v.kind) && Number.isInteger(v.depth) && v.depth >= 0 && v.depth <= 999, text);
    }
    // Logprobs: the target's raw log-softmax at each returned token, as plain decoding reports it.
    const ids = tokensOf(outs);
    const lps = outs.flatMap((o) => o.logprobs!.map((l) => l.logprob));
    assert.deepEqual(outs.flatMap((o) => o.logprobs!.map((l) => l.token)), ids);
    const want = teacherForced(oracle.runner, r.promptTokenIds, ids);
    want.forEach((w, j) => assert.ok(Math.abs(lps[j]! - w) <= 1e-3, `${r.requestId} token ${j}: logprob ${lps[j]} vs the target's ${w}`));
  }
  // The draft is the target itself and drafts under the same masks (q = p up to rounding): nearly every draft is kept.
  const sd = engine.stats().specDecode!;
  t.diagnostic(`accepted ${sd.numAcceptedTokens} of ${sd.numDraftTokens} drafts, per position ${sd.acceptedPerPos.join(", ")}`);
  assert.ok(sd.numDraftTokens > 200 && sd.numAcceptedTokens > 0.9 * sd.numDraftTokens, `drafts masked by the grammar, as the target's rows are: ${JSON.stringify(sd)}`);
  assert.equal(proposer.pool.numUsedBlocks, 0);
});

// The Markov pair: four single-letter tokens; the regex allows 2, 3, 3, then 4 of them.
const LETTERS = ["a", "b", "c", "d"];
const ALLOWED = [["a", "b"], ["b", "c", "d"], ["a", "c", "d"], ["a", "b", "c", "d"]];
const MARKOV_REGEX: GrammarSpec = { type: "regex", pattern: `${ALLOWED.map((s) => `[${s.join("")}]`).join("")}[abcd]*` };
/** P(next | prev) over LETTERS, one row per prev. */
const P = [
  [0.55, 0.25, 0.15, 0.05],
  [0.1, 0.2, 0.6, 0.1],
  [0.3, 0.3, 0.2, 0.2],
  [0.7, 0.05, 0.05, 0.2],
];
/** The draft's table: unlike P, and with much of its mass on letters the grammar forbids at some positions. */
const Q = [
  [0.2, 0.5, 0.2, 0.1],
  [0.6, 0.2, 0.1, 0.1],
  [0.1, 0.1, 0.2, 0.6],
  [0.1, 0.6, 0.2, 0.1],
];

test("sampled drafts (q ≠ p) under a grammar: 4-token continuations follow the grammar-masked target (chi-square, α = 0.001); logprobs equal plain decoding's", async (t) => {
  await backend.prepare(MARKOV_REGEX);
  const tok = target.tokenizer;
  const config = target.config;
  const V = config.vocabSize;
  const ids = LETTERS.map((l) => {
    const id = Array.from({ length: tok.vocabSize }, (_, i) => i).find((i) => !tok.isSpecial(i) && tok.decode([i]) === l && tok.encode(l, { addSpecialTokens: false }).length === 1);
    assert.ok(id !== undefined, `the tokenizer has a token for ${l}`);
    return id;
  });
  const letter = (id: number) => ids.indexOf(id);
  const LEN = 4;
  const N = 3000;
  const prompt = [ids[0]!, ids[2]!, ids[3]!, ids[1]!, ids[3]!];
  const requests = (n: number): EngineRequest[] =>
    Array.from({ length: n }, (_, i) => ({ requestId: `m${i}`, promptTokenIds: prompt, params: resolveSamplingParams({ temperature: 1, seed: 5000 + i, maxTokens: LEN, logprobs: 2 }, V), grammar: MARKOV_REGEX }));
  const run = (spec: Pick<EngineOptions, "speculativeConfig" | "proposer">, n: number) => {
    const engine = new Engine({ runner: new MarkovRunner(config, ids, P), tokenizer: tok, eosTokenIds: target.eosTokenIds, grammar: backend, maxNumSeqs: 256, ...spec });
    return { engine, by: drain(engine, requests(n)) };
  };
  const proposer = new DraftModelProposer({ runner: new MarkovRunner(config, ids, Q), vocabLimit: V, sampled: true });
  const { engine, by } = run({ speculativeConfig: { model: "markov-q", num_speculative_tokens: 3, disable_by_batch_size: 10_000, draft_sampling: "sampled" }, proposer }, N);
  const sd = engine.stats().specDecode!;
  assert.ok(sd.numDrafts > N && sd.numAcceptedTokens > 0.1 * sd.numDraftTokens && sd.numAcceptedTokens < 0.9 * sd.numDraftTokens, `drafts verified, some accepted, some rejected: ${JSON.stringify(sd)}`);
  assert.equal(proposer.pool.numUsedBlocks, 0);

  // Exact probabilities of the 4^LEN continuations under the grammar-masked P.
  const K = LETTERS.length;
  const masked = (prev: number, pos: number, next: number) => {
    const ok = (j: number) => ALLOWED[pos]!.includes(LETTERS[j]!);
    const z = P[prev]!.reduce((s, p, j) => s + (ok(j) ? p : 0), 0);
    return ok(next) ? P[prev]![next]! / z : 0;
  };
  const observed = new Float64Array(K ** LEN);
  const expected = Array.from({ length: K ** LEN }, (_, c) => {
    let prev = letter(prompt.at(-1)!);
    let p = 1;
    for (let i = 0; i < LEN; i++) {
      const next = Math.floor(c / K ** (LEN - 1 - i)) % K;
      p *= masked(prev, i, next);
      prev = next;
    }
    return p * N;
  });
  for (const outs of by.values()) {
    const s = tokensOf(outs);
    assert.equal(s.length, LEN);
    observed[s.reduce((c, t) => c * K + letter(t), 0)]!++;
  }
  for (let c = 0; c < K ** LEN; c++) assert.ok(observed[c] === 0 || expected[c]! > 0, `outcome ${c} is forbidden by the grammar but was drawn ${observed[c]} times`);
  const { chi2, df } = assertChiSquare(observed, expected, "sampled drafts under a grammar");
  t.diagnostic(`chi-square ${chi2.toFixed(1)} over ${df} degrees of freedom; accepted ${sd.numAcceptedTokens} of ${sd.numDraftTokens} drafts`);

  // Logprobs: plain decoding's for the same token after the same letter at the same position (raw log P, with its top 2).
  const plain = run({}, 400).by;
  const seen = new Map<string, string>();
  const key = (outs: readonly EngineOutput[]) => {
    const lps = outs.flatMap((o) => o.logprobs!);
    let prev = letter(prompt.at(-1)!);
    return lps.map((l, pos) => {
      const k = `${prev}:${pos}:${letter(l.token)}`;
      prev = letter(l.token);
      return [k, JSON.stringify([l.logprob, l.top])] as const;
    });
  };
  for (const outs of plain.values()) for (const [k, v] of key(outs)) seen.set(k, v);
  let compared = 0;
  for (const outs of by.values()) {
    for (const [k, v] of key(outs)) {
      const want = seen.get(k);
      if (want === undefined) continue;
      const [a, b] = [JSON.parse(v) as [number, { token: number; logprob: number }[]], JSON.parse(want) as [number, { token: number; logprob: number }[]]];
      assert.ok(Math.abs(a[0] - b[0]) <= 1e-6, `${k}: logprob ${a[0]} vs plain ${b[0]}`);
      assert.deepEqual(a[1].map((t) => t.token), b[1].map((t) => t.token), k);
      a[1].forEach((t, i) => assert.ok(Math.abs(t.logprob - b[1][i]!.logprob) <= 1e-6, k));
      compared++;
    }
  }
  assert.ok(compared > N, `compared ${compared} logprobs`);
});

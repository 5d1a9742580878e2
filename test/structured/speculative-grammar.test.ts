// Speculative decoding of constrained requests: each verification row is
// masked by the grammar matcher as it stands after the tokens accepted before
// it, so drafts the grammar forbids are never accepted and the matcher never
// needs a rollback. With drafts that are the plain run's own future tokens
// (wrong at chosen positions, so runs end inside the grammar and at its end),
// seeded constrained requests give exactly the plain run's tokens and text,
// and finish with "stop" where the grammar completes.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Engine, type EngineOutput, type EngineRequest } from "../../src/engine/engine.js";
import type { DraftProposer } from "../../src/engine/ngram-proposer.js";
import { Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { GrammarBackend } from "../../src/structured/grammar-backend.js";
import type { GrammarSpec } from "../../src/structured/grammar-spec.js";
import { ToyRunner } from "../engine/toy-runner.js";

const dir = defaultModelDir();
const config = parseModelConfig(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")));
const tokenizer = Tokenizer.fromDir(dir);
const V = config.vocabSize;
let backend: GrammarBackend;

before(async () => {
  backend = await GrammarBackend.create({ tokenizer, vocabSize: V, stopTokenIds: [2] });
});
after(() => backend.dispose());

const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => 3 + ((seed * 7919 + i * 104729) % (V - 3)));
const REGEX: GrammarSpec = { type: "regex", pattern: "[a-z]{3,6}-[0-9]{2}" };
const SCHEMA: GrammarSpec = { type: "json", schema: JSON.stringify({ type: "object", properties: { a: { enum: ["x", "y"] }, b: { type: "integer", minimum: 0, maximum: 99 } }, required: ["a", "b"], additionalProperties: false }) };

/** Drafts: the plain run's next tokens for this prompt, then three past its end; the one at output index i wrong where i % 4 === 2. */
class ReplayProposer implements DraftProposer {
  constructor(readonly runs: { prompt: number[]; output: number[] }[]) {}
  propose(tokens: readonly number[], k: number): number[] {
    const run = this.runs.find((r) => r.prompt.every((t, i) => tokens[i] === t) && tokens.length >= r.prompt.length);
    if (run === undefined) return [];
    const from = tokens.length - run.prompt.length;
    return [...run.output, 5, 6, 7].slice(from, from + k).map((t, j) => ((from + j) % 4 === 2 ? (t + 1) % V : t));
  }
}

function run(engine: Engine<ToyRunner>, requests: EngineRequest[]): Map<string, EngineOutput[]> {
  for (const r of requests) assert.equal(engine.addRequest(r), "accepted");
  const by = new Map<string, EngineOutput[]>();
  for (let i = 0; engine.hasUnfinishedRequests; i++) {
    assert.ok(i < 5000, "the engine did not finish");
    for (const out of engine.step()) by.set(out.requestId, [...(by.get(out.requestId) ?? []), out]);
  }
  assert.equal(engine.kvCacheManager.pool.numUsedBlocks, 0);
  return by;
}

const tokens = (outs: EngineOutput[]) => outs.flatMap((o) => o.tokenIds);
const text = (outs: EngineOutput[]) => outs.map((o) => o.text).join("");

test("constrained requests under speculation: drafts checked against the grammar matcher, the same tokens as plain decoding", async () => {
  await backend.prepare(REGEX);
  await backend.prepare(SCHEMA);
  const requests: EngineRequest[] = [1, 2, 3, 4, 5, 6].map((seed) => ({
    requestId: `g${seed}`,
    promptTokenIds: prompt(seed, 5 + seed),
    params: resolveSamplingParams({ temperature: seed % 3 === 0 ? 0 : 1, seed, maxTokens: 40, logprobs: 0 }, V),
    grammar: seed % 2 === 0 ? SCHEMA : REGEX,
  }));
  const engine = (spec: DraftProposer | null) =>
    new Engine({ runner: new ToyRunner({ config, numBlocks: 64, blockSize: 4 }), tokenizer, eosTokenIds: [2], grammar: backend, ...(spec === null ? {} : { speculativeConfig: { num_speculative_tokens: 5, disable_by_batch_size: 64 }, proposer: spec }) });
  const plain = run(engine(null), requests);
  const proposer = new ReplayProposer(requests.map((r) => ({ prompt: [...r.promptTokenIds], output: tokens(plain.get(r.requestId)!) })));
  const specEngine = engine(proposer);
  const spec = run(specEngine, requests);
  for (const r of requests) {
    const [a, b] = [plain.get(r.requestId)!, spec.get(r.requestId)!];
    assert.deepEqual(tokens(b), tokens(a), `${r.requestId}: tokens`);
    assert.equal(text(b), text(a));
    assert.equal(b.at(-1)!.finishReason, "stop", `${r.requestId} completes its grammar`);
    assert.deepEqual(b.flatMap((o) => o.logprobs!.map((l) => l.logprob)), a.flatMap((o) => o.logprobs!.map((l) => l.logprob)));
    if (r.grammar === REGEX) assert.match(text(b), /^[a-z]{3,6}-[0-9]{2}$/);
  }
  const sd = specEngine.stats().specDecode!;
  assert.ok(sd.numAcceptedTokens > 0 && sd.numAcceptedTokens < sd.numDraftTokens, JSON.stringify(sd));
});

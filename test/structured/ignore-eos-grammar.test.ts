// ignore_eos with a grammar: the request goes on inside its grammar until
// max_tokens wherever the grammar allows more than EOS (EOS is masked there,
// as llama.cpp's --ignore-eos masks it), and stops ("stop") only where EOS is
// all the grammar allows. vLLM instead lets the grammar's EOS through without
// stopping and then samples unconstrained past the grammar's end (its
// StructuredOutputManager fills a full bitmask for a terminated matcher), so
// its output stops matching the grammar; kvflash keeps it valid.
// A Markov model over the tokens a, b and EOS (EOS likely after every
// letter) makes the difference certain: without the mask nearly every
// request would end after a few tokens.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Engine, type EngineOptions, type EngineOutput } from "../../src/engine/engine.js";
import { Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { DraftModelProposer } from "../../src/engine/draft-model-proposer.js";
import { GrammarBackend } from "../../src/structured/grammar-backend.js";
import type { GrammarSpec } from "../../src/structured/grammar-spec.js";
import { MarkovRunner } from "../engine/markov-runner.js";

const dir = defaultModelDir();
const config = parseModelConfig(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")));
const tokenizer = Tokenizer.fromDir(dir);
const V = config.vocabSize;
const EOS = 2;
let backend: GrammarBackend;

before(async () => {
  backend = await GrammarBackend.create({ tokenizer, vocabSize: V, stopTokenIds: [EOS] });
});
after(() => backend.dispose());

/** The single-letter token of `l`. */
function letterId(l: string): number {
  const id = Array.from({ length: tokenizer.vocabSize }, (_, i) => i).find((i) => !tokenizer.isSpecial(i) && tokenizer.decode([i]) === l);
  assert.ok(id !== undefined, `the tokenizer has a token for ${l}`);
  return id;
}

/** P(next | prev) over [a, b, EOS]: EOS has 0.3–0.4 of the mass after either letter. */
const P = [
  [0.2, 0.4, 0.4],
  [0.4, 0.3, 0.3],
  [0.5, 0.5, 0.0001],
];

function run(grammar: GrammarSpec, ignoreEos: boolean, spec: Pick<EngineOptions, "speculativeConfig" | "proposer">): EngineOutput[][] {
  const states = [letterId("a"), letterId("b"), EOS];
  const engine = new Engine({ runner: new MarkovRunner(config, states, P), tokenizer, eosTokenIds: [EOS], grammar: backend, ...spec });
  for (let i = 0; i < 40; i++) engine.addRequest({ requestId: `r${i}`, promptTokenIds: [states[0]!, states[1]!], params: resolveSamplingParams({ temperature: 1, seed: 300 + i, maxTokens: 12, ignoreEos }, V), grammar });
  const by = new Map<string, EngineOutput[]>();
  while (engine.hasUnfinishedRequests) for (const o of engine.step()) by.set(o.requestId, [...(by.get(o.requestId) ?? []), o]);
  assert.equal(engine.kvCacheManager.pool.numUsedBlocks, 0);
  return [...by.values()];
}

const SPECS: [string, () => Pick<EngineOptions, "speculativeConfig" | "proposer">][] = [
  ["plain decoding", () => ({})],
  ["sampled drafts", () => ({ speculativeConfig: { model: "markov", num_speculative_tokens: 3, disable_by_batch_size: 1000, draft_sampling: "sampled" }, proposer: new DraftModelProposer({ runner: new MarkovRunner(config, [letterId("a"), letterId("b"), EOS], P), vocabLimit: V, sampled: true }) })],
];

for (const [name, spec] of SPECS) {
  test(`ignore_eos with a grammar that may end, (ab|ba)+ (${name}): max_tokens tokens inside the grammar, finish "length"`, async () => {
    const grammar: GrammarSpec = { type: "regex", pattern: "(ab|ba)+" };
    await backend.prepare(grammar);
    for (const outs of run(grammar, true, spec())) {
      const text = outs.map((o) => o.text).join("");
      assert.equal(outs.at(-1)!.finishReason, "length", text);
      assert.equal(outs.flatMap((o) => o.tokenIds).length, 12);
      assert.match(text, /^(ab|ba){6}$/);
    }
    // Without ignore_eos the same requests end where the grammar may, on EOS.
    const stopped = run(grammar, false, spec());
    for (const outs of stopped) assert.match(outs.map((o) => o.text).join(""), /^(ab|ba)+$/);
    const early = stopped.filter((outs) => outs.at(-1)!.finishReason === "stop" && outs.at(-1)!.numOutputTokens < 12).length;
    assert.ok(early > 30, `most end early on EOS without ignore_eos: ${early} of 40`);
  });

  test(`ignore_eos with a grammar that must end, "ab" (${name}): it stops there with "stop"`, async () => {
    const grammar: GrammarSpec = { type: "regex", pattern: "ab" };
    await backend.prepare(grammar);
    for (const outs of run(grammar, true, spec())) {
      assert.equal(outs.at(-1)!.finishReason, "stop");
      assert.equal(outs.map((o) => o.text).join(""), "ab");
      assert.deepEqual(outs.flatMap((o) => o.tokenIds), [letterId("a"), letterId("b"), EOS]);
    }
  });
}

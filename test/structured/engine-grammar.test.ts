// Constrained decoding inside the engine (no server): XGrammar matchers beside
// the sampler, over the toy runner's deterministic logits and the default
// model's real 32k tokenizer. Seeded constrained requests hold their grammar
// and equal their run-alone outputs through batching and preemption; free
// requests in the same batch are untouched; parallel samples (prefillAfter)
// wait for the first one's prefill and reuse its blocks; the bitmask layout.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Engine, type EngineOutput, type EngineRequest } from "../../src/engine/engine.js";
import { Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import { applyTokenMask } from "../../src/engine/sampler.js";
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

function request(id: string, seed: number, grammar?: GrammarSpec, extra: Partial<EngineRequest> = {}): EngineRequest {
  return { requestId: id, promptTokenIds: prompt(seed, 5 + seed), params: resolveSamplingParams({ temperature: 1, seed, maxTokens: 40 }, V), ...(grammar ? { grammar } : {}), ...extra };
}

function run(engine: Engine<ToyRunner>, requests: EngineRequest[]): Map<string, EngineOutput[]> {
  for (const r of requests) assert.equal(engine.addRequest(r), "accepted");
  const by = new Map<string, EngineOutput[]>();
  for (let i = 0; engine.hasUnfinishedRequests; i++) {
    assert.ok(i < 5000, "the engine did not finish");
    for (const out of engine.step()) by.set(out.requestId, [...(by.get(out.requestId) ?? []), out]);
  }
  return by;
}

const engineWith = (numBlocks: number) => new Engine({ runner: new ToyRunner({ config, numBlocks, blockSize: 4 }), tokenizer, eosTokenIds: [2], grammar: backend });
const text = (outs: EngineOutput[]) => outs.map((o) => o.text).join("");
const tokens = (outs: EngineOutput[]) => outs.flatMap((o) => o.tokenIds);

test("constrained and free requests batched through preemptions equal each run alone; constrained ones hold their grammar and stop", async () => {
  await backend.prepare(REGEX);
  await backend.prepare(SCHEMA);
  const requests = [request("re1", 1, REGEX), request("free2", 2), request("js3", 3, SCHEMA), request("re4", 4, REGEX), request("js5", 5, SCHEMA), request("free6", 6)];
  const alone = new Map(requests.map((r) => [r.requestId, run(engineWith(64), [r]).get(r.requestId)!]));
  const small = engineWith(14);
  const together = run(small, requests);
  assert.ok(small.stats().numPreemptions > 0, "expected preemptions");
  for (const r of requests) {
    const outs = together.get(r.requestId)!;
    assert.deepEqual(tokens(outs), tokens(alone.get(r.requestId)!), `${r.requestId}: same tokens as alone`);
    if (r.grammar === undefined) continue;
    assert.equal(outs.at(-1)!.finishReason, "stop", `${r.requestId} completes its grammar`);
    if (r.grammar === REGEX) assert.match(text(outs), /^[a-z]{3,6}-[0-9]{2}$/);
    else assert.ok(["x", "y"].includes((JSON.parse(text(outs)) as { a: string }).a));
  }
  assert.equal(small.stats().numFreeBlocks, 14);
});

test("a grammar the backend has not compiled, or an engine without a backend, refuse the request by name", async () => {
  await assert.rejects(backend.prepare({ type: "json", schema: "{not json" }), /grammar is not JSON/);
  await assert.rejects(backend.prepare({ type: "regex", pattern: "(a" }), /Regex parsing error/);
  const engine = engineWith(16);
  assert.throws(() => engine.addRequest(request("x", 1, { type: "regex", pattern: "[0-9]+" })), /grammar was not prepared/);
  const plain = new Engine({ runner: new ToyRunner({ config, numBlocks: 16, blockSize: 4 }), tokenizer, eosTokenIds: [2] });
  assert.throws(() => plain.addRequest(request("y", 1, REGEX)), /grammar needs an engine with a grammar backend/);
});

test("parallel samples: prefillAfter waits for the sibling's prefill, then hits its blocks; outputs equal the samples alone", () => {
  const engine = engineWith(64);
  const p = prompt(9, 23);
  const mk = (i: number, after?: string): EngineRequest => ({
    requestId: `s${i}`,
    promptTokenIds: p,
    params: resolveSamplingParams({ temperature: 1, seed: 100 + i, maxTokens: 6, ignoreEos: true }, V),
    ...(after ? { prefillAfter: after } : {}),
  });
  const by = run(engine, [mk(0), mk(1, "s0"), mk(2, "s0")]);
  assert.equal(engine.stats().prefixCacheHits, 2 * 20, "each follower reuses the 5 full 4-token blocks");
  for (let i = 0; i < 3; i++) assert.deepEqual(tokens(by.get(`s${i}`)!), tokens(run(engineWith(64), [mk(i)]).get(`s${i}`)!));
});

test("applyTokenMask: bit t % 32 of word t >> 5 allows token t; the rest, and tokens past the mask, become −∞", () => {
  for (const n of [1, 31, 32, 33, 97, 1000]) {
    const logits = Float32Array.from({ length: n }, (_, i) => i + 0.5);
    const allowed = new Set(Array.from({ length: n }, (_, i) => i).filter((i) => (i * 7) % 5 === 0 || i === n - 1));
    const mask = new Int32Array(Math.ceil(n / 32) - (n > 64 ? 1 : 0)); // n > 64: one word short, the tail masked
    for (const t of allowed) if (t >> 5 < mask.length) mask[t >> 5]! |= 1 << (t & 31);
    applyTokenMask(logits, mask);
    for (let t = 0; t < n; t++) assert.equal(logits[t], allowed.has(t) && t >> 5 < mask.length ? t + 0.5 : -Infinity, `n=${n} token ${t}`);
  }
});

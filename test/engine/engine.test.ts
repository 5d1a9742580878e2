// The engine step: batched greedy outputs equal each request run alone (through
// batching, chunked prefill, preemption and prefix hits), text deltas add up to
// the decoded tokens, stop strings / stop ids / EOS / max tokens, seeded
// sampling independent of the batch, logprobs, abort, the bounded queue,
// failures contained (NaN logits fail one request; a failed forward fails the
// running ones, resets the prefix cache and the rest go on), and metrics.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Engine, type EngineOutput, type EngineOptions } from "../../src/engine/engine.js";
import { type Runtime, type SamplingParams, Tokenizer, createRuntime, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { ToyRunner, type ToyRunnerOptions, toyGreedy } from "./toy-runner.js";

const dir = defaultModelDir();
const config = parseModelConfig(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")));
const tokenizer = Tokenizer.fromDir(dir);
const V = config.vocabSize;

function setup(runner: Partial<ToyRunnerOptions> = {}, engine: Partial<Omit<EngineOptions, "runner">> = {}) {
  const r = new ToyRunner({ config, numBlocks: 64, blockSize: 4, ...runner });
  let clock = 0;
  const e = new Engine({ runner: r, tokenizer, eosTokenIds: [], now: () => (clock += 10), ...engine });
  return { runner: r, engine: e };
}

const params = (p: SamplingParams = {}) => resolveSamplingParams({ temperature: 0, maxTokens: 8, ...p }, V);

/** Steps until every request finished; returns each request's outputs in order. */
function runAll(engine: Engine<ToyRunner>, maxSteps = 10_000): Map<string, EngineOutput[]> {
  const by = new Map<string, EngineOutput[]>();
  for (let i = 0; engine.hasUnfinishedRequests; i++) {
    assert.ok(i < maxSteps, "the engine did not finish");
    for (const out of engine.step()) {
      const list = by.get(out.requestId) ?? [];
      assert.ok(list.every((o) => o.finishReason === null), `output after the last one for ${out.requestId}`);
      list.push(out);
      by.set(out.requestId, list);
    }
  }
  return by;
}

const tokensOf = (outs: readonly EngineOutput[]) => outs.flatMap((o) => o.tokenIds);
const textOf = (outs: readonly EngineOutput[]) => outs.map((o) => o.text).join("");
/** The text `out` adds after `p` (SentencePiece gives a word its space only after another). */
const continuation = (p: readonly number[], out: readonly number[]) => {
  const head = tokenizer.decode(p, { skipSpecialTokens: true });
  const all = tokenizer.decode([...p, ...out], { skipSpecialTokens: true });
  assert.ok(all.startsWith(head));
  return all.slice(head.length);
};
const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => 3 + ((seed * 7919 + i * 104729) % (V - 3)));

test("greedy outputs under continuous batching and chunked prefill equal each request run alone; text is the decoded tokens", () => {
  const { engine } = setup({}, { maxNumBatchedTokens: 16 });
  const prompts = [prompt(1, 5), prompt(2, 23), prompt(3, 1), prompt(4, 40), prompt(5, 9)];
  prompts.forEach((p, i) => assert.equal(engine.addRequest({ requestId: `r${i}`, promptTokenIds: p, params: params({ maxTokens: 12, ignoreEos: true }) }), "accepted"));
  const by = runAll(engine);
  prompts.forEach((p, i) => {
    const outs = by.get(`r${i}`)!;
    const want = toyGreedy(p, 12, V);
    assert.deepEqual(tokensOf(outs), want, `request r${i}`);
    assert.equal(textOf(outs), continuation(p, want));
    const last = outs.at(-1)!;
    assert.deepEqual([last.finishReason, last.numOutputTokens, last.numPromptTokens], ["length", 12, p.length]);
  });
  assert.equal(engine.kvCacheManager.pool.numUsedBlocks, 0);
});

test("a pool too small for every request at once: preemptions, and every output still equals the request alone", () => {
  const { engine } = setup({ numBlocks: 12, blockSize: 4 });
  const prompts = Array.from({ length: 6 }, (_, i) => prompt(10 + i, 6 + i));
  prompts.forEach((p, i) => engine.addRequest({ requestId: `p${i}`, promptTokenIds: p, params: params({ maxTokens: 14, ignoreEos: true }) }));
  const by = runAll(engine);
  assert.ok(engine.stats().numPreemptions > 0, "expected preemptions");
  prompts.forEach((p, i) => assert.deepEqual(tokensOf(by.get(`p${i}`)!), toyGreedy(p, 14, V), `request p${i}`));
  assert.equal(engine.stats().numFreeBlocks, 12);
});

test("prefix caching: a second request with the same prompt hits the cache and generates the same tokens", () => {
  const { engine } = setup();
  const p = prompt(7, 17);
  engine.addRequest({ requestId: "a", promptTokenIds: p, params: params() });
  const a = runAll(engine).get("a")!;
  engine.addRequest({ requestId: "b", promptTokenIds: p, params: params() });
  const b = runAll(engine).get("b")!;
  assert.deepEqual(tokensOf(b), tokensOf(a));
  assert.equal(b.at(-1)!.numCachedTokens, 16, "four full blocks of four tokens");
  const s = engine.stats();
  assert.deepEqual([s.prefixCacheQueries, s.prefixCacheHits], [34, 16]);
});

test("stop token ids end the output without their text; EOS stops unless ignoreEos", () => {
  // A prompt whose first five greedy tokens differ, so each stop id first occurs where the test puts it.
  const p = [11, 12, 13, 14, 15, 16, 17, 18].map((seed) => prompt(seed, 6)).find((q) => new Set(toyGreedy(q, 5, V)).size === 5)!;
  const want = toyGreedy(p, 8, V);
  const { engine } = setup({}, { eosTokenIds: [want[4]!] });
  engine.addRequest({ requestId: "id", promptTokenIds: p, params: params({ stopTokenIds: [want[2]!] }) });
  engine.addRequest({ requestId: "eos", promptTokenIds: p, params: params() });
  engine.addRequest({ requestId: "ignore", promptTokenIds: p, params: params({ ignoreEos: true }) });
  const by = runAll(engine);
  const id = by.get("id")!;
  assert.deepEqual(tokensOf(id), want.slice(0, 3));
  assert.deepEqual([id.at(-1)!.finishReason, id.at(-1)!.stopReason], ["stop", want[2]]);
  assert.equal(textOf(id), continuation(p, want.slice(0, 2)));
  const eos = by.get("eos")!;
  assert.deepEqual(tokensOf(eos), want.slice(0, 5));
  assert.deepEqual([eos.at(-1)!.finishReason, eos.at(-1)!.stopReason], ["stop", null]);
  assert.deepEqual(tokensOf(by.get("ignore")!), want);
  assert.equal(by.get("ignore")!.at(-1)!.finishReason, "length");
});

test("stop strings: the output is cut before the match, never streamed in part", () => {
  const p = prompt(12, 4);
  const want = toyGreedy(p, 16, V);
  const full = continuation(p, want);
  const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 3);
  assert.ok(stop.trim().length > 0, `a usable stop string from ${JSON.stringify(full)}`);
  const { engine } = setup();
  engine.addRequest({ requestId: "s", promptTokenIds: p, params: params({ maxTokens: 16, stop: [stop], ignoreEos: true }) });
  const outs = runAll(engine).get("s")!;
  let streamed = "";
  for (const o of outs) {
    streamed += o.text;
    assert.ok(!streamed.includes(stop), "the stop string was streamed");
  }
  assert.equal(streamed, full.slice(0, full.indexOf(stop)));
  assert.deepEqual([outs.at(-1)!.finishReason, outs.at(-1)!.stopReason], ["stop", stop]);
});

test("seeded sampling gives the same tokens alone and in a batch; logprobs are the raw log-softmax, top-n best first", () => {
  const p = prompt(13, 8);
  const sampling = params({ temperature: 1, seed: 42, maxTokens: 10, ignoreEos: true, logprobs: 3 });
  const alone = setup().engine;
  alone.addRequest({ requestId: "x", promptTokenIds: p, params: sampling });
  const a = runAll(alone).get("x")!;
  const batched = setup({}, { maxNumBatchedTokens: 8 }).engine;
  for (let i = 0; i < 4; i++) batched.addRequest({ requestId: `o${i}`, promptTokenIds: prompt(20 + i, 9), params: params({ temperature: 1, seed: i }) });
  batched.addRequest({ requestId: "x", promptTokenIds: p, params: sampling });
  const b = runAll(batched).get("x")!;
  assert.deepEqual(tokensOf(b), tokensOf(a));
  assert.notDeepEqual(tokensOf(a), toyGreedy(p, 10, V), "temperature 1 over the noise is not greedy");
  const lps = a.flatMap((o) => o.logprobs!);
  assert.equal(lps.length, 10);
  for (const lp of lps) {
    assert.equal(lp.top.length, 3);
    assert.ok(lp.top[0]!.logprob >= lp.top[1]!.logprob && lp.top[1]!.logprob >= lp.top[2]!.logprob);
    assert.ok(lp.logprob <= lp.top[0]!.logprob + 1e-12 && lp.logprob < 0);
  }
});

test("abort frees the request's blocks at once and ends it with 'abort'; others are untouched", () => {
  const { engine } = setup();
  const p = prompt(14, 10);
  engine.addRequest({ requestId: "keep", promptTokenIds: p, params: params({ maxTokens: 6, ignoreEos: true }) });
  engine.addRequest({ requestId: "gone", promptTokenIds: prompt(15, 30), params: params({ maxTokens: 50 }) });
  engine.step();
  engine.step();
  const used = engine.kvCacheManager.pool.numUsedBlocks;
  assert.equal(engine.abort("gone"), true);
  assert.equal(engine.abort("gone"), false);
  assert.equal(engine.kvCacheManager.pool.numUsedBlocks, used - 8, "gone held ⌈32 / 4⌉ = 8 blocks");
  const by = runAll(engine);
  assert.deepEqual(by.get("gone")!.map((o) => o.finishReason), ["abort"]);
  assert.deepEqual(tokensOf(by.get("keep")!).length, 4, "two tokens came before the abort");
  assert.equal(engine.stats().requestSuccess.abort, 1);
});

test("a bounded waiting queue answers queue_full; bad requests throw naming the field", () => {
  const { engine } = setup({ maxModelLen: 32 }, { maxWaitingRequests: 2 });
  const add = (id: string, p = prompt(1, 3)) => engine.addRequest({ requestId: id, promptTokenIds: p, params: params() });
  assert.deepEqual([add("a"), add("b"), add("c")], ["accepted", "accepted", "queue_full"]);
  assert.throws(() => add("a"), /requestId "a" is already live/);
  assert.throws(() => add("d", [1, V]), new RegExp(`promptTokenIds\\[1\\] must be ≤ ${V - 1}, got ${V}`));
  assert.throws(() => add("e", prompt(2, 32)), /promptTokenIds has 32 tokens, but maxModelLen 32/);
});

test("NaN logits fail only that request; a failed forward fails the running requests, resets the prefix cache, and waiting ones complete", () => {
  const nanToken = 5;
  const failToken = 6;
  const { engine } = setup({ nanToken, failToken }, { maxNumSeqs: 2 });
  const good = prompt(30, 9);
  engine.addRequest({ requestId: "nan", promptTokenIds: [9, 9, nanToken], params: params() });
  engine.addRequest({ requestId: "ok", promptTokenIds: good, params: params({ ignoreEos: true }) });
  const first = runAll(engine);
  assert.deepEqual(first.get("nan")!.map((o) => [o.finishReason, o.error?.startsWith("sampling failed: logits contain NaN")]), [["error", true]]);
  assert.deepEqual(tokensOf(first.get("ok")!), toyGreedy(good, 8, V));

  engine.addRequest({ requestId: "a", promptTokenIds: good, params: params({ ignoreEos: true }) });
  engine.addRequest({ requestId: "bad", promptTokenIds: [failToken, 8, 9], params: params() });
  engine.addRequest({ requestId: "later", promptTokenIds: good, params: params({ ignoreEos: true }) });
  const second = runAll(engine);
  for (const id of ["a", "bad"]) {
    const outs = second.get(id)!;
    assert.equal(outs.at(-1)!.finishReason, "error", id);
    assert.match(outs.at(-1)!.error!, /^forward failed: toy runner: batch contains the fail token 6/);
  }
  const later = second.get("later")!;
  assert.deepEqual(tokensOf(later), toyGreedy(good, 8, V));
  assert.equal(later.at(-1)!.numCachedTokens, 0, "the prefix cache was reset after the failed forward");
  const s = engine.stats();
  assert.deepEqual([s.numFailedForwards, s.requestSuccess.error, s.requestSuccess.length, s.numFreeBlocks], [1, 3, 2, 64]);
});

test("metrics: TTFT per request, ITL per later token, e2e per finish, token counters", () => {
  const { engine } = setup();
  engine.addRequest({ requestId: "m1", promptTokenIds: prompt(40, 5), params: params({ maxTokens: 4, ignoreEos: true }), arrivalTime: 0 });
  engine.addRequest({ requestId: "m2", promptTokenIds: prompt(41, 7), params: params({ maxTokens: 3, ignoreEos: true }), arrivalTime: 0 });
  runAll(engine);
  const s = engine.stats();
  assert.deepEqual([s.promptTokens, s.generationTokens, s.requestSuccess.length], [12, 7, 2]);
  assert.deepEqual([s.timeToFirstToken.count, s.interTokenLatency.count, s.e2eRequestLatency.count], [2, 5, 2]);
  // The fake clock ticks 10 ms per reading: every latency is a positive multiple of 10 ms.
  assert.ok(s.timeToFirstToken.sum > 0 && s.interTokenLatency.sum > 0);
  assert.equal(s.interTokenLatency.counts.reduce((a, b) => a + b, 0), 5);
});

test("rows past the tokenizer (a padded vocab_size) are never sampled, greedy or seeded", () => {
  // Half the vocabulary is padding: the toy's peak lands there about every other step.
  const padded = { ...config, vocabSize: 2 * V };
  const { engine } = setup({ config: padded, numBlocks: 128 });
  const p = (x: SamplingParams) => resolveSamplingParams({ maxTokens: 64, ignoreEos: true, ...x }, 2 * V);
  const prompts: Record<string, number[]> = { greedy: [5, 6, 7], seeded: [8, 9] };
  engine.addRequest({ requestId: "greedy", promptTokenIds: prompts["greedy"]!, params: p({ temperature: 0 }) });
  engine.addRequest({ requestId: "seeded", promptTokenIds: prompts["seeded"]!, params: p({ temperature: 1, seed: 3 }) });
  for (const [id, outs] of runAll(engine)) {
    const tokens = tokensOf(outs);
    assert.equal(tokens.length, 64, id);
    assert.ok(tokens.every((t) => t < V), `${id}: ${tokens.filter((t) => t >= V)}`);
    assert.equal(textOf(outs), continuation(prompts[id]!, tokens), id);
  }
});

test("with a runtime the sampler runs its wasm passes: the same greedy tokens, seeded draws that reproduce, logprobs", async () => {
  const rt = await createRuntime({ threads: 1 });
  try {
    const run = (runtime: Runtime | undefined, p: SamplingParams) => {
      const { engine } = setup({}, runtime === undefined ? {} : { runtime });
      assert.equal(engine.samplerPasses, runtime === undefined ? "js" : "wasm");
      for (let i = 0; i < 3; i++) engine.addRequest({ requestId: `r${i}`, promptTokenIds: prompt(i + 1, 6), params: params({ maxTokens: 10, ignoreEos: true, ...p }) });
      const by = runAll(engine);
      engine.dispose();
      return [0, 1, 2].map((i) => by.get(`r${i}`)!);
    };
    const tokens = (outs: EngineOutput[][]) => outs.map(tokensOf);
    assert.deepEqual(tokens(run(rt, {})), tokens(run(undefined, {})), "greedy: the same tokens");
    const sampled = { temperature: 0.9, topP: 0.9, topK: 40, seed: 5 };
    const a = tokens(run(rt, sampled));
    assert.deepEqual(tokens(run(rt, sampled)), a, "a seed reproduces");
    for (const t of a.flat()) assert.ok(Number.isInteger(t) && t >= 0 && t < V);
    const lp = run(rt, { logprobs: 2 })[0]!.flatMap((o) => o.logprobs ?? []);
    assert.equal(lp.length, 10);
    for (const l of lp) assert.ok(l.logprob <= 0 && l.top.length === 2 && l.top[0]!.logprob >= l.top[1]!.logprob);
  } finally {
    await rt.dispose();
  }
});

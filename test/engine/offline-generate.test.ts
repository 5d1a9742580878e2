// generate() and promptLogits(): one request through the scheduler, the KV
// cache manager, buildForwardBatch, the decoder, the sampler and the stop
// checker, on tiny models (embedding std 0.05: logits of a trained model's
// spread, so sampling has choices). Greedy decoding is deterministic and equals an
// argmax loop over raw forwards; seeded sampling reproduces; a prompt longer
// than the step budget (chunked prefill) gives the same tokens.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import {
  ArgumentError,
  type LoadedModel,
  type Runtime,
  type SamplingParams,
  createRuntime,
  generate,
  loadModel,
  promptLogits,
  resolveSamplingParams,
} from "../../src/ops-entry.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { Blocks, argmaxOf, makeBatch, relErr } from "../model/decoder-support.js";

let rt: Runtime;
let root: string;
let qwen: LoadedModel;
let llama: LoadedModel;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-generate-"));
  const opts = { weights: "f32", kvDtype: "f32", blockSize: 4, numBlocks: 64, progress: false } as const;
  qwen = loadModel(rt, writeTinyModel(join(root, "qwen3"), { arch: "qwen3", seed: 5, embeddingStd: 0.05 }).dir, opts);
  llama = loadModel(rt, writeTinyModel(join(root, "llama"), { arch: "llama", seed: 6 }).dir, { ...opts, maxModelLen: 48 });
});
after(async () => {
  qwen.runner.dispose();
  llama.runner.dispose();
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

const params = (m: LoadedModel, p: SamplingParams) => resolveSamplingParams(p, m.config.vocabSize);
const run = (m: LoadedModel, promptIds: number[], p: SamplingParams, maxNumBatchedTokens = 512) =>
  generate({ runner: m.runner, tokenizer: m.tokenizer, promptIds, params: params(m, p), eosTokenIds: m.eosTokenIds, maxNumBatchedTokens });

test("greedy generation is deterministic and equals an argmax loop over raw forwards", () => {
  const prompt = qwen.tokenizer.encode("The quick brown fox jumps over the lazy dog");
  const a = run(qwen, prompt, { temperature: 0, maxTokens: 12, ignoreEos: true, logprobs: 0 });
  const b = run(qwen, prompt, { temperature: 0, maxTokens: 12, ignoreEos: true, logprobs: 0 });
  assert.deepEqual(a.ids, b.ids);
  assert.equal(a.ids.length, 12);
  assert.equal(a.finishReason, "length");
  assert.equal(a.text, qwen.tokenizer.decode(a.ids, { skipSpecialTokens: true }));
  assert.deepEqual(a.logprobs, b.logprobs);
  assert.ok(a.logprobs!.every((lp) => lp <= 0 && Number.isFinite(lp)));

  // The same tokens by hand: prefill, then one decode step per token, argmax each time.
  const blocks = new Blocks(4).take(prompt.length + 12);
  const ids = [...prompt];
  let logits = qwen.runner.forward(makeBatch([{ blocks, start: 0, tokens: prompt }], 4));
  const want: number[] = [];
  for (let i = 0; i < 12; i++) {
    const next = argmaxOf(logits);
    want.push(next);
    ids.push(next);
    logits = qwen.runner.forward(makeBatch([{ blocks, start: ids.length - 1, tokens: [next] }], 4));
  }
  assert.deepEqual(a.ids, want);
});

test("seeded sampling reproduces; another seed draws another sequence", () => {
  const prompt = qwen.tokenizer.encode("Once upon a time");
  const p = { temperature: 1.2, topP: 0.95, topK: 100, maxTokens: 16, ignoreEos: true };
  const a = run(qwen, prompt, { ...p, seed: 42 });
  const b = run(qwen, prompt, { ...p, seed: 42 });
  const c = run(qwen, prompt, { ...p, seed: 43 });
  assert.deepEqual(a.ids, b.ids);
  assert.equal(a.text, b.text);
  assert.notDeepEqual(a.ids, c.ids);
  assert.equal(a.logprobs, null, "logprobs only when asked for");
});

test("a prompt longer than the step budget is prefilled in chunks and gives the same tokens and logprobs", () => {
  const prompt = qwen.tokenizer.encode("a b c d e f g h i j k l m n o p q r s t u v w x y z, and then some more words");
  assert.ok(prompt.length > 20);
  const p = { temperature: 0, maxTokens: 6, ignoreEos: true, logprobs: 0 };
  const one = run(qwen, prompt, p);
  const chunked = run(qwen, prompt, p, 5);
  assert.deepEqual(chunked.ids, one.ids);
  chunked.logprobs!.forEach((lp, i) => assert.ok(Math.abs(lp - one.logprobs![i]!) <= 1e-4, `logprob ${i}: ${lp} vs ${one.logprobs![i]}`));
  assert.equal(chunked.prefill.tokens, prompt.length);
  assert.equal(chunked.decode.tokens, 5);
});

test("promptLogits equals the last row of a raw prefill, with and without chunking", () => {
  const prompt = llama.tokenizer.encode("Hello world, hello kvflash");
  const raw = llama.runner.forward(makeBatch([{ blocks: new Blocks(4).take(prompt.length), start: 0, tokens: prompt }], 4));
  assert.ok(relErr(promptLogits(llama.runner, prompt), raw) <= 1e-6);
  assert.ok(relErr(promptLogits(llama.runner, prompt, { maxNumBatchedTokens: 3 }), raw) <= 1e-4);
});

test("stop strings end the text before them; the model's length limit ends a request with 'length'", () => {
  const prompt = qwen.tokenizer.encode("Once upon a time");
  const free = run(qwen, prompt, { temperature: 0, maxTokens: 16, ignoreEos: true });
  const cut = free.text.slice(3, 6);
  assert.ok(cut.length === 3, `need some text to cut, got ${JSON.stringify(free.text)}`);
  const stopped = run(qwen, prompt, { temperature: 0, maxTokens: 16, ignoreEos: true, stop: [cut] });
  assert.equal(stopped.finishReason, "stop");
  assert.equal(stopped.stopReason, cut);
  assert.equal(stopped.text, free.text.slice(0, free.text.indexOf(cut)));

  // maxModelLen 48: a 40-token prompt leaves room for 8 tokens, whatever maxTokens says.
  const long = Array.from({ length: 40 }, (_, i) => 10 + i);
  const r = run(llama, long, { temperature: 0, maxTokens: 100, ignoreEos: true });
  assert.equal(r.ids.length, 8);
  assert.equal(r.finishReason, "length");
  assert.throws(() => run(llama, Array.from({ length: 48 }, () => 5), { maxTokens: 1 }), (e: Error) => e instanceof ArgumentError && /maxModelLen 48/.test(e.message));
  assert.throws(() => run(llama, [1, llama.config.vocabSize], { maxTokens: 1 }), /promptIds\[1\]/);
});

test("generate is the engine with one request: its onText deltas add up to its text, and a failing forward throws its error", () => {
  const prompt = qwen.tokenizer.encode("Once upon a time");
  let streamed = "";
  const r = generate({ runner: qwen.runner, tokenizer: qwen.tokenizer, promptIds: prompt, params: params(qwen, { temperature: 0.8, seed: 4, maxTokens: 12, logprobs: 2 }), onText: (t) => (streamed += t) });
  assert.equal(streamed, r.text);
  assert.equal(r.logprobs!.length, r.ids.length);
  assert.ok(r.topLogprobs!.every((t) => t.length === 2));
  assert.equal(r.decode.tokens, r.ids.length - 1);
  // The engine contains a forward's failure (the request finishes with "error"); generate hands it on.
  const broken = Object.create(qwen.runner, { forward: { value: () => { throw new Error("kernel fell over"); } } }) as typeof qwen.runner;
  assert.throws(() => generate({ runner: broken, tokenizer: qwen.tokenizer, promptIds: prompt, params: params(qwen, { maxTokens: 4 }) }), /forward failed: kernel fell over/);
});

// Decoder embeddings end to end (vLLM's pooling runner): `kvflash serve`
// on a tiny Qwen3ForCausalLM directory with sentence-transformers modules
// (last-token pooling + Normalize, Qwen3-Embedding's layout: served as an
// embedding model without a flag), and on a plain tiny LlamaForCausalLM
// directory with `--task embed` (vLLM's default for a decoder: last token,
// normalized). Called with the official openai client's embeddings.create;
// vectors checked against the float64 reference decoder's final-normed hidden
// state (referenceForward, output "hidden"), not against our own decoder.
// Also: generation refused on it, inputs beyond the token budget a 400, and
// --task generate refused on an encoder. And `--task score` on a tiny
// Qwen3ForCausalLM (Qwen3-Reranker as vLLM serves it): /v1/rerank's
// relevance scores = sigmoid(logit_yes − logit_no) of the reference's last
// position on the concatenated pair (classifier_from_token in config.json).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError } from "../../src/errors.js";
import { type Runtime, createRuntime } from "../../src/ops-entry.js";
import { type ReferenceWeights, referenceForward, writeTinyModel } from "../../src/testing/index.js";
import type { ModelConfig } from "../../src/model/config.js";
import { writeSentenceTransformersModules } from "../../src/testing/sentence-transformers-modules.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";
import { serve } from "../../src/server/start-server.js";
import { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import { referenceWeights } from "../model/decoder-support.js";
import { type ServerProcess, post, startServer } from "./harness.js";

let root: string;
let qwen: ServerProcess;
let llama: ServerProcess;
let reranker: ServerProcess;
const refs = new Map<string, { config: ModelConfig; weights: ReferenceWeights; tok: Tokenizer }>();

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-dec-embed-e2e-"));
  const q = writeTinyModel(join(root, "qwen3-embedding-tiny"), { arch: "qwen3", seed: 3, numLayers: 2, hiddenSize: 64, intermediateSize: 96 });
  writeSentenceTransformersModules(q.dir, { dimension: 64, pooling: "last", normalize: true, maxSeqLength: 48 });
  const l = writeTinyModel(join(root, "llama-tiny"), { arch: "llama", seed: 4, numLayers: 1, hiddenSize: 32, intermediateSize: 64 });
  const r = writeTinyModel(join(root, "qwen3-reranker-tiny"), { arch: "qwen3", seed: 6, numLayers: 2, hiddenSize: 32, intermediateSize: 64 });
  const rtok = Tokenizer.fromDir(r.dir);
  const cfgPath = join(r.dir, "config.json");
  writeFileSync(cfgPath, JSON.stringify({ ...JSON.parse(readFileSync(cfgPath, "utf8")), classifier_from_token: [rtok.idToToken(40), rtok.idToToken(57)] }));
  const rt: Runtime = await createRuntime({ threads: 1 });
  try {
    for (const [name, m] of [["qwen", q], ["llama", l], ["reranker", r]] as const) refs.set(name, { config: m.config, weights: referenceWeights(rt, m.dir), tok: Tokenizer.fromDir(m.dir) });
  } finally {
    await rt.dispose();
  }
  [qwen, llama, reranker] = await Promise.all([
    startServer(["--model", q.dir, "--served-model-name", "qwen3-embedding-tiny"]),
    startServer(["--model", l.dir, "--served-model-name", "llama-tiny", "--task", "embed", "--max-num-batched-tokens", "40"]),
    startServer(["--model", r.dir, "--served-model-name", "qwen3-reranker-tiny", "--task", "score"]),
  ]);
});
after(async () => {
  await Promise.all([qwen?.stop(), llama?.stop(), reranker?.stop()]);
  rmSync(root, { recursive: true, force: true });
});

/** The reference vector: the last token's final-normed hidden state, L2-normalized. */
function reference(name: string, text: string): number[] {
  const { config, weights, tok } = refs.get(name)!;
  const ids = tok.encode(text);
  const h = config.hiddenSize;
  const hidden = referenceForward(config, weights, ids, { output: "hidden" });
  const v = Array.from(hidden.subarray((ids.length - 1) * h, ids.length * h));
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}
const maxErr = (a: ArrayLike<number>, b: ArrayLike<number>): number => Math.max(...Array.from(a, (v, i) => Math.abs(v - b[i]!)));

test("a sentence-transformers Qwen3ForCausalLM (lasttoken + Normalize) serves /v1/embeddings without a flag: vectors = the float64 reference to 1e-5", async () => {
  const texts = ["Instruct: find the answer\nQuery: what is a panda?", "The giant panda is a bear.", "a"];
  const r = await qwen.openai.embeddings.create({ model: "qwen3-embedding-tiny", input: texts, encoding_format: "float" });
  assert.equal(r.data.length, 3);
  const tok = refs.get("qwen")!.tok;
  const tokens = texts.reduce((n, t) => n + tok.encode(t).length, 0);
  assert.deepEqual(r.usage, { prompt_tokens: tokens, total_tokens: tokens });
  texts.forEach((t, i) => {
    assert.equal(r.data[i]!.embedding.length, 64);
    const e = maxErr(r.data[i]!.embedding, reference("qwen", t));
    assert.ok(e <= 1e-5, `input ${i}: max error ${e}`);
  });
  const b64 = await qwen.openai.embeddings.create({ model: "qwen3-embedding-tiny", input: texts[1]! });
  assert.ok(maxErr(b64.data[0]!.embedding, reference("qwen", texts[1]!)) <= 1e-5);
  assert.match(qwen.stderr(), /ready in [\d.]+ s: an embedding model, 64 dimensions, max_model_len 48/);
});

test("--task embed on a plain LlamaForCausalLM: last token, normalized (vLLM's default); generation refused; beyond the token budget a 400", async () => {
  const texts = ["hello world", "the cat sat on the mat"];
  const r = await llama.openai.embeddings.create({ model: "llama-tiny", input: texts, encoding_format: "float" });
  texts.forEach((t, i) => assert.ok(maxErr(r.data[i]!.embedding, reference("llama", t)) <= 1e-5, `input ${i}`));
  const chat = await post(`${llama.url}/v1/chat/completions`, { model: "llama-tiny", messages: [{ role: "user", content: "hi" }] });
  assert.equal(chat.status, 400);
  assert.equal(chat.body.error.param, "model");
  assert.match(chat.body.error.message, /embedding model/);
  const long = await post(`${llama.url}/v1/embeddings`, { input: ["short", "word ".repeat(60)] });
  assert.equal(long.status, 400);
  assert.equal(long.body.error.param, "input[1]");
  assert.equal(long.body.error.code, "context_length_exceeded");
  assert.match(llama.stderr(), /max_model_len 40/);
});

test("--task generate on an encoder directory is refused, naming the task", async () => {
  const dir = join(root, "bert");
  writeTinyBert({ dir, numLayers: 1 });
  await assert.rejects(serve({ modelDir: dir, task: "generate", port: 0 }), (e: unknown) => e instanceof ArgumentError && e.argument === "task" && /BertModel/.test(e.message));
});

test("--task score on a Qwen3ForCausalLM (Qwen3-Reranker): /v1/rerank and /v1/score = sigmoid(logit_yes − logit_no) of the reference, to 1e-5", async () => {
  const { config, weights, tok } = refs.get("reranker")!;
  const V = config.vocabSize;
  const reference = (q: string, d: string): number => {
    const ids = tok.encodePair(q, d).ids;
    assert.deepEqual(ids, [...tok.encode(q), ...tok.encode(d)]); // Qwen's pair template concatenates: the prompt is the caller's
    const logits = referenceForward(config, weights, ids);
    const last = (ids.length - 1) * V;
    return 1 / (1 + Math.exp(logits[last + 40]! - logits[last + 57]!));
  };
  const query = "<Instruct>: Given a web search query, retrieve relevant passages\n<Query>: what is a panda?\n";
  const docs = ["<Document>: The giant panda is a bear.", "<Document>: Paris is in France.", "<Document>: a"];
  const r = await post<{ results: { index: number; relevance_score: number }[] }>(`${reranker.url}/v1/rerank`, { query, documents: docs });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  const want = docs.map((d) => reference(query, d));
  assert.deepEqual(r.body.results.map((x) => x.index), want.map((s, i) => ({ s, i })).sort((a, b) => b.s - a.s).map((x) => x.i));
  for (const x of r.body.results) assert.ok(Math.abs(x.relevance_score - want[x.index]!) <= 1e-5, `document ${x.index}: ${x.relevance_score} against ${want[x.index]}`);
  const s = await post<{ data: { score: number }[] }>(`${reranker.url}/v1/score`, { text_1: query, text_2: docs[1] });
  assert.ok(Math.abs(s.body.data[0]!.score - want[1]!) <= 1e-5);
  // use_activation false: the raw logit_yes − logit_no (vLLM's yes−no classifier row), i.e. logit(p(yes)).
  const raw = await post<{ data: { score: number }[] }>(`${reranker.url}/v1/score`, { text_1: query, text_2: docs, use_activation: false });
  assert.equal(raw.status, 200, JSON.stringify(raw.body));
  raw.body.data.forEach((d, i) => {
    const logit = Math.log(want[i]! / (1 - want[i]!));
    assert.ok(Math.abs(d.score - logit) <= 1e-4 * Math.max(1, Math.abs(logit)), `raw ${i}: ${d.score} against ${logit}`);
  });
  const e = await post(`${reranker.url}/v1/embeddings`, { input: "a" });
  assert.equal(e.status, 400);
  assert.match(e.body.error.message, /cross-encoder \(Qwen3ForCausalLM\)/);
});

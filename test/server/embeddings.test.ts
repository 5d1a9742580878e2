// POST /v1/embeddings end to end: `kvflash serve --model <a sentence-transformers
// directory>` (a tiny random-weight BertModel, mean pooling, Normalize,
// Matryoshka dimensions), called with the official openai client's
// embeddings.create (its default base64 and encoding_format "float") and with
// raw HTTP for the errors. Vectors are checked against the float64 reference
// of BertModel + pooling (test/model/encoder/bert-reference.ts), not against
// our own encoder; a query ranks its paraphrase above an unrelated text
// (cosine example); metrics count the requests.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { encoderTokenizer } from "../../src/model/encoder/encoder-model.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import { cosine, referenceEmbedding } from "../model/encoder/bert-reference.js";
import { type ServerProcess, metric, post, startServer, waitMetrics } from "./harness.js";

const NAME = "tiny-minilm";
const GROUPS = [
  ["cat", "kitten", "feline"],
  ["sat", "rested", "lay"],
  ["mat", "rug", "carpet"],
  ["stock", "shares"],
  ["markets", "exchanges"],
  ["fell", "dropped"],
  ["sharply", "steeply"],
];
const WORDS = ["the", "a", "on", "in", "hello", "world", "query", "text"];
const CFG = { hidden: 32, heads: 4, layers: 2, eps: 1e-12, gelu: "erf" as const };

let root: string;
let dir: string;
let server: ServerProcess;
let tok: Tokenizer;

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-embed-e2e-"));
  dir = join(root, "all-MiniLM-tiny");
  // Small projections (weightScale): the words' shared rows carry through the layers, as meaning does in a trained model.
  writeTinyBert({ dir, seed: 5, hiddenSize: 32, numHeads: 4, numLayers: 2, maxPositionEmbeddings: 24, pooling: "mean", words: WORDS, groups: GROUPS, matryoshkaDimensions: [8, 16], weightScale: 0.05 });
  tok = encoderTokenizer(dir);
  server = await startServer(["--model", dir, "--served-model-name", NAME]);
});
after(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

const reference = (text: string): number[] => referenceEmbedding(dir, CFG, tok.encode(text), "mean", true);
const maxErr = (a: ArrayLike<number>, b: ArrayLike<number>): number => Math.max(...Array.from(a, (v, i) => Math.abs(v - b[i]!)));

test("embeddings.create (the client's default base64, and float): vectors = the float64 reference to 1e-5; usage; order", async () => {
  const texts = ["Hello world", "the cat sat on the mat", "a"];
  const b64 = await server.openai.embeddings.create({ model: NAME, input: texts });
  const flt = await server.openai.embeddings.create({ model: NAME, input: texts, encoding_format: "float" });
  assert.equal(b64.object, "list");
  assert.equal(b64.model, NAME);
  assert.deepEqual(b64.data.map((d) => [d.object, d.index]), texts.map((_, i) => ["embedding", i]));
  const tokens = texts.reduce((n, t) => n + tok.encode(t).length, 0);
  assert.deepEqual(b64.usage, { prompt_tokens: tokens, total_tokens: tokens });
  texts.forEach((t, i) => {
    const ref = reference(t);
    assert.equal(flt.data[i]!.embedding.length, 32);
    assert.ok(maxErr(flt.data[i]!.embedding, ref) <= 1e-5, `float ${i}: ${maxErr(flt.data[i]!.embedding, ref)}`);
    assert.ok(maxErr(b64.data[i]!.embedding, ref) <= 1e-5, `base64 ${i}`);
    assert.ok(cosine(flt.data[i]!.embedding, ref) >= 0.9999);
  });
  const raw = await post<{ data: { embedding: string }[] }>(`${server.url}/v1/embeddings`, { input: "Hello world", encoding_format: "base64" });
  const bytes = Buffer.from(raw.body.data[0]!.embedding, "base64");
  assert.equal(bytes.length, 32 * 4);
  assert.deepEqual(Array.from({ length: 32 }, (_, i) => bytes.readFloatLE(i * 4)), flt.data[0]!.embedding);
});

test("cosine example: a query ranks its paraphrase above an unrelated text", async () => {
  const query = "the cat sat on the mat";
  const docs = ["stock markets fell sharply", "a kitten rested on the rug"];
  const r = await server.openai.embeddings.create({ model: NAME, input: [query, ...docs], encoding_format: "float" });
  const [q, unrelated, paraphrase] = r.data.map((d) => d.embedding) as [number[], number[], number[]];
  const ranked = docs.map((d, i) => ({ d, score: cosine(q, [unrelated, paraphrase][i]!) })).sort((a, b) => b.score - a.score);
  assert.equal(ranked[0]!.d, "a kitten rested on the rug", JSON.stringify(ranked));
  assert.ok(ranked[0]!.score > ranked[1]!.score + 0.1, JSON.stringify(ranked));
});

test("token-id inputs (one list, a list of lists) give the text's vector; concurrent requests are batched and each gets its own", async () => {
  const ids = tok.encode("the cat sat on the mat");
  const one = await server.openai.embeddings.create({ model: NAME, input: ids, encoding_format: "float" });
  const many = await server.openai.embeddings.create({ model: NAME, input: [ids, tok.encode("hello")], encoding_format: "float" });
  const ref = reference("the cat sat on the mat");
  assert.ok(maxErr(one.data[0]!.embedding, ref) <= 1e-5);
  assert.ok(maxErr(many.data[0]!.embedding, ref) <= 1e-5);
  assert.ok(maxErr(many.data[1]!.embedding, reference("hello")) <= 1e-5);
  const texts = Array.from({ length: 12 }, (_, i) => ["hello world", "the cat sat", "stock markets fell", "a rug"][i % 4]! + " x".repeat(i % 5));
  const all = await Promise.all(texts.map((t) => server.openai.embeddings.create({ model: NAME, input: t, encoding_format: "float" })));
  all.forEach((r, i) => assert.ok(maxErr(r.data[0]!.embedding, reference(texts[i]!)) <= 1e-5, `request ${i}`));
});

test("dimensions: Matryoshka truncation renormalized, for the model's listed dimensions only", async () => {
  const full = (await server.openai.embeddings.create({ model: NAME, input: "hello world", encoding_format: "float" })).data[0]!.embedding;
  const r = await server.openai.embeddings.create({ model: NAME, input: "hello world", encoding_format: "float", dimensions: 16 });
  const v = r.data[0]!.embedding;
  assert.equal(v.length, 16);
  const n = Math.hypot(...full.slice(0, 16));
  assert.ok(maxErr(v, full.slice(0, 16).map((x) => x / n)) <= 1e-6);
  const bad = await post(`${server.url}/v1/embeddings`, { input: "hello", dimensions: 12 });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.param, "dimensions");
  assert.match(bad.body.error.message, /\[8, 16\].*12/);
});

test("too long: 400 context_length_exceeded naming the input, or truncated with truncate_prompt_tokens ([CLS] … [SEP] kept)", async () => {
  const long = Array.from({ length: 40 }, () => "cat").join(" "); // 42 tokens with [CLS] and [SEP]; the model takes 24
  const r = await post(`${server.url}/v1/embeddings`, { input: ["hello", long] });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, "input[1]");
  assert.equal(r.body.error.code, "context_length_exceeded");
  const t = await post<{ usage: { prompt_tokens: number }; data: { embedding: number[] }[] }>(`${server.url}/v1/embeddings`, { input: long, truncate_prompt_tokens: 10 });
  assert.equal(t.status, 200);
  assert.equal(t.body.usage.prompt_tokens, 10);
  const ids = tok.encode(long);
  const kept = [...ids.slice(0, 9), ids[ids.length - 1]!];
  assert.ok(maxErr(t.body.data[0]!.embedding, referenceEmbedding(dir, CFG, kept, "mean", true)) <= 1e-5);
  const ti = await post<{ usage: { prompt_tokens: number } }>(`${server.url}/v1/embeddings`, { input: ids, truncate_prompt_tokens: -1 });
  assert.equal(ti.body.usage.prompt_tokens, 24);
});

test("the startup log names an embedding model and hints at /v1/embeddings", () => {
  assert.match(server.stderr(), /ready in [\d.]+ s: an embedding model, 32 dimensions, max_model_len 24/);
  assert.match(server.stderr(), /curl http:\/\/[^ ]+\/v1\/embeddings/);
});

test("bad requests fail alone with a 400 naming the field; generation is refused on an embedding model", async () => {
  const cases: [unknown, string][] = [
    [{}, "input"],
    [{ input: [] }, "input"],
    [{ input: "" }, "input"],
    [{ input: [1, "a"] }, "input"],
    [{ input: "a", encoding_format: "int8" }, "encoding_format"],
    [{ input: "a", dimensions: 0 }, "dimensions"],
    [{ input: "a", dimensions: 64 }, "dimensions"],
    [{ input: "a", truncate_prompt_tokens: 0 }, "truncate_prompt_tokens"],
    [{ input: "a", truncate_prompt_tokens: 25 }, "truncate_prompt_tokens"],
    [{ input: [[2, 99999, 3]] }, "input"],
  ];
  for (const [body, param] of cases) {
    const r = await post(`${server.url}/v1/embeddings`, body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.param, param, `${JSON.stringify(body)}: ${r.body.error.message}`);
  }
  const missing = await post(`${server.url}/v1/embeddings`, { model: "nope", input: "a" });
  assert.equal(missing.status, 404);
  const chat = await post(`${server.url}/v1/chat/completions`, { model: NAME, messages: [{ role: "user", content: "hi" }] });
  assert.equal(chat.status, 400);
  assert.equal(chat.body.error.param, "model");
  const completion = await post(`${server.url}/v1/completions`, { model: NAME, prompt: "hi" });
  assert.equal(completion.status, 400);
  assert.match(completion.body.error.message, /embedding model/);
  const ok = await server.openai.embeddings.create({ model: NAME, input: "still fine" });
  assert.equal(ok.data.length, 1);
});

test("rerank and score on an embedding model: the cosine of the two texts' reference vectors (vLLM's bi-encoder score)", async () => {
  const query = "the cat sat on the mat";
  const docs = ["stock markets fell sharply", "a kitten rested on the rug"];
  const r = await post<{ results: { index: number; relevance_score: number }[]; usage: { prompt_tokens: number } }>(`${server.url}/v1/rerank`, { model: NAME, query, documents: docs });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.deepEqual(r.body.results.map((x) => x.index), [1, 0]); // the paraphrase first
  for (const x of r.body.results) assert.ok(Math.abs(x.relevance_score - cosine(reference(query), reference(docs[x.index]!))) <= 1e-5, `document ${x.index}`);
  assert.equal(r.body.usage.prompt_tokens, [query, ...docs].reduce((n, t) => n + tok.encode(t).length, 0));
  const s = await post<{ data: { score: number }[] }>(`${server.url}/v1/score`, { text_1: ["hello world", "a rug"], text_2: ["hello world", "the cat"] });
  assert.equal(s.status, 200);
  assert.ok(Math.abs(s.body.data[0]!.score - 1) <= 1e-5);
  assert.ok(Math.abs(s.body.data[1]!.score - cosine(reference("a rug"), reference("the cat"))) <= 1e-5);
});

test("score on an embedding model with truncate_prompt_tokens: each text cut to k as /v1/embeddings cuts it ([CLS] first k−2 [SEP]), then the cosine of the reference vectors", async () => {
  const a = "the cat sat on the mat in the hello world";
  const b = "a kitten rested on the rug";
  const cut = (t: string, k: number): number[] => {
    const ids = tok.encode(t);
    return ids.length <= k ? ids : [...ids.slice(0, k - 1), ids[ids.length - 1]!];
  };
  for (const k of [4, 7]) {
    const s = await post<{ data: { score: number }[]; usage: { prompt_tokens: number } }>(`${server.url}/v1/score`, { text_1: a, text_2: b, truncate_prompt_tokens: k });
    assert.equal(s.status, 200, JSON.stringify(s.body));
    const ref = cosine(referenceEmbedding(dir, CFG, cut(a, k), "mean", true), referenceEmbedding(dir, CFG, cut(b, k), "mean", true));
    assert.ok(Math.abs(s.body.data[0]!.score - ref) <= 1e-5, `k=${k}: ${s.body.data[0]!.score} against ${ref}`);
    assert.equal(s.body.usage.prompt_tokens, 2 * k);
  }
});

test("metrics count embedding requests and their prompt tokens", async () => {
  const before = await server.metrics();
  const done = metric(before, "vllm:request_success_total", { finished_reason: "stop" }, NAME);
  const prompt = metric(before, "vllm:prompt_tokens_total", {}, NAME);
  await server.openai.embeddings.create({ model: NAME, input: ["hello", "world"] });
  const m = await waitMetrics(server, (x) => metric(x, "vllm:request_success_total", { finished_reason: "stop" }, NAME) === done + 1);
  assert.equal(metric(m, "vllm:prompt_tokens_total", {}, NAME), prompt + 6);
});

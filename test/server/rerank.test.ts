// POST /v1/rerank and /v1/score end to end: `kvflash serve --model <a
// cross-encoder directory>` (tiny random-weight BertForSequenceClassification,
// the cross-encoder/ms-marco-MiniLM layout; and an
// XLMRobertaForSequenceClassification, bge-reranker's), called with plain
// fetch (the openai client has no rerank) in vLLM's shapes. Scores are
// checked against the float64 reference of the HF forward
// (test/model/encoder/bert-reference.ts referenceScore) on the pair encoded by
// the tokenizer's pair template, not against our own encoder. Also: top_n,
// return_documents, /rerank and /v2/rerank, 1:1 / 1:N / N:N scoring,
// truncate_prompt_tokens (longest_first, against the reference of the pair
// truncated by hand), use_activation false (raw logits), errors
// naming the field, a cross-encoder refusing embeddings and generation by
// name, metrics.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { encoderTokenizer } from "../../src/model/encoder/encoder-model.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import { type RefConfig, type Tensors, readF32Safetensors, referenceScore } from "../model/encoder/bert-reference.js";
import { type ServerProcess, metric, post, startServer, waitMetrics } from "./harness.js";

const NAME = "tiny-ms-marco";
const XLMR = "tiny-bge-reranker";
const WORDS = ["what", "is", "a", "panda", "bear", "the", "giant", "paris", "in", "france", "cat", "small", "pet"];
const CFG: RefConfig = { hidden: 32, heads: 4, layers: 2, eps: 1e-12, gelu: "erf" };
const XCFG: RefConfig = { hidden: 24, heads: 4, layers: 1, eps: 1e-5, gelu: "erf", positionOffset: 2 };

let root: string;
let server: ServerProcess;
let xserver: ServerProcess;
let tok: Tokenizer;
let xtok: Tokenizer;
let tensors: Tensors;
let xtensors: Tensors;

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-rerank-e2e-"));
  const dir = join(root, "ms-marco-tiny");
  writeTinyBert({ dir, crossEncoder: true, seed: 21, hiddenSize: 32, numHeads: 4, numLayers: 2, maxPositionEmbeddings: 24, words: WORDS });
  const xdir = join(root, "bge-reranker-tiny");
  writeTinyBert({ dir: xdir, arch: "xlm-roberta", crossEncoder: true, seed: 22, hiddenSize: 24, numHeads: 4, numLayers: 1, maxPositionEmbeddings: 32, words: WORDS });
  tok = encoderTokenizer(dir);
  xtok = encoderTokenizer(xdir);
  tensors = readF32Safetensors(join(dir, "model.safetensors"));
  xtensors = readF32Safetensors(join(xdir, "model.safetensors"));
  [server, xserver] = await Promise.all([startServer(["--model", dir, "--served-model-name", NAME]), startServer(["--model", xdir, "--served-model-name", XLMR])]);
});
after(async () => {
  await Promise.all([server?.stop(), xserver?.stop()]);
  rmSync(root, { recursive: true, force: true });
});

const reference = (q: string, d: string): number => {
  const e = tok.encodePair(q, d);
  return referenceScore(tensors, CFG, e.ids, e.typeIds, "bert", "sigmoid");
};
const pairTokens = (q: string, d: string): number => tok.encodePair(q, d).ids.length;

interface RerankBody {
  id: string;
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
  results: { index: number; document?: { text: string }; relevance_score: number }[];
}
interface ScoreBody {
  id: string;
  object: string;
  created: number;
  model: string;
  data: { index: number; object: string; score: number }[];
  usage: { prompt_tokens: number; total_tokens: number; completion_tokens: number };
}

const QUERY = "what is a panda";
const DOCS = ["the giant panda is a bear", "paris is in france", "a cat is a small pet", "panda"];

test("rerank (BertForSequenceClassification): relevance scores = the float64 reference to 1e-5, best first; usage; vLLM's shape", async () => {
  const r = await post<RerankBody>(`${server.url}/v1/rerank`, { model: NAME, query: QUERY, documents: DOCS });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.match(r.body.id, /^rerank-/);
  assert.equal(r.body.model, NAME);
  const refs = DOCS.map((d) => reference(QUERY, d));
  const order = refs.map((s, i) => ({ s, i })).sort((a, b) => b.s - a.s).map((x) => x.i);
  assert.deepEqual(r.body.results.map((x) => x.index), order);
  for (const x of r.body.results) {
    assert.deepEqual(Object.keys(x), ["index", "document", "relevance_score"]);
    assert.equal(x.document!.text, DOCS[x.index]);
    assert.ok(Math.abs(x.relevance_score - refs[x.index]!) <= 1e-5, `document ${x.index}: ${x.relevance_score} against ${refs[x.index]}`);
  }
  const tokens = DOCS.reduce((n, d) => n + pairTokens(QUERY, d), 0);
  assert.deepEqual(r.body.usage, { prompt_tokens: tokens, total_tokens: tokens });
});

test("rerank: top_n keeps the best n, return_documents false drops the text, { text } documents, /rerank and /v2/rerank answer the same", async () => {
  const full = (await post<RerankBody>(`${server.url}/v1/rerank`, { query: QUERY, documents: DOCS })).body;
  const top = await post<RerankBody>(`${server.url}/v1/rerank`, { query: QUERY, documents: DOCS.map((text) => ({ text })), top_n: 2, return_documents: false });
  assert.equal(top.status, 200);
  assert.deepEqual(top.body.results, full.results.slice(0, 2).map(({ index, relevance_score }) => ({ index, relevance_score })));
  for (const path of ["/rerank", "/v2/rerank"]) {
    const r = await post<RerankBody>(`${server.url}${path}`, { query: QUERY, documents: DOCS, top_n: 10 });
    assert.equal(r.status, 200, path);
    assert.deepEqual(r.body.results, full.results, path);
  }
});

test("score: 1:1, 1:N (text_1 broadcast) and N:N pairs = the reference; vLLM's shape", async () => {
  const one = await post<ScoreBody>(`${server.url}/v1/score`, { model: NAME, text_1: QUERY, text_2: DOCS[0] });
  assert.equal(one.status, 200, JSON.stringify(one.body));
  assert.equal(one.body.object, "list");
  assert.match(one.body.id, /^score-/);
  assert.equal(one.body.model, NAME);
  assert.ok(Number.isInteger(one.body.created));
  assert.deepEqual(one.body.data.map((d) => [d.index, d.object]), [[0, "score"]]);
  assert.ok(Math.abs(one.body.data[0]!.score - reference(QUERY, DOCS[0]!)) <= 1e-5);
  const n = pairTokens(QUERY, DOCS[0]!);
  assert.deepEqual(one.body.usage, { prompt_tokens: n, total_tokens: n, completion_tokens: 0 });
  const fan = await post<ScoreBody>(`${server.url}/score`, { text_1: [QUERY], text_2: DOCS });
  assert.deepEqual(fan.body.data.map((d) => d.index), [0, 1, 2, 3]);
  fan.body.data.forEach((d, i) => assert.ok(Math.abs(d.score - reference(QUERY, DOCS[i]!)) <= 1e-5, `1:N ${i}`));
  const qs = ["what is a panda", "is paris in france", "a small cat"];
  const nn = await post<ScoreBody>(`${server.url}/v1/score`, { text_1: qs, text_2: DOCS.slice(0, 3) });
  nn.body.data.forEach((d, i) => assert.ok(Math.abs(d.score - reference(qs[i]!, DOCS[i]!)) <= 1e-5, `N:N ${i}`));
});

test("rerank on an XLMRobertaForSequenceClassification (bge-reranker layout, <s> q </s></s> d </s>) = the reference", async () => {
  const r = await post<RerankBody>(`${xserver.url}/v1/rerank`, { query: QUERY, documents: DOCS });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  for (const x of r.body.results) {
    const e = xtok.encodePair(QUERY, DOCS[x.index]!);
    const ref = referenceScore(xtensors, XCFG, e.ids, e.typeIds, "roberta", "sigmoid");
    assert.ok(Math.abs(x.relevance_score - ref) <= 1e-5, `document ${x.index}: ${x.relevance_score} against ${ref}`);
  }
  assert.ok(r.body.results.every((x, i) => i === 0 || x.relevance_score <= r.body.results[i - 1]!.relevance_score));
});

test("bad requests fail alone with a 400 naming the field", async () => {
  const long = Array.from({ length: 30 }, () => "panda").join(" "); // the model takes 24 tokens
  const cases: [string, unknown, string][] = [
    ["/v1/rerank", { documents: ["a"] }, "query"],
    ["/v1/rerank", { query: 3, documents: ["a"] }, "query"],
    ["/v1/rerank", { query: "", documents: ["a"] }, "query"],
    ["/v1/rerank", { query: "a" }, "documents"],
    ["/v1/rerank", { query: "a", documents: [] }, "documents"],
    ["/v1/rerank", { query: "a", documents: ["a", 7] }, "documents"],
    ["/v1/rerank", { query: "a", documents: ["a", ""] }, "documents"],
    ["/v1/rerank", { query: "a", documents: ["a"], top_n: 1.5 }, "top_n"],
    ["/v1/rerank", { query: "a", documents: ["a"], top_n: -2 }, "top_n"],
    ["/v1/rerank", { query: "a", documents: ["a"], return_documents: "yes" }, "return_documents"],
    ["/v1/rerank", { query: "a", documents: ["a", long] }, "documents[1]"],
    ["/v1/score", { text_2: "a" }, "text_1"],
    ["/v1/score", { text_1: "a" }, "text_2"],
    ["/v1/score", { text_1: ["a", "b"], text_2: ["a", "b", "c"] }, "text_1"],
    ["/v1/score", { text_1: "a", text_2: [1] }, "text_2"],
    ["/v1/score", { text_1: "a", text_2: [] }, "text_2"],
    ["/v1/rerank", { query: "a", documents: ["a"], truncate_prompt_tokens: 0 }, "truncate_prompt_tokens"],
    ["/v1/rerank", { query: "a", documents: ["a"], truncate_prompt_tokens: 25 }, "truncate_prompt_tokens"],
    ["/v1/rerank", { query: "a", documents: ["a"], truncate_prompt_tokens: -2 }, "truncate_prompt_tokens"],
    ["/v1/score", { text_1: "a", text_2: "b", truncate_prompt_tokens: "8" }, "truncate_prompt_tokens"],
    ["/v1/score", { text_1: "what is", text_2: "a panda", truncate_prompt_tokens: 2 }, "truncate_prompt_tokens"],
    ["/v1/score", { text_1: "a", text_2: "b", use_activation: "no" }, "use_activation"],
    ["/v1/score", { text_1: "a", text_2: "b", use_activation: false, activation: true }, "activation"],
  ];
  for (const [path, body, param] of cases) {
    const r = await post(`${server.url}${path}`, body);
    assert.equal(r.status, 400, `${path} ${JSON.stringify(body)}`);
    assert.equal(r.body.error.param, param, `${path} ${JSON.stringify(body)}: ${r.body.error.message}`);
  }
  const tooLong = await post(`${server.url}/v1/rerank`, { query: "a", documents: ["a", long] });
  assert.equal(tooLong.body.error.code, "context_length_exceeded");
  const missing = await post(`${server.url}/v1/rerank`, { model: "nope", query: "a", documents: ["a"] });
  assert.equal(missing.status, 404);
  const ok = await post<RerankBody>(`${server.url}/v1/rerank`, { query: "a", documents: ["still fine"], use_activation: true });
  assert.equal(ok.status, 200);
});

/**
 * The pair as transformers' fast tokenizer(q, d, truncation=True,
 * max_length=k) gives it (longest_first as tokenizers' truncate_encodings
 * does it, written out here): each text's WordPiece ids within the budget
 * T = k − specials, the shorter whole if it fits in ⌊T/2⌋, else both to
 * halves with the odd token to the longer (a tie: the second), then the
 * template rebuilt by hand.
 */
function truncatedPair(t: Tokenizer, q: string, d: string, k: number, kind: "bert" | "roberta"): { ids: number[]; typeIds: number[] } {
  const a = t.encode(q, { addSpecialTokens: false });
  const b = t.encode(d, { addSpecialTokens: false });
  const budget = k - (kind === "bert" ? 3 : 4);
  if (a.length + b.length > budget) {
    const [short, long] = a.length > b.length ? [b, a] : [a, b];
    const keepShort = 2 * short.length <= budget ? short.length : Math.floor(budget / 2);
    short.length = keepShort;
    long.length = budget - keepShort;
  }
  if (kind === "bert") {
    const [cls, sep] = [t.tokenToId("[CLS]")!, t.tokenToId("[SEP]")!];
    return { ids: [cls, ...a, sep, ...b, sep], typeIds: [0, ...a.map(() => 0), 0, ...b.map(() => 1), 1] };
  }
  const [s, e] = [t.tokenToId("<s>")!, t.tokenToId("</s>")!];
  const ids = [s, ...a, e, e, ...b, e];
  return { ids, typeIds: ids.map(() => 0) };
}

test("truncate_prompt_tokens (vLLM's, longest_first on the pair): scores = the reference of the truncated pair; -1 = the model's limit; usage counts the kept tokens", async () => {
  const long = Array.from({ length: 30 }, (_, i) => WORDS[i % WORDS.length]).join(" "); // 30 tokens: beyond the model's 24 alone
  const docs = [long, DOCS[0]!, "panda"];
  for (const k of [-1, 8, 5]) {
    const r = await post<RerankBody>(`${server.url}/v1/rerank`, { query: QUERY, documents: docs, truncate_prompt_tokens: k });
    assert.equal(r.status, 200, `k=${k}: ${JSON.stringify(r.body)}`);
    const limit = k === -1 ? 24 : k;
    const pairs = docs.map((d) => truncatedPair(tok, QUERY, d, limit, "bert"));
    assert.equal(pairs[0]!.ids.length, limit);
    for (const x of r.body.results) {
      const e = pairs[x.index]!;
      const ref = referenceScore(tensors, CFG, e.ids, e.typeIds, "bert", "sigmoid");
      assert.ok(Math.abs(x.relevance_score - ref) <= 1e-5, `k=${k} document ${x.index}: ${x.relevance_score} against ${ref}`);
    }
    const tokens = pairs.reduce((n, e) => n + e.ids.length, 0);
    assert.equal(r.body.usage.prompt_tokens, tokens, `k=${k}`);
  }
  // Without it the long document is still a 400: truncation is asked for, never implied.
  assert.equal((await post(`${server.url}/v1/rerank`, { query: QUERY, documents: docs })).status, 400);
  // XLM-R's <s> q </s></s> d </s> template, through /v1/score N:N.
  const qs = [long, "what is a panda bear"];
  const s = await post<ScoreBody>(`${xserver.url}/v1/score`, { text_1: qs, text_2: [DOCS[1], long], truncate_prompt_tokens: 11 });
  assert.equal(s.status, 200, JSON.stringify(s.body));
  s.body.data.forEach((d, i) => {
    const e = truncatedPair(xtok, qs[i]!, i === 0 ? DOCS[1]! : long, 11, "roberta");
    const ref = referenceScore(xtensors, XCFG, e.ids, e.typeIds, "roberta", "sigmoid");
    assert.ok(Math.abs(d.score - ref) <= 1e-5, `pair ${i}: ${d.score} against ${ref}`);
  });
  assert.equal(s.body.usage.prompt_tokens, 22);
});

test("use_activation false (and its older name activation false): the classification head's raw logit = the reference's, on BERT and XLM-R heads; with truncation too", async () => {
  const pairs = DOCS.map((d) => tok.encodePair(QUERY, d));
  for (const body of [{ use_activation: false }, { activation: false }]) {
    const r = await post<RerankBody>(`${server.url}/v1/rerank`, { query: QUERY, documents: DOCS, ...body });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    for (const x of r.body.results) {
      const e = pairs[x.index]!;
      const ref = referenceScore(tensors, CFG, e.ids, e.typeIds, "bert", "identity");
      assert.ok(Math.abs(x.relevance_score - ref) <= 1e-5, `${JSON.stringify(body)} document ${x.index}: ${x.relevance_score} against ${ref}`);
    }
  }
  const s = await post<ScoreBody>(`${xserver.url}/v1/score`, { text_1: QUERY, text_2: DOCS, use_activation: false, truncate_prompt_tokens: 9 });
  assert.equal(s.status, 200, JSON.stringify(s.body));
  s.body.data.forEach((d, i) => {
    const e = truncatedPair(xtok, QUERY, DOCS[i]!, 9, "roberta");
    const ref = referenceScore(xtensors, XCFG, e.ids, e.typeIds, "roberta", "identity");
    assert.ok(Math.abs(d.score - ref) <= 1e-5, `XLM-R pair ${i}: ${d.score} against ${ref}`);
  });
  // Activated and raw requests in flight together each get their own kind of score.
  const [on, off] = await Promise.all([true, false].map((use_activation) => post<ScoreBody>(`${server.url}/v1/score`, { text_1: QUERY, text_2: DOCS, use_activation })));
  on!.body.data.forEach((d, i) => assert.ok(Math.abs(d.score - 1 / (1 + Math.exp(-off!.body.data[i]!.score))) <= 1e-6, `pair ${i}`));
});

test("a cross-encoder refuses embeddings and generation with a 400 naming the model and why; the startup log names it", async () => {
  const e = await post(`${server.url}/v1/embeddings`, { model: NAME, input: "hello" });
  assert.equal(e.status, 400);
  assert.equal(e.body.error.param, "model");
  assert.match(e.body.error.message, new RegExp(`${NAME}.*cross-encoder \\(BertForSequenceClassification\\).*/v1/rerank`));
  const chat = await post(`${server.url}/v1/chat/completions`, { model: NAME, messages: [{ role: "user", content: "hi" }] });
  assert.equal(chat.status, 400);
  assert.match(chat.body.error.message, /cross-encoder/);
  assert.match(server.stderr(), /ready in [\d.]+ s: a cross-encoder \(BertForSequenceClassification, a reranker\), max_model_len 24/);
  assert.match(server.stderr(), /curl http:\/\/[^ ]+\/v1\/rerank/);
});

test("metrics count rerank requests and their prompt tokens", async () => {
  const before = await server.metrics();
  const done = metric(before, "vllm:request_success_total", { finished_reason: "stop" }, NAME);
  const prompt = metric(before, "vllm:prompt_tokens_total", {}, NAME);
  await post(`${server.url}/v1/rerank`, { query: QUERY, documents: DOCS.slice(0, 2) });
  const m = await waitMetrics(server, (x) => metric(x, "vllm:request_success_total", { finished_reason: "stop" }, NAME) === done + 1);
  assert.equal(metric(m, "vllm:prompt_tokens_total", {}, NAME), prompt + pairTokens(QUERY, DOCS[0]!) + pairTokens(QUERY, DOCS[1]!));
});

// `kvflash serve --model bge-reranker.gguf`: a GGUF reranker as llama.cpp's
// convert_hf_to_gguf.py writes XLMRobertaForSequenceClassification (arch
// bert, "t5" vocabulary, cls / cls.output; src/testing/tiny-bert-gguf.ts from
// a tiny random-weight checkpoint), called through the official openai
// client's generic post (it has no rerank method) on POST /v1/rerank and
// /v1/score. Scores are the float64 reference of transformers' forward
// (bert-reference.ts referenceScore) on the pair tokenizer.json encodes,
// within 1e-5: sigmoid by default, the raw logit with use_activation false,
// and the pair cut by hand with longest_first under truncate_prompt_tokens.
// The reranker refuses embeddings naming itself; a file that cannot give the
// checkpoint's scores (the converter's BERT reranker, pooler dropped) fails
// serve() naming the tensor.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError } from "../../src/errors.js";
import { encoderTokenizer } from "../../src/model/encoder/encoder-model.js";
import { serve } from "../../src/server/start-server.js";
import { writeBertGguf } from "../../src/testing/tiny-bert-gguf.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import { type RefConfig, type Tensors, readF32Safetensors, referenceScore } from "../model/encoder/bert-reference.js";
import { type ServerProcess, post, startServer } from "./harness.js";

const NAME = "tiny-bge-reranker-gguf";
const WORDS = ["what", "is", "a", "panda", "bear", "the", "giant", "paris", "in", "france", "cat", "small", "pet"];
const CFG: RefConfig = { hidden: 32, heads: 4, layers: 2, eps: 1e-5, gelu: "erf", positionOffset: 2 };
const QUERY = "what is a panda";
const DOCS = ["the giant panda is a bear", "paris is in france", "a cat is a small pet", "panda"];

let root: string;
let dir: string;
let server: ServerProcess;
let tok: Tokenizer;
let tensors: Tensors;

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-rerank-gguf-"));
  dir = join(root, "bge-reranker-tiny");
  writeTinyBert({ dir, arch: "xlm-roberta", crossEncoder: true, seed: 31, hiddenSize: 32, numHeads: 4, numLayers: 2, maxPositionEmbeddings: 24, words: WORDS });
  const file = join(root, "bge-reranker-tiny-f32.gguf");
  writeBertGguf(dir, file);
  tok = encoderTokenizer(dir); // the directory's tokenizer.json: the server tokenizes from the GGUF vocabulary
  tensors = readF32Safetensors(join(dir, "model.safetensors"));
  server = await startServer(["--model", file, "--served-model-name", NAME]);
});
after(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

const reference = (e: { ids: number[]; typeIds: number[] }, activation: "sigmoid" | "identity" = "sigmoid"): number => referenceScore(tensors, CFG, e.ids, e.typeIds, "roberta", activation);

interface RerankBody {
  id: string;
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
  results: { index: number; document?: { text: string }; relevance_score: number }[];
}
interface ScoreBody {
  model: string;
  data: { index: number; object: string; score: number }[];
  usage: { prompt_tokens: number; total_tokens: number };
}

test("openai client → POST /v1/rerank on a GGUF bge-reranker: scores = the float64 reference to 1e-5, best first, usage, the startup log names the head", async () => {
  const r = await server.openai.post<RerankBody>("/rerank", { body: { model: NAME, query: QUERY, documents: DOCS } });
  assert.match(r.id, /^rerank-/);
  assert.equal(r.model, NAME);
  const pairs = DOCS.map((d) => tok.encodePair(QUERY, d));
  const refs = pairs.map((e) => reference(e));
  assert.deepEqual(r.results.map((x) => x.index), refs.map((s, i) => ({ s, i })).sort((a, b) => b.s - a.s).map((x) => x.i));
  for (const x of r.results) {
    assert.equal(x.document!.text, DOCS[x.index]);
    assert.ok(Math.abs(x.relevance_score - refs[x.index]!) <= 1e-5, `document ${x.index}: ${x.relevance_score} against ${refs[x.index]}`);
  }
  assert.ok(Math.max(...refs) - Math.min(...refs) > 1e-3, `the fixture's scores must differ to test the order: ${refs}`);
  const tokens = pairs.reduce((n, e) => n + e.ids.length, 0);
  assert.deepEqual(r.usage, { prompt_tokens: tokens, total_tokens: tokens });
  assert.match(server.stderr(), /a cross-encoder \(XLMRobertaForSequenceClassification, a reranker\), max_model_len 24/);
});

test("POST /v1/score 1:N: sigmoid scores and, with use_activation false, the head's raw logits = the reference", async () => {
  const on = await server.openai.post<ScoreBody>("/score", { body: { text_1: QUERY, text_2: DOCS } });
  const off = await server.openai.post<ScoreBody>("/score", { body: { text_1: QUERY, text_2: DOCS, use_activation: false } });
  DOCS.forEach((d, i) => {
    const e = tok.encodePair(QUERY, d);
    assert.ok(Math.abs(on.data[i]!.score - reference(e)) <= 1e-5, `pair ${i}: ${on.data[i]!.score}`);
    assert.ok(Math.abs(off.data[i]!.score - reference(e, "identity")) <= 1e-5, `pair ${i} raw: ${off.data[i]!.score}`);
  });
});

test("truncate_prompt_tokens: the pair <s> q </s></s> d </s> cut with longest_first = the reference of the pair cut by hand", async () => {
  const long = Array.from({ length: 30 }, (_, i) => WORDS[i % WORDS.length]).join(" "); // longer than the 24-token context alone
  const k = 9; // 5 tokens for the texts: both cut, the odd one to the longer (tokenizers' longest_first)
  const r = await server.openai.post<RerankBody>("/rerank", { body: { query: QUERY, documents: [long, DOCS[1]], truncate_prompt_tokens: k } });
  const [s, e] = [tok.tokenToId("<s>")!, tok.tokenToId("</s>")!];
  for (const x of r.results) {
    const a = tok.encode(QUERY, { addSpecialTokens: false });
    const b = tok.encode(x.index === 0 ? long : DOCS[1]!, { addSpecialTokens: false });
    if (a.length + b.length > k - 4) {
      const [short, long] = a.length > b.length ? [b, a] : [a, b];
      short.length = Math.min(short.length, Math.floor((k - 4) / 2));
      long.length = k - 4 - short.length;
    }
    const ids = [s, ...a, e, e, ...b, e];
    const ref = reference({ ids, typeIds: ids.map(() => 0) });
    assert.ok(Math.abs(x.relevance_score - ref) <= 1e-5, `document ${x.index}: ${x.relevance_score} against ${ref}`);
  }
  // Without truncation the long document is a 400 naming it; the server goes on.
  const bad = await post(`${server.url}/v1/rerank`, { query: QUERY, documents: [DOCS[0], long] });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.error.param, "documents[1]");
});

test("the GGUF reranker refuses embeddings naming itself; the converter's BERT reranker (pooler dropped) fails serve() naming cls.output.weight", async () => {
  const e = await post(`${server.url}/v1/embeddings`, { model: NAME, input: "hello" });
  assert.equal(e.status, 400);
  assert.match(e.body.error.message, /cross-encoder \(XLMRobertaForSequenceClassification\).*\/v1\/rerank/);
  const bdir = join(root, "ms-marco-tiny");
  writeTinyBert({ dir: bdir, crossEncoder: true, seed: 32, hiddenSize: 16, numHeads: 2, numLayers: 1, maxPositionEmbeddings: 16 });
  const bert = join(root, "ms-marco-tiny.gguf");
  writeBertGguf(bdir, bert);
  await assert.rejects(serve({ modelDir: bert, port: 0, threads: 1 }), (err: unknown) => err instanceof ArgumentError && /has cls\.output\.weight but no cls\.weight/.test(err.message));
});

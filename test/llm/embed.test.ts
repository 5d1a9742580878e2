// llm.embed (src/llm/llm.ts) on a tiny sentence-transformers directory loaded
// with LLM.load: vectors equal the float64 reference of BertModel + mean
// pooling + Normalize (test/model/encoder/bert-reference.ts), dimensions and
// truncation pass through, a bad option is the server's 400 as an LLMError
// naming the field, and chat on an embedding model is refused. llm.rerank on
// it ranks by the cosine of the reference vectors.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { LLM, LLMError } from "../../src/index.js";
import { encoderTokenizer } from "../../src/model/encoder/encoder-model.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";
import { referenceEmbedding } from "../model/encoder/bert-reference.js";

let root: string;
let llm: LLM;

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-llm-embed-"));
  writeTinyBert({ dir: root, seed: 21, hiddenSize: 32, numHeads: 4, numLayers: 2, maxPositionEmbeddings: 24, words: ["hello", "world"], matryoshkaDimensions: [8] });
  llm = await LLM.load(root, { threads: 1 });
});
after(async () => {
  await llm?.close();
  rmSync(root, { recursive: true, force: true });
});

test("llm.embed: one vector per input equal to the float64 reference; usage; dimensions; truncation", async () => {
  const tok = encoderTokenizer(root);
  const texts = ["hello world", "world"];
  const r = await llm.embed(texts);
  assert.equal(llm.info.task, "embed");
  assert.equal(r.embeddings.length, 2);
  texts.forEach((t, i) => {
    const ref = referenceEmbedding(root, { hidden: 32, heads: 4, layers: 2, eps: 1e-12, gelu: "erf" }, tok.encode(t), "mean", true);
    const err = Math.max(...ref.map((v, j) => Math.abs(v - r.embeddings[i]![j]!)));
    assert.ok(err <= 1e-5, `input ${i}: ${err}`);
  });
  assert.equal(r.usage.prompt_tokens, tok.encode(texts[0]!).length + tok.encode(texts[1]!).length);
  assert.equal((await llm.embed("hello", { dimensions: 8 })).embeddings[0]!.length, 8);
  const long = "hello ".repeat(40);
  assert.equal((await llm.embed(long, { truncatePromptTokens: -1 })).usage.prompt_tokens, 24);
  await assert.rejects(llm.embed(long), (e: unknown) => e instanceof LLMError && e.status === 400 && e.code === "context_length_exceeded");
  await assert.rejects(llm.embed("hello", { dimensions: 5 }), (e: unknown) => e instanceof LLMError && e.param === "dimensions");
  await assert.rejects(llm.chat([{ role: "user", content: "hi" }]), (e: unknown) => e instanceof LLMError && e.status === 400 && e.param === "model");
});

test("llm.rerank on an embedding model: the cosine of the reference vectors, best first, topN", async () => {
  const tok = encoderTokenizer(root);
  const ref = (t: string): number[] => referenceEmbedding(root, { hidden: 32, heads: 4, layers: 2, eps: 1e-12, gelu: "erf" }, tok.encode(t), "mean", true);
  const docs = ["world", "hello world", "hello"];
  const q = ref("hello");
  const want = docs.map((d) => ref(d).reduce((s, v, i) => s + v * q[i]!, 0)); // unit vectors: the dot is the cosine
  const r = await llm.rerank("hello", docs);
  assert.deepEqual(r.results.map((x) => x.index), want.map((s, i) => ({ s, i })).sort((a, b) => b.s - a.s).map((x) => x.i));
  for (const x of r.results) {
    assert.equal(x.document.text, docs[x.index]);
    assert.ok(Math.abs(x.relevance_score - want[x.index]!) <= 1e-5, `document ${x.index}`);
  }
  assert.equal((await llm.rerank("hello", docs, { topN: 1 })).results.length, 1);
  await assert.rejects(llm.rerank("hello", []), (e: unknown) => e instanceof LLMError && e.status === 400 && e.param === "documents");
});

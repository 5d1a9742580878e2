// llm.rerank's options (src/llm/llm.ts) against POST /v1/rerank on a server
// of the same tiny cross-encoder (BertForSequenceClassification, random
// weights): the same cases — plain, truncatePromptTokens k (vLLM's
// truncate_prompt_tokens, longest_first), -1, useActivation false (raw
// logits), both together, with topN — give the same results from both paths,
// and the options change the scores as they should (a raw logit's sigmoid is
// the activated score; truncation changes a long pair's score). A bad option
// is the server's 400, as an LLMError naming the field.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { LLM, LLMError, type RerankOptions } from "../../src/index.js";
import { type RunningServer, serve } from "../../src/server/start-server.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";

let root: string;
let llm: LLM;
let server: RunningServer;

const QUERY = "hello world";
const DOCS = ["hello there world", "a b c d e f g h i j k l m n o p q r s t", "world", "xyz hello"];

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-llm-rerank-"));
  writeTinyBert({ dir: root, seed: 33, hiddenSize: 32, numHeads: 4, numLayers: 2, maxPositionEmbeddings: 32, words: ["hello", "world", "there"], crossEncoder: true });
  [llm, server] = await Promise.all([LLM.load(root, { threads: 1 }), serve({ modelDir: root, port: 0, threads: 1 })]);
  await server.ready;
});
after(async () => {
  await Promise.all([llm?.close(), server?.close()]);
  rmSync(root, { recursive: true, force: true });
});

type Results = { index: number; relevance_score: number }[];

/** POST /v1/rerank with the options in the server's snake_case, as a client of the HTTP API sends them. */
async function viaServer(options: RerankOptions): Promise<{ status: number; results: Results; body: Record<string, unknown> }> {
  const res = await fetch(`${server.url}/v1/rerank`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      query: QUERY,
      documents: DOCS,
      ...(options.topN === undefined ? {} : { top_n: options.topN }),
      ...(options.truncatePromptTokens === undefined ? {} : { truncate_prompt_tokens: options.truncatePromptTokens }),
      ...(options.useActivation === undefined ? {} : { use_activation: options.useActivation }),
    }),
  });
  const body = (await res.json()) as Record<string, unknown>;
  return { status: res.status, results: (body["results"] as Results | undefined) ?? [], body };
}

const CASES: { name: string; options: RerankOptions }[] = [
  { name: "no options", options: {} },
  { name: "truncatePromptTokens 9", options: { truncatePromptTokens: 9 } },
  { name: "truncatePromptTokens -1", options: { truncatePromptTokens: -1 } },
  { name: "useActivation false", options: { useActivation: false } },
  { name: "truncatePromptTokens 7, useActivation false, topN 2", options: { truncatePromptTokens: 7, useActivation: false, topN: 2 } },
];

const scores = (r: Results): number[] => [...r].sort((a, b) => a.index - b.index).map((x) => x.relevance_score);

test("llm.rerank = POST /v1/rerank for the same inputs, case by case", async () => {
  for (const { name, options } of CASES) {
    const lib = await llm.rerank(QUERY, DOCS, options);
    const http = await viaServer(options);
    assert.equal(http.status, 200, `${name}: ${JSON.stringify(http.body)}`);
    assert.deepEqual(lib.results.map((r) => r.index), http.results.map((r) => r.index), name);
    assert.deepEqual(lib.results.map((r) => r.relevance_score), http.results.map((r) => r.relevance_score), name);
  }
});

test("the options take effect: useActivation false gives the raw logit (its sigmoid = the score); truncation changes the long pair's score", async () => {
  const plain = scores((await llm.rerank(QUERY, DOCS)).results);
  const raw = scores((await llm.rerank(QUERY, DOCS, { useActivation: false })).results);
  raw.forEach((logit, i) => assert.ok(Math.abs(1 / (1 + Math.exp(-logit)) - plain[i]!) <= 1e-6, `document ${i}: sigmoid(${logit}) vs ${plain[i]}`));
  assert.ok(raw.some((v) => v < 0 || v > 1), `raw logits outside (0, 1): ${raw}`);
  const cut = scores((await llm.rerank(QUERY, DOCS, { truncatePromptTokens: 9 })).results);
  assert.notEqual(cut[1], plain[1], "the 20-word document is cut to fit 9 tokens");
  assert.equal(cut[2], plain[2], "a pair within 9 tokens is not cut");
  assert.deepEqual(scores((await llm.rerank(QUERY, DOCS, { truncatePromptTokens: -1 })).results), plain, "-1 = the model's limit: nothing here is longer");
});

test("bad options are the server's 400, as an LLMError naming the field", async () => {
  const named = (param: string) => (e: unknown) => e instanceof LLMError && e.status === 400 && e.param === param;
  await assert.rejects(llm.rerank(QUERY, DOCS, { truncatePromptTokens: 0 }), named("truncate_prompt_tokens"));
  await assert.rejects(llm.rerank(QUERY, DOCS, { truncatePromptTokens: 2 }), named("truncate_prompt_tokens"));
  await assert.rejects(llm.rerank(QUERY, DOCS, { useActivation: "no" as unknown as boolean }), named("use_activation"));
  assert.equal((await llm.rerank(QUERY, DOCS)).results.length, DOCS.length, "the LLM still answers after the refusals");
});

/**
 * llama.cpp as the oracle for a GGUF reranker and its normalization table.
 * One file (src/testing/tiny-bert-gguf.ts: a tiny random-weight
 * XLMRobertaForSequenceClassification written as convert_hf_to_gguf.py writes
 * bge-reranker, with a precompiled_charsmap built by src/testing/charsmap.ts
 * whose rules are not NFKC's), loaded by both:
 *   - token ids: kvflash's (the GGUF vocabulary's Unigram, the table read by
 *     src/tokenizer/precompiled-charsmap.ts) equal llama.cpp's
 *     llm_tokenizer_ugm on texts that hit the table's rules (so llama.cpp
 *     reads the table this project writes, and both apply it alike);
 *   - scores: llama.cpp's rank pooling (node-llama-cpp's LlamaRankingContext:
 *     <s> q </s></s> d </s>, the head on <s>, sigmoid) on the same ids gives
 *     the logits of the float64 reference with llama.cpp's GELU (ggml_gelu:
 *     the tanh form, through an f16 table) within 1e-2 (seen: 1.2e-3 on
 *     logits of −2.5 … −3.9), and ranks the
 *     documents in kvflash's order. kvflash's own logits are the erf-GELU
 *     reference's (transformers' "gelu") to 1e-5.
 *
 * Skips without llama.cpp (`npm run llamacpp:install`), fails under
 * KVFLASH_REQUIRE_LLAMACPP=1, as test/model/gguf-oracle.test.ts.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ggufEncoderTokenizer, loadGgufEncoderModel } from "../../../src/model/encoder/gguf-encoder.js";
import { type Runtime, createRuntime } from "../../../src/runtime/runtime.js";
import { buildCharsmap } from "../../../src/testing/charsmap.js";
import { findLlamaCpp, llamaCppRequired } from "../../../src/testing/llamacpp.js";
import { writeBertGguf } from "../../../src/testing/tiny-bert-gguf.js";
import { writeTinyBert } from "../../../src/testing/tiny-bert.js";
import { type RefConfig, readF32Safetensors, referenceScore } from "./bert-reference.js";

// The slice of node-llama-cpp's API these tests use (the package is not a typed dependency).
interface LlamaModel {
  tokenize(text: string, specialTokens: boolean): number[];
  createRankingContext(o: { contextSize: number; threads: number }): Promise<{ rankAll(query: number[], documents: number[][]): Promise<number[]>; dispose(): Promise<void> }>;
  dispose(): Promise<void>;
}
interface Llama {
  loadModel(o: { modelPath: string }): Promise<LlamaModel>;
  dispose(): Promise<void>;
}

/** Rules sentencepiece (longest key) and Hugging Face (shortest key, by grapheme) apply alike; none is NFKC's. */
const RULES: Record<string, string> = { "\u00c4": "a", "\u00e9": "e", "\u2460": "(1)", "\u200b": "", "\t": " ", "\ufb01": "fi", "\uff76": "ka" };
const WORDS = ["what", "is", "a", "panda", "bear", "the", "giant", "paris", "in", "france", "cafe", "file", "(1)", "apfel", "ka"];
const CFG: RefConfig = { hidden: 32, heads: 4, layers: 2, eps: 1e-5, gelu: "erf", positionOffset: 2 };

const found = findLlamaCpp();
let llama: Llama | null = null;
let rt: Runtime;
let root: string;
let dir: string;
let file: string;
before(async () => {
  if (!("missing" in found)) {
    const m = (await import(found.bindingEntry)) as { getLlama(o: object): Promise<Llama>; LlamaLogLevel: Record<string, unknown> };
    llama = await m.getLlama({ gpu: false, build: "never", logLevel: m.LlamaLogLevel["error"] });
  }
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-rerank-oracle-"));
  dir = join(root, "bge-reranker-tiny");
  writeTinyBert({ dir, arch: "xlm-roberta", crossEncoder: true, seed: 71, hiddenSize: 32, numHeads: 4, numLayers: 2, maxPositionEmbeddings: 64, words: WORDS, charsmap: buildCharsmap(RULES) });
  file = join(root, "bge-reranker-tiny.gguf");
  writeBertGguf(dir, file);
});
after(async () => {
  await llama?.dispose();
  await rt.dispose();
  rmSync(root, { recursive: true, force: true });
});

function needLlamaCpp(t: { skip(message: string): void }): Llama | null {
  if (llama) return llama;
  const why = "missing" in found ? found.missing : "node-llama-cpp did not load";
  if (llamaCppRequired()) assert.fail(`KVFLASH_REQUIRE_LLAMACPP=1, but ${why}`);
  t.skip(why);
  return null;
}

test("llama.cpp oracle: the GGUF reranker's token ids, its precompiled_charsmap applied, = llama.cpp's", async (t) => {
  const cpp = needLlamaCpp(t);
  if (!cpp) return;
  const lm = await cpp.loadModel({ modelPath: file });
  try {
    const tok = ggufEncoderTokenizer(file);
    const texts = ["what is a panda", "\u00c4pfel \u2460\u200bok", "caf\u00e9\tbar \ufb01le", "\uff76 in paris, the giant bear!", "xyz 42 (1)"];
    for (const text of texts) assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), [...lm.tokenize(text, false)], `ids of ${JSON.stringify(text)}`);
    assert.notDeepEqual(tok.encode(texts[1]!, { addSpecialTokens: false }), tok.encode(texts[1]!.normalize("NFKC"), { addSpecialTokens: false }), "the table is not NFKC");
  } finally {
    await lm.dispose();
  }
});

test("llama.cpp oracle: rank pooling on the GGUF reranker = the float64 reference with llama.cpp's tanh GELU (logits within 1e-2), kvflash's order", async (t) => {
  const cpp = needLlamaCpp(t);
  if (!cpp) return;
  const tok = ggufEncoderTokenizer(file);
  const query = "what is a panda";
  const docs = ["the giant panda is a bear", "paris is in france", "a panda", "cafe file (1) ka", "what is the bear in paris"];
  const q = tok.encode(query, { addSpecialTokens: false });
  const d = docs.map((x) => tok.encode(x, { addSpecialTokens: false }));
  const lm = await cpp.loadModel({ modelPath: file });
  let probabilities: number[];
  try {
    const ctx = await lm.createRankingContext({ contextSize: 64, threads: 2 });
    probabilities = await ctx.rankAll(q, d);
    await ctx.dispose();
  } finally {
    await lm.dispose();
  }
  const pairs = docs.map((x) => tok.encodePair(query, x));
  const [s, e] = [tok.tokenToId("<s>")!, tok.tokenToId("</s>")!];
  pairs.forEach((p, i) => assert.deepEqual(p.ids, [s, ...q, e, e, ...d[i]!, e], "node-llama-cpp's input is the pair template's"));
  const model = loadGgufEncoderModel(rt, file);
  let mine: number[];
  try {
    const cu = [0];
    for (const p of pairs) cu.push(cu[cu.length - 1]! + p.ids.length);
    mine = model.embedBatch({ tokens: pairs.flatMap((p) => p.ids), cuSeqlens: cu, raw: pairs.map(() => true) }).map((v) => v[0]!);
  } finally {
    model.dispose();
  }
  const tensors = readF32Safetensors(join(dir, "model.safetensors"));
  const cppLogits = probabilities.map((p) => Math.log(p / (1 - p)));
  const refTanh = pairs.map((p) => referenceScore(tensors, { ...CFG, gelu: "tanh" }, p.ids, p.typeIds, "roberta", "identity"));
  const refErf = pairs.map((p) => referenceScore(tensors, CFG, p.ids, p.typeIds, "roberta", "identity"));
  t.diagnostic(`logits: llama.cpp ${cppLogits.map((x) => x.toFixed(4)).join(" ")}; reference (tanh GELU) ${refTanh.map((x) => x.toFixed(4)).join(" ")}; kvflash ${mine.map((x) => x.toFixed(4)).join(" ")}`);
  pairs.forEach((_, i) => {
    assert.ok(Math.abs(cppLogits[i]! - refTanh[i]!) <= 1e-2, `document ${i}: llama.cpp's logit ${cppLogits[i]} against the tanh-GELU reference ${refTanh[i]}`);
    assert.ok(Math.abs(mine[i]! - refErf[i]!) <= 1e-5, `document ${i}: kvflash's logit ${mine[i]} against the erf-GELU reference ${refErf[i]}`);
  });
  const order = (xs: number[]): number[] => xs.map((x, i) => ({ x, i })).sort((a, b) => b.x - a.x).map((o) => o.i);
  assert.deepEqual(order(cppLogits), order(mine), "the documents rank alike");
  assert.ok(Math.max(...refErf) - Math.min(...refErf) > 0.1, `the fixture's logits must spread to test the order: ${refErf}`);
});

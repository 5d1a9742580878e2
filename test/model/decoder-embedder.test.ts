// A decoder as an embedding model (DecoderEmbedder, vLLM's pooling runner:
// `--task embed`) on tiny random-weight decoders: the pooled vector of each
// sequence of a ragged batch = the float64 reference decoder's final-normed
// hidden state (referenceForward, output "hidden") of its last token (or its
// first, "cls"; or the f64 mean over all its tokens, "mean", vLLM's MEAN
// pooler), L2-normalized; within 1e-5 per element, cosine ≥ 0.9999.
// Also: a vector does not depend on its batch (blocks are reused from 0
// every step), and bad settings fail with the argument named. The yes/no
// scorer (DecoderScorer, Qwen3-Reranker as vLLM serves it) = sigmoid(logit_yes
// − logit_no) of the reference's last-position logits, within 1e-5.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError } from "../../src/errors.js";
import { type LoadedModel, type Runtime, createRuntime, loadModel } from "../../src/ops-entry.js";
import { type ReferenceWeights, referenceForward, writeTinyModel } from "../../src/testing/index.js";
import { DecoderEmbedder, decoderEmbedBlocks } from "../../src/model/decoder-embedder.js";
import { DecoderScorer, yesNoTokens } from "../../src/model/decoder-scorer.js";
import { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import type { PoolingModelInfo } from "../../src/model/pooling-model.js";
import { referenceWeights } from "./decoder-support.js";

let rt: Runtime;
let root: string;
const BLOCK = 4;
const models = new Map<string, { model: LoadedModel; ref: ReferenceWeights }>();
const dirs = new Map<string, string>();

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-dec-embed-"));
  for (const arch of ["qwen3", "llama"] as const) {
    const dir = writeTinyModel(join(root, arch), { arch, seed: 11, numLayers: 2, hiddenSize: 64, intermediateSize: 96 }).dir;
    dirs.set(arch, dir);
    models.set(arch, { model: loadModel(rt, dir, { weights: "f32", kvDtype: "f32", blockSize: BLOCK, numBlocks: decoderEmbedBlocks(64, 4, BLOCK), progress: false }), ref: referenceWeights(rt, dir) });
  }
});
after(async () => {
  for (const { model } of models.values()) model.runner.dispose();
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

function info(model: LoadedModel, mode: "last" | "cls" | "mean", normalize: boolean): PoolingModelInfo {
  const c = model.config;
  return { maxModelLen: 64, dimensions: c.hiddenSize, crossEncoder: false, pooling: { mode, normalize, maxSeqLength: null, matryoshka: null }, config: { architecture: c.architecture, vocabSize: c.vocabSize, typeVocabSize: 1 } };
}

function seqs(lengths: readonly number[], vocab: number, seed: number): number[][] {
  let s = seed;
  return lengths.map((n) =>
    Array.from({ length: n }, () => {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      return 3 + (s % (vocab - 3));
    }),
  );
}

/** Embeds `sequences` in one batch through a DecoderEmbedder that does not own the shared decoder. */
function embed(model: LoadedModel, mode: "last" | "cls" | "mean", normalize: boolean, sequences: number[][]): Float32Array[] {
  const e = new DecoderEmbedder(model.runner, info(model, mode, normalize));
  const cu = [0];
  for (const s of sequences) cu.push(cu[cu.length - 1]! + s.length);
  return e.embedBatch({ tokens: sequences.flat(), cuSeqlens: cu });
}

const CASES = [
  { arch: "qwen3", mode: "last" as const, normalize: true, what: "Qwen3ForCausalLM (Qwen3-Embedding: last token, normalized)" },
  { arch: "llama", mode: "last" as const, normalize: false, what: "LlamaForCausalLM, last token, not normalized" },
  { arch: "qwen3", mode: "cls" as const, normalize: true, what: "Qwen3ForCausalLM, first token" },
  { arch: "qwen3", mode: "mean" as const, normalize: true, what: "Qwen3ForCausalLM, mean of every token's final-normed state, normalized" },
  { arch: "llama", mode: "mean" as const, normalize: false, what: "LlamaForCausalLM, mean pooling, not normalized" },
];

/** The float64 reference's pooled vector of one sequence: hidden [n, h] (final norm applied) → one row, or the mean of all rows. */
function referencePooled(hidden: Float64Array | Float32Array, n: number, h: number, mode: "last" | "cls" | "mean"): number[] {
  if (mode !== "mean") {
    const t = mode === "last" ? n - 1 : 0;
    return Array.from(hidden.subarray(t * h, t * h + h));
  }
  return Array.from({ length: h }, (_, i) => {
    let sum = 0;
    for (let t = 0; t < n; t++) sum += hidden[t * h + i]!;
    return sum / n;
  });
}

for (const c of CASES) {
  test(`decoder embedding = float64 reference hidden state: ${c.what}; ragged lengths 1, 7, 21, 5`, () => {
    const { model, ref } = models.get(c.arch)!;
    const h = model.config.hiddenSize;
    const batch = seqs([1, 7, 21, 5], model.config.vocabSize, 3);
    const got = embed(model, c.mode, c.normalize, batch);
    batch.forEach((ids, s) => {
      const hidden = referenceForward(model.config, ref, ids, { output: "hidden" });
      let want = referencePooled(hidden, ids.length, h, c.mode);
      if (c.normalize) {
        const n = Math.hypot(...want);
        want = want.map((v) => v / n);
      }
      const scale = c.normalize ? 1 : Math.max(...want.map(Math.abs));
      const err = Math.max(...want.map((v, i) => Math.abs(v - got[s]![i]!))) / scale;
      assert.ok(err <= 1e-5, `sequence ${s}: max error ${err.toExponential(2)} (relative to the largest element when not normalized)`);
      const dot = want.reduce((a, v, i) => a + v * got[s]![i]!, 0);
      const cos = dot / (Math.hypot(...want) * Math.hypot(...got[s]!));
      assert.ok(cos >= 0.9999, `sequence ${s}: cosine ${cos}`);
    });
  });
}

test("a sequence's vector does not depend on the batch it is in (blocks reused from 0 each step)", () => {
  const { model } = models.get("qwen3")!;
  const [a, b, c] = seqs([9, 13, 3], model.config.vocabSize, 5) as [number[], number[], number[]];
  const alone = embed(model, "last", true, [a])[0]!;
  const third = embed(model, "last", true, [b, c, a])[2]!;
  assert.ok(Math.max(...Array.from(alone, (v, i) => Math.abs(v - third[i]!))) <= 1e-6);
});

test("mean pooling: a sequence's vector does not depend on its batch; it differs from last-token pooling", () => {
  const { model } = models.get("llama")!;
  const [a, b] = seqs([11, 4], model.config.vocabSize, 8) as [number[], number[]];
  const alone = embed(model, "mean", true, [a])[0]!;
  const second = embed(model, "mean", true, [b, a])[1]!;
  assert.ok(Math.max(...Array.from(alone, (v, i) => Math.abs(v - second[i]!))) <= 1e-6);
  const last = embed(model, "last", true, [a])[0]!;
  assert.ok(Math.max(...Array.from(alone, (v, i) => Math.abs(v - last[i]!))) > 1e-3);
});

test("refused: an unknown pooling mode, a batch beyond the KV blocks, a sequence beyond maxModelLen, each naming the argument", () => {
  const { model } = models.get("qwen3")!;
  const bad = { ...info(model, "last", true), pooling: { mode: "max" as unknown as "mean", normalize: true, maxSeqLength: null, matryoshka: null } };
  assert.throws(() => new DecoderEmbedder(model.runner, bad), (e: unknown) => e instanceof ArgumentError && e.argument === "pooling" && /"max"/.test(e.message));
  const e = new DecoderEmbedder(model.runner, info(model, "last", true));
  const big = seqs([60, 60], model.config.vocabSize, 1); // 30 blocks of 4 > decoderEmbedBlocks(64, 4, 4) = 20
  assert.throws(() => e.embedBatch({ tokens: big.flat(), cuSeqlens: [0, 60, 120] }), (x: unknown) => x instanceof ArgumentError && x.argument === "batch" && /30 KV blocks/.test(x.message));
  const long = seqs([65], model.config.vocabSize, 1);
  assert.throws(() => e.embedBatch({ tokens: long.flat(), cuSeqlens: [0, 65] }), (x: unknown) => x instanceof ArgumentError && x.argument === "sequence 0");
});

test("yes/no scorer (Qwen3-Reranker): p(yes) = sigmoid(logit_yes − logit_no) of the float64 reference's last position, to 1e-5; tokens from classifier_from_token", () => {
  const { model, ref } = models.get("qwen3")!;
  const tok = Tokenizer.fromDir(dirs.get("qwen3")!);
  const [a, b] = [tok.idToToken(40)!, tok.idToToken(57)!];
  const tokens = yesNoTokens({ classifier_from_token: [a, b] }, tok, "config.json");
  assert.deepEqual(tokens, { no: 40, yes: 57 });
  assert.throws(() => yesNoTokens({}, tok, "config.json"), (e: unknown) => e instanceof ArgumentError && e.argument === "config.json classifier_from_token" && /"no"/.test(e.message));
  assert.throws(() => yesNoTokens({ classifier_from_token: ["x"] }, tok, "config.json"), (e: unknown) => e instanceof ArgumentError && /two token strings/.test(e.message));
  const scorer = new DecoderScorer(model.runner, { ...info(model, "last", false), dimensions: 1, crossEncoder: true }, tokens);
  const batch = seqs([6, 17, 2], model.config.vocabSize, 9);
  const cu = [0, 6, 23, 25];
  const got = scorer.embedBatch({ tokens: batch.flat(), cuSeqlens: cu });
  const V = model.config.vocabSize;
  const scores: number[] = [];
  batch.forEach((ids, s) => {
    const logits = referenceForward(model.config, ref, ids);
    const last = (ids.length - 1) * V;
    const want = 1 / (1 + Math.exp(logits[last + 40]! - logits[last + 57]!));
    scores.push(want);
    assert.equal(got[s]!.length, 1);
    assert.ok(Math.abs(got[s]![0]! - want) <= 1e-5, `pair ${s}: ${got[s]![0]} against ${want}`);
  });
  assert.ok(Math.max(...scores) - Math.min(...scores) > 1e-3, `the fixture's scores must differ: ${scores}`);
});

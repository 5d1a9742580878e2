// Cross-encoders (rerankers: BertForSequenceClassification as
// cross-encoder/ms-marco-MiniLM, XLMRobertaForSequenceClassification as
// bge-reranker) against a float64 reference of transformers' semantics: the
// encoder (bert-reference.ts, token types included), then BERT's pooler +
// classifier or RobertaClassificationHead on the first token, then the
// sigmoid (or the Identity config.json names). Random-weight tiny
// checkpoints (writeTinyBert crossEncoder); scores within 1e-5. Also: the
// tokenizer's pair template ([CLS] q [SEP] d [SEP] with type ids 0…0 1…1;
// <s> q </s></s> d </s>), and checkpoints the head cannot serve refused with
// the key named.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError } from "../../../src/errors.js";
import { type Runtime, createRuntime } from "../../../src/runtime/runtime.js";
import { encoderTokenizer, loadEncoderModel, readEncoderInfo } from "../../../src/model/encoder/encoder-model.js";
import { writeSafetensors } from "../../../src/sources/safetensors-writer.js";
import { writeTinyBert } from "../../../src/testing/tiny-bert.js";
import { type RefConfig, readF32Safetensors, referenceScore } from "./bert-reference.js";

let rt: Runtime;
let root: string;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-xenc-"));
});
after(async () => {
  await rt.dispose();
  rmSync(root, { recursive: true, force: true });
});

const WORDS = ["what", "is", "a", "cat", "the", "small", "pet", "stock", "market", "fell", "paris", "capital", "of", "france"];
const PAIRS: [string, string][] = [
  ["what is a cat", "a cat is a small pet"],
  ["what is a cat", "the stock market fell"],
  ["capital of france", "paris"],
  ["a", "the capital of france is paris, a city of the france market"],
];

const CASES = [
  { name: "BertForSequenceClassification (ms-marco-MiniLM layout), sigmoid, h32 H4", arch: "bert" as const, h: 32, heads: 4, layers: 2, activation: "sigmoid" as const },
  { name: "XLMRobertaForSequenceClassification (bge-reranker layout), sigmoid, h40 H5", arch: "xlm-roberta" as const, h: 40, heads: 5, layers: 2, activation: "sigmoid" as const },
  { name: "BertForSequenceClassification, Identity activation (config.json sentence_transformers.activation_fn), h24 H3", arch: "bert" as const, h: 24, heads: 3, layers: 1, activation: "identity" as const },
];

for (const [ci, c] of CASES.entries()) {
  test(`cross-encoder score = float64 reference to 1e-5: ${c.name}; four pairs of ragged lengths in one forward`, () => {
    const dir = join(root, `case${ci}`);
    writeTinyBert({ dir, arch: c.arch, crossEncoder: true, seed: 40 + ci, hiddenSize: c.h, numHeads: c.heads, numLayers: c.layers, maxPositionEmbeddings: 48, words: WORDS, ...(c.activation === "identity" ? { activationFn: "torch.nn.modules.linear.Identity" } : {}) });
    const info = readEncoderInfo(dir);
    assert.equal(info.crossEncoder, true);
    assert.equal(info.dimensions, 1);
    const tok = encoderTokenizer(dir);
    const model = loadEncoderModel(rt, dir);
    try {
      const enc = PAIRS.map(([q, d]) => tok.encodePair(q, d));
      const scores = model.embed(enc.map((e) => e.ids), enc.map((e) => e.typeIds));
      const tensors = readF32Safetensors(join(dir, "model.safetensors"));
      const xlmr = c.arch === "xlm-roberta";
      const ref: RefConfig = { hidden: c.h, heads: c.heads, layers: c.layers, eps: xlmr ? 1e-5 : 1e-12, gelu: "erf", positionOffset: xlmr ? 2 : 0 };
      const refs = enc.map((e) => referenceScore(tensors, ref, e.ids, e.typeIds, xlmr ? "roberta" : "bert", c.activation));
      enc.forEach((_, i) => {
        assert.equal(scores[i]!.length, 1);
        const err = Math.abs(scores[i]![0]! - refs[i]!);
        assert.ok(err <= 1e-5, `pair ${i}: score ${scores[i]![0]} against ${refs[i]} (error ${err})`);
      });
      if (c.activation === "sigmoid") assert.ok(refs.every((r) => r > 0 && r < 1));
      assert.ok(Math.max(...refs) - Math.min(...refs) > 1e-3, `the fixture's scores must differ to test anything: ${refs}`);
    } finally {
      model.dispose();
    }
  });
}

test("the pair templates: BERT [CLS] q [SEP] d [SEP] with type ids 0…0 1…1; XLM-R <s> q </s></s> d </s>, types 0", () => {
  const bert = join(root, "case0");
  const t1 = encoderTokenizer(bert);
  const q = t1.encode("what is a cat", { addSpecialTokens: false });
  const d = t1.encode("a small pet", { addSpecialTokens: false });
  const [cls, sep] = [t1.tokenToId("[CLS]")!, t1.tokenToId("[SEP]")!];
  assert.deepEqual(t1.encodePair("what is a cat", "a small pet"), { ids: [cls, ...q, sep, ...d, sep], typeIds: [...new Array(q.length + 2).fill(0), ...new Array(d.length + 1).fill(1)] });
  const xlmr = join(root, "case1");
  const t2 = encoderTokenizer(xlmr);
  const q2 = t2.encode("what is a cat", { addSpecialTokens: false });
  const d2 = t2.encode("a small pet", { addSpecialTokens: false });
  const [s, e] = [t2.tokenToId("<s>")!, t2.tokenToId("</s>")!];
  const pair = t2.encodePair("what is a cat", "a small pet");
  assert.deepEqual(pair.ids, [s, ...q2, e, e, ...d2, e]);
  assert.ok(pair.typeIds.every((x) => x === 0));
});

test("a pair's score does not depend on the batch it is in, and token types matter (BERT)", () => {
  const dir = join(root, "case0");
  const tok = encoderTokenizer(dir);
  const model = loadEncoderModel(rt, dir);
  try {
    const p = tok.encodePair("what is a cat", "a cat is a small pet");
    const alone = model.embed([p.ids], [p.typeIds])[0]![0]!;
    const other = tok.encodePair("capital of france", "paris");
    const batched = model.embed([other.ids, p.ids], [other.typeIds, p.typeIds])[1]![0]!;
    assert.ok(Math.abs(alone - batched) <= 1e-6, `${alone} alone, ${batched} in a batch`);
    const typesZero = model.embed([p.ids])[0]![0]!;
    assert.ok(Math.abs(typesZero - alone) > 1e-6, "segment B's type ids must change the score");
  } finally {
    model.dispose();
  }
});

test("refused: two labels (id2label named), an unknown activation_fn, a checkpoint without its head", () => {
  const two = join(root, "two-labels");
  writeTinyBert({ dir: two, crossEncoder: true, numLabels: 2, numLayers: 1 });
  assert.throws(() => readEncoderInfo(two), (e: unknown) => e instanceof ArgumentError && e.argument.endsWith("config.json id2label") && /got 2 labels/.test(e.message));
  const act = join(root, "bad-activation");
  writeTinyBert({ dir: act, crossEncoder: true, numLayers: 1, activationFn: "torch.nn.modules.activation.Tanh" });
  assert.throws(() => readEncoderInfo(act), (e: unknown) => e instanceof ArgumentError && e.argument.endsWith("sentence_transformers.activation_fn") && /Tanh/.test(e.message));
  const headless = join(root, "headless");
  writeTinyBert({ dir: headless, crossEncoder: true, numLayers: 1 });
  const tensors = readF32Safetensors(join(headless, "model.safetensors"));
  unlinkSync(join(headless, "model.safetensors"));
  writeSafetensors(
    join(headless, "model.safetensors"),
    [...tensors].filter(([n]) => !n.startsWith("classifier.")).map(([name, v]) => {
      const f = Float32Array.from(v.data);
      return { name, dtype: "f32" as const, shape: v.shape, data: new Uint8Array(f.buffer) };
    }),
  );
  assert.throws(() => loadEncoderModel(rt, headless), (e: unknown) => e instanceof ArgumentError && /classifier\.weight/.test(e.message));
});

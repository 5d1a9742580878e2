// GGUF rerankers: XLMRobertaForSequenceClassification (bge-reranker) as
// llama.cpp's convert_hf_to_gguf.py writes it (arch "bert", the Unigram "t5"
// vocabulary, RobertaClassificationHead as cls / cls.output,
// bert.classifier.output_labels; written here by src/testing/tiny-bert-gguf.ts
// from a tiny random-weight checkpoint) scored against the float64 reference
// of transformers' forward (bert-reference.ts referenceScore: the encoder,
// dense + tanh on <s>, out_proj, sigmoid or identity) within 1e-5, on pairs
// the GGUF vocabulary's pair template encodes as tokenizer.json does. Also:
// the safetensors directory gives the same scores, pooling_type 4 (rank) is
// accepted, an F16 file scores within its rounding, a BERT file carrying both
// head layers (cls = the pooler) scores with its token types; and the files
// that cannot give the checkpoint's scores are refused naming the tensor or
// key (the converter's BertForSequenceClassification without its pooler, a
// half head, two labels, rank pooling without a head, mean pooling with one).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError } from "../../../src/errors.js";
import { encoderTokenizer, loadEncoderModel } from "../../../src/model/encoder/encoder-model.js";
import { encoderSourceTokenizer, isEncoderModelSource, readEncoderSourceInfo } from "../../../src/model/encoder/encoder-source.js";
import { ggufEncoderTokenizer, loadGgufEncoderModel, readGgufEncoderInfo } from "../../../src/model/encoder/gguf-encoder.js";
import { type Runtime, createRuntime } from "../../../src/runtime/runtime.js";
import { gguf, writeGguf } from "../../../src/sources/gguf/writer.js";
import { bertDirToGguf, writeBertGguf } from "../../../src/testing/tiny-bert-gguf.js";
import { writeTinyBert } from "../../../src/testing/tiny-bert.js";
import { type RefConfig, readF32Safetensors, referenceScore } from "./bert-reference.js";

let rt: Runtime;
let root: string;
let xdir: string;
let xfile: string;
let bdir: string;

const WORDS = ["what", "is", "a", "cat", "the", "small", "pet", "stock", "market", "fell", "paris", "capital", "of", "france"];
const PAIRS: [string, string][] = [
  ["what is a cat", "a cat is a small pet"],
  ["what is a cat", "the stock market fell"],
  ["capital of france", "paris"],
  ["a", "the capital of france is paris, a city of the france market"],
];
const XCFG: RefConfig = { hidden: 40, heads: 5, layers: 2, eps: 1e-5, gelu: "erf", positionOffset: 2 };
const BCFG: RefConfig = { hidden: 32, heads: 4, layers: 2, eps: 1e-12, gelu: "erf" };

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-gguf-rerank-"));
  xdir = join(root, "bge-reranker");
  writeTinyBert({ dir: xdir, arch: "xlm-roberta", crossEncoder: true, seed: 61, hiddenSize: 40, numHeads: 5, numLayers: 2, maxPositionEmbeddings: 48, words: WORDS });
  xfile = join(root, "bge-reranker.gguf");
  writeBertGguf(xdir, xfile);
  bdir = join(root, "ms-marco");
  writeTinyBert({ dir: bdir, crossEncoder: true, seed: 62, hiddenSize: 32, numHeads: 4, numLayers: 2, maxPositionEmbeddings: 48, words: WORDS });
});
after(async () => {
  await rt.dispose();
  rmSync(root, { recursive: true, force: true });
});

const isArg = (re: RegExp) => (e: unknown) => e instanceof ArgumentError && re.test(`${e.argument} ${e.message}`);

/** Writes bertDirToGguf(dir) edited by `edit`; returns the path. */
function edited(dir: string, name: string, edit: (o: ReturnType<typeof bertDirToGguf>) => void): string {
  const o = bertDirToGguf(dir);
  edit(o);
  const path = join(root, `${name}.gguf`);
  writeGguf(path, o);
  return path;
}

test("the converter's layout: cls / cls.output, output_labels [LABEL_0], no pooling_type, no roberta. prefix", () => {
  const o = bertDirToGguf(xdir);
  const names = o.tensors.map((t) => t.name);
  for (const n of ["cls.weight", "cls.bias", "cls.output.weight", "cls.output.bias", "token_embd.weight", "blk.1.ffn_down.bias"]) assert.ok(names.includes(n), n);
  assert.deepEqual(o.tensors.find((t) => t.name === "cls.output.weight")!.shape, [1, 40]);
  assert.deepEqual(o.metadata["bert.classifier.output_labels"], gguf.strings(["LABEL_0"]));
  assert.equal(o.metadata["bert.pooling_type"], undefined);
  const info = readGgufEncoderInfo(xfile);
  assert.deepEqual([info.crossEncoder, info.dimensions, info.config.architecture, info.pooling.mode, info.pooling.normalize, info.maxModelLen], [true, 1, "XLMRobertaForSequenceClassification", "cls", false, 48]);
  assert.equal(isEncoderModelSource({ kind: "gguf", path: xfile }), true);
  assert.equal(readEncoderSourceInfo({ kind: "gguf", path: xfile }).crossEncoder, true);
});

test("GGUF bge-reranker score = float64 reference (1e-5) = the safetensors directory (1e-5); sigmoid and raw logits; four ragged pairs in one forward", () => {
  const tok = ggufEncoderTokenizer(xfile);
  const hf = encoderTokenizer(xdir);
  const gg = loadGgufEncoderModel(rt, xfile);
  const st = loadEncoderModel(rt, xdir);
  try {
    const enc = PAIRS.map(([q, d]) => tok.encodePair(q, d));
    enc.forEach((e, i) => assert.deepEqual(e, hf.encodePair(...PAIRS[i]!), `pair ${i}: the GGUF vocabulary's pair template = tokenizer.json's`));
    assert.deepEqual(encoderSourceTokenizer({ kind: "gguf", path: xfile }).encodePair(...PAIRS[0]!), enc[0]);
    const cu = [0];
    for (const e of enc) cu.push(cu[cu.length - 1]! + e.ids.length);
    const batch = { tokens: enc.flatMap((e) => e.ids), cuSeqlens: cu };
    const scores = gg.embedBatch(batch);
    const raw = gg.embedBatch({ ...batch, raw: enc.map(() => true) });
    const fromDir = st.embedBatch(batch);
    const tensors = readF32Safetensors(join(xdir, "model.safetensors"));
    enc.forEach((e, i) => {
      const ref = referenceScore(tensors, XCFG, e.ids, e.typeIds, "roberta", "sigmoid");
      const refLogit = referenceScore(tensors, XCFG, e.ids, e.typeIds, "roberta", "identity");
      assert.equal(scores[i]!.length, 1);
      assert.ok(Math.abs(scores[i]![0]! - ref) <= 1e-5, `pair ${i}: ${scores[i]![0]} against the reference ${ref}`);
      assert.ok(Math.abs(raw[i]![0]! - refLogit) <= 1e-5, `pair ${i}: raw ${raw[i]![0]} against the reference logit ${refLogit}`);
      assert.ok(Math.abs(scores[i]![0]! - fromDir[i]![0]!) <= 1e-5, `pair ${i}: GGUF ${scores[i]![0]} against safetensors ${fromDir[i]![0]}`);
    });
    const refs = enc.map((e) => referenceScore(tensors, XCFG, e.ids, e.typeIds, "roberta", "identity"));
    assert.ok(Math.max(...refs) - Math.min(...refs) > 1e-2, `the fixture's logits must differ to test anything: ${refs}`);
  } finally {
    gg.dispose();
    st.dispose();
  }
});

test("pooling_type 4 (rank, as llama-server --reranking runs it) and 2 (cls) give the same scores; an F16 file within f16 rounding", () => {
  const rank = edited(xdir, "rank", (o) => void (o.metadata["bert.pooling_type"] = gguf.u32(4)));
  const cls = edited(xdir, "cls", (o) => void (o.metadata["bert.pooling_type"] = gguf.u32(2)));
  const f16 = join(root, "bge-reranker-f16.gguf");
  writeBertGguf(xdir, f16, { type: "F16" });
  const pair = ggufEncoderTokenizer(xfile).encodePair(...PAIRS[0]!);
  const score = (file: string): number => {
    const m = loadGgufEncoderModel(rt, file);
    try {
      return m.embed([pair.ids], [pair.typeIds])[0]![0]!;
    } finally {
      m.dispose();
    }
  };
  const base = score(xfile);
  assert.equal(score(rank), base);
  assert.equal(score(cls), base);
  const err = Math.abs(score(f16) - base);
  assert.ok(err > 0 && err <= 5e-3, `f16 vs f32 score difference ${err}`);
});

test("a BERT GGUF carrying both head layers (cls = BertForSequenceClassification's pooler) scores as transformers does, token types included", () => {
  const file = edited(bdir, "bert-pooled", (o) => {
    // What the converter dropped, put back under the head's first layer.
    const t = readF32Safetensors(join(bdir, "model.safetensors"));
    for (const kind of ["weight", "bias"]) {
      const p = t.get(`bert.pooler.dense.${kind}`)!;
      o.tensors.push({ name: `cls.${kind}`, type: "F32", shape: p.shape, data: new Uint8Array(Float32Array.from(p.data).buffer) });
    }
  });
  const info = readGgufEncoderInfo(file);
  assert.deepEqual([info.crossEncoder, info.config.architecture, info.config.typeVocabSize], [true, "BertForSequenceClassification", 2]);
  const tok = ggufEncoderTokenizer(file);
  const m = loadGgufEncoderModel(rt, file);
  try {
    const enc = PAIRS.map(([q, d]) => tok.encodePair(q, d));
    assert.ok(enc[0]!.typeIds.includes(1), "segment B has type 1");
    const scores = m.embed(enc.map((e) => e.ids), enc.map((e) => e.typeIds));
    const tensors = readF32Safetensors(join(bdir, "model.safetensors"));
    enc.forEach((e, i) => {
      const ref = referenceScore(tensors, BCFG, e.ids, e.typeIds, "bert", "sigmoid");
      assert.ok(Math.abs(scores[i]![0]! - ref) <= 1e-5, `pair ${i}: ${scores[i]![0]} against ${ref}`);
    });
  } finally {
    m.dispose();
  }
});

test("refused, naming the tensor or key: the converter's BERT reranker (pooler dropped), half a head, two labels, labels ≠ rows, rank without a head, mean pooling with a head", () => {
  // convert_hf_to_gguf.py's own BertForSequenceClassification file: cls.output only.
  const bert = join(root, "ms-marco.gguf");
  writeBertGguf(bdir, bert);
  assert.throws(() => readGgufEncoderInfo(bert), isArg(/has cls\.output\.weight but no cls\.weight: .*pooler/));
  const noOut = edited(xdir, "no-out", (o) => void (o.tensors = o.tensors.filter((t) => !t.name.startsWith("cls.output."))));
  assert.throws(() => readGgufEncoderInfo(noOut), isArg(/has cls\.weight but no cls\.output\.weight/));
  const two = edited(xdir, "two-labels", (o) => {
    const w = o.tensors.find((t) => t.name === "cls.output.weight")!;
    const b = o.tensors.find((t) => t.name === "cls.output.bias")!;
    w.shape = [2, 40];
    w.data = new Uint8Array(2 * 40 * 4);
    b.shape = [2];
    b.data = new Uint8Array(8);
    o.metadata["bert.classifier.output_labels"] = gguf.strings(["no", "yes"]);
  });
  assert.throws(() => readGgufEncoderInfo(two), isArg(/cls\.output\.weight must have one row .*got shape \[2, 40\]/));
  const mismatch = edited(xdir, "labels", (o) => void (o.metadata["bert.classifier.output_labels"] = gguf.strings(["a", "b", "c"])));
  assert.throws(() => readGgufEncoderInfo(mismatch), isArg(/bert\.classifier\.output_labels must name one label per row .*got 3/));
  const headless = edited(xdir, "rank-headless", (o) => {
    o.tensors = o.tensors.filter((t) => !t.name.startsWith("cls."));
    o.metadata["bert.pooling_type"] = gguf.u32(4);
  });
  assert.throws(() => readGgufEncoderInfo(headless), isArg(/bert\.pooling_type is 4 \(rank\), but the file has no classification head/));
  const mean = edited(xdir, "mean", (o) => void (o.metadata["bert.pooling_type"] = gguf.u32(1)));
  assert.throws(() => readGgufEncoderInfo(mean), isArg(/bert\.pooling_type must be 4 \(rank\), 2 \(cls\) or absent in a reranker.*got 1/));
  const shape = edited(xdir, "dense-shape", (o) => {
    const t = o.tensors.find((x) => x.name === "cls.weight")!;
    t.shape = [20, 80];
  });
  assert.throws(() => readGgufEncoderInfo(shape), isArg(/cls\.weight must have shape \[40, 40\]/));
});

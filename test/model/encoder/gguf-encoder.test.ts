// BERT-family GGUF files (llama.cpp's convert_hf_to_gguf.py layout, written
// here by src/testing/tiny-bert-gguf.ts from the same random weights as a
// tiny safetensors directory) served by the same encoder: pooled vectors equal
// the safetensors path's within 1e-5 and the float64 reference
// (bert-reference.ts) within 1e-5; an F16 file within its rounding; the
// WordPiece tokenizer rebuilt from the phantom-space GGUF vocabulary equals
// tokenizer.json's on accents, punctuation, unknown words and pairs, and so
// does XLM-R's (arch bert, its Unigram "t5" vocabulary, the position table
// cut at padding_idx + 1); bad files (a missing tensor, an unknown or
// unserved pooling type (rank without a classification head), a causal
// flag, another vocabulary kind, a Unigram one without scores) fail naming
// the tensor or key. GGUF rerankers: gguf-reranker.test.ts.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError } from "../../../src/errors.js";
import { encoderTokenizer, loadEncoderModel } from "../../../src/model/encoder/encoder-model.js";
import { encoderSourceTokenizer, isEncoderModelSource, readEncoderSourceInfo } from "../../../src/model/encoder/encoder-source.js";
import { ggufEncoderTokenizer, loadGgufEncoderModel, readGgufEncoderInfo } from "../../../src/model/encoder/gguf-encoder.js";
import { gguf, writeGguf } from "../../../src/sources/gguf/writer.js";
import { readSourceTokenizer } from "../../../src/model/source-tokenizer.js";
import { type Runtime, createRuntime } from "../../../src/runtime/runtime.js";
import { Prng } from "../../../src/tensor/prng.js";
import { bertDirToGguf, writeBertGguf } from "../../../src/testing/tiny-bert-gguf.js";
import { writeTinyBert } from "../../../src/testing/tiny-bert.js";
import { readF32Safetensors, referenceHidden, referenceNomicHidden, referencePool } from "./bert-reference.js";

let rt: Runtime;
let root: string;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-bert-gguf-"));
});
after(async () => {
  await rt.dispose();
  rmSync(root, { recursive: true, force: true });
});

const maxErr = (a: ArrayLike<number>, b: ArrayLike<number>): number => Math.max(...Array.from(a, (v, i) => Math.abs(v - b[i]!)));

const CASES = [
  { name: "bert, mean pooling, h32 H4", opts: { hiddenSize: 32, numHeads: 4, numLayers: 2, pooling: "mean" as const }, pooling: "mean" as const },
  { name: "bert, cls pooling, h40 H5 I72", opts: { hiddenSize: 40, numHeads: 5, numLayers: 3, intermediateSize: 72, pooling: "cls" as const }, pooling: "cls" as const },
  { name: "XLMRobertaModel (arch bert, Unigram \"t5\" vocabulary, positions cut at padding_idx + 1), cls pooling, h48 H6", opts: { arch: "xlm-roberta" as const, hiddenSize: 48, numHeads: 6, numLayers: 2, intermediateSize: 96, pooling: "cls" as const }, pooling: "cls" as const },
  { name: "nomic-bert, mean pooling, h48 H4", opts: { arch: "nomic-bert" as const, hiddenSize: 48, numHeads: 4, numLayers: 2, intermediateSize: 80, pooling: "mean" as const }, pooling: "mean" as const },
];

for (const [ci, { name, opts, pooling }] of CASES.entries()) {
  test(`GGUF ${name} = the safetensors directory (1e-5) = the float64 reference (1e-5); ragged lengths 1, 6, 29`, () => {
    const dir = join(root, `case${ci}`);
    const { vocab } = writeTinyBert({ dir, seed: 40 + ci, maxPositionEmbeddings: 40, ...opts });
    const file = join(root, `case${ci}.gguf`);
    writeBertGguf(dir, file);
    const info = readGgufEncoderInfo(file);
    assert.deepEqual([info.pooling.mode, info.pooling.normalize, info.maxModelLen, info.dimensions], [pooling, true, 40, opts.hiddenSize]);
    const st = loadEncoderModel(rt, dir);
    const gg = loadGgufEncoderModel(rt, file);
    try {
      const xlmr = opts.arch === "xlm-roberta";
      assert.equal(gg.info.config.architecture, opts.arch === "nomic-bert" ? "NomicBertModel" : xlmr ? "XLMRobertaModel" : "BertModel");
      assert.equal(gg.info.config.layerNormEps, xlmr ? 1e-5 : 1e-12);
      const rng = new Prng(7 + ci);
      const seqs = [1, 6, 29].map((n) => Array.from({ length: n }, () => rng.nextInt(vocab.length)));
      const a = st.embed(seqs);
      const b = gg.embed(seqs);
      const tensors = readF32Safetensors(join(dir, "model.safetensors"));
      const c = { hidden: opts.hiddenSize, heads: opts.numHeads, layers: opts.numLayers, eps: xlmr ? 1e-5 : 1e-12, gelu: "erf" as const, positionOffset: xlmr ? 2 : 0 };
      seqs.forEach((ids, s) => {
        assert.ok(maxErr(a[s]!, b[s]!) <= 1e-5, `sequence ${s}: GGUF vs safetensors ${maxErr(a[s]!, b[s]!)}`);
        const hidden = opts.arch === "nomic-bert" ? referenceNomicHidden(tensors, { ...c, theta: 1000 }, ids) : referenceHidden(tensors, c, ids);
        const ref = referencePool(hidden, pooling, true);
        assert.ok(maxErr(b[s]!, ref) <= 1e-5, `sequence ${s}: GGUF vs float64 reference ${maxErr(b[s]!, ref)}`);
      });
    } finally {
      st.dispose();
      gg.dispose();
    }
  });
}

test("an F16 GGUF (matrices f16, norms f32) gives the f32 file's vectors within f16 rounding", () => {
  const dir = join(root, "case0");
  const f16 = join(root, "case0-f16.gguf");
  writeBertGguf(dir, f16, { type: "F16" });
  const a = loadGgufEncoderModel(rt, join(root, "case0.gguf"));
  const b = loadGgufEncoderModel(rt, f16);
  try {
    const seq = [2, 40, 41, 17, 9, 3];
    const err = maxErr(a.embed([seq])[0]!, b.embed([seq])[0]!);
    assert.ok(err > 0 && err <= 5e-3, `f16 vs f32 max difference ${err}`);
  } finally {
    a.dispose();
    b.dispose();
  }
});

test("WordPiece from the GGUF vocabulary = tokenizer.json: accents, punctuation, unknown words, [CLS] … [SEP], pairs with token types", () => {
  const dir = join(root, "wordpiece");
  writeTinyBert({ dir, words: ["hello", "world", "play", "##ful", "café"], numLayers: 1 });
  const file = join(root, "wordpiece.gguf");
  writeBertGguf(dir, file);
  const hf = encoderTokenizer(dir);
  const gg = ggufEncoderTokenizer(file);
  const viaSource = readSourceTokenizer({ kind: "gguf", path: file });
  const texts = ["Hello, WORLD!", "playful players played", "héllo Café x7 (ok)?", "naïve — ünknöwn ☃ words", "a  b\tc", "[CLS] inside text", "日本 語"];
  for (const text of texts) {
    assert.deepEqual(gg.encode(text), hf.encode(text), text);
    assert.deepEqual(viaSource.encode(text), hf.encode(text), text);
  }
  assert.ok(hf.encode("☃").includes(hf.tokenToId("[UNK]")!), "the fixture has unknown words");
  assert.deepEqual(gg.encodePair("a query", "a document!"), hf.encodePair("a query", "a document!"));
  assert.deepEqual(gg.encodePair("a query", "a document!").typeIds.slice(-3), [1, 1, 1]);
});

test("XLM-R's Unigram vocabulary from GGUF (\"t5\", scores) = tokenizer.json: <s> ▁word … </s>, unknown pieces, pairs <s> a </s></s> b </s>", () => {
  const dir = join(root, "xlmr-tok");
  writeTinyBert({ dir, arch: "xlm-roberta", words: ["hello", "world", "play"], numLayers: 1 });
  const file = join(root, "xlmr-tok.gguf");
  writeBertGguf(dir, file);
  const hf = encoderTokenizer(dir);
  const gg = ggufEncoderTokenizer(file);
  const viaSource = readSourceTokenizer({ kind: "gguf", path: file });
  for (const text of ["hello world", "hello xyz", "playful, Played!", "ünknöwn ☃ words", "  spaced   out "]) {
    assert.deepEqual(gg.encode(text), hf.encode(text), text);
    assert.deepEqual(viaSource.encode(text), hf.encode(text), text);
  }
  assert.deepEqual(gg.encodePair("a query", "a document!"), hf.encodePair("a query", "a document!"));
  assert.equal(readGgufEncoderInfo(file).maxModelLen, 64, "the context is the cut table's length");
});

test("encoder-source: a BERT GGUF is an encoder source; info and tokenizer by source", () => {
  const file = join(root, "case0.gguf");
  assert.equal(isEncoderModelSource({ kind: "gguf", path: file }), true);
  assert.equal(readEncoderSourceInfo({ kind: "gguf", path: file }, 16).maxModelLen, 16);
  assert.deepEqual(encoderSourceTokenizer({ kind: "gguf", path: file }).encode("a b"), encoderTokenizer(join(root, "case0")).encode("a b"));
});

/** Writes bertDirToGguf(case0) edited by `edit`; returns the path. */
function badFile(name: string, edit: (o: ReturnType<typeof bertDirToGguf>) => void): string {
  const o = bertDirToGguf(join(root, "case0"));
  edit(o);
  const path = join(root, `${name}.gguf`);
  writeGguf(path, o);
  return path;
}

test("bad GGUF files fail naming the tensor or the key: missing tensor, unknown / rank / none pooling, causal, another vocabulary kind, Unigram without scores, a stray tensor", () => {
  const isArg = (re: RegExp) => (e: unknown) => e instanceof ArgumentError && re.test(`${e.argument} ${e.message}`);
  const missing = badFile("missing", (o) => void (o.tensors = o.tensors.filter((t) => t.name !== "blk.1.attn_k.weight")));
  assert.throws(() => loadGgufEncoderModel(rt, missing), isArg(/has no tensor "blk\.1\.attn_k\.weight"/));
  const noEmbd = badFile("noembd", (o) => void (o.tensors = o.tensors.filter((t) => t.name !== "token_embd.weight")));
  assert.throws(() => readGgufEncoderInfo(noEmbd), isArg(/has no tensor "token_embd\.weight"/));
  const pool7 = badFile("pool7", (o) => void (o.metadata["bert.pooling_type"] = gguf.u32(7)));
  assert.throws(() => readGgufEncoderInfo(pool7), isArg(/bert\.pooling_type .*got 7 \(not a llama\.cpp pooling type\)/));
  const rank = badFile("rank", (o) => void (o.metadata["bert.pooling_type"] = gguf.u32(4)));
  assert.throws(() => readGgufEncoderInfo(rank), isArg(/bert\.pooling_type is 4 \(rank\), but the file has no classification head/));
  const none = badFile("none", (o) => void (o.metadata["bert.pooling_type"] = gguf.u32(0)));
  assert.throws(() => readGgufEncoderInfo(none), isArg(/bert\.pooling_type .*got 0 \(none/));
  const causal = badFile("causal", (o) => void (o.metadata["bert.attention.causal"] = gguf.bool(true)));
  assert.throws(() => readGgufEncoderInfo(causal), isArg(/bert\.attention\.causal/));
  const t5 = badFile("t5", (o) => void (o.metadata["tokenizer.ggml.model"] = gguf.str("t5")));
  assert.throws(() => ggufEncoderTokenizer(t5), isArg(/tokenizer\.ggml\.scores must have one score per token/));
  const gpt2 = badFile("gpt2", (o) => void (o.metadata["tokenizer.ggml.model"] = gguf.str("gpt2")));
  assert.throws(() => ggufEncoderTokenizer(gpt2), isArg(/tokenizer\.ggml\.model .*"gpt2"/));
  const stray = badFile("stray", (o) => void o.tensors.push({ name: "cls.norm.weight", type: "F32", shape: [32], data: new Uint8Array(128) }));
  assert.throws(() => readGgufEncoderInfo(stray), isArg(/not part of a bert encoder .*cls\.norm\.weight/));
  const shape = badFile("shape", (o) => {
    const t = o.tensors.find((x) => x.name === "blk.0.ffn_up.weight")!;
    t.shape = [t.shape[1]!, t.shape[0]!];
  });
  assert.throws(() => loadGgufEncoderModel(rt, shape), isArg(/blk\.0\.ffn_up\.weight must have shape \[128, 32\]/));
  // Without pooling_type: CLS, normalized (vLLM's default for an encoder).
  const plain = badFile("plain", (o) => void delete o.metadata["bert.pooling_type"]);
  assert.deepEqual([readGgufEncoderInfo(plain).pooling.mode, readGgufEncoderInfo(plain).pooling.normalize], ["cls", true]);
});

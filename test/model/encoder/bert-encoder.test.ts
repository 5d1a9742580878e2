// The BERT encoder (model/encoder) against a float64 reference of BertModel +
// sentence-transformers pooling (bert-reference.ts), on random-weight tiny
// sentence-transformers directories: ragged batches of awkward lengths, each
// pooling mode, erf and tanh GELU, odd hidden sizes. Tolerances: per-token
// hidden states cosine ≥ 0.9999 with the reference, pooled vectors within
// 1e-5 per element. Also: WordPiece through the project's Tokenizer against a
// greedy longest-match reference, a vector independent of its batch, and
// bad inputs and bad directories failing with the argument named.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError } from "../../../src/errors.js";
import { type Runtime, createRuntime } from "../../../src/runtime/runtime.js";
import { encoderTokenizer, loadEncoderModel, readEncoderInfo } from "../../../src/model/encoder/encoder-model.js";
import { writeTinyBert } from "../../../src/testing/tiny-bert.js";
import { Prng } from "../../../src/tensor/prng.js";
import { cosine, readF32Safetensors, referenceHidden, referenceNomicHidden, referencePool } from "./bert-reference.js";

let rt: Runtime;
let root: string;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-bert-"));
});
after(async () => {
  await rt.dispose();
  rmSync(root, { recursive: true, force: true });
});

const CASES = [
  { name: "mean, erf GELU, h32 H4", opts: { hiddenSize: 32, numHeads: 4, numLayers: 2, pooling: "mean" as const, hiddenAct: "gelu" } },
  { name: "cls, tanh GELU, h40 H5 I72", opts: { hiddenSize: 40, numHeads: 5, numLayers: 3, intermediateSize: 72, pooling: "cls" as const, hiddenAct: "gelu_new" } },
  { name: "last, not normalized, h24 H2", opts: { hiddenSize: 24, numHeads: 2, numLayers: 1, intermediateSize: 40, pooling: "last" as const, normalize: false } },
  { name: "XLMRobertaModel (positions from padding_idx + 1), cls, h48 H6", opts: { arch: "xlm-roberta" as const, hiddenSize: 48, numHeads: 6, numLayers: 2, intermediateSize: 96, pooling: "cls" as const } },
];

for (const [ci, { name, opts }] of CASES.entries()) {
  test(`encoder = float64 reference: ${name}; ragged lengths 1, 7, 33, 2`, () => {
    const dir = join(root, `case${ci}`);
    const { vocab } = writeTinyBert({ dir, seed: 10 + ci, maxPositionEmbeddings: 40, ...opts });
    const model = loadEncoderModel(rt, dir);
    try {
      const rng = new Prng(99 + ci);
      const seqs = [1, 7, 33, 2].map((n) => Array.from({ length: n }, () => rng.nextInt(vocab.length)));
      const cu = [0];
      for (const s of seqs) cu.push(cu[cu.length - 1]! + s.length);
      const hidden = model.encoder.forward({ tokens: seqs.flat(), cuSeqlens: cu });
      const vecs = model.embed(seqs);
      const tensors = readF32Safetensors(join(dir, "model.safetensors"));
      const h = opts.hiddenSize;
      const xlmr = "arch" in opts;
      const c = { hidden: h, heads: opts.numHeads, layers: opts.numLayers, eps: xlmr ? 1e-5 : 1e-12, gelu: "hiddenAct" in opts && opts.hiddenAct === "gelu_new" ? ("tanh" as const) : ("erf" as const), positionOffset: xlmr ? 2 : 0 };
      seqs.forEach((ids, s) => {
        const ref = referenceHidden(tensors, c, ids);
        ref.forEach((row, i) => {
          const t = cu[s]! + i;
          const got = hidden.subarray(t * h, t * h + h);
          const cos = cosine(got, row);
          assert.ok(cos >= 0.9999, `sequence ${s} token ${i}: cosine ${cos}`);
        });
        const pooled = referencePool(ref, opts.pooling, "normalize" in opts ? opts.normalize === true : true);
        const err = Math.max(...pooled.map((v, i) => Math.abs(v - vecs[s]![i]!)));
        assert.ok(err <= 1e-5, `sequence ${s}: pooled max error ${err}`);
        assert.ok(cosine(vecs[s]!, pooled) >= 0.9999);
      });
    } finally {
      model.dispose();
    }
  });
}

test("a sequence's vector does not depend on the batch it is in", () => {
  const dir = join(root, "case0");
  const model = loadEncoderModel(rt, dir);
  try {
    const a = [2, 40, 41, 42, 3];
    const alone = model.embed([a])[0]!;
    const batched = model.embed([[2, 50, 3], a, [2, 60, 61, 62, 63, 64, 65, 3]])[1]!;
    const err = Math.max(...Array.from(alone, (v, i) => Math.abs(v - batched[i]!)));
    assert.ok(err <= 1e-6, `max difference ${err}`);
  } finally {
    model.dispose();
  }
});

/** BERT's basic tokenization + WordPiece, greedy longest match first (Wu et al. 2016; transformers' WordpieceTokenizer). */
function referenceWordPiece(text: string, vocab: readonly string[]): string[] {
  const words = text.toLowerCase().split(/\s+/).filter(Boolean).flatMap((w) => w.split(/([!-/:-@[-`{-~])/).filter(Boolean));
  const out = ["[CLS]"];
  for (const w of words) {
    const pieces: string[] = [];
    let start = 0;
    let ok = true;
    while (start < w.length) {
      let end = w.length;
      let found: string | null = null;
      while (start < end) {
        const sub = (start > 0 ? "##" : "") + w.slice(start, end);
        if (vocab.includes(sub)) {
          found = sub;
          break;
        }
        end--;
      }
      if (found === null) {
        ok = false;
        break;
      }
      pieces.push(found);
      start = end;
    }
    out.push(...(ok ? pieces : ["[UNK]"]));
  }
  out.push("[SEP]");
  return out;
}

test("WordPiece through the project's Tokenizer: lowercasing, punctuation, ## continuation, [CLS] … [SEP]", () => {
  const dir = join(root, "wordpiece");
  const { vocab } = writeTinyBert({ dir, words: ["hello", "world", "play", "##ful"], numLayers: 1 });
  const tok = encoderTokenizer(dir);
  for (const text of ["Hello, WORLD!", "playful players played", "héllo x7 (ok)?", "a  b\tc"]) {
    const ids = tok.encode(text);
    // BertNormalizer with strip_accents null and lowercase strips accents, as BERT uncased does: é → e.
    const want = referenceWordPiece(text.replace("é", "e"), vocab);
    assert.deepEqual(ids.map((i) => vocab[i]), want, text);
  }
});

test("bad token ids, an empty sequence and an over-long one are refused before any kernel runs, naming the argument", () => {
  const dir = join(root, "case0");
  const model = loadEncoderModel(rt, dir);
  try {
    const V = model.info.config.vocabSize;
    assert.throws(() => model.embed([[2, V, 3]]), (e: unknown) => e instanceof ArgumentError && e.argument === "tokens[1]" && e.message.includes(String(V)));
    assert.throws(() => model.embed([[2, 3], []]), (e: unknown) => e instanceof ArgumentError && e.argument === "cuSeqlens[2]");
    assert.throws(() => model.embed([Array.from({ length: 41 }, () => 5)]), (e: unknown) => e instanceof ArgumentError && /max_position_embeddings 40/.test(e.message));
    assert.equal(model.embed([[2, 3]])[0]!.length, 32); // still works after the refusals
  } finally {
    model.dispose();
  }
});

test("pooling config: a Dense module or max pooling is refused at load, naming the file", () => {
  const dir = join(root, "bad");
  writeTinyBert({ dir, numLayers: 1 });
  writeFileSync(join(dir, "modules.json"), JSON.stringify([{ idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" }, { idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" }, { idx: 2, name: "2", path: "2_Dense", type: "sentence_transformers.models.Dense" }]));
  assert.throws(() => readEncoderInfo(dir), (e: unknown) => e instanceof ArgumentError && e.argument.endsWith("modules.json[2].type") && e.message.includes("Dense"));
  writeFileSync(join(dir, "modules.json"), JSON.stringify([{ idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" }]));
  mkdirSync(join(dir, "1_Pooling"), { recursive: true });
  writeFileSync(join(dir, "1_Pooling", "config.json"), JSON.stringify({ pooling_mode_max_tokens: true }));
  assert.throws(() => readEncoderInfo(dir), (e: unknown) => e instanceof ArgumentError && e.argument.endsWith("pooling_mode_max_tokens"));
  const bare = join(root, "bare");
  writeTinyBert({ dir: bare, numLayers: 1, sentenceTransformers: false });
  const info = readEncoderInfo(bare);
  assert.deepEqual([info.pooling.mode, info.pooling.normalize], ["cls", true]); // vLLM's default for an encoder without modules.json
});

test("XLM-R: a SentencePiece Unigram tokenizer.json through the project's Tokenizer (<s> ▁word … </s>); 40 tokens fit a table of 42 positions, 41 do not", () => {
  const dir = join(root, "xlmr-tok");
  const { vocab } = writeTinyBert({ dir, arch: "xlm-roberta", words: ["hello", "world"], numLayers: 1, maxPositionEmbeddings: 40 });
  const tok = encoderTokenizer(dir);
  assert.deepEqual(tok.encode("hello world").map((i) => vocab[i]), ["<s>", "▁hello", "▁world", "</s>"]);
  assert.deepEqual(tok.encode("hello xyz").map((i) => vocab[i]), ["<s>", "▁hello", "▁x", "y", "z", "</s>"]);
  const info = readEncoderInfo(dir);
  assert.deepEqual([info.config.positionOffset, info.config.maxPositionEmbeddings, info.maxModelLen], [2, 42, 40]);
  const model = loadEncoderModel(rt, dir);
  try {
    assert.equal(model.embed([Array.from({ length: 40 }, () => 5)])[0]!.length, 32);
    assert.throws(() => model.embed([Array.from({ length: 41 }, () => 5)]), (e: unknown) => e instanceof ArgumentError && /at most 40 tokens/.test(e.message));
  } finally {
    model.dispose();
  }
});

test("NomicBertModel (rotary q/k, SwiGLU, no biases) = its float64 reference: ragged lengths 1, 9, 30; mean pooling", () => {
  const dir = join(root, "nomic");
  const { vocab } = writeTinyBert({ dir, arch: "nomic-bert", seed: 31, hiddenSize: 48, numHeads: 4, numLayers: 2, intermediateSize: 80, maxPositionEmbeddings: 64, pooling: "mean" });
  const model = loadEncoderModel(rt, dir);
  try {
    assert.deepEqual([model.info.config.positions, model.info.config.mlp], ["rotary", "swiglu"]);
    const rng = new Prng(5);
    const seqs = [1, 9, 30].map((n) => Array.from({ length: n }, () => rng.nextInt(vocab.length)));
    const vecs = model.embed(seqs);
    const tensors = readF32Safetensors(join(dir, "model.safetensors"));
    seqs.forEach((ids, s) => {
      const ref = referenceNomicHidden(tensors, { hidden: 48, heads: 4, layers: 2, eps: 1e-12, gelu: "erf", theta: 1000 }, ids);
      const pooled = referencePool(ref, "mean", true);
      const err = Math.max(...pooled.map((v, i) => Math.abs(v - vecs[s]![i]!)));
      assert.ok(err <= 1e-5, `sequence ${s}: pooled max error ${err}`);
      assert.ok(cosine(vecs[s]!, pooled) >= 0.9999);
    });
  } finally {
    model.dispose();
  }
});

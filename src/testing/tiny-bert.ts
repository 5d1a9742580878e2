/**
 * Writes a small, real sentence-transformers model directory with random
 * weights — the shape of all-MiniLM-L6-v2's repo at any size:
 *
 *   config.json                  BertModel (post-LN, absolute positions, GELU)
 *   model.safetensors            f32, BertModel's tensor names
 *   tokenizer.json               BertNormalizer + BertPreTokenizer + WordPiece + [CLS] … [SEP]
 *   tokenizer_config.json, vocab.txt
 *   modules.json, 1_Pooling/config.json, [2_Normalize/], sentence_bert_config.json
 *
 * The vocabulary is the special tokens, the letters (alone and as "##x", so
 * every lowercase word has a WordPiece split), punctuation and `words`.
 * With arch "xlm-roberta" it is an XLMRobertaModel instead (positions from
 * padding_idx + 1 = 2, one token type) with a SentencePiece Unigram
 * tokenizer.json (Metaspace "▁", <s> … </s>; with `charsmap`, a Precompiled
 * normalizer), as multilingual-e5 / bge-m3 ship.
 * With arch "nomic-bert" it is a NomicBertModel (nomic-embed-text's names and
 * config keys: rotary positions, SwiGLU, no biases) with the WordPiece tokenizer. Words
 * of one of `groups` share their embedding row up to a little noise — a
 * fixture whose mean-pooled vectors make paraphrases close (the cosine
 * example), not a trained model. With `crossEncoder` it is a reranker
 * instead (cross-encoder/ms-marco-MiniLM's and bge-reranker's layout):
 * BertForSequenceClassification ("bert." names, the pooler, `classifier`) or
 * XLMRobertaForSequenceClassification ("roberta." names, `classifier.dense`,
 * `classifier.out_proj`), one label, no sentence-transformers modules. Same
 * options → same files.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeSafetensors } from "../sources/safetensors-writer.js";
import type { PoolingMode } from "../model/encoder/pooling-config.js";
import { Prng } from "../tensor/prng.js";
import { writeSentenceTransformersModules } from "./sentence-transformers-modules.js";

export interface TinyBertOptions {
  dir: string;
  /** Default "bert". */
  arch?: "bert" | "xlm-roberta" | "nomic-bert";
  hiddenSize?: number;
  numHeads?: number;
  numLayers?: number;
  intermediateSize?: number;
  maxPositionEmbeddings?: number;
  /** sentence_bert_config.json max_seq_length; default maxPositionEmbeddings. */
  maxSeqLength?: number;
  /** Default "mean". */
  pooling?: PoolingMode;
  /** Write a Normalize module. Default true. */
  normalize?: boolean;
  /** Write modules.json etc. (false: a bare BertModel directory). Default true. */
  sentenceTransformers?: boolean;
  /** config.json matryoshka_dimensions. */
  matryoshkaDimensions?: number[];
  /** "gelu" (erf) or "gelu_new" (tanh). Default "gelu". */
  hiddenAct?: string;
  /** Whole words in the vocabulary, besides letters and punctuation. */
  words?: readonly string[];
  /** Words (each also added to the vocabulary) whose embedding rows are one shared vector plus noise. */
  groups?: readonly (readonly string[])[];
  /** Uniform(−s, s) scale of the projection weights. Default 0.3. */
  weightScale?: number;
  /** Pad the vocabulary with unused "[unusedN]" tokens up to this size (a 30522-token MiniLM shape). */
  vocabSize?: number;
  seed?: number;
  /** Write a cross-encoder (a *ForSequenceClassification checkpoint). */
  crossEncoder?: boolean;
  /** The cross-encoder's labels (id2label). Default 1. */
  numLabels?: number;
  /** config.json sentence_transformers.activation_fn of the cross-encoder. Default: none written. */
  activationFn?: string;
  /** XLM-R only: tokenizer.json's normalizer is this SentencePiece precompiled_charsmap (charsmap.ts's buildCharsmap), as XLM-R's is. Default: no normalizer. */
  charsmap?: Uint8Array;
}

const SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
const LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789".split("");
const PUNCT = [".", ",", "!", "?", "'", "-", ":", ";", "(", ")"];

const XLMR_SPECIAL = ["<s>", "<pad>", "</s>", "<unk>"];

/** The vocabulary (id order) of a tiny BERT with these words and groups (XLM-R: SentencePiece pieces, "▁" starting a word). */
export function tinyBertVocab(options: Pick<TinyBertOptions, "words" | "groups" | "vocabSize" | "arch">): string[] {
  const xlmr = options.arch === "xlm-roberta";
  const vocab = xlmr ? [...XLMR_SPECIAL, "▁", ...PUNCT, ...LETTERS, ...LETTERS.map((l) => `▁${l}`)] : [...SPECIAL, ...PUNCT, ...LETTERS, ...LETTERS.map((l) => `##${l}`), "##s", "##ed", "##ing", "##ly"];
  for (const w of [...(options.words ?? []), ...(options.groups ?? []).flat()]) if (!vocab.includes(xlmr ? `▁${w}` : w)) vocab.push(xlmr ? `▁${w}` : w);
  for (let i = 0; vocab.length < (options.vocabSize ?? 0); i++) vocab.push(`[unused${i}]`);
  return vocab;
}

function tokenizerJson(vocab: readonly string[]): unknown {
  const id = (t: string): number => vocab.indexOf(t);
  const special = (t: string) => ({ id: id(t), content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: SPECIAL.map(special),
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "[CLS]", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "[SEP]", type_id: 0 } }],
      pair: [
        { SpecialToken: { id: "[CLS]", type_id: 0 } },
        { Sequence: { id: "A", type_id: 0 } },
        { SpecialToken: { id: "[SEP]", type_id: 0 } },
        { Sequence: { id: "B", type_id: 1 } },
        { SpecialToken: { id: "[SEP]", type_id: 1 } },
      ],
      special_tokens: {
        "[CLS]": { id: "[CLS]", ids: [id("[CLS]")], tokens: ["[CLS]"] },
        "[SEP]": { id: "[SEP]", ids: [id("[SEP]")], tokens: ["[SEP]"] },
      },
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab: Object.fromEntries(vocab.map((t, i) => [t, i])) },
  };
}

/** A SentencePiece Unigram tokenizer.json over `vocab`: whole-word pieces likelier than characters. */
function unigramTokenizerJson(vocab: readonly string[], charsmap?: Uint8Array): unknown {
  const special = (t: string) => ({ id: vocab.indexOf(t), content: t, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  const score = (p: string): number => (XLMR_SPECIAL.includes(p) ? 0 : p.length > 2 ? -5 - p.length / 10 : -10);
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: XLMR_SPECIAL.map(special),
    normalizer: charsmap === undefined ? null : { type: "Precompiled", precompiled_charsmap: Buffer.from(charsmap).toString("base64") },
    pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
      pair: [{ SpecialToken: { id: "<s>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }, { Sequence: { id: "B", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
      special_tokens: Object.fromEntries(["<s>", "</s>"].map((t) => [t, { id: t, ids: [vocab.indexOf(t)], tokens: [t] }])),
    },
    decoder: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    model: { type: "Unigram", unk_id: vocab.indexOf("<unk>"), byte_fallback: false, vocab: vocab.map((p) => [p, score(p)]) },
  };
}

/** Writes the directory; returns its vocabulary. */
export function writeTinyBert(options: TinyBertOptions): { vocab: string[] } {
  const { dir } = options;
  const h = options.hiddenSize ?? 32;
  const heads = options.numHeads ?? 4;
  const layers = options.numLayers ?? 2;
  const inter = options.intermediateSize ?? 4 * h;
  const xlmr = options.arch === "xlm-roberta";
  /** XLM-R's positions start at padding_idx + 1 = 2: its table has two rows more than it takes tokens. */
  const maxPos = (options.maxPositionEmbeddings ?? 64) + (xlmr ? 2 : 0);
  const types = xlmr ? 1 : 2;
  const scale = options.weightScale ?? 0.3;
  const vocab = tinyBertVocab(options);
  const V = vocab.length;
  const rng = new Prng(options.seed ?? 1);
  const uniform = (n: number, s: number, mean = 0): Float32Array => Float32Array.from({ length: n }, () => mean + s * (2 * rng.nextFloat() - 1));
  const tensors: { name: string; shape: number[]; data: Float32Array }[] = [];
  const put = (name: string, shape: number[], data: Float32Array): void => void tensors.push({ name, shape, data });

  const word = uniform(V * h, 1);
  for (const group of options.groups ?? []) {
    const base = uniform(h, 1);
    for (const w of group) {
      const row = vocab.indexOf(xlmr ? `▁${w}` : w);
      for (let i = 0; i < h; i++) word[row * h + i] = base[i]! + 0.1 * (2 * rng.nextFloat() - 1);
    }
  }
  put("embeddings.word_embeddings.weight", [V, h], word);
  if (options.arch === "nomic-bert") {
    put("embeddings.token_type_embeddings.weight", [2, h], uniform(2 * h, 0.2));
    put("emb_ln.weight", [h], uniform(h, 0.2, 1));
    put("emb_ln.bias", [h], uniform(h, 0.1));
    for (let l = 0; l < layers; l++) {
      const p = `encoder.layers.${l}.`;
      put(`${p}attn.Wqkv.weight`, [3 * h, h], uniform(3 * h * h, scale));
      put(`${p}attn.out_proj.weight`, [h, h], uniform(h * h, scale));
      put(`${p}mlp.fc11.weight`, [inter, h], uniform(inter * h, scale));
      put(`${p}mlp.fc12.weight`, [inter, h], uniform(inter * h, scale));
      put(`${p}mlp.fc2.weight`, [h, inter], uniform(h * inter, scale / 2));
      for (const n of ["norm1", "norm2"]) (put(`${p}${n}.weight`, [h], uniform(h, 0.2, 1)), put(`${p}${n}.bias`, [h], uniform(h, 0.1)));
    }
  } else {
  put("embeddings.position_embeddings.weight", [maxPos, h], uniform(maxPos * h, 0.2));
  put("embeddings.token_type_embeddings.weight", [types, h], uniform(types * h, 0.2));
  put("embeddings.LayerNorm.weight", [h], uniform(h, 0.2, 1));
  put("embeddings.LayerNorm.bias", [h], uniform(h, 0.1));
  for (let l = 0; l < layers; l++) {
    const p = `encoder.layer.${l}.`;
    for (const n of ["query", "key", "value"]) {
      put(`${p}attention.self.${n}.weight`, [h, h], uniform(h * h, scale));
      put(`${p}attention.self.${n}.bias`, [h], uniform(h, 0.1));
    }
    put(`${p}attention.output.dense.weight`, [h, h], uniform(h * h, scale));
    put(`${p}attention.output.dense.bias`, [h], uniform(h, 0.1));
    put(`${p}attention.output.LayerNorm.weight`, [h], uniform(h, 0.2, 1));
    put(`${p}attention.output.LayerNorm.bias`, [h], uniform(h, 0.1));
    put(`${p}intermediate.dense.weight`, [inter, h], uniform(inter * h, scale));
    put(`${p}intermediate.dense.bias`, [inter], uniform(inter, 0.1));
    put(`${p}output.dense.weight`, [h, inter], uniform(h * inter, scale / 2));
    put(`${p}output.dense.bias`, [h], uniform(h, 0.1));
    put(`${p}output.LayerNorm.weight`, [h], uniform(h, 0.2, 1));
    put(`${p}output.LayerNorm.bias`, [h], uniform(h, 0.1));
  }
  }

  if (options.crossEncoder === true) {
    const L = options.numLabels ?? 1;
    const prefix = xlmr ? "roberta." : "bert.";
    for (const t of tensors) t.name = prefix + t.name;
    const [dense, out] = xlmr ? ["classifier.dense", "classifier.out_proj"] : ["bert.pooler.dense", "classifier"];
    put(`${dense}.weight`, [h, h], uniform(h * h, 0.5));
    put(`${dense}.bias`, [h], uniform(h, 0.1));
    put(`${out}.weight`, [L, h], uniform(L * h, 1));
    put(`${out}.bias`, [L], uniform(L, 0.2));
  }

  mkdirSync(dir, { recursive: true });
  const json = (path: string, value: unknown): void => writeFileSync(join(dir, path), `${JSON.stringify(value, null, 2)}\n`);
  const nomic = {
    architectures: ["NomicBertModel"],
    model_type: "nomic_bert",
    vocab_size: V,
    n_embd: h,
    n_head: heads,
    n_layer: layers,
    n_inner: inter,
    n_positions: maxPos,
    type_vocab_size: 2,
    layer_norm_epsilon: 1e-12,
    rotary_emb_base: 1000,
    rotary_emb_fraction: 1.0,
    rotary_emb_interleaved: false,
    activation_function: "swiglu",
    prenorm: false,
    qkv_proj_bias: false,
    mlp_fc1_bias: false,
    mlp_fc2_bias: false,
    pad_token_id: 0,
  };
  json("config.json", options.arch === "nomic-bert" ? nomic : {
    architectures: [xlmr ? (options.crossEncoder === true ? "XLMRobertaForSequenceClassification" : "XLMRobertaModel") : options.crossEncoder === true ? "BertForSequenceClassification" : "BertModel"],
    ...(options.crossEncoder === true ? { id2label: Object.fromEntries(Array.from({ length: options.numLabels ?? 1 }, (_, i) => [String(i), `LABEL_${i}`])) } : {}),
    ...(options.activationFn === undefined ? {} : { sentence_transformers: { activation_fn: options.activationFn, version: "4.1.0" } }),
    model_type: xlmr ? "xlm-roberta" : "bert",
    vocab_size: V,
    hidden_size: h,
    num_hidden_layers: layers,
    num_attention_heads: heads,
    intermediate_size: inter,
    hidden_act: options.hiddenAct ?? "gelu",
    max_position_embeddings: maxPos,
    type_vocab_size: types,
    layer_norm_eps: xlmr ? 1e-5 : 1e-12,
    position_embedding_type: "absolute",
    pad_token_id: xlmr ? 1 : 0,
    ...(xlmr ? { bos_token_id: 0, eos_token_id: 2 } : {}),
    torch_dtype: "float32",
    ...(options.matryoshkaDimensions === undefined ? {} : { matryoshka_dimensions: options.matryoshkaDimensions }),
  });
  writeSafetensors(
    join(dir, "model.safetensors"),
    tensors.map((t) => ({ name: t.name, dtype: "f32", shape: t.shape, data: new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength) })),
  );
  if (xlmr) {
    json("tokenizer.json", unigramTokenizerJson(vocab, options.charsmap));
    json("tokenizer_config.json", { model_max_length: maxPos - 2, bos_token: "<s>", eos_token: "</s>", cls_token: "<s>", sep_token: "</s>", pad_token: "<pad>", unk_token: "<unk>", tokenizer_class: "XLMRobertaTokenizer" });
  } else {
    json("tokenizer.json", tokenizerJson(vocab));
    json("tokenizer_config.json", { do_lower_case: true, model_max_length: maxPos, cls_token: "[CLS]", sep_token: "[SEP]", pad_token: "[PAD]", unk_token: "[UNK]", mask_token: "[MASK]", tokenizer_class: "BertTokenizer" });
    writeFileSync(join(dir, "vocab.txt"), `${vocab.join("\n")}\n`);
  }
  if (options.sentenceTransformers !== false && options.crossEncoder !== true) {
    writeSentenceTransformersModules(dir, { dimension: h, pooling: options.pooling ?? "mean", normalize: options.normalize ?? true, maxSeqLength: options.maxSeqLength ?? maxPos - (xlmr ? 2 : 0) });
  }
  return { vocab };
}

/**
 * A BERT, XLM-RoBERTa or NomicBert model directory (writeTinyBert's, f32
 * safetensors with a WordPiece or Unigram tokenizer.json) → the GGUF file llama.cpp's
 * convert_hf_to_gguf.py writes from it (BertModel / NomicBertModel): the same
 * weights under llama.cpp's tensor names, the vocabulary in its "phantom
 * space" spelling (CONTROL tokens as they are, "##x" → "x", "x" → "▁x"),
 * the special ids gguf-py's SpecialVocab writes from tokenizer_config.json,
 * XLM-R's Unigram vocabulary as "t5" with its scores (and its Precompiled
 * normalizer's table as tokenizer.ggml.precompiled_charsmap), the position table cut
 * to start at padding_idx + 1 (RobertaModel.modify_tensors),
 * and `{arch}.pooling_type` from the sentence-transformers Pooling module
 * (_try_set_pooling_type). A cross-encoder (writeTinyBert crossEncoder) is
 * written as the converter writes a reranker: the "bert." / "roberta." prefix
 * dropped, RobertaClassificationHead's classifier.dense / classifier.out_proj
 * as cls / cls.output, id2label as `{arch}.classifier.output_labels`, no
 * pooling_type; and a BertForSequenceClassification as the converter mangles
 * it: the pooler dropped, `classifier` as cls.output. For tests: the same
 * random weights served from two formats must give the same vectors.
 *
 *   bertDirToGguf(dir)                    → WriteGgufOptions (edit it to make a bad file)
 *   writeBertGguf(dir, out, { type })     writes it (matrices F32, F16 or a quantized type)
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { GgmlTypeName } from "../tensor/ggml-types.js";
import { quantize } from "../sources/gguf/quantize.js";
import { type GgufTyped, type GgufWriteTensor, type WriteGgufOptions, gguf, writeGguf } from "../sources/gguf/writer.js";

export interface BertGgufOptions {
  /** GGUF type of the matrices (1-D tensors and token_types stay F32, as the converter keeps them). Default "F32". */
  type?: GgmlTypeName;
}

type Json = Record<string, unknown>;

const CONTROL = 3;
const NORMAL = 1;
const UNKNOWN = 2;

/** name → [shape, f32 data] of an f32 model.safetensors. */
function readSafetensorsF32(path: string): Map<string, { shape: number[]; data: Float32Array }> {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8")) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, e] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    if (e.dtype !== "F32") throw new Error(`bertDirToGguf reads F32 checkpoints, ${name} is ${e.dtype}`);
    const bytes = buf.subarray(8 + n + e.data_offsets[0], 8 + n + e.data_offsets[1]);
    out.set(name, { shape: e.shape, data: new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)) });
  }
  return out;
}

/**
 * The converter's tensor name for a transformers one (gguf-py tensor_mapping.py, BERT and nomic-bert rows;
 * BertModel / XLMRobertaModel.filter_tensors for a *ForSequenceClassification checkpoint), or null for a dropped one.
 */
function ggufName(name: string): string | null {
  const hf = name.replace(/^(?:bert|roberta)\./, "");
  if (hf.startsWith("pooler.dense.")) return null; // "we are only using BERT for embeddings so we don't need the pooling layer"
  if (hf === "classifier.weight" || hf === "classifier.bias") return `cls.output.${hf.slice("classifier.".length)}`; // BERT's, renamed classifier.out_proj

  const top: Readonly<Record<string, string>> = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.LayerNorm": "token_embd_norm",
    emb_ln: "token_embd_norm",
    "classifier.dense": "cls",
    "classifier.out_proj": "cls.output",
  };
  const layer: Readonly<Record<string, string>> = {
    "attention.self.query": "attn_q", "attention.self.key": "attn_k", "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output", "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up", "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm",
    "attn.Wqkv": "attn_qkv", "attn.out_proj": "attn_output", norm1: "attn_output_norm", "mlp.fc11": "ffn_up", "mlp.fc12": "ffn_gate", "mlp.fc2": "ffn_down", norm2: "layer_output_norm",
  };
  const kind = hf.slice(hf.lastIndexOf(".") + 1);
  const base = hf.slice(0, hf.lastIndexOf("."));
  if (top[base] !== undefined) return `${top[base]}.${kind}`;
  const m = /^encoder\.layers?\.(\d+)\.(.+)$/.exec(base);
  if (m === null || layer[m[2]!] === undefined) throw new Error(`bertDirToGguf: no llama.cpp name for ${hf}`);
  return `blk.${m[1]}.${layer[m[2]!]}.${kind}`;
}

/** The pooling_type _try_set_pooling_type writes (1 mean, 2 cls, 3 last), or null without a Pooling module. */
function poolingType(dir: string): number | null {
  const modulesPath = join(dir, "modules.json");
  if (!existsSync(modulesPath)) return null;
  const mod = (JSON.parse(readFileSync(modulesPath, "utf8")) as { type: string; path: string }[]).find((m) => m.type === "sentence_transformers.models.Pooling");
  if (mod === undefined) return null;
  const p = JSON.parse(readFileSync(join(dir, mod.path, "config.json"), "utf8")) as Json;
  return p["pooling_mode_mean_tokens"] === true ? 1 : p["pooling_mode_cls_token"] === true ? 2 : p["pooling_mode_lasttoken"] === true ? 3 : null;
}

/** The GGUF file convert_hf_to_gguf.py would write from `dir`, as writer options. */
export function bertDirToGguf(dir: string, options: BertGgufOptions = {}): WriteGgufOptions & { metadata: Record<string, GgufTyped>; tensors: GgufWriteTensor[] } {
  const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Json;
  const nomic = config["model_type"] === "nomic_bert";
  const arch = nomic ? "nomic-bert" : "bert";
  const tj = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")) as { model: { type: string; vocab: Record<string, number> | [string, number][]; unk_id?: number }; added_tokens: { id: number; content: string; special: boolean }[]; normalizer: Json | null };
  const unigram = tj.model.type === "Unigram"; // XLMRobertaModel: _xlmroberta_set_vocab's "t5" vocabulary
  if (tj.model.type !== "WordPiece" && !unigram) throw new Error(`bertDirToGguf writes WordPiece or Unigram vocabularies, ${dir} has ${tj.model.type}`);
  const vocab: string[] = [];
  if (Array.isArray(tj.model.vocab)) tj.model.vocab.forEach(([t], i) => (vocab[i] = t));
  else for (const [t, i] of Object.entries(tj.model.vocab)) vocab[i] = t;
  for (let i = 0; i < vocab.length; i++) vocab[i] ??= `[PAD${i}]`; // an id no token has (get_vocab_base's filler)
  const ids = new Map(vocab.map((t, i) => [t, i]));
  const types = vocab.map((_, i) => (unigram && i === tj.model.unk_id ? UNKNOWN : tj.added_tokens.some((a) => a.id === i && a.special) ? CONTROL : NORMAL));
  const tokens = unigram ? vocab : vocab.map((t, i) => (types[i] === CONTROL ? t : t.startsWith("##") ? t.slice(2) : `\u2581${t}`));
  const tc = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")) as Json;
  const idOf = (key: string): number | null => (typeof tc[key] === "string" ? (ids.get(tc[key] as string) ?? null) : null);
  // RobertaModel's converter cuts the position table to start at padding_idx + 1 and shortens the context to match.
  const offset = unigram ? (config["pad_token_id"] as number) + 1 : 0;
  const k = (key: string): string => `${arch}.${key}`;
  const int = (key: string): number => config[key] as number;
  const metadata: Record<string, GgufTyped> = {
    "general.architecture": gguf.str(arch),
    "general.name": gguf.str("tiny-bert"),
    [k("context_length")]: gguf.u32(nomic ? int("n_positions") : int("max_position_embeddings") - offset),
    [k("embedding_length")]: gguf.u32(nomic ? int("n_embd") : int("hidden_size")),
    [k("feed_forward_length")]: gguf.u32(nomic ? int("n_inner") : int("intermediate_size")),
    [k("block_count")]: gguf.u32(nomic ? int("n_layer") : int("num_hidden_layers")),
    [k("attention.head_count")]: gguf.u32(nomic ? int("n_head") : int("num_attention_heads")),
    [k("attention.layer_norm_epsilon")]: gguf.f32((nomic ? config["layer_norm_epsilon"] : config["layer_norm_eps"]) as number),
    [k("attention.causal")]: gguf.bool(false),
    ...(nomic ? { [k("rope.freq_base")]: gguf.f32(config["rotary_emb_base"] as number) } : {}),
    "tokenizer.ggml.token_type_count": gguf.u32(int("type_vocab_size")),
    "tokenizer.ggml.model": gguf.str(unigram ? "t5" : "bert"),
    "tokenizer.ggml.pre": gguf.str("default"),
    "tokenizer.ggml.tokens": gguf.strings(tokens),
    "tokenizer.ggml.token_type": gguf.i32s(types),
    ...(unigram
      ? {
          "tokenizer.ggml.scores": gguf.f32s((tj.model.vocab as [string, number][]).map(([, s]) => s)),
          "tokenizer.ggml.add_space_prefix": gguf.bool(true),
          "tokenizer.ggml.remove_extra_whitespaces": gguf.bool(false), // the fixture's tokenizer.json has no Replace normalizer
          // _xlmroberta_set_vocab: b64decode(tokenizer_json["normalizer"]["precompiled_charsmap"]), as bytes.
          ...(tj.normalizer?.["type"] === "Precompiled" ? { "tokenizer.ggml.precompiled_charsmap": { type: "array", of: "u8", values: [...Buffer.from(tj.normalizer["precompiled_charsmap"] as string, "base64")] } as GgufTyped } : {}),
        }
      : {}),
  };
  // BertModel.__init__ keeps id2label unless it is AutoConfig's two dummy labels; set_gguf_parameters writes them.
  const id2label = config["id2label"] as Record<string, string> | undefined;
  const labels = id2label === undefined ? [] : Object.keys(id2label).sort((a, b) => Number(a) - Number(b)).map((i) => id2label[i]!);
  if (labels.length > 0 && !(labels.length === 2 && labels[0] === "LABEL_0")) metadata[k("classifier.output_labels")] = gguf.strings(labels);
  const pool = poolingType(dir);
  if (pool !== null) metadata[k("pooling_type")] = gguf.u32(pool);
  for (const [key, name] of [["bos_token", "bos"], ["eos_token", "eos"], ["unk_token", "unknown"], ["sep_token", "seperator"], ["pad_token", "padding"], ["cls_token", "cls"], ["mask_token", "mask"]] as const) {
    const id = idOf(key);
    if (id !== null) metadata[`tokenizer.ggml.${name}_token_id`] = gguf.u32(id);
  }
  const type = options.type ?? "F32";
  const tensors: GgufWriteTensor[] = [];
  for (let [name, t] of readSafetensorsF32(join(dir, "model.safetensors"))) {
    const g = ggufName(name);
    if (g === null) continue;
    if (g === "position_embd.weight" && offset > 0) t = { shape: [t.shape[0]! - offset, t.shape[1]!], data: t.data.slice(offset * t.shape[1]!) };
    const matrix = t.shape.length === 2 && !g.startsWith("token_types");
    const cols = t.shape[t.shape.length - 1]!;
    tensors.push({ name: g, type: matrix ? type : "F32", shape: t.shape, data: quantize(matrix ? type : "F32", t.data, cols) });
  }
  return { metadata, tensors };
}

/** Writes bertDirToGguf(dir, options) to `out`. */
export function writeBertGguf(dir: string, out: string, options: BertGgufOptions = {}): void {
  writeGguf(out, bertDirToGguf(dir, options));
}

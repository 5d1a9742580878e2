/**
 * A BERT-family GGUF file (llama.cpp's convert_hf_to_gguf.py: BertModel →
 * arch "bert", NomicBertModel → arch "nomic-bert") → the BertConfig and
 * pooling the encoder (bert-encoder.ts) runs, and each GGUF tensor's
 * transformers name, so the safetensors path's weight builder
 * (bert-weights.ts) reads it unchanged. The keys, under the architecture
 * prefix (gguf-py Keys.LLM / Keys.Attention, llama-model.cpp's BERT loader):
 *
 *   {arch}.embedding_length  feed_forward_length  block_count  context_length
 *   {arch}.attention.head_count  attention.layer_norm_epsilon  attention.causal (false)
 *   {arch}.pooling_type      0 none · 1 mean · 2 cls · 3 last · 4 rank (llama.h's llama_pooling_type)
 *   {arch}.rope.freq_base    nomic-bert's RoPE base
 *   tokenizer.ggml.token_type_count
 *
 *   bert                                   nomic-bert
 *   token_embd, position_embd, token_types token_embd, token_types (no position table)
 *   token_embd_norm.{weight,bias}          token_embd_norm (emb_ln)
 *   blk.N.attn_{q,k,v}.{weight,bias}       blk.N.attn_qkv.weight (Wqkv)
 *   blk.N.attn_output.{weight,bias}        blk.N.attn_output.weight (out_proj)
 *   blk.N.attn_output_norm                 blk.N.attn_output_norm (norm1)
 *   blk.N.ffn_up, ffn_down (+ biases)      blk.N.ffn_up (fc11), ffn_gate (fc12), ffn_down (fc2)
 *   blk.N.layer_output_norm                blk.N.layer_output_norm (norm2)
 *
 * XLMRobertaModel is written as arch "bert" with a Unigram vocabulary
 * (tokenizer.ggml.model "t5") and its position table already cut to start at
 * padding_idx + 1; it is reported as XLMRobertaModel. A reranker
 * (XLMRobertaForSequenceClassification, bge-reranker) is the same file with
 * its classification head as cls / cls.output (gguf-classifier.ts), reported
 * as XLMRobertaForSequenceClassification.
 *
 * What GGUF does not carry takes BERT's defaults: the GELU is erf
 * (BertConfig's hidden_act "gelu"; llama.cpp evaluates ggml_gelu, the tanh
 * approximation), positions start at 0 (the converter already dropped
 * RoBERTa's first padding_idx + 1 rows), and the pooled vector is
 * L2-normalized, as llama-server's /v1/embeddings (embd_normalize 2) and
 * vLLM's embed pooler do. A file without pooling_type gets CLS, vLLM's
 * default for an encoder. "none" (per-token vectors) is refused, naming the
 * key; "rank" goes with a classification head (gguf-classifier.ts).
 */
import { ArgumentError, show } from "../../errors.js";
import type { GgufHeader, GgufTensorInfo } from "../../sources/gguf/reader.js";
import { GgufMetadata, shortestDecimal } from "../../sources/gguf/metadata.js";
import type { BertConfig } from "./bert-config.js";
import { GGUF_CLASSIFIER_TENSORS, ggufClassifierConfig } from "./gguf-classifier.js";
import type { PoolingMode } from "./pooling-config.js";

/** general.architecture → the transformers class it was converted from. */
export const GGUF_ENCODER_ARCHITECTURES: Readonly<Record<string, "BertModel" | "NomicBertModel">> = { bert: "BertModel", "nomic-bert": "NomicBertModel" };

/** llama.h's llama_pooling_type values, by name. */
export const GGUF_POOLING_TYPES: Readonly<Record<number, string>> = { 0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank" };
const SERVED: Readonly<Record<number, PoolingMode>> = { 1: "mean", 2: "cls", 3: "last" };

/** True if a GGUF header's general.architecture is an encoder this package serves. */
export function isGgufEncoderHeader(header: GgufHeader): boolean {
  const arch = header.metadata.get("general.architecture");
  return typeof arch === "string" && arch in GGUF_ENCODER_ARCHITECTURES;
}

const TOP: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  bert: { token_embd: "embeddings.word_embeddings", position_embd: "embeddings.position_embeddings", token_types: "embeddings.token_type_embeddings", token_embd_norm: "embeddings.LayerNorm", ...GGUF_CLASSIFIER_TENSORS },
  "nomic-bert": { token_embd: "embeddings.word_embeddings", token_types: "embeddings.token_type_embeddings", token_embd_norm: "emb_ln" },
};
const LAYER: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  bert: {
    attn_q: "attention.self.query", attn_k: "attention.self.key", attn_v: "attention.self.value", attn_output: "attention.output.dense",
    attn_output_norm: "attention.output.LayerNorm", ffn_up: "intermediate.dense", ffn_down: "output.dense", layer_output_norm: "output.LayerNorm",
  },
  "nomic-bert": { attn_qkv: "attn.Wqkv", attn_output: "attn.out_proj", attn_output_norm: "norm1", ffn_up: "mlp.fc11", ffn_gate: "mlp.fc12", ffn_down: "mlp.fc2", layer_output_norm: "norm2" },
};
const layerPrefix = (arch: string): string => (arch === "nomic-bert" ? "encoder.layers." : "encoder.layer.");

/** A GGUF tensor name → the transformers (safetensors) name bert-weights.ts reads, or null if the encoder has no such tensor. */
export function hfEncoderTensorName(ggufName: string, arch: string): string | null {
  const m = /^(?:blk\.(\d+)\.)?([a-z_]+(?:\.output)?)\.(weight|bias)$/.exec(ggufName); // "cls.output.weight" too
  if (m === null || TOP[arch] === undefined) return null;
  const [, block, base, kind] = m;
  const hf = block === undefined ? TOP[arch]![base!] : LAYER[arch]![base!];
  if (hf === undefined) return null;
  return block === undefined ? `${hf}.${kind}` : `${layerPrefix(arch)}${block}.${hf}.${kind}`;
}

/** The inverse: a transformers name → the GGUF tensor name llama.cpp gives it (errors name the file's tensor). */
export function ggufEncoderTensorName(hfName: string, arch: string): string {
  const kind = hfName.slice(hfName.lastIndexOf(".") + 1);
  const base = hfName.slice(0, hfName.lastIndexOf("."));
  const find = (table: Readonly<Record<string, string>> | undefined, v: string): string | undefined => Object.entries(table ?? {}).find(([, hf]) => hf === v)?.[0];
  const top = find(TOP[arch], base);
  if (top !== undefined) return `${top}.${kind}`;
  const prefix = layerPrefix(arch);
  const m = base.startsWith(prefix) ? /^(\d+)\.(.+)$/.exec(base.slice(prefix.length)) : null;
  const g = m === null ? undefined : find(LAYER[arch], m[2]!);
  return m === null || g === undefined ? hfName : `blk.${m[1]}.${g}.${kind}`;
}

/** The inverse of hfEncoderTensorName over a file's tensors: HF name → GGUF tensor; unknown GGUF tensors refused, naming them. */
export function ggufEncoderTensors(header: GgufHeader, arch: string): Map<string, GgufTensorInfo> {
  const out = new Map<string, GgufTensorInfo>();
  const unknown: string[] = [];
  for (const t of header.tensors) {
    const hf = hfEncoderTensorName(t.name, arch);
    if (hf === null) unknown.push(t.name);
    else out.set(hf, t);
  }
  if (unknown.length > 0) throw new ArgumentError(header.path, `has tensors that are not part of a ${arch} encoder as llama.cpp names it: ${unknown.slice(0, 8).join(", ")}${unknown.length > 8 ? `, … (${unknown.length})` : ""}`);
  return out;
}

/** The pooling a file's {arch}.pooling_type names (absent: CLS), always normalized (see the header). */
export function ggufEncoderPooling(meta: GgufMetadata, arch: string): { mode: PoolingMode; normalize: true } {
  const key = `${arch}.pooling_type`;
  if (!meta.has(key)) return { mode: "cls", normalize: true };
  const v = meta.int(key, undefined, 0);
  const mode = SERVED[v];
  if (mode === undefined) {
    const name = GGUF_POOLING_TYPES[v];
    throw meta.error(key, `must be 1 (mean), 2 (cls) or 3 (last) for /v1/embeddings, got ${v}${name === undefined ? " (not a llama.cpp pooling type)" : ` (${name}${name === "rank" ? ": a reranker needs its classification head, cls.weight and cls.output.weight" : ": per-token vectors are not served"})`}`);
  }
  return { mode, normalize: true };
}

/** Rows of a 2-D tensor the config needs, or an error naming it. */
function rows(tensors: ReadonlyMap<string, GgufTensorInfo>, hf: string, gguf: string, path: string): number {
  const t = tensors.get(hf);
  if (t === undefined) throw new ArgumentError(path, `has no tensor ${show(gguf)} (a BERT encoder needs it)`);
  if (t.shape.length !== 2) throw new ArgumentError(`${path} ${gguf}`, `must be a matrix, got shape ${show(t.shape)}`);
  return t.shape[0]!;
}

/** The BertConfig of an encoder GGUF file (`tensors` from ggufEncoderTensors). */
export function parseGgufBertConfig(header: GgufHeader, tensors: ReadonlyMap<string, GgufTensorInfo>): BertConfig {
  const meta = new GgufMetadata(header.metadata, header.path);
  const arch = meta.string("general.architecture") ?? "";
  const architecture = GGUF_ENCODER_ARCHITECTURES[arch];
  if (architecture === undefined) throw meta.error("general.architecture", `must be one of ${Object.keys(GGUF_ENCODER_ARCHITECTURES).join(", ")} for an encoder, got ${show(arch)}`);
  const k = (key: string): string => `${arch}.${key}`;
  if (meta.bool(k("attention.causal"), false)) throw meta.error(k("attention.causal"), "must be false for an encoder (bidirectional attention), got true");
  const hiddenSize = meta.int(k("embedding_length"), undefined, 1);
  const numHeads = meta.int(k("attention.head_count"), undefined, 1);
  if (hiddenSize % numHeads !== 0) throw meta.error(k("embedding_length"), `must be a multiple of attention.head_count ${numHeads}, got ${hiddenSize}`);
  const headDim = hiddenSize / numHeads;
  if (headDim > 256 || (arch === "nomic-bert" && headDim % 2 !== 0)) throw meta.error(k("embedding_length"), `/ attention.head_count must be ≤ 256${arch === "nomic-bert" ? " and even (RoPE)" : ""}, got ${headDim}`);
  const context = meta.int(k("context_length"), undefined, 1);
  const vocabSize = rows(tensors, "embeddings.word_embeddings.weight", "token_embd.weight", header.path);
  const typeVocabSize = rows(tensors, "embeddings.token_type_embeddings.weight", "token_types.weight", header.path);
  const typeCount = meta.int("tokenizer.ggml.token_type_count", typeVocabSize, 1);
  if (typeCount !== typeVocabSize) throw meta.error("tokenizer.ggml.token_type_count", `must equal token_types.weight's ${typeVocabSize} rows, got ${typeCount}`);
  const nomic = arch === "nomic-bert";
  const classifier = ggufClassifierConfig(meta, arch, tensors, header.path);
  const positions = nomic ? context : rows(tensors, "embeddings.position_embeddings.weight", "position_embd.weight", header.path);
  if (context > positions) throw meta.error(k("context_length"), `must be ≤ position_embd.weight's ${positions} rows, got ${context}`);
  // A "bert" file with XLM-R's Unigram vocabulary ("t5") was converted from XLMRobertaModel, or with a head from its *ForSequenceClassification.
  const xlmr = architecture === "BertModel" && meta.string("tokenizer.ggml.model") === "t5";
  return {
    architecture: classifier !== null ? (xlmr ? "XLMRobertaForSequenceClassification" : "BertForSequenceClassification") : xlmr ? "XLMRobertaModel" : architecture,
    vocabSize,
    hiddenSize,
    numLayers: meta.int(k("block_count"), undefined, 1),
    numHeads,
    headDim,
    intermediateSize: meta.int(k("feed_forward_length"), undefined, 1),
    maxPositionEmbeddings: positions,
    typeVocabSize,
    layerNormEps: shortestDecimal(meta.positive(k("attention.layer_norm_epsilon"), 1e-12)), // an f32 in the file: 1e-12, not 9.99999996e-13
    gelu: "erf",
    positionOffset: 0,
    maxTokens: context,
    positions: nomic ? "rotary" : "absolute",
    ropeTheta: nomic ? shortestDecimal(meta.positive(k("rope.freq_base"), 10000)) : 0,
    mlp: nomic ? "swiglu" : "gelu",
    classifier,
  };
}

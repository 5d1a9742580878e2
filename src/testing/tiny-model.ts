/**
 * Writes tiny Hugging Face model directories with deterministic weights, for
 * tests and the embedded default model: config.json, model.safetensors (or
 * shards + model.safetensors.index.json), tokenizer.json,
 * tokenizer_config.json and generation_config.json, exactly as a user would
 * download them, for Llama, Mistral, Qwen2, Qwen3, Phi-3, SmolLM3, Gemma 2 and Gemma 3 (text).
 * SmolLM3's fixture skips RoPE on every noRopeLayerInterval-th layer (default
 * 2, so two layers hold one NoPE layer; SmolLM3-3B's and llama.cpp's is 4).
 * The Phi-3 fixture has Phi-4-mini's partial rotary (0.75 of each head) and a
 * LongRoPE scaling with an original context of 16 (so test prompts run on its
 * long factors, as they do past 4096 tokens on Phi-3-128k).
 * The Gemma fixtures use small softcaps (attention 3, logits 10) so the random
 * weights reach the tanh's curve, and Gemma 3's alternates sliding and full
 * layers every other layer (sliding_window_pattern 2) so two layers hold both.
 *
 * Weights follow PyTorch's default initialisation, drawn from one seeded
 * stream (Prng) in checkpoint order: Linear weights and biases
 * U(−1/√in, 1/√in), embeddings with standard deviation `embeddingStd`
 * (uniform, so the files depend on no transcendental function), RMSNorm
 * weights 1 + U(−0.1, 0.1) (Gemma's, which scale by 1 + w: U(−0.1, 0.1)) (not exactly 1, so a decoder that ignores them fails
 * its tests). The same options write the same bytes.
 */
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ArgumentError, show } from "../errors.js";
import { checkInt, checkOneOf, numel } from "../tensor/check.js";
import { allocStorage, encodeInto } from "../tensor/codec.js";
import { Prng } from "../tensor/prng.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { type Architecture, type ModelConfig, parseModelConfig } from "../model/config.js";
import { WEIGHTS_INDEX_FILE, SINGLE_WEIGHTS_FILE } from "../model/model-dir.js";
import { type WeightDType } from "../sources/safetensors.js";
import { type TensorToWrite, writeSafetensors } from "../sources/safetensors-writer.js";
import { type TinyTokenizerFamily, buildTinyTokenizer } from "./tiny-tokenizer.js";
import { expectedWeights } from "../model/weight-names.js";

export type TinyArch = "llama" | "mistral" | "qwen2" | "qwen3" | "phi3" | "smollm3" | "gemma2" | "gemma3";
export const TINY_ARCHS: readonly TinyArch[] = ["llama", "mistral", "qwen2", "qwen3", "phi3", "smollm3", "gemma2", "gemma3"];

const ARCH: Readonly<Record<TinyArch, { architecture: Architecture; family: TinyTokenizerFamily }>> = {
  llama: { architecture: "LlamaForCausalLM", family: "llama" },
  mistral: { architecture: "MistralForCausalLM", family: "mistral" },
  qwen2: { architecture: "Qwen2ForCausalLM", family: "qwen" },
  qwen3: { architecture: "Qwen3ForCausalLM", family: "qwen" },
  phi3: { architecture: "Phi3ForCausalLM", family: "qwen" },
  smollm3: { architecture: "SmolLM3ForCausalLM", family: "qwen" },
  gemma2: { architecture: "Gemma2ForCausalLM", family: "qwen" },
  gemma3: { architecture: "Gemma3ForCausalLM", family: "qwen" },
};

/** Tokenizer of a tiny model: a synthetic byte-level BPE, or real files copied from a directory. */
export type TinyTokenizerOptions =
  | { kind: "synthetic"; merges?: number }
  | {
      kind: "copy";
      /** Directory holding tokenizer.json and tokenizer_config.json. */
      dir: string;
      /** Sets tokenizer_config.json's chat_template (for tokenizers shipped without one). */
      chatTemplate?: string;
    };

export interface TinyModelOptions {
  arch: TinyArch;
  /** Seed of the weight stream. Default 0. */
  seed?: number;
  hiddenSize?: number;
  intermediateSize?: number;
  numLayers?: number;
  numHeads?: number;
  numKvHeads?: number;
  /** Default hidden / heads (Qwen3: 2 · hidden / heads, so head_dim ≠ hidden / heads is exercised). */
  headDim?: number;
  /** Default: the tokenizer's size rounded up to a multiple of 64 (real checkpoints pad their vocabulary too). */
  vocabSize?: number;
  maxPositionEmbeddings?: number;
  ropeTheta?: number;
  /** Written as config.json's rope_scaling, e.g. { rope_type: "llama3", factor: 8, … }. */
  ropeScaling?: Record<string, unknown> | null;
  rmsNormEps?: number;
  /** Default: true for Qwen2/Qwen3 (as their small checkpoints), false for Llama/Mistral. */
  tieWordEmbeddings?: boolean;
  /** Mistral's and Gemma's sliding_window. Default 16, small enough for tests to cross it. */
  slidingWindow?: number | null;
  /** SmolLM3's no_rope_layer_interval: every n-th layer skips RoPE. Default 2. */
  noRopeLayerInterval?: number;
  /** Gemma's query_pre_attn_scalar (scores · its −½ power). Default the head dim, as Gemma 2 2B/9B and llama.cpp's GGUF reading. */
  queryPreAttnScalar?: number;
  /** Storage dtype of every tensor. Default "f32". */
  dtype?: WeightDType;
  /** Split the weights over this many model-0000i-of-0000n.safetensors files. Default 1 (model.safetensors). */
  shards?: number;
  /** Standard deviation of the embedding (and untied lm_head) entries. Default 1 (torch.nn.Embedding's). */
  embeddingStd?: number;
  tokenizer?: TinyTokenizerOptions;
  /** Extra generation_config.json fields (temperature, top_p, …). */
  generation?: Record<string, unknown>;
}

export interface TinyModel {
  dir: string;
  /** The files written, relative to dir, sorted. */
  files: string[];
  config: ModelConfig;
}

/** JSON as transformers' save_pretrained writes it: 2-space indent, sorted keys, final newline. */
function writeJson(path: string, value: unknown): void {
  writeFileSync(path, `${JSON.stringify(sortKeys(value), null, 2)}\n`);
}

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (typeof v === "object" && v !== null) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v).sort()) out[k] = sortKeys((v as Record<string, unknown>)[k]);
    return out;
  }
  return v;
}

interface TokenizerOut {
  size: number;
  bosTokenId: number | null;
  eosTokenIds: number[];
  padTokenId: number | null;
}

function writeTokenizer(dir: string, arch: TinyArch, options: TinyTokenizerOptions): TokenizerOut {
  if (options.kind === "synthetic") {
    const t = buildTinyTokenizer(ARCH[arch].family, checkInt("tokenizer.merges", options.merges ?? 200, { min: 0, max: 4096 }));
    writeJson(join(dir, "tokenizer.json"), t.tokenizerJson);
    writeJson(join(dir, "tokenizer_config.json"), t.tokenizerConfig);
    return t;
  }
  copyFileSync(join(options.dir, "tokenizer.json"), join(dir, "tokenizer.json"));
  const config = JSON.parse(readFileSync(join(options.dir, "tokenizer_config.json"), "utf8")) as Record<string, unknown>;
  if (options.chatTemplate !== undefined) config["chat_template"] = options.chatTemplate;
  writeJson(join(dir, "tokenizer_config.json"), config);
  const tok = Tokenizer.fromDir(dir);
  const pad = typeof config["pad_token"] === "string" ? (tok.tokenToId(config["pad_token"]) ?? null) : null;
  return { size: tok.vocabSize, bosTokenId: tok.bosTokenId, eosTokenIds: tok.eosTokenId === null ? [] : [tok.eosTokenId], padTokenId: pad };
}

function configJson(o: Required<Omit<TinyModelOptions, "tokenizer" | "generation" | "ropeScaling" | "slidingWindow" | "queryPreAttnScalar" | "noRopeLayerInterval">> & Pick<TinyModelOptions, "ropeScaling" | "slidingWindow" | "queryPreAttnScalar" | "noRopeLayerInterval">, tok: TokenizerOut): Record<string, unknown> {
  const { architecture } = ARCH[o.arch];
  const json: Record<string, unknown> = {
    architectures: [architecture],
    model_type: o.arch === "gemma3" ? "gemma3_text" : o.arch,
    hidden_size: o.hiddenSize,
    intermediate_size: o.intermediateSize,
    num_hidden_layers: o.numLayers,
    num_attention_heads: o.numHeads,
    num_key_value_heads: o.numKvHeads,
    head_dim: o.headDim,
    vocab_size: o.vocabSize,
    max_position_embeddings: o.maxPositionEmbeddings,
    rms_norm_eps: o.rmsNormEps,
    rope_theta: o.ropeTheta,
    rope_scaling: o.ropeScaling ?? null,
    tie_word_embeddings: o.tieWordEmbeddings,
    hidden_act: o.arch === "gemma2" || o.arch === "gemma3" ? "gelu_pytorch_tanh" : "silu",
    bos_token_id: tok.bosTokenId,
    eos_token_id: tok.eosTokenIds.length === 1 ? tok.eosTokenIds[0] : tok.eosTokenIds,
    torch_dtype: { f32: "float32", f16: "float16", bf16: "bfloat16" }[o.dtype],
    use_cache: true,
  };
  if (o.arch === "llama" || o.arch === "qwen3") json["attention_bias"] = false;
  if (o.arch === "llama") json["mlp_bias"] = false;
  if (o.arch === "mistral") json["sliding_window"] = o.slidingWindow ?? null;
  if (o.arch === "gemma2" || o.arch === "gemma3") {
    json["hidden_activation"] = "gelu_pytorch_tanh";
    json["sliding_window"] = o.slidingWindow ?? null;
    json["query_pre_attn_scalar"] = o.queryPreAttnScalar ?? o.headDim;
    json["attention_bias"] = false;
    json["final_logit_softcapping"] = o.arch === "gemma2" ? 10 : null;
    json["attn_logit_softcapping"] = o.arch === "gemma2" ? 3 : null;
  }
  if (o.arch === "smollm3") {
    const n = o.noRopeLayerInterval ?? 2;
    json["attention_bias"] = false;
    json["mlp_bias"] = false;
    json["use_sliding_window"] = false;
    json["sliding_window"] = null;
    json["no_rope_layer_interval"] = n;
    json["no_rope_layers"] = Array.from({ length: o.numLayers }, (_, i) => Number((i + 1) % n !== 0)); // as SmolLM3Config writes it
  }
  if (o.arch === "phi3") {
    json["attention_bias"] = false;
    json["sliding_window"] = null;
    json["partial_rotary_factor"] = 0.75;
    json["original_max_position_embeddings"] = 16;
    if (o.ropeScaling === null || o.ropeScaling === undefined) {
      const half = Math.floor(o.headDim * 0.75) / 2;
      json["rope_scaling"] = { type: "longrope", short_factor: Array.from({ length: half }, (_, i) => 1 + 0.25 * i), long_factor: Array.from({ length: half }, (_, i) => 1.5 + 2 * i) };
    }
  }
  if (o.arch === "gemma3") {
    json["sliding_window_pattern"] = 2;
    json["rope_local_base_freq"] = 10000;
  }
  if (o.arch === "qwen2" || o.arch === "qwen3") {
    json["use_sliding_window"] = false;
    json["sliding_window"] = null;
    json["max_window_layers"] = o.numLayers;
  }
  return json;
}

/** One tensor's values, drawn from `rng` according to what the tensor is; `fanIn` is its layer's input width. */
function initValues(name: string, shape: readonly number[], fanIn: number, rng: Prng, embeddingStd: number, normOffset: number): Float32Array {
  const out = new Float32Array(numel(shape));
  if (name.endsWith("norm.weight")) {
    // The norm scales by ≈ 1 either way: w ≈ 1, or Gemma's (1 + w) with w ≈ 0.
    for (let i = 0; i < out.length; i++) out[i] = 1 - normOffset + 0.1 * (2 * rng.nextFloat() - 1);
    return out;
  }
  // U(−a, a) has std a/√3. Linear weights and biases: torch's kaiming-uniform bound 1/√fanIn.
  const isEmbedding = name === "model.embed_tokens.weight" || name === "lm_head.weight";
  const bound = isEmbedding ? embeddingStd * Math.sqrt(3) : 1 / Math.sqrt(fanIn);
  for (let i = 0; i < out.length; i++) out[i] = bound * (2 * rng.nextFloat() - 1);
  return out;
}

function encode(values: Float32Array, dtype: WeightDType): Uint8Array {
  if (dtype === "f32") return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  const codes = allocStorage(dtype, values.length);
  encodeInto(dtype, values, codes);
  return new Uint8Array(codes.buffer, codes.byteOffset, codes.byteLength);
}

/** Writes a tiny model directory (creating it) and returns its files and parsed config. */
export function writeTinyModel(dir: string, options: TinyModelOptions): TinyModel {
  const arch = checkOneOf("arch", options.arch, TINY_ARCHS);
  const hiddenSize = checkInt("hiddenSize", options.hiddenSize ?? 64, { min: 1 });
  const numHeads = checkInt("numHeads", options.numHeads ?? 4, { min: 1 });
  const numKvHeads = checkInt("numKvHeads", options.numKvHeads ?? 2, { min: 1 });
  const dtype = checkOneOf("dtype", options.dtype ?? "f32", ["f32", "f16", "bf16"] as const);
  const shards = checkInt("shards", options.shards ?? 1, { min: 1, max: 99999 });
  const seed = options.seed ?? 0;
  const embeddingStd = options.embeddingStd ?? 1;
  if (!(embeddingStd > 0 && Number.isFinite(embeddingStd))) throw new ArgumentError("embeddingStd", `must be a positive number, got ${show(embeddingStd)}`);

  mkdirSync(dir, { recursive: true });
  const tok = writeTokenizer(dir, arch, options.tokenizer ?? { kind: "synthetic" });
  const vocabSize = checkInt("vocabSize", options.vocabSize ?? Math.ceil(tok.size / 64) * 64, { min: tok.size });
  const o = {
    arch,
    seed,
    hiddenSize,
    intermediateSize: checkInt("intermediateSize", options.intermediateSize ?? 2 * hiddenSize, { min: 1 }),
    numLayers: checkInt("numLayers", options.numLayers ?? 2, { min: 1 }),
    numHeads,
    numKvHeads,
    headDim: checkInt("headDim", options.headDim ?? (arch === "qwen3" ? 2 : 1) * Math.floor(hiddenSize / numHeads), { min: 1 }),
    vocabSize,
    maxPositionEmbeddings: checkInt("maxPositionEmbeddings", options.maxPositionEmbeddings ?? 512, { min: 1 }),
    ropeTheta: options.ropeTheta ?? (arch === "gemma3" ? 1e6 : 10000),
    ropeScaling: options.ropeScaling ?? null,
    rmsNormEps: options.rmsNormEps ?? (arch === "llama" || arch === "mistral" ? 1e-5 : 1e-6),
    tieWordEmbeddings: options.tieWordEmbeddings ?? (arch !== "llama" && arch !== "mistral" && arch !== "phi3"),
    slidingWindow: options.slidingWindow === undefined ? 16 : options.slidingWindow,
    ...(options.queryPreAttnScalar === undefined ? {} : { queryPreAttnScalar: options.queryPreAttnScalar }),
    ...(options.noRopeLayerInterval === undefined ? {} : { noRopeLayerInterval: options.noRopeLayerInterval }),
    dtype,
    shards,
    embeddingStd,
  };
  const cfgJson = configJson(o, tok);
  const config = parseModelConfig(cfgJson, { source: "writeTinyModel options" });
  writeJson(join(dir, "config.json"), cfgJson);
  writeJson(join(dir, "generation_config.json"), {
    bos_token_id: tok.bosTokenId,
    eos_token_id: tok.eosTokenIds.length === 1 ? tok.eosTokenIds[0] : tok.eosTokenIds,
    ...(tok.padTokenId !== null ? { pad_token_id: tok.padTokenId } : {}),
    ...(options.generation ?? {}),
  });

  const rng = new Prng(seed);
  const specs = expectedWeights(config);
  const shapes = new Map(specs.map((s) => [s.name, s.shape]));
  const tensors: TensorToWrite[] = specs.map(({ name, shape }) => {
    const weightShape = shapes.get(name.replace(/\.bias$/, ".weight"))!;
    const fanIn = weightShape[weightShape.length - 1]!;
    return { name, dtype, shape, data: encode(initValues(name, shape, fanIn, rng, embeddingStd, config.normOffset), dtype) };
  });
  const files = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"];
  const metadata = { format: "pt" };
  if (shards === 1) {
    writeSafetensors(join(dir, SINGLE_WEIGHTS_FILE), tensors, metadata);
    files.push(SINGLE_WEIGHTS_FILE);
  } else {
    if (shards > tensors.length) throw new ArgumentError("shards", `must be ≤ the ${tensors.length} tensors, got ${shards}`);
    const groups = splitByBytes(tensors, shards);
    const weightMap: Record<string, string> = {};
    groups.forEach((group, i) => {
      const file = `model-${String(i + 1).padStart(5, "0")}-of-${String(shards).padStart(5, "0")}.safetensors`;
      writeSafetensors(join(dir, file), group, metadata);
      for (const t of group) weightMap[t.name] = file;
      files.push(file);
    });
    const totalSize = tensors.reduce((s, t) => s + t.data.length, 0);
    writeJson(join(dir, WEIGHTS_INDEX_FILE), { metadata: { total_size: totalSize }, weight_map: weightMap });
    files.push(WEIGHTS_INDEX_FILE);
  }
  return { dir, files: files.sort(), config };
}

/** Splits tensors, in order, into `n` non-empty runs of roughly equal bytes. */
function splitByBytes(tensors: TensorToWrite[], n: number): TensorToWrite[][] {
  const total = tensors.reduce((s, t) => s + t.data.length, 0);
  const groups: TensorToWrite[][] = [];
  let current: TensorToWrite[] = [];
  let bytes = 0;
  tensors.forEach((t, i) => {
    const remainingTensors = tensors.length - i;
    const groupsLeft = n - groups.length;
    if (current.length > 0 && (bytes >= (total * (groups.length + 1)) / n || remainingTensors < groupsLeft)) {
      groups.push(current);
      current = [];
    }
    current.push(t);
    bytes += t.data.length;
  });
  groups.push(current);
  return groups;
}

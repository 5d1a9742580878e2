/**
 * config.json of a BERT-family encoder (transformers' BertConfig, and
 * XLMRobertaConfig / RobertaConfig, the same network): the shapes the encoder
 * forward (bert-encoder.ts) needs, with BertConfig's defaults. BERT is post-LN,
 * with absolute learned positions (0, 1, … per sequence) and token types; its
 * MLP is GELU (erf, "gelu") or the tanh approximation ("gelu_new",
 * "gelu_pytorch_tanh"). (XLM-)RoBERTa numbers positions from
 * padding_idx + 1 (create_position_ids_from_input_ids: pad_token_id 1 → 2, 3,
 * …), so it takes max_position_embeddings − 2 tokens. NomicBertModel
 * (nomic-embed-text) is the same post-LN encoder with rotary positions (no
 * position table), a SwiGLU MLP and no projection biases; its config keys are
 * GPT-2's (n_embd, n_head, …), read by parseNomicConfig. Anything else is
 * refused here, naming the key. The *ForSequenceClassification classes
 * (cross-encoders, rerankers) are the same encoder with a classification head
 * (sequence-classifier.ts).
 */
import { ArgumentError, show } from "../../errors.js";
import { type ClassifierConfig, CROSS_ENCODER_ARCHITECTURES, isCrossEncoderArchitecture, parseClassifierConfig } from "./sequence-classifier.js";

/** Architectures served by the BERT encoder (architectures[0], or model_type "bert"). */
export const ENCODER_ARCHITECTURES = ["BertModel", "BertForMaskedLM", "BertForPreTraining", "XLMRobertaModel", "XLMRobertaForMaskedLM", "RobertaModel", "RobertaForMaskedLM", "NomicBertModel", ...CROSS_ENCODER_ARCHITECTURES] as const;

/** model_type of each family (used when `architectures` is absent). */
const MODEL_TYPES = ["bert", "xlm-roberta", "roberta", "nomic_bert"];

export type GeluKind = "erf" | "tanh";

export interface BertConfig {
  architecture: string;
  vocabSize: number;
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  /** hiddenSize / numHeads. */
  headDim: number;
  intermediateSize: number;
  maxPositionEmbeddings: number;
  typeVocabSize: number;
  layerNormEps: number;
  gelu: GeluKind;
  /** Position id of a sequence's first token: 0 for BERT, pad_token_id + 1 for (XLM-)RoBERTa. */
  positionOffset: number;
  /** Longest sequence: max_position_embeddings − positionOffset. */
  maxTokens: number;
  /** "absolute": a learned position table (BERT, XLM-R); "rotary": RoPE on q and k, rotate-half (NomicBert). */
  positions: "absolute" | "rotary";
  /** RoPE base (positions "rotary"). */
  ropeTheta: number;
  /** "gelu": up · GELU · down with biases (BERT); "swiglu": down(silu(gate) ⊙ up), no biases (NomicBert). */
  mlp: "gelu" | "swiglu";
  /** The classification head of a cross-encoder (*ForSequenceClassification), else null. */
  classifier: ClassifierConfig | null;
}

const GELU: Readonly<Record<string, GeluKind>> = { gelu: "erf", gelu_new: "tanh", gelu_pytorch_tanh: "tanh", gelu_fast: "tanh" };

/** True if config.json (parsed) describes a BERT encoder this file reads. */
export function isBertConfig(json: unknown): boolean {
  if (typeof json !== "object" || json === null) return false;
  const j = json as Record<string, unknown>;
  const archs = j["architectures"];
  if (Array.isArray(archs) && typeof archs[0] === "string") return (ENCODER_ARCHITECTURES as readonly string[]).includes(archs[0]);
  return MODEL_TYPES.includes(j["model_type"] as string);
}

/** Parses config.json of a BERT encoder; `source` names the file in errors. */
export function parseBertConfig(json: unknown, source = "config.json"): BertConfig {
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new ArgumentError(source, `must be a JSON object, got ${show(json)}`);
  const j = json as Record<string, unknown>;
  if (j["model_type"] === "nomic_bert" || (Array.isArray(j["architectures"]) && j["architectures"][0] === "NomicBertModel")) return parseNomicConfig(j, source);
  if (!isBertConfig(j)) throw new ArgumentError(`${source} architectures`, `must name one of ${ENCODER_ARCHITECTURES.join(", ")} (or model_type ${MODEL_TYPES.join(" | ")}), got ${show(j["architectures"] ?? j["model_type"])}`);
  const int = (key: string, fallback?: number): number => {
    const v = j[key] ?? fallback;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw new ArgumentError(`${source} ${key}`, `must be a positive integer, got ${show(v)}`);
    return v;
  };
  const hiddenSize = int("hidden_size", 768);
  const numHeads = int("num_attention_heads", 12);
  if (hiddenSize % numHeads !== 0) throw new ArgumentError(`${source} hidden_size`, `must be a multiple of num_attention_heads ${numHeads}, got ${hiddenSize}`);
  const headDim = hiddenSize / numHeads;
  if (headDim > 256) throw new ArgumentError(`${source} hidden_size`, `/ num_attention_heads must be ≤ 256 (the attention kernels' head dim), got ${headDim}`);
  const act = j["hidden_act"] ?? "gelu";
  const gelu = typeof act === "string" ? GELU[act] : undefined;
  if (gelu === undefined) throw new ArgumentError(`${source} hidden_act`, `must be one of ${Object.keys(GELU).join(", ")}, got ${show(act)}`);
  const positions = j["position_embedding_type"] ?? "absolute";
  if (positions !== "absolute") throw new ArgumentError(`${source} position_embedding_type`, `must be "absolute" (relative position encodings are not supported), got ${show(positions)}`);
  if (j["is_decoder"] === true) throw new ArgumentError(`${source} is_decoder`, "must be false: a BERT decoder (causal) is not an encoder, got true");
  const eps = j["layer_norm_eps"] ?? 1e-12;
  if (typeof eps !== "number" || !(eps > 0)) throw new ArgumentError(`${source} layer_norm_eps`, `must be a positive number, got ${show(eps)}`);
  const archs = j["architectures"];
  const architecture = Array.isArray(archs) && typeof archs[0] === "string" ? archs[0] : j["model_type"] === "bert" ? "BertModel" : "XLMRobertaModel";
  const roberta = architecture.includes("Roberta");
  const pad = j["pad_token_id"] ?? 1;
  if (roberta && (typeof pad !== "number" || !Number.isInteger(pad) || pad < 0)) throw new ArgumentError(`${source} pad_token_id`, `must be a non-negative integer (RoBERTa numbers positions from it), got ${show(pad)}`);
  const positionOffset = roberta ? (pad as number) + 1 : 0;
  const maxPositionEmbeddings = int("max_position_embeddings", 512);
  if (maxPositionEmbeddings <= positionOffset) throw new ArgumentError(`${source} max_position_embeddings`, `must be > the first position ${positionOffset}, got ${maxPositionEmbeddings}`);
  return {
    architecture,
    vocabSize: int("vocab_size", 30522),
    hiddenSize,
    numLayers: int("num_hidden_layers", 12),
    numHeads,
    headDim,
    intermediateSize: int("intermediate_size", 3072),
    maxPositionEmbeddings,
    typeVocabSize: int("type_vocab_size", 2),
    layerNormEps: eps,
    gelu,
    positionOffset,
    maxTokens: maxPositionEmbeddings - positionOffset,
    positions: "absolute",
    ropeTheta: 0,
    mlp: "gelu",
    classifier: isCrossEncoderArchitecture(architecture) ? parseClassifierConfig(j, architecture, source) : null,
  };
}

/** NomicBertConfig (nomic-embed-text's config.json, GPT-2 key names): the variants nomic-embed-text ships, others refused naming the key. */
function parseNomicConfig(j: Record<string, unknown>, source: string): BertConfig {
  const int = (key: string, fallback?: number): number => {
    const v = j[key] ?? fallback;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw new ArgumentError(`${source} ${key}`, `must be a positive integer, got ${show(v)}`);
    return v;
  };
  const want = (key: string, value: unknown, fallback: unknown): void => {
    const v = j[key] ?? fallback;
    if (v !== value) throw new ArgumentError(`${source} ${key}`, `must be ${show(value)} (the NomicBert variant served here), got ${show(v)}`);
  };
  want("prenorm", false, false);
  want("rotary_emb_fraction", 1, 1);
  want("rotary_emb_interleaved", false, false);
  want("activation_function", "swiglu", "swiglu");
  want("qkv_proj_bias", false, false);
  want("mlp_fc1_bias", false, false);
  want("mlp_fc2_bias", false, false);
  if (j["rotary_scaling_factor"] !== undefined && j["rotary_scaling_factor"] !== null) throw new ArgumentError(`${source} rotary_scaling_factor`, `is not supported (dynamic NTK scaling), got ${show(j["rotary_scaling_factor"])}`);
  const hiddenSize = int("n_embd", 768);
  const numHeads = int("n_head", 12);
  if (hiddenSize % numHeads !== 0 || (hiddenSize / numHeads) % 2 !== 0) throw new ArgumentError(`${source} n_embd`, `must be an even multiple of n_head ${numHeads} per head, got ${hiddenSize}`);
  const theta = j["rotary_emb_base"] ?? 10000;
  if (typeof theta !== "number" || !(theta > 1)) throw new ArgumentError(`${source} rotary_emb_base`, `must be a number > 1, got ${show(theta)}`);
  const eps = j["layer_norm_epsilon"] ?? 1e-12;
  if (typeof eps !== "number" || !(eps > 0)) throw new ArgumentError(`${source} layer_norm_epsilon`, `must be a positive number, got ${show(eps)}`);
  const maxPositionEmbeddings = int("n_positions", 2048);
  return {
    architecture: "NomicBertModel",
    vocabSize: int("vocab_size", 30528),
    hiddenSize,
    numLayers: int("n_layer", 12),
    numHeads,
    headDim: hiddenSize / numHeads,
    intermediateSize: int("n_inner", 4 * hiddenSize),
    maxPositionEmbeddings,
    typeVocabSize: int("type_vocab_size", 2),
    layerNormEps: eps,
    gelu: "erf",
    positionOffset: 0,
    maxTokens: maxPositionEmbeddings,
    positions: "rotary",
    ropeTheta: theta,
    mlp: "swiglu",
    classifier: null,
  };
}

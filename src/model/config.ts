/**
 * Hugging Face `config.json` → a normalized, validated ModelConfig for the
 * decoder family kvflash runs: Llama (2, 3, 3.x with "llama3" RoPE scaling,
 * TinyLlama, SmolLM), SmolLM3, Mistral, Qwen2, Qwen3, Phi-3/Phi-4, Gemma 2
 * and Gemma 3 (text).
 * They share one block:
 *
 *   x = x + post?(o_proj(attn(rope(q_norm?(q_proj(rms(x)))), rope(k_norm?(k_proj(rms(x)))), v_proj(rms(x)))))
 *   x = x + post?(down_proj(act(gate_proj(rms(x))) * up_proj(rms(x))))
 *
 * and differ only in the flags recorded here (q/k/v bias, q/k RMSNorm, sliding
 * windows, RoPE scaling, tied embeddings, and Gemma's: (1 + w) norms, the
 * post-norms `post?`, GeGLU, √hidden embedding scale, query_pre_attn_scalar,
 * logit softcaps, per-layer RoPE theta; Phi-3's fused qkv_proj and gate_up_proj
 * checkpoint tensors, partial rotary and LongRoPE; SmolLM3's NoPE layers). Keys missing from the file take the
 * defaults of the transformers config class of that architecture, except the
 * five that fix the shapes (hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, vocab_size), which are required.
 */
import { ArgumentError, show } from "../errors.js";
import type { RopeScaling } from "../ops/rope.js";

export const SUPPORTED_ARCHITECTURES = [
  "LlamaForCausalLM",
  "MistralForCausalLM",
  "Qwen2ForCausalLM",
  "Qwen3ForCausalLM",
  "Phi3ForCausalLM",
  "SmolLM3ForCausalLM",
  "Gemma2ForCausalLM",
  "Gemma3ForCausalLM",
] as const;
export type Architecture = (typeof SUPPORTED_ARCHITECTURES)[number];

/** `model_type` of each architecture (used when `architectures` is absent). */
const MODEL_TYPE: Readonly<Record<string, Architecture>> = {
  llama: "LlamaForCausalLM",
  mistral: "MistralForCausalLM",
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
  phi3: "Phi3ForCausalLM",
  smollm3: "SmolLM3ForCausalLM",
  gemma2: "Gemma2ForCausalLM",
  gemma3_text: "Gemma3ForCausalLM",
};

/** Defaults of the transformers config classes for keys a file may omit. */
const DEFAULTS: Readonly<Record<Architecture, { maxPositionEmbeddings: number; slidingWindow: number | null }>> = {
  LlamaForCausalLM: { maxPositionEmbeddings: 2048, slidingWindow: null },
  MistralForCausalLM: { maxPositionEmbeddings: 4096 * 32, slidingWindow: 4096 },
  Qwen2ForCausalLM: { maxPositionEmbeddings: 32768, slidingWindow: 4096 },
  Qwen3ForCausalLM: { maxPositionEmbeddings: 32768, slidingWindow: 4096 },
  Phi3ForCausalLM: { maxPositionEmbeddings: 4096, slidingWindow: null },
  SmolLM3ForCausalLM: { maxPositionEmbeddings: 32768, slidingWindow: null },
  Gemma2ForCausalLM: { maxPositionEmbeddings: 8192, slidingWindow: 4096 },
  Gemma3ForCausalLM: { maxPositionEmbeddings: 131072, slidingWindow: 4096 },
};

/** Gemma 2 and Gemma 3: the sandwich-norm, GeGLU, (1 + w) RMSNorm block. */
export function isGemma(arch: Architecture): boolean {
  return arch === "Gemma2ForCausalLM" || arch === "Gemma3ForCausalLM";
}

/**
 * Upper bounds on the keys that size tensors, checked before anything is
 * allocated from them: an absurd config.json (num_hidden_layers 1e9, vocab_size
 * 1e12) is refused here, naming the key, instead of reaching an allocation
 * that aborts V8. Each is well above every published checkpoint of these
 * architectures (Llama-3.1-405B: hidden 16384, MLP 53248, 126 layers, 128
 * heads; Qwen2.5: vocabulary 152064; Llama 4: 10M positions); whether a
 * model of legal shapes fits this machine is memory-plan.ts's question.
 */
const SIZE_LIMITS: Readonly<Record<string, { limit: number; why: string }>> = {
  hidden_size: { limit: 65536, why: "4× the widest published model" },
  intermediate_size: { limit: 262144, why: "4× the widest published MLP" },
  num_hidden_layers: { limit: 1024, why: "8× the deepest published model" },
  num_attention_heads: { limit: 1024, why: "8× the most published heads" },
  num_key_value_heads: { limit: 1024, why: "8× the most published heads" },
  head_dim: { limit: 256, why: "the attention kernels' largest head dim" },
  vocab_size: { limit: 1 << 24, why: "100× the largest published vocabulary" },
  max_position_embeddings: { limit: 1 << 27, why: "12× the longest published context" },
  sliding_window: { limit: 1 << 27, why: "max_position_embeddings' bound" },
};

/** The bound on a config.json size key, as an error text ("must be ≤ …, got v"), or null when `value` is within it. */
export function sizeLimitError(key: keyof typeof SIZE_LIMITS & string, value: number): string | null {
  const max = SIZE_LIMITS[key];
  return max !== undefined && value > max.limit ? `must be ≤ ${max.limit} (${max.why}), got ${value}` : null;
}

export interface ModelConfig {
  architecture: Architecture;
  /** Model width (d_model). */
  hiddenSize: number;
  /** MLP inner width (gate/up output, down input). */
  intermediateSize: number;
  numLayers: number;
  /** Query heads H. */
  numHeads: number;
  /** KV heads Hkv (H % Hkv == 0; query head h reads KV head floor(h / (H/Hkv))). */
  numKvHeads: number;
  /** D: `head_dim` if the file gives it, else hiddenSize / numHeads. May differ from hiddenSize / numHeads (Qwen3). */
  headDim: number;
  vocabSize: number;
  maxPositionEmbeddings: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling: RopeScaling;
  /** lm_head shares model.embed_tokens.weight (no lm_head.weight tensor). */
  tieWordEmbeddings: boolean;
  /** q_proj, k_proj and v_proj have biases (Qwen2 always; Llama with attention_bias). */
  qkvBias: boolean;
  /** o_proj has a bias (Llama with attention_bias; Qwen3 with attention_bias). */
  oProjBias: boolean;
  /** gate/up/down projections have biases (Llama mlp_bias). */
  mlpBias: boolean;
  /** Per-head RMSNorm of q and k before RoPE, weights [headDim] (Qwen3). */
  qkNorm: boolean;
  /**
   * Sliding attention window per layer, or null for full causal attention.
   * A window W lets a token see itself and the W − 1 tokens before it
   * (transformers' mask `q − k < W`; the attention operators' left = W − 1).
   */
  layerWindows: (number | null)[];
  /** MLP activation: SwiGLU ("silu") or GeGLU with tanh GELU ("gelu_pytorch_tanh", Gemma). */
  hiddenAct: "silu" | "gelu_pytorch_tanh";
  /** Every RMSNorm multiplies by (normOffset + w): 1 for Gemma's (1 + w) norms (weights stored as w), else 0. */
  normOffset: number;
  /** The embedding rows are multiplied by this (Gemma: √hidden, in f32 as llama.cpp), else 1. */
  embeddingScale: number;
  /**
   * Gemma 2/3's sandwich: the attention output and the MLP output are each
   * RMSNormed (post_attention_layernorm, post_feedforward_layernorm) before
   * joining the residual stream, and the MLP's input norm is pre_feedforward_layernorm.
   */
  sandwichNorms: boolean;
  /** Attention softmax scale: 1/√D, or Gemma's query_pre_attn_scalar^−½. */
  attentionScale: number;
  /** > 0: attention scores become cap·tanh(s/cap) (Gemma 2: 50); 0: off. */
  attnLogitSoftcap: number;
  /** > 0: final logits become cap·tanh(z/cap) (Gemma 2: 30); 0: off. */
  finalLogitSoftcap: number;
  /** Rotated dimensions of each head (Phi-3's partial_rotary_factor · D; D otherwise); the rest pass through. */
  rotaryDim: number;
  /** The checkpoint holds q/k/v as one qkv_proj and gate/up as one gate_up_proj (Phi-3), rows in that order. */
  fusedProjections: boolean;
  /** Per layer: its RoPE theta and scaling (Gemma 3's sliding layers: rope_local_base_freq, no scaling), or null: no rotation (SmolLM3's NoPE layers). */
  layerRope: (LayerRope | null)[];
  bosTokenId: number | null;
  /** From config.json only; generation_config.json may add more (see model-dir). */
  eosTokenIds: number[];
  /** The checkpoint's declared dtype (`torch_dtype` / `dtype`), e.g. "bfloat16", or null. */
  torchDtype: string | null;
}

/** One layer's rotary embedding. */
export interface LayerRope {
  theta: number;
  scaling: RopeScaling;
}

type Json = Record<string, unknown>;

/** Reads config.json keys and names the key and the value on every error. */
class Keys {
  constructor(
    readonly json: Json,
    readonly source: string,
  ) {}

  #error(key: string, message: string): ArgumentError {
    return new ArgumentError(`${this.source} ${key}`, message);
  }

  has(key: string): boolean {
    return this.json[key] !== undefined && this.json[key] !== null;
  }

  int(key: string, fallback: number | undefined, min = 1, why = ""): number {
    const v = this.json[key];
    if (v === undefined || v === null) {
      if (fallback === undefined) throw this.#error(key, `is required${why}, got ${show(v)}`);
      return fallback;
    }
    if (typeof v !== "number" || !Number.isInteger(v)) throw this.#error(key, `must be an integer, got ${show(v)}`);
    if (v < min) throw this.#error(key, `must be ≥ ${min}, got ${v}`);
    const tooBig = sizeLimitError(key, v);
    if (tooBig !== null) throw this.#error(key, tooBig);
    return v;
  }

  positive(key: string, fallback: number, json: Json = this.json, prefix = ""): number {
    const v = json[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
      throw this.#error(prefix + key, `must be a positive number, got ${show(v)}`);
    }
    return v;
  }

  bool(key: string, fallback: boolean): boolean {
    const v = this.json[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== "boolean") throw this.#error(key, `must be true or false, got ${show(v)}`);
    return v;
  }

  /** An id, a list of ids, or null. */
  ids(key: string): number[] {
    const v = this.json[key];
    if (v === undefined || v === null) return [];
    const list = Array.isArray(v) ? v : [v];
    list.forEach((id, i) => {
      if (typeof id !== "number" || !Number.isInteger(id) || id < 0) {
        throw this.#error(Array.isArray(v) ? `${key}[${i}]` : key, `must be a token id (integer ≥ 0), got ${show(id)}`);
      }
    });
    return list as number[];
  }

  error(key: string, message: string): ArgumentError {
    return this.#error(key, message);
  }
}

/** Resolves the architecture from `architectures[0]`, else `model_type`. */
function architectureOf(k: Keys): Architecture {
  const supported = `supported: ${SUPPORTED_ARCHITECTURES.join(", ")}`;
  const archs = k.json["architectures"];
  if (archs !== undefined && archs !== null) {
    if (!Array.isArray(archs) || archs.length === 0 || typeof archs[0] !== "string") {
      throw k.error("architectures", `must be a non-empty list of class names, got ${show(archs)}`);
    }
    const name = archs[0] as string;
    if (!(SUPPORTED_ARCHITECTURES as readonly string[]).includes(name)) {
      throw k.error("architectures", `names an unsupported architecture ${show(name)} (${supported})`);
    }
    return name as Architecture;
  }
  const type = k.json["model_type"];
  if (typeof type === "string" && MODEL_TYPE[type]) return MODEL_TYPE[type]!;
  throw k.error(
    "architectures",
    `is missing and model_type ${show(type)} is not one of ${Object.keys(MODEL_TYPE).map((t) => JSON.stringify(t)).join(", ")} (${supported})`,
  );
}

/**
 * RoPE parameters from `rope_parameters` (transformers ≥ 5: theta and scaling in
 * one object) or `rope_theta` + `rope_scaling` (earlier versions).
 */
function ropeOf(k: Keys, maxPositions: number): { theta: number; scaling: RopeScaling } {
  const paramsKey = k.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const raw = k.json[paramsKey];
  const theta =
    paramsKey === "rope_parameters" && isObject(raw) && raw["rope_theta"] !== undefined
      ? k.positive("rope_theta", 10000, raw, "rope_parameters.")
      : k.positive("rope_theta", 10000);
  if (raw === undefined || raw === null) return { theta, scaling: { type: "default" } };
  if (!isObject(raw)) throw k.error(paramsKey, `must be an object or null, got ${show(raw)}`);
  const type = raw["rope_type"] ?? raw["type"] ?? "default";
  const p = `${paramsKey}.`;
  const need = (key: string): number => {
    if (raw[key] === undefined || raw[key] === null) throw k.error(p + key, `is required for rope type ${show(type)}, got ${show(raw[key])}`);
    return k.positive(key, 0, raw, p);
  };
  switch (type) {
    case "default":
      return { theta, scaling: { type: "default" } };
    case "linear":
      return { theta, scaling: { type: "linear", factor: need("factor") } };
    case "llama3": {
      const scaling: RopeScaling = {
        type: "llama3",
        factor: need("factor"),
        lowFreqFactor: need("low_freq_factor"),
        highFreqFactor: need("high_freq_factor"),
        originalMaxPositionEmbeddings: need("original_max_position_embeddings"),
      };
      if (scaling.highFreqFactor <= scaling.lowFreqFactor) {
        throw k.error(`${p}high_freq_factor`, `must be > low_freq_factor (${scaling.lowFreqFactor}), got ${scaling.highFreqFactor}`);
      }
      return { theta, scaling };
    }
    case "longrope":
    case "su": {
      // transformers' _compute_longrope_parameters; original_max_position_embeddings is Phi-3's top-level key.
      const orig = raw["original_max_position_embeddings"] !== undefined ? need("original_max_position_embeddings") : k.positive("original_max_position_embeddings", maxPositions);
      const factors = (key: string): number[] => {
        const v = raw[key];
        if (!Array.isArray(v) || v.length === 0 || v.some((f) => typeof f !== "number" || !(f > 0))) throw k.error(p + key, `must be a list of positive numbers, got ${show(v)}`);
        return v as number[];
      };
      const factor = maxPositions / orig;
      const attentionFactor = raw["attention_factor"] !== undefined && raw["attention_factor"] !== null ? need("attention_factor") : factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(orig));
      return { theta, scaling: { type: "longrope", shortFactor: factors("short_factor"), longFactor: factors("long_factor"), originalMaxPositionEmbeddings: orig, attentionFactor } };
    }
    default:
      throw k.error(`${p}${raw["rope_type"] !== undefined ? "rope_type" : "type"}`, `must be "default", "linear", "llama3" or "longrope", got ${show(type)}`);
  }
}

/** Per-layer sliding windows: `layer_types` if given, else each architecture's own rule. */
function windowsOf(k: Keys, arch: Architecture, numLayers: number): (number | null)[] {
  const window = k.has("sliding_window") ? k.int("sliding_window", undefined) : null;
  const layerTypes = k.json["layer_types"];
  if (layerTypes !== undefined && layerTypes !== null) {
    if (!Array.isArray(layerTypes) || layerTypes.length !== numLayers) {
      throw k.error("layer_types", `must be a list of ${numLayers} layer types (num_hidden_layers), got ${show(layerTypes)}`);
    }
    return layerTypes.map((t, i) => {
      if (t === "full_attention") return null;
      if (t === "sliding_attention") {
        if (window === null) throw k.error("sliding_window", `is required by layer_types[${i}] = "sliding_attention", got ${show(k.json["sliding_window"])}`);
        return window;
      }
      throw k.error(`layer_types[${i}]`, `must be "full_attention" or "sliding_attention", got ${show(t)}`);
    });
  }
  switch (arch) {
    case "Gemma2ForCausalLM":
    case "Gemma3ForCausalLM": {
      // transformers: layer i slides iff (i + 1) % pattern ≠ 0 (Gemma 2: every other, from layer 0; Gemma 3: 5 of each 6).
      const pattern = arch === "Gemma2ForCausalLM" ? 2 : k.int("sliding_window_pattern", 6);
      const w = window ?? DEFAULTS[arch].slidingWindow;
      return Array.from({ length: numLayers }, (_, i) => ((i + 1) % pattern !== 0 ? w : null));
    }
    case "LlamaForCausalLM":
      return new Array<number | null>(numLayers).fill(null);
    case "Phi3ForCausalLM":
      return new Array<number | null>(numLayers).fill(window);
    case "SmolLM3ForCausalLM":
      return new Array<number | null>(numLayers).fill(k.bool("use_sliding_window", false) ? window : null);
    case "MistralForCausalLM": {
      const w = k.json["sliding_window"] === undefined ? DEFAULTS[arch].slidingWindow : window;
      return new Array<number | null>(numLayers).fill(w);
    }
    case "Qwen2ForCausalLM":
    case "Qwen3ForCausalLM": {
      // transformers: a layer slides iff use_sliding_window and layer ≥ max_window_layers.
      if (!k.bool("use_sliding_window", false)) return new Array<number | null>(numLayers).fill(null);
      const w = window ?? DEFAULTS[arch].slidingWindow;
      const from = k.int("max_window_layers", 28, 0);
      return Array.from({ length: numLayers }, (_, i) => (i >= from ? w : null));
    }
  }
}

/**
 * SmolLM3: which layers skip RoPE (NoPE). `no_rope_layers[i]` is 1 where layer i
 * rotates, 0 where it does not; absent, every no_rope_layer_interval-th layer
 * (default 4: layers 3, 7, …) skips it, as SmolLM3Config builds the list.
 */
function noRopeLayers(k: Keys, numLayers: number): boolean[] {
  const list = k.json["no_rope_layers"];
  if (list === undefined || list === null) {
    const interval = k.int("no_rope_layer_interval", 4);
    return Array.from({ length: numLayers }, (_, i) => (i + 1) % interval === 0);
  }
  if (!Array.isArray(list) || list.length !== numLayers || list.some((v) => v !== 0 && v !== 1 && v !== true && v !== false)) {
    throw k.error("no_rope_layers", `must be a list of ${numLayers} flags (num_hidden_layers; 1 = the layer applies RoPE), got ${show(list)}`);
  }
  return list.map((v) => !v);
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export interface ParseConfigOptions {
  /** Names the file in error messages. Default "config.json". */
  source?: string;
}

/** Parses a config.json object (already JSON.parse'd) into a validated ModelConfig. */
export function parseModelConfig(json: unknown, options: ParseConfigOptions = {}): ModelConfig {
  const source = options.source ?? "config.json";
  if (!isObject(json)) throw new ArgumentError(source, `must be a JSON object, got ${show(json)}`);
  const k = new Keys(json, source);
  const architecture = architectureOf(k);
  const why = ` for ${architecture}`;

  const hiddenSize = k.int("hidden_size", undefined, 1, why);
  const intermediateSize = k.int("intermediate_size", undefined, 1, why);
  const numLayers = k.int("num_hidden_layers", undefined, 1, why);
  const numHeads = k.int("num_attention_heads", undefined, 1, why);
  const numKvHeads = k.int("num_key_value_heads", numHeads);
  const vocabSize = k.int("vocab_size", undefined, 1, why);
  if (numHeads % numKvHeads !== 0) {
    throw k.error("num_key_value_heads", `must divide num_attention_heads (${numHeads}), got ${numKvHeads}`);
  }
  let headDim: number;
  const gemma = isGemma(architecture);
  if (k.has("head_dim")) headDim = k.int("head_dim", undefined);
  else if (architecture === "Qwen3ForCausalLM") headDim = 128; // Qwen3Config's default, not hidden / heads
  else if (gemma) headDim = 256; // Gemma2Config's and Gemma3TextConfig's default
  else {
    if (hiddenSize % numHeads !== 0) {
      throw k.error("hidden_size", `must be a multiple of num_attention_heads (${numHeads}) when head_dim is absent, got ${hiddenSize}`);
    }
    headDim = hiddenSize / numHeads;
    if (headDim > SIZE_LIMITS["head_dim"]!.limit) {
      throw k.error("num_attention_heads", `must give hidden_size / num_attention_heads ≤ ${SIZE_LIMITS["head_dim"]!.limit} (the attention kernels' largest head dim) when head_dim is absent, got ${hiddenSize} / ${numHeads} = ${headDim}`);
    }
  }

  const actKey = gemma && json["hidden_activation"] !== undefined ? "hidden_activation" : "hidden_act";
  const hiddenAct = gemma ? "gelu_pytorch_tanh" : "silu";
  const act = json[actKey] ?? hiddenAct;
  if (act !== hiddenAct) throw k.error(actKey, `must be ${show(hiddenAct)} (${gemma ? "GeGLU" : "SwiGLU"} MLP), got ${show(act)}`);

  const attentionBias = k.bool("attention_bias", false);
  const qkvBias = architecture === "Qwen2ForCausalLM" ? true : attentionBias;
  const oProjBias = architecture === "Qwen2ForCausalLM" ? false : attentionBias;
  const mlpBias = architecture === "LlamaForCausalLM" ? k.bool("mlp_bias", false) : false;

  const maxPositionEmbeddings = k.int("max_position_embeddings", DEFAULTS[architecture].maxPositionEmbeddings);
  const rope = ropeOf(k, maxPositionEmbeddings);
  const phi3 = architecture === "Phi3ForCausalLM";
  const rotary = phi3 ? k.positive("partial_rotary_factor", 1) : 1;
  const rotaryDim = Math.floor(headDim * rotary);
  if (rotary > 1 || rotaryDim < 2 || rotaryDim % 2 !== 0) throw k.error("partial_rotary_factor", `must give an even number of rotated dims in [2, head_dim ${headDim}], got ${rotary} · ${headDim} = ${headDim * rotary}`);
  if (rope.scaling.type === "longrope" && rope.scaling.shortFactor.length !== rotaryDim / 2) {
    throw k.error("rope_scaling.short_factor", `must hold one factor per rotated frequency (${rotaryDim / 2}), got ${rope.scaling.shortFactor.length}`);
  }
  if (rope.scaling.type === "longrope" && rope.scaling.longFactor.length !== rotaryDim / 2) {
    throw k.error("rope_scaling.long_factor", `must hold one factor per rotated frequency (${rotaryDim / 2}), got ${rope.scaling.longFactor.length}`);
  }
  const layerWindows = windowsOf(k, architecture, numLayers);
  // Gemma 3: sliding layers rotate with rope_local_base_freq and no scaling; full layers with rope_theta and rope_scaling.
  const local = architecture === "Gemma3ForCausalLM" ? { theta: k.positive("rope_local_base_freq", 10000), scaling: { type: "default" } as const } : null;
  const noRope = architecture === "SmolLM3ForCausalLM" ? noRopeLayers(k, numLayers) : null;
  const layerRope = layerWindows.map((w, i) => (noRope?.[i] ? null : local !== null && w !== null ? local : { theta: rope.theta, scaling: rope.scaling }));
  const softcap = (key: string, fallback: number): number => (json[key] === null ? 0 : k.positive(key, fallback));
  const torchDtype = json["torch_dtype"] ?? json["dtype"] ?? null;
  return {
    architecture,
    hiddenSize,
    intermediateSize,
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    vocabSize,
    maxPositionEmbeddings,
    rmsNormEps: k.positive("rms_norm_eps", phi3 ? 1e-5 : 1e-6),
    ropeTheta: rope.theta,
    ropeScaling: rope.scaling,
    tieWordEmbeddings: k.bool("tie_word_embeddings", gemma), // Gemma's configs default to tied
    qkvBias,
    oProjBias,
    mlpBias,
    qkNorm: architecture === "Qwen3ForCausalLM" || architecture === "Gemma3ForCausalLM",
    layerWindows,
    hiddenAct,
    normOffset: gemma ? 1 : 0,
    embeddingScale: gemma ? Math.fround(Math.sqrt(hiddenSize)) : 1,
    sandwichNorms: gemma,
    attentionScale: 1 / Math.sqrt(gemma ? k.positive("query_pre_attn_scalar", 256) : headDim),
    attnLogitSoftcap: architecture === "Gemma2ForCausalLM" ? softcap("attn_logit_softcapping", 50) : gemma ? softcap("attn_logit_softcapping", 0) : 0,
    finalLogitSoftcap: architecture === "Gemma2ForCausalLM" ? softcap("final_logit_softcapping", 30) : gemma ? softcap("final_logit_softcapping", 0) : 0,
    rotaryDim,
    fusedProjections: phi3,
    layerRope,
    bosTokenId: k.ids("bos_token_id")[0] ?? null,
    eosTokenIds: k.ids("eos_token_id"),
    torchDtype: typeof torchDtype === "string" ? torchDtype : null,
  };
}

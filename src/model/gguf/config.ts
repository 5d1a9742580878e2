/**
 * GGUF metadata → ModelConfig (config.ts) for the architectures llama.cpp
 * names `llama` (Llama 2/3/3.x, Mistral, TinyLlama, SmolLM), `qwen2` and
 * `qwen3`, with the keys of gguf-py's `Keys.LLM` / `Keys.Attention` /
 * `Keys.Rope` under the architecture prefix:
 *
 *   {arch}.embedding_length  feed_forward_length  block_count  context_length
 *   {arch}.attention.head_count  head_count_kv  key_length  value_length
 *   {arch}.attention.layer_norm_rms_epsilon  sliding_window
 *   {arch}.rope.freq_base  rope.scaling.type / factor / original_context_length
 *
 * Biases, q/k norms and tied embeddings are read off the tensor index, as
 * llama.cpp does (no `output.weight` → the LM head is the embedding). Llama
 * 3.1's RoPE scaling is not in the metadata: the converter stores its
 * per-frequency divisors as the tensor `rope_freqs.weight`, which is matched
 * here against the "llama3" rule (rope.ts) to recover its parameters.
 */
import type { RopeScaling } from "../../ops/rope.js";
import { type Architecture, type ModelConfig, sizeLimitError } from "../config.js";
import type { GgufHeader, GgufTensorInfo } from "./reader.js";
import { GgufMetadata, shortestDecimal } from "./metadata.js";

export const GGUF_ARCHITECTURES: Readonly<Record<string, Architecture>> = {
  llama: "LlamaForCausalLM",
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
};

/** Llama 3.x's divisors for frequency i of D/2 under `scaling` (transformers' _compute_llama3_parameters). */
export function llama3Factors(theta: number, headDim: number, s: Extract<RopeScaling, { type: "llama3" }>): Float64Array {
  const out = new Float64Array(headDim / 2);
  const lowWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
  const highWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
  for (let i = 0; i < headDim / 2; i++) {
    const freq = 1 / theta ** ((2 * i) / headDim);
    const wavelen = (2 * Math.PI) / freq;
    if (wavelen < highWavelen) out[i] = 1;
    else if (wavelen > lowWavelen) out[i] = s.factor;
    else {
      const smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      out[i] = 1 / ((1 - smooth) / s.factor + smooth);
    }
  }
  return out;
}

/** The "llama3" scaling whose divisors equal `factors` (Llama 3.1: 8, 1, 4, 8192; 3.2: 32, 1, 4, 8192), or null. */
function llama3FromFactors(factors: Float32Array, theta: number, headDim: number): RopeScaling | null {
  const factor = factors.reduce((a, b) => Math.max(a, b), 0);
  for (const [low, high, orig] of [[1, 4, 8192], [1, 4, 4096], [1, 4, 2048], [1, 4, 16384]] as const) {
    const s = { type: "llama3", factor, lowFreqFactor: low, highFreqFactor: high, originalMaxPositionEmbeddings: orig } as const;
    const want = llama3Factors(theta, headDim, s);
    if (want.every((w, i) => Math.abs(w - factors[i]!) <= 1e-4 * w)) return s;
  }
  return null;
}

export interface GgufConfigOptions {
  /**
   * Reads a tensor's values (gguf-model.ts reads the file). rope_freqs.weight is
   * read through it only after its shape is checked to be [head dim / 2], so a
   * forged 1 GiB rope_freqs never reaches memory. Without it, rope_freqs is ignored.
   */
  readTensor?: (tensor: GgufTensorInfo) => Float32Array;
}

/** Reads the architecture's hyperparameters; `header.tensors` decide biases, q/k norm and tying. */
export function parseGgufConfig(header: GgufHeader, options: GgufConfigOptions = {}): ModelConfig {
  const m = new GgufMetadata(header.metadata, header.path);
  const arch = m.string("general.architecture");
  const architecture = arch === null ? undefined : GGUF_ARCHITECTURES[arch];
  if (!architecture) {
    throw m.error("general.architecture", `must be one of ${Object.keys(GGUF_ARCHITECTURES).map((a) => JSON.stringify(a)).join(", ")}, got ${arch === null ? "nothing" : JSON.stringify(arch)}`);
  }
  const k = (key: string) => `${arch}.${key}`;
  const hiddenSize = m.int(k("embedding_length"), undefined, 1);
  const intermediateSize = m.int(k("feed_forward_length"), undefined, 1);
  const numLayers = m.int(k("block_count"), undefined, 1);
  const numHeads = m.int(k("attention.head_count"), undefined, 1);
  const numKvHeads = m.int(k("attention.head_count_kv"), numHeads, 1);
  if (numHeads % numKvHeads !== 0) throw m.error(k("attention.head_count_kv"), `must divide attention.head_count (${numHeads}), got ${numKvHeads}`);
  const headDim = m.int(k("attention.key_length"), hiddenSize % numHeads === 0 ? hiddenSize / numHeads : undefined, 1);
  // config.json's size bounds, before anything is sized from these (a hostile block_count must not reach an allocation).
  for (const [hfKey, key, value] of [
    ["hidden_size", "embedding_length", hiddenSize],
    ["intermediate_size", "feed_forward_length", intermediateSize],
    ["num_hidden_layers", "block_count", numLayers],
    ["num_attention_heads", "attention.head_count", numHeads],
    ["num_key_value_heads", "attention.head_count_kv", numKvHeads],
    ["head_dim", "attention.key_length", headDim],
  ] as const) {
    const tooBig = sizeLimitError(hfKey, value);
    if (tooBig !== null) throw m.error(k(key), tooBig);
  }
  const valueDim = m.int(k("attention.value_length"), headDim, 1);
  if (valueDim !== headDim) throw m.error(k("attention.value_length"), `must equal attention.key_length (${headDim}), got ${valueDim}`);
  const ropeDim = m.int(k("rope.dimension_count"), headDim, 1);
  if (ropeDim !== headDim) throw m.error(k("rope.dimension_count"), `must equal the head dim ${headDim} (partial rotary is not supported), got ${ropeDim}`);

  const tensors = new Map(header.tensors.map((t) => [t.name, t]));
  const embd = tensors.get("token_embd.weight");
  if (!embd || embd.shape.length !== 2) throw m.error("token_embd.weight", `must be a [vocab, ${hiddenSize}] tensor, got ${embd ? `[${embd.shape.join(", ")}]` : "none"}`);
  const has = (name: string) => tensors.has(`blk.0.${name}`);

  const ropeTheta = shortestDecimal(m.positive(k("rope.freq_base"), 10000));
  let ropeScaling: RopeScaling = { type: "default" };
  const scalingType = m.string(k("rope.scaling.type"), "none");
  if (scalingType === "linear") ropeScaling = { type: "linear", factor: m.positive(k("rope.scaling.factor"), 1) };
  else if (scalingType !== "none") throw m.error(k("rope.scaling.type"), `must be "none" or "linear" (YaRN is not supported), got ${JSON.stringify(scalingType)}`);
  const ropeTensor = tensors.get("rope_freqs.weight");
  if (ropeTensor !== undefined && options.readTensor !== undefined) {
    if (ropeTensor.shape.length !== 1 || ropeTensor.numel !== headDim / 2) {
      throw m.error("rope_freqs.weight", `must be a [${headDim / 2}] tensor (head dim / 2), got [${ropeTensor.shape.join(", ")}]`);
    }
    const llama3 = llama3FromFactors(options.readTensor(ropeTensor), ropeTheta, headDim);
    if (!llama3) throw m.error("rope_freqs.weight", "holds RoPE frequency divisors that match no Llama 3 scaling (factor, low/high freq factor 1/4, original context 2048..16384)");
    ropeScaling = llama3;
  }

  const window = m.optionalInt(k("attention.sliding_window"));
  for (const [hfKey, key, value] of [
    ["vocab_size", "token_embd.weight", embd.shape[0]!],
    ["max_position_embeddings", k("context_length"), m.int(k("context_length"), 2048, 2)],
    ["sliding_window", k("attention.sliding_window"), window ?? 0],
  ] as const) {
    const tooBig = sizeLimitError(hfKey, value);
    if (tooBig !== null) throw m.error(key, tooBig);
  }
  const embedType = embd.type.name;
  return {
    architecture,
    hiddenSize,
    intermediateSize,
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    vocabSize: embd.shape[0]!,
    maxPositionEmbeddings: m.int(k("context_length"), 2048, 2),
    rmsNormEps: shortestDecimal(m.positive(k("attention.layer_norm_rms_epsilon"), 1e-6)),
    ropeTheta,
    ropeScaling,
    tieWordEmbeddings: !tensors.has("output.weight"),
    qkvBias: has("attn_q.bias"),
    oProjBias: has("attn_output.bias"),
    mlpBias: has("ffn_gate.bias"),
    qkNorm: architecture === "Qwen3ForCausalLM" || has("attn_q_norm.weight"),
    layerWindows: new Array<number | null>(numLayers).fill(window !== null && window > 0 ? window : null),
    bosTokenId: m.optionalInt("tokenizer.ggml.bos_token_id"),
    eosTokenIds: [m.optionalInt("tokenizer.ggml.eos_token_id")].filter((x): x is number => x !== null),
    // The KV cache and "auto" weights follow the file: bf16 files stay bf16, quantized and f16 files get a 16-bit cache.
    torchDtype: embedType === "F32" ? "float32" : embedType === "BF16" ? "bfloat16" : "float16",
  };
}

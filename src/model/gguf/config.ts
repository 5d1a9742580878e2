/**
 * GGUF metadata → ModelConfig (config.ts) for the architectures llama.cpp
 * names `llama` (Llama 2/3/3.x, Mistral, TinyLlama, SmolLM), `qwen2`,
 * `qwen3`, `phi3`, `smollm3`, `gemma2` and `gemma3`, with the keys of gguf-py's `Keys.LLM` / `Keys.Attention` /
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
 *
 * Gemma, as llama.cpp's src/models/gemma2.cpp and gemma3.cpp read it:
 * `attn_logit_softcapping` (Gemma 2, default 50), `final_logit_softcapping`
 * (Gemma 2 default 30, Gemma 3 none), `attention.sliding_window` (Gemma 2
 * default 4096; a Gemma 3 without one has no sliding layers), and
 * `attention.sliding_window_pattern` (default 2 / 6: layer i slides iff
 * i % n < n − 1); Gemma 3's sliding layers rotate with `rope.freq_base_swa`
 * (default 10000). The attention scale is llama.cpp's: 1/√head_dim, or
 * 1/√(hidden / heads) for the 27B models (46 and 62 layers), since GGUF has
 * no query_pre_attn_scalar. convert_hf_to_gguf stores Gemma's norm weights
 * with the 1 of (1 + w) already added, so normOffset is 0 here.
 *
 * Phi-3 (src/models/phi3.cpp): fused attn_qkv and ffn_up (gate and up),
 * partial rotary `rope.dimension_count`, LongRoPE as the tensors
 * rope_factors_short / rope_factors_long with `rope.scaling.attn_factor` and
 * `rope.scaling.original_context_length`; llama.cpp disables Phi's sliding
 * window, and so does this reading of the file.
 *
 * SmolLM3 (src/models/smollm3.cpp) is `llama` with Q/K permuted alike and
 * RoPE skipped on every 4th layer (n_no_rope_layer_step = 4, no key).
 */
import type { RopeScaling } from "../../ops/rope.js";
import { type Architecture, type LayerRope, type ModelConfig, sizeLimitError } from "../config.js";
import type { GgufHeader, GgufTensorInfo } from "../../sources/gguf/reader.js";
import { GgufMetadata, shortestDecimal } from "../../sources/gguf/metadata.js";

export const GGUF_ARCHITECTURES: Readonly<Record<string, Architecture>> = {
  llama: "LlamaForCausalLM",
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
  phi3: "Phi3ForCausalLM",
  smollm3: "SmolLM3ForCausalLM",
  gemma2: "Gemma2ForCausalLM",
  gemma3: "Gemma3ForCausalLM",
};

/** Reads a [R/2] RoPE factor tensor through `read` once its shape is checked. */
function ropeFactors(m: GgufMetadata, t: GgufTensorInfo, half: number, read: (t: GgufTensorInfo) => Float32Array): number[] {
  if (t.shape.length !== 1 || t.numel !== half) throw m.error(t.name, `must be a [${half}] tensor (rotary dims / 2), got [${t.shape.join(", ")}]`);
  return [...read(t)].map(shortestDecimal);
}

/** The Gemma fields of a ModelConfig from a gemma2 / gemma3 file's metadata (see the header). */
function gemmaFields(m: GgufMetadata, arch: "gemma2" | "gemma3", c: { numLayers: number; hiddenSize: number; numHeads: number; headDim: number; rope: LayerRope }) {
  const k = (key: string) => `${arch}.${key}`;
  const two = arch === "gemma2";
  const cap = (key: string, fallback: number) => shortestDecimal(m.positive(k(key), fallback));
  const finalCap = two || m.has(k("final_logit_softcapping")) ? cap("final_logit_softcapping", 30) : 0;
  const window = m.optionalInt(k("attention.sliding_window")) ?? (two ? 4096 : 0);
  const pattern = m.int(k("attention.sliding_window_pattern"), two ? 2 : 6, 0);
  const layerWindows = Array.from({ length: c.numLayers }, (_, i) => (window > 0 && (pattern === 0 || i % pattern < pattern - 1) ? window : null));
  const local: LayerRope = { theta: two ? c.rope.theta : shortestDecimal(m.positive(k("rope.freq_base_swa"), 10000)), scaling: two ? c.rope.scaling : { type: "default" } };
  const big = c.numLayers === (two ? 46 : 62); // llama.cpp's LLM_TYPE_27B
  return {
    hiddenAct: "gelu_pytorch_tanh" as const,
    normOffset: 0,
    embeddingScale: Math.fround(Math.sqrt(c.hiddenSize)),
    sandwichNorms: true,
    attentionScale: 1 / Math.sqrt(big ? c.hiddenSize / c.numHeads : c.headDim),
    attnLogitSoftcap: two ? cap("attn_logit_softcapping", 50) : 0,
    finalLogitSoftcap: finalCap,
    layerWindows,
    layerRope: layerWindows.map((w) => (w !== null ? local : c.rope)),
  };
}

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
  // Partial rotary is NEOX's (HF's) split; the `llama` arch's interleaved pairs are not supported partially.
  if (ropeDim > headDim || ropeDim % 2 !== 0 || (ropeDim !== headDim && (arch === "llama" || arch === "smollm3"))) {
    throw m.error(k("rope.dimension_count"), `must be ${arch === "llama" || arch === "smollm3" ? `the head dim ${headDim}` : `even and ≤ the head dim ${headDim}`}, got ${ropeDim}`);
  }

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
  const short = tensors.get("rope_factors_short.weight");
  const long = tensors.get("rope_factors_long.weight");
  if (short !== undefined && long !== undefined && options.readTensor !== undefined) {
    ropeScaling = {
      type: "longrope",
      shortFactor: ropeFactors(m, short, ropeDim / 2, options.readTensor),
      longFactor: ropeFactors(m, long, ropeDim / 2, options.readTensor),
      originalMaxPositionEmbeddings: m.int(k("rope.scaling.original_context_length"), m.int(k("context_length"), 2048, 2), 1),
      attentionFactor: shortestDecimal(m.positive(k("rope.scaling.attn_factor"), 1)),
    };
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
  const rope: LayerRope = { theta: ropeTheta, scaling: ropeScaling };
  const family =
    arch === "gemma2" || arch === "gemma3"
      ? gemmaFields(m, arch, { numLayers, hiddenSize, numHeads, headDim, rope })
      : {
          hiddenAct: "silu" as const,
          normOffset: 0,
          embeddingScale: 1,
          sandwichNorms: false,
          attentionScale: 1 / Math.sqrt(headDim),
          attnLogitSoftcap: 0,
          finalLogitSoftcap: 0,
          layerWindows: new Array<number | null>(numLayers).fill(window !== null && window > 0 ? window : null),
          layerRope: Array.from({ length: numLayers }, (_, i): LayerRope | null => (arch === "smollm3" && (i + 1) % 4 === 0 ? null : rope)),
        };
  if (arch === "phi3") family.layerWindows.fill(null); // llama.cpp: "Phi SWA is currently disabled"
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
    rotaryDim: ropeDim,
    fusedProjections: has("attn_qkv.weight"),
    ...family,
    bosTokenId: m.optionalInt("tokenizer.ggml.bos_token_id"),
    eosTokenIds: [m.optionalInt("tokenizer.ggml.eos_token_id")].filter((x): x is number => x !== null),
    // The KV cache and "auto" weights follow the file: bf16 files stay bf16, quantized and f16 files get a 16-bit cache.
    torchDtype: embedType === "F32" ? "float32" : embedType === "BF16" ? "bfloat16" : "float16",
  };
}

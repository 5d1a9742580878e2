/**
 * A model with a real checkpoint's shapes and random weights, built in memory
 * with no files: what `npm run bench -- model` and the serve benchmark run
 * when the point is speed, not text. By default it has the shapes of
 * Qwen/Qwen2.5-0.5B (its config.json below): hidden 896, 24 layers, 14 query
 * heads and 2 KV heads of 64, MLP 4864, vocabulary 151936, tied embeddings,
 * q/k/v biases — 494 M parameters, 0.99 GB in bf16 (1.98 GB in f32, which
 * with a KV cache of a few hundred MB still fits wasm32's 4 GiB).
 *
 * Weights are deterministic bf16 values of a trained model's magnitude
 * (|w| in [2⁻⁸, 2⁻⁴), random signs; norm weights ≈ 1): each tensor is a run of
 * one seeded pool of 4 M random codes, starting where its name hashes to, so
 * tensors differ; converted to the requested format exactly as a
 * checkpoint's are.
 */
import type { Runtime } from "../runtime/runtime.js";
import type { Tensor } from "../tensor/tensor.js";
import { type ModelConfig, parseModelConfig } from "./config.js";
import { buildDecoderWeights } from "./decoder-weights.js";
import type { Decoder } from "./decoder.js";
import { type RunnerOptions, createDecoder, planRunner, resolveWeightFormat, withRuntimeMachine } from "./loader.js";
import type { WeightsSetting } from "../ops/weight.js";
import { expectedWeights } from "./weight-names.js";

/** Qwen/Qwen2.5-0.5B's config.json, as published. */
export const QWEN25_05B_CONFIG_JSON: Readonly<Record<string, unknown>> = Object.freeze({
  architectures: ["Qwen2ForCausalLM"],
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151643,
  hidden_act: "silu",
  hidden_size: 896,
  initializer_range: 0.02,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 24,
  model_type: "qwen2",
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
});

/** The shapes of meta-llama/Llama-3.1-8B's config.json (hidden 4096, 32 layers, 32/8 heads, MLP 14336, vocabulary 128256, untied): 8.03 G parameters, too big for one wasm32 memory at q8 (9.0 GB). */
export const LLAMA31_8B_CONFIG_JSON: Readonly<Record<string, unknown>> = Object.freeze({
  architectures: ["LlamaForCausalLM"],
  bos_token_id: 128000,
  eos_token_id: 128001,
  hidden_act: "silu",
  hidden_size: 4096,
  intermediate_size: 14336,
  max_position_embeddings: 131072,
  model_type: "llama",
  num_attention_heads: 32,
  num_hidden_layers: 32,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-5,
  rope_scaling: { factor: 8.0, high_freq_factor: 4.0, low_freq_factor: 1.0, original_max_position_embeddings: 8192, rope_type: "llama3" },
  rope_theta: 500000.0,
  tie_word_embeddings: false,
  torch_dtype: "bfloat16",
  vocab_size: 128256,
});

/** Llama-3.1-8B's ModelConfig. */
export function llama31EightBConfig(): ModelConfig {
  return parseModelConfig(LLAMA31_8B_CONFIG_JSON, { source: "LLAMA31_8B_CONFIG_JSON" });
}

/** Qwen2.5-0.5B's ModelConfig. */
export function qwen25HalfBConfig(): ModelConfig {
  return parseModelConfig(QWEN25_05B_CONFIG_JSON, { source: "QWEN25_05B_CONFIG_JSON" });
}

export interface SyntheticModelOptions extends RunnerOptions {
  /** Default: Qwen2.5-0.5B's (qwen25HalfBConfig()). */
  config?: ModelConfig;
  /** Compute format of the weights: f32 | bf16 | q8 | q4. Default bf16 (the checkpoint's). */
  weights?: WeightsSetting;
  /** Mixed into every tensor's stream. Default 0. */
  seed?: number;
}

/** FNV-1a of a string: where each tensor starts in the pool. */
function hashName(name: string, seed: number): number {
  let h = (2166136261 ^ seed) >>> 0;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619) >>> 0;
  return h;
}

/** Values in the pool of random bf16 codes (a prime, so rows of any width do not line up with its period). */
const POOL = 4_194_301;

/** POOL bf16 codes of ±[2⁻⁸, 2⁻⁴): sign, exponent 119..122, 7 random mantissa bits (an LCG's high bits). */
function bf16Pool(seed: number): Uint16Array {
  const pool = new Uint16Array(POOL);
  let s = (seed * 2654435761 + 1) >>> 0;
  for (let i = 0; i < POOL; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    pool[i] = ((s >>> 31) << 15) | ((119 + ((s >>> 7) & 3)) << 7) | ((s >>> 16) & 0x7f);
  }
  return pool;
}

/**
 * Fills a bf16 tensor: norm weights 1 + k·2⁻⁷ (k < 4), every other tensor a
 * run of the pool starting where its name hashes to (copied, not drawn: the
 * 494 M values of the default model take well under a second).
 */
function fillBf16(t: Tensor, name: string, seed: number, pool: Uint16Array): void {
  const d = t.data() as Uint16Array;
  let at = hashName(name, seed) % POOL;
  if (name.endsWith("norm.weight")) {
    for (let i = 0; i < d.length; i++) d[i] = 0x3f80 | (pool[(at + i) % POOL]! & 3);
    return;
  }
  for (let i = 0; i < d.length; ) {
    const n = Math.min(d.length - i, POOL - at);
    d.set(pool.subarray(at, at + n), i);
    i += n;
    at = 0;
  }
}

/** Builds the synthetic model's Decoder (weights converted to options.weights, a KV cache per RunnerOptions). */
export function createSyntheticModel(rt: Runtime, options: SyntheticModelOptions = {}): Decoder {
  const config = options.config ?? qwen25HalfBConfig();
  const format = resolveWeightFormat(options.weights ?? "bf16", config);
  const seed = options.seed ?? 0;
  const shapes = new Map(expectedWeights(config).map((s) => [s.name, s.shape]));
  const pool = bf16Pool(seed);
  const source = (names: readonly string[], into: Runtime): Map<string, Tensor> => {
    const out = new Map<string, Tensor>();
    try {
      for (const name of names) {
        const t = into.tensor("bf16", shapes.get(name)!, `synthetic ${name}`);
        out.set(name, t);
        fillBf16(t, name, seed, pool);
      }
    } catch (e) {
      for (const t of out.values()) into.free(t);
      throw e;
    }
    return out;
  };
  const plan = planRunner(config, format, withRuntimeMachine(rt, options), 2); // sizes, KV blocks, placement, fit check: before any weight is made
  return createDecoder(rt, config, buildDecoderWeights(rt, { config, format, source, placement: plan.placement }), options, plan);
}

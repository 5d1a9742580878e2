/**
 * The context length a model allows, and the user's maxModelLen resolved
 * against it, once, when the loader has read the config (vLLM's
 * ModelConfig._get_and_verify_max_len): the config's max_position_embeddings,
 * times the factor of a linear RoPE scaling (position interpolation stretches
 * the trained positions; llama3 and LongRoPE configs already state the long
 * length, and Gemma's linear factor is folded into its max_position_embeddings,
 * as vLLM skips it for Gemma 3), or a GGUF's <arch>.context_length as it
 * stands (llama.cpp's n_ctx_train). A maxModelLen above it is an error naming
 * the setting, the value and where the limit comes from. Everything below
 * (the memory plan, the runners, the engine, the server) reads the result.
 */
import { ArgumentError } from "../errors.js";
import type { ModelConfig } from "./config.js";

/** The model's own limit on prompt + output tokens, and where it comes from (for errors and logs). */
export interface ModelLengthLimit {
  tokens: number;
  /** "max_position_embeddings 32768 in config.json", "context_length 4096 in the GGUF", … */
  from: string;
}

/** Gemma 2 and 3 state their scaled length in max_position_embeddings (vLLM leaves their factor out). */
const FACTOR_FOLDED: ReadonlySet<string> = new Set(["Gemma2ForCausalLM", "Gemma3ForCausalLM"]);

/** The longest sequence `config` allows (`gguf`: the config came from a GGUF file's metadata). */
export function modelLengthLimit(config: ModelConfig, gguf = false): ModelLengthLimit {
  const positions = config.maxPositionEmbeddings;
  if (gguf) return { tokens: positions, from: `context_length ${positions} in the GGUF` };
  const s = config.ropeScaling;
  if (s.type === "linear" && s.factor > 1 && !FACTOR_FOLDED.has(config.architecture)) {
    const tokens = Math.floor(positions * s.factor);
    return { tokens, from: `max_position_embeddings ${positions} × rope_scaling factor ${s.factor} = ${tokens} in config.json` };
  }
  return { tokens: positions, from: `max_position_embeddings ${positions} in config.json` };
}

/**
 * `requested` (a LoadConfig's maxModelLen, already an integer ≥ 2) checked
 * against the model's limit; undefined stays undefined (the memory plan then
 * takes the limit, as far as the KV cache holds it).
 */
export function checkMaxModelLen(requested: number | undefined, limit: ModelLengthLimit): number | undefined {
  if (requested !== undefined && requested > limit.tokens) {
    throw new ArgumentError("maxModelLen", `must be ≤ ${limit.tokens}, what the model allows (${limit.from}), got ${requested}`);
  }
  return requested;
}

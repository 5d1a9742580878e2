/**
 * Speculative decoding settings, resolved once at the edge (vLLM's
 * SpeculativeConfig, its JSON keys as `--speculative-config` takes them):
 *
 *   {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2,
 *    "disable_by_batch_size": 8}
 *
 *   {"model": "Qwen/Qwen2.5-0.5B-Instruct", "num_speculative_tokens": 4, "draft_sampling": "sampled"}
 *
 * Two methods: prompt lookup ("ngram", Saxena's prompt-lookup decoding as vLLM
 * runs it), and a draft model ("draft_model", implied by `"model"`: a model
 * directory, GGUF file or hub spec with the target's tokenizer, which the
 * edge resolves and loads; draft-model-proposer.ts).
 * As in vLLM, a missing prompt_lookup_min defaults to prompt_lookup_max and
 * the other way round, and both to 5 when neither is given.
 * `draft_sampling` (a draft model only; kvflash's own key): "greedy" (the
 * default) drafts the draft's argmax; "sampled" draws a sampling request's
 * drafts from the draft's distribution and verifies them by the full
 * rejection rule (rejection-sampler.ts), which accepts more at temperature > 0.
 * `disable_by_batch_size`: no request speculates while this many or more
 * requests run (vLLM v0's speculative_disable_by_batch_size; at a large batch
 * the weights are already read once for many tokens, and drafts only add work).
 */
import { ArgumentError, show } from "../errors.js";
import { MAX_DECODE_QLEN } from "../attention/plan.js";
import { checkInt } from "../tensor/check.js";

/** Most draft tokens a step verifies per sequence: 1 + k query tokens stay within the decode attention path's qLen ≤ 16. */
export const MAX_SPECULATIVE_TOKENS = MAX_DECODE_QLEN - 1;
/** Longest n-gram prompt lookup matches (vLLM allows any; past this the match is long enough). */
export const MAX_PROMPT_LOOKUP = 64;
/** vLLM's default n-gram length when neither bound is given. */
export const DEFAULT_PROMPT_LOOKUP = 5;
/** Running requests at which speculation turns off, unless set. */
export const DEFAULT_DISABLE_BY_BATCH_SIZE = 8;

/**
 * A resolved speculative decoding config (camelCase), checked: prompt lookup
 * (vLLM's "ngram") or a draft model (vLLM's "draft_model"). Both have
 * numSpeculativeTokens (k, drafts a step at most, in [1, MAX_SPECULATIVE_TOKENS])
 * and disableByBatchSize (speculation is off while ≥ this many requests run).
 */
export type SpeculativeConfig =
  | {
      method: "ngram";
      numSpeculativeTokens: number;
      disableByBatchSize: number;
      /** Shortest suffix n-gram that must match earlier in the sequence, ≥ 1. */
      promptLookupMin: number;
      /** Longest suffix n-gram tried first, ≥ promptLookupMin. */
      promptLookupMax: number;
    }
  | {
      method: "draft_model";
      numSpeculativeTokens: number;
      disableByBatchSize: number;
      /** The draft model as given: a directory, a .gguf file or a hub spec (the edge resolves it). */
      model: string;
      /** How a sampling request's drafts are chosen: the argmax ("greedy", default) or drawn from the draft's distribution ("sampled"). */
      draftSampling?: "greedy" | "sampled";
    };

/** Prompt lookup's config. */
export type NgramSpeculativeConfig = Extract<SpeculativeConfig, { method: "ngram" }>;
/** A draft model's config. */
export type DraftModelSpeculativeConfig = Extract<SpeculativeConfig, { method: "draft_model" }>;

const KEYS = ["method", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min", "disable_by_batch_size", "model", "draft_sampling"] as const;

/**
 * Resolves `--speculative-config` (its JSON text, or the parsed object) into
 * a SpeculativeConfig. Errors name `argument.field` and the value. A resolved
 * config passes through unchanged (idempotent).
 */
export function resolveSpeculativeConfig(value: unknown, argument = "speculativeConfig"): SpeculativeConfig {
  if (isResolved(value)) return value;
  let raw = value;
  if (typeof raw === "string") {
    try {
      raw = JSON.parse(raw) as unknown;
    } catch (e) {
      throw new ArgumentError(argument, `must be a JSON object, got ${show(value)}: ${(e as Error).message}`);
    }
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) throw new ArgumentError(argument, `must be a JSON object, got ${show(raw)}`);
  const o = raw as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!(KEYS as readonly string[]).includes(key)) throw new ArgumentError(`${argument}.${key}`, `is not a speculative config field (known: ${KEYS.join(", ")})`);
  }
  const method = o["method"] ?? (o["model"] === undefined ? "ngram" : "draft_model");
  if (method !== "ngram" && method !== "draft_model") throw new ArgumentError(`${argument}.method`, `must be "ngram" (prompt lookup) or "draft_model", got ${show(method)}`);
  if (o["num_speculative_tokens"] === undefined) throw new ArgumentError(`${argument}.num_speculative_tokens`, "is required (draft tokens per step, 1..15)");
  const k = checkInt(`${argument}.num_speculative_tokens`, o["num_speculative_tokens"], { min: 1, max: MAX_SPECULATIVE_TOKENS });
  const disable = o["disable_by_batch_size"] === undefined ? DEFAULT_DISABLE_BY_BATCH_SIZE : checkInt(`${argument}.disable_by_batch_size`, o["disable_by_batch_size"], { min: 1 });
  if (method === "draft_model") {
    const model = o["model"];
    if (typeof model !== "string" || model.trim() === "") throw new ArgumentError(`${argument}.model`, `must name the draft model (a directory, .gguf file or hub spec), got ${show(model)}`);
    for (const key of ["prompt_lookup_max", "prompt_lookup_min"]) {
      if (o[key] !== undefined) throw new ArgumentError(`${argument}.${key}`, `is a prompt lookup setting, not one of a draft model, got ${show(o[key])}`);
    }
    const sampling = o["draft_sampling"] ?? "greedy";
    if (sampling !== "greedy" && sampling !== "sampled") throw new ArgumentError(`${argument}.draft_sampling`, `must be "greedy" or "sampled", got ${show(sampling)}`);
    return { method: "draft_model", model, numSpeculativeTokens: k, disableByBatchSize: disable, draftSampling: sampling };
  }
  if (o["model"] !== undefined) throw new ArgumentError(`${argument}.model`, `names a draft model, but method is "ngram", got ${show(o["model"])}`);
  if (o["draft_sampling"] !== undefined) throw new ArgumentError(`${argument}.draft_sampling`, `is a draft model setting, not one of prompt lookup, got ${show(o["draft_sampling"])}`);
  const lookup = (key: string) => (o[key] === undefined ? undefined : checkInt(`${argument}.${key}`, o[key], { min: 1, max: MAX_PROMPT_LOOKUP }));
  let max = lookup("prompt_lookup_max");
  let min = lookup("prompt_lookup_min");
  if (max === undefined && min === undefined) max = min = DEFAULT_PROMPT_LOOKUP;
  max ??= min!;
  min ??= max;
  if (min > max) throw new ArgumentError(`${argument}.prompt_lookup_min`, `must be ≤ prompt_lookup_max (${max}), got ${min}`);
  return { method: "ngram", numSpeculativeTokens: k, promptLookupMin: min, promptLookupMax: max, disableByBatchSize: disable };
}

function isResolved(v: unknown): v is SpeculativeConfig {
  if (v === null || typeof v !== "object") return false;
  const method = (v as { method?: unknown }).method;
  const c = v as Partial<NgramSpeculativeConfig & Omit<DraftModelSpeculativeConfig, "method">>;
  if ((method !== "ngram" && method !== "draft_model") || c.numSpeculativeTokens === undefined) return false;
  // Checked again: a hand-built object must hold the same ranges.
  checkInt("speculativeConfig.numSpeculativeTokens", c.numSpeculativeTokens, { min: 1, max: MAX_SPECULATIVE_TOKENS });
  checkInt("speculativeConfig.disableByBatchSize", c.disableByBatchSize, { min: 1 });
  if (method === "draft_model") {
    if (typeof c.model !== "string" || c.model === "") throw new ArgumentError("speculativeConfig.model", `must name the draft model, got ${show(c.model)}`);
    if (c.draftSampling !== undefined && c.draftSampling !== "greedy" && c.draftSampling !== "sampled") throw new ArgumentError("speculativeConfig.draftSampling", `must be "greedy" or "sampled", got ${show(c.draftSampling)}`);
    return true;
  }
  const min = checkInt("speculativeConfig.promptLookupMin", c.promptLookupMin, { min: 1, max: MAX_PROMPT_LOOKUP });
  checkInt("speculativeConfig.promptLookupMax", c.promptLookupMax, { min, max: MAX_PROMPT_LOOKUP });
  return true;
}

/**
 * Per-request sampling parameters, with vLLM's / OpenAI's names, ranges and
 * defaults. resolveSamplingParams validates a request (every error names the
 * parameter and its value) and fills the defaults: the request's own values,
 * else the model's generation_config.json (as vLLM's `--generation-config auto`),
 * else the OpenAI defaults.
 */
import { ArgumentError, show } from "../errors.js";
import type { GenerationConfig } from "../model/generation-config.js";

/** The most top-n logprobs a request may ask for (OpenAI's and vLLM's default limit). */
export const MAX_LOGPROBS = 20;
/** Temperatures below this are greedy (vLLM's _SAMPLING_EPS). */
export const GREEDY_EPSILON = 1e-5;

export interface SamplingParams {
  /** Softmax temperature; 0 means greedy (argmax). Default 1. */
  temperature?: number;
  /** Keep only the k highest logits; 0 or -1 keeps all. Default 0. */
  topK?: number;
  /** Keep the smallest set of most probable tokens whose probability sums to ≥ topP. Default 1 (all). */
  topP?: number;
  /** Drop tokens with probability < minP · (the top token's probability). Default 0 (off). */
  minP?: number;
  /** HF's repetition penalty over prompt and output tokens: a logit l > 0 becomes l / p, else l · p. Default 1 (off). */
  repetitionPenalty?: number;
  /** OpenAI: subtract this from the logit of every token already in the output. In [-2, 2], default 0. */
  presencePenalty?: number;
  /** OpenAI: subtract this × (times the token is in the output) from its logit. In [-2, 2], default 0. */
  frequencyPenalty?: number;
  /** Token id → bias in [-100, 100] added to its logit before anything else (OpenAI logit_bias). */
  logitBias?: Readonly<Record<string, number>> | ReadonlyMap<number, number>;
  /** Seed of this request's own random stream: the same seed and logits give the same tokens. Default: random. */
  seed?: number | null;
  /** Stop after this many generated tokens. Default 16 (OpenAI's completions default), or generation_config's max_new_tokens. */
  maxTokens?: number;
  /** Stop strings, matched on the detokenized text and trimmed from the output. */
  stop?: string | readonly string[];
  /** More token ids that end the sequence (besides the model's EOS ids). */
  stopTokenIds?: readonly number[];
  /** Keep generating past the model's EOS ids. Default false. */
  ignoreEos?: boolean;
  /** Keep the matched stop string at the end of the output. Default false. */
  includeStopStrInOutput?: boolean;
  /** Return the chosen token's logprob and the top-n, n in [0, 20]; null for none. Default null. */
  logprobs?: number | null;
}

export interface ResolvedSamplingParams {
  temperature: number;
  /** 0 = off. */
  topK: number;
  topP: number;
  minP: number;
  repetitionPenalty: number;
  presencePenalty: number;
  frequencyPenalty: number;
  logitBias: ReadonlyMap<number, number>;
  seed: number | null;
  maxTokens: number;
  stop: readonly string[];
  stopTokenIds: readonly number[];
  ignoreEos: boolean;
  includeStopStrInOutput: boolean;
  logprobs: number | null;
}

function num(name: string, v: unknown, min: number, max: number, openMin = false): number {
  if (typeof v !== "number" || !Number.isFinite(v)) throw new ArgumentError(name, `must be a finite number, got ${show(v)}`);
  if (openMin ? v <= min : v < min) throw new ArgumentError(name, `must be ${openMin ? ">" : "≥"} ${min}, got ${v}`);
  if (v > max) throw new ArgumentError(name, `must be ≤ ${max}, got ${v}`);
  return v;
}

function int(name: string, v: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== "number" || !Number.isInteger(v)) throw new ArgumentError(name, `must be an integer, got ${show(v)}`);
  if (v < min || v > max) throw new ArgumentError(name, `must be in [${min}, ${max}], got ${v}`);
  return v;
}

function tokenId(name: string, v: unknown, vocabSize: number): number {
  return int(name, v, 0, vocabSize - 1);
}

/** The request defaults a generation_config.json implies (vLLM's --generation-config auto). */
export function samplingDefaults(gen: GenerationConfig): SamplingParams {
  const out: SamplingParams = {};
  if (gen.temperature !== null) out.temperature = gen.temperature;
  if (gen.topP !== null) out.topP = gen.topP;
  if (gen.topK !== null) out.topK = gen.topK;
  if (gen.minP !== null) out.minP = gen.minP;
  if (gen.repetitionPenalty !== null) out.repetitionPenalty = gen.repetitionPenalty;
  if (gen.maxNewTokens !== null) out.maxTokens = gen.maxNewTokens;
  return out;
}

/**
 * Validates `params` against a vocabulary of `vocabSize` logits and fills
 * defaults from `defaults` (e.g. samplingDefaults(generationConfig)), then
 * from the OpenAI defaults.
 */
export function resolveSamplingParams(params: SamplingParams, vocabSize: number, defaults: SamplingParams = {}): ResolvedSamplingParams {
  int("vocabSize", vocabSize, 1);
  const p = { ...defaults, ...Object.fromEntries(Object.entries(params).filter(([, v]) => v !== undefined)) } as SamplingParams;
  const topK = int("topK", p.topK ?? 0, -1);
  const logitBias = new Map<number, number>();
  if (p.logitBias !== undefined) {
    const entries = p.logitBias instanceof Map ? [...p.logitBias.entries()] : Object.entries(p.logitBias as Record<string, number>);
    for (const [k, v] of entries) {
      const id = typeof k === "number" ? k : /^\d+$/.test(k) ? Number(k) : NaN;
      tokenId(`logitBias key`, Number.isNaN(id) ? k : id, vocabSize);
      logitBias.set(id, num(`logitBias[${id}]`, v, -100, 100));
    }
  }
  const stop = p.stop === undefined ? [] : typeof p.stop === "string" ? [p.stop] : [...p.stop];
  stop.forEach((s, i) => {
    if (typeof s !== "string" || s.length === 0) throw new ArgumentError(`stop[${i}]`, `must be a non-empty string, got ${show(s)}`);
  });
  const stopTokenIds = [...(p.stopTokenIds ?? [])];
  stopTokenIds.forEach((id, i) => tokenId(`stopTokenIds[${i}]`, id, vocabSize));
  const seed = p.seed ?? null;
  if (seed !== null && (typeof seed !== "number" || !Number.isSafeInteger(seed) || seed < 0)) {
    throw new ArgumentError("seed", `must be an integer in [0, 2^53), got ${show(seed)}`);
  }
  const logprobs = p.logprobs ?? null;
  if (logprobs !== null) int("logprobs", logprobs, 0, MAX_LOGPROBS);
  const bool = (name: string, v: unknown): boolean => {
    if (typeof v !== "boolean") throw new ArgumentError(name, `must be true or false, got ${show(v)}`);
    return v;
  };
  return {
    temperature: num("temperature", p.temperature ?? 1, 0, 100),
    topK: topK <= 0 ? 0 : topK,
    topP: num("topP", p.topP ?? 1, 0, 1, true),
    minP: num("minP", p.minP ?? 0, 0, 1),
    repetitionPenalty: num("repetitionPenalty", p.repetitionPenalty ?? 1, 0, 100, true),
    presencePenalty: num("presencePenalty", p.presencePenalty ?? 0, -2, 2),
    frequencyPenalty: num("frequencyPenalty", p.frequencyPenalty ?? 0, -2, 2),
    logitBias,
    seed,
    maxTokens: int("maxTokens", p.maxTokens ?? 16, 1),
    stop,
    stopTokenIds,
    ignoreEos: bool("ignoreEos", p.ignoreEos ?? false),
    includeStopStrInOutput: bool("includeStopStrInOutput", p.includeStopStrInOutput ?? false),
    logprobs,
  };
}

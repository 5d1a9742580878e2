/**
 * `generation_config.json`: the sampling defaults and stop ids a checkpoint
 * ships. kvflash uses them as vLLM does (`--generation-config auto`): its
 * temperature, top_p, top_k, min_p, repetition_penalty and max_new_tokens
 * become the request defaults, and its eos_token_id (an id or a list) adds
 * stop tokens. `do_sample` is kept for reference but, as in vLLM, does not
 * force greedy decoding.
 */
import { ArgumentError, show } from "../errors.js";

export interface GenerationConfig {
  bosTokenId: number | null;
  eosTokenIds: number[];
  padTokenId: number | null;
  doSample: boolean | null;
  temperature: number | null;
  topP: number | null;
  topK: number | null;
  minP: number | null;
  repetitionPenalty: number | null;
  maxNewTokens: number | null;
  maxLength: number | null;
}

export const EMPTY_GENERATION_CONFIG: Readonly<GenerationConfig> = Object.freeze({
  bosTokenId: null,
  eosTokenIds: [],
  padTokenId: null,
  doSample: null,
  temperature: null,
  topP: null,
  topK: null,
  minP: null,
  repetitionPenalty: null,
  maxNewTokens: null,
  maxLength: null,
});

export function parseGenerationConfig(json: unknown, source = "generation_config.json"): GenerationConfig {
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new ArgumentError(source, `must be a JSON object, got ${show(json)}`);
  const j = json as Record<string, unknown>;
  const err = (key: string, what: string): ArgumentError => new ArgumentError(`${source} ${key}`, `must be ${what}, got ${show(j[key])}`);
  const num = (key: string, ok: (v: number) => boolean, what: string): number | null => {
    const v = j[key];
    if (v === undefined || v === null) return null;
    if (typeof v !== "number" || !Number.isFinite(v) || !ok(v)) throw err(key, what);
    return v;
  };
  const id = (key: string): number | null => num(key, (v) => Number.isInteger(v) && v >= 0, "a token id (integer ≥ 0)");
  const eos = j["eos_token_id"];
  let eosTokenIds: number[] = [];
  if (eos !== undefined && eos !== null) {
    const list = Array.isArray(eos) ? eos : [eos];
    if (!list.every((v) => typeof v === "number" && Number.isInteger(v) && v >= 0)) throw err("eos_token_id", "a token id or a list of token ids");
    eosTokenIds = list as number[];
  }
  const doSample = j["do_sample"];
  if (doSample !== undefined && doSample !== null && typeof doSample !== "boolean") throw err("do_sample", "true or false");
  return {
    bosTokenId: id("bos_token_id"),
    eosTokenIds,
    padTokenId: id("pad_token_id"),
    doSample: typeof doSample === "boolean" ? doSample : null,
    temperature: num("temperature", (v) => v >= 0, "a number ≥ 0"),
    topP: num("top_p", (v) => v > 0 && v <= 1, "a number in (0, 1]"),
    topK: num("top_k", (v) => Number.isInteger(v) && v >= 0, "an integer ≥ 0"),
    minP: num("min_p", (v) => v >= 0 && v <= 1, "a number in [0, 1]"),
    repetitionPenalty: num("repetition_penalty", (v) => v > 0, "a number > 0"),
    maxNewTokens: num("max_new_tokens", (v) => Number.isInteger(v) && v >= 1, "an integer ≥ 1"),
    maxLength: num("max_length", (v) => Number.isInteger(v) && v >= 1, "an integer ≥ 1"),
  };
}

/**
 * vLLM's pooler config (`--pooler-config '{"pooling_type": "MEAN"}'`, the
 * older `--override-pooler-config`): how a decoder run as an embedding model
 * (`--task embed`, decoder-embedder.ts) pools, over what its directory says
 * (sentence-transformers modules) or vLLM's default for a decoder (the last
 * token, normalized). Parsed once at the edge (serve-args.ts, serve()) into
 * this typed value and passed down whole to the engine worker.
 *
 *   pooling_type   "MEAN" | "CLS" | "LAST" (vLLM's PoolingType names; any case)
 *   normalize      true | false (L2-normalize the pooled vector)
 *
 * Other keys are refused, naming the key.
 */
import { ArgumentError, show } from "../errors.js";
import type { PoolingConfig, PoolingMode } from "./encoder/pooling-config.js";

export interface PoolerConfig {
  /** "mean": every prompt token's final-normed hidden state, averaged; "cls": the first token's; "last": the last token's. */
  poolingType?: PoolingMode;
  normalize?: boolean;
}

const TYPES: Readonly<Record<string, PoolingMode>> = { MEAN: "mean", CLS: "cls", LAST: "last" };

/** Parses vLLM's JSON object (snake_case keys); `name` is the flag or option errors name. */
export function parsePoolerConfig(json: unknown, name = "--pooler-config"): PoolerConfig {
  if (typeof json !== "object" || json === null || Array.isArray(json)) throw new ArgumentError(name, `must be a JSON object such as {"pooling_type": "MEAN"}, got ${show(json)}`);
  const out: PoolerConfig = {};
  for (const [key, v] of Object.entries(json as Record<string, unknown>)) {
    if (key === "pooling_type") {
      const mode = typeof v === "string" ? TYPES[v.toUpperCase()] : undefined;
      if (mode === undefined) throw new ArgumentError(`${name} pooling_type`, `must be one of ${Object.keys(TYPES).join(", ")}, got ${show(v)}`);
      out.poolingType = mode;
    } else if (key === "normalize") {
      if (typeof v !== "boolean") throw new ArgumentError(`${name} normalize`, `must be true or false, got ${show(v)}`);
      out.normalize = v;
    } else throw new ArgumentError(`${name} ${key}`, `is not a supported pooler setting (pooling_type, normalize), got ${show(v)}`);
  }
  return out;
}

/** Checks a PoolerConfig given to the library (serve({ poolerConfig })); `name` is the option errors name. */
export function checkPoolerConfig(config: PoolerConfig, name = "poolerConfig"): PoolerConfig {
  if (typeof config !== "object" || config === null || Array.isArray(config)) throw new ArgumentError(name, `must be an object { poolingType?, normalize? }, got ${show(config)}`);
  for (const [key, v] of Object.entries(config)) {
    if (key === "poolingType" && (typeof v !== "string" || !Object.values(TYPES).includes(v as PoolingMode))) throw new ArgumentError(`${name}.poolingType`, `must be "mean", "cls" or "last", got ${show(v)}`);
    else if (key === "normalize" && typeof v !== "boolean") throw new ArgumentError(`${name}.normalize`, `must be true or false, got ${show(v)}`);
    else if (key !== "poolingType" && key !== "normalize") throw new ArgumentError(`${name}.${key}`, `is not a pooler setting (poolingType, normalize), got ${show(v)}`);
  }
  return config;
}

/** `base` with the config's settings over it. */
export function applyPoolerConfig(base: PoolingConfig, config: PoolerConfig | undefined): PoolingConfig {
  if (config === undefined) return base;
  return { ...base, ...(config.poolingType === undefined ? {} : { mode: config.poolingType }), ...(config.normalize === undefined ? {} : { normalize: config.normalize }) };
}

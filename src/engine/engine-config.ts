/**
 * The engine's settings, resolved once at the edge (vLLM's VllmConfig idea,
 * for the scheduler's knobs): the defaults live here and nowhere else. The
 * engine worker resolves them before the model loads (the runner sizes its
 * step buffers from them), the Engine for library callers, and the serve
 * usage text prints the same defaults.
 */
import { checkInt } from "../tensor/check.js";
import type { EngineSettings } from "./engine-settings.js";
import { type SpeculativeConfig, resolveSpeculativeConfig } from "./speculative-config.js";

/** Most requests running at once (vLLM's max_num_seqs) unless set. */
export const DEFAULT_MAX_NUM_SEQS = 64;
/** The smallest default token budget of a step: room for a 512-token prefill chunk. */
export const MIN_DEFAULT_BATCHED_TOKENS = 512;

/** Default token budget of a step for a given maxNumSeqs: room for a 512-token prefill chunk, and for every sequence's decode token. */
export function defaultMaxNumBatchedTokens(maxNumSeqs: number): number {
  return Math.max(MIN_DEFAULT_BATCHED_TOKENS, maxNumSeqs);
}

/** EngineSettings with the defaults applied and the values checked. */
export interface EngineConfig {
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  /** Unbounded when undefined. */
  maxWaitingRequests?: number;
  enablePrefixCaching: boolean;
  /** Speculative decoding; none when undefined. */
  speculativeConfig?: SpeculativeConfig;
}

/** Applies the defaults to `settings` and checks each value, naming it. Idempotent: an EngineConfig resolves to itself. */
export function resolveEngineConfig(settings: EngineSettings): EngineConfig {
  const maxNumSeqs = checkInt("maxNumSeqs", settings.maxNumSeqs ?? DEFAULT_MAX_NUM_SEQS, { min: 1 });
  return {
    maxNumSeqs,
    maxNumBatchedTokens: checkInt("maxNumBatchedTokens", settings.maxNumBatchedTokens ?? defaultMaxNumBatchedTokens(maxNumSeqs), { min: 1 }),
    ...(settings.maxWaitingRequests === undefined ? {} : { maxWaitingRequests: checkInt("maxWaitingRequests", settings.maxWaitingRequests, { min: 0 }) }),
    enablePrefixCaching: settings.enablePrefixCaching ?? true,
    ...(settings.speculativeConfig === undefined ? {} : { speculativeConfig: resolveSpeculativeConfig(settings.speculativeConfig) }),
  };
}

/**
 * Draft proposers for speculative decoding, and the prompt-lookup one (vLLM's
 * `ngram` method, after Saxena's prompt-lookup decoding): the last n tokens
 * of a sequence (n from prompt_lookup_max down to prompt_lookup_min) are
 * looked up earlier in the same sequence, prompt and output alike; the tokens
 * that followed the match are the draft. Text that copies its input (edits,
 * retrieval answers, code, JSON) gets long accepted runs for free.
 *
 *   tokens  … a b c X Y Z … a b c      suffix "a b c" (n = 3) matches earlier
 *   draft                X Y Z …        the k tokens after the match
 *
 * Of the longest matching n, the most recent occurrence wins. One backward
 * scan, O(L) for L tokens, with no state: a preempted or rolled-back sequence
 * needs nothing rebuilt.
 */
import { checkInt } from "../tensor/check.js";

/** Proposes draft tokens to follow a sequence (the engine verifies them against the model). */
export interface DraftProposer {
  /** Up to `k` draft tokens to follow `tokens` (a request's prompt and output so far); [] for none. */
  propose(tokens: readonly number[], k: number): number[];
}

export interface NgramProposerOptions {
  /** Shortest suffix that must match, ≥ 1. */
  promptLookupMin: number;
  /** Longest suffix tried, ≥ promptLookupMin. */
  promptLookupMax: number;
}

export class NgramProposer implements DraftProposer {
  readonly promptLookupMin: number;
  readonly promptLookupMax: number;

  constructor(options: NgramProposerOptions) {
    this.promptLookupMin = checkInt("promptLookupMin", options.promptLookupMin, { min: 1 });
    this.promptLookupMax = checkInt("promptLookupMax", options.promptLookupMax, { min: this.promptLookupMin });
  }

  propose(tokens: readonly number[], k: number): number[] {
    const L = tokens.length;
    const { promptLookupMin: min, promptLookupMax: max } = this;
    if (k <= 0 || L <= min) return [];
    const last = tokens[L - 1]!;
    let best = -1;
    let bestLen = min - 1;
    // i: where an earlier occurrence of the suffix ends (the draft starts at i + 1).
    for (let i = L - 2; i >= 0 && bestLen < max; i--) {
      if (tokens[i] !== last) continue;
      let m = 1;
      while (m < max && i - m >= 0 && tokens[i - m] === tokens[L - 1 - m]) m++;
      if (m > bestLen) {
        bestLen = m;
        best = i;
      }
    }
    if (best < 0) return [];
    return tokens.slice(best + 1, Math.min(L, best + 1 + k));
  }
}

/**
 * How many draft tokens one sequence proposes next (adaptive speculation
 * length), so that speculating is never slower than plain decoding.
 *
 * Each verification of d drafts with a accepted updates an exponentially
 * weighted average of the acceptance rate α̂ = EWMA(a / d). With per-draft
 * acceptance α, a step verifying k drafts yields (1 − α^(k+1)) / (1 − α)
 * tokens (Leviathan et al. 2023, eq. 1) and costs about 1 + c·k plain steps,
 * c = DRAFT_TOKEN_COST the extra work of one query token in a decode step
 * (plus, for a draft model, one draft forward: its cost against a target step).
 * The next k is the one that maximizes tokens per cost; when no k beats
 * plain decoding by MIN_GAIN, the sequence stops proposing for a pause that
 * doubles each time (8, 16, … 256 steps), then probes with one draft.
 *
 * a / d under-counts α (a run stops at its first rejection), so the choice
 * errs towards fewer drafts.
 */
import { checkInt } from "../tensor/check.js";

/** Weight of the latest verification in the acceptance average. */
export const ACCEPTANCE_EWMA_WEIGHT = 0.3;
/** Extra cost of one draft token in a decode step, as a fraction of the step (bench spec: 1 + k rows of a q8 GEMM against 1 GEMV). */
export const DRAFT_TOKEN_COST = 0.2;
/** Expected tokens per cost a draft length must reach to be worth proposing. */
export const MIN_GAIN = 1.05;
const FIRST_PAUSE = 8;
const MAX_PAUSE = 256;

/** Expected tokens per unit cost of verifying k drafts at per-draft acceptance α. */
export function draftGain(alpha: number, k: number, cost = DRAFT_TOKEN_COST): number {
  const tokens = alpha >= 1 ? k + 1 : (1 - alpha ** (k + 1)) / (1 - alpha);
  return tokens / (1 + cost * k);
}

export class DraftLength {
  readonly maxDrafts: number;
  /** Cost of one draft in plain decode steps (c above). */
  readonly cost: number;
  /** Acceptance average; starts optimistic (1) so a new sequence tries the full length. */
  #alpha = 1;
  #pause = 0;
  #nextPause = FIRST_PAUSE;

  constructor(maxDrafts: number, cost = DRAFT_TOKEN_COST) {
    this.maxDrafts = checkInt("maxDrafts", maxDrafts, { min: 1 });
    if (!(cost >= 0 && Number.isFinite(cost))) throw new RangeError(`cost must be a finite number ≥ 0, got ${cost}`);
    this.cost = cost;
  }

  get acceptance(): number {
    return this.#alpha;
  }

  /** Drafts to propose this step (0: none). A paused sequence counts the step. */
  next(): number {
    if (this.#pause > 0) {
      this.#pause--;
      return this.#pause === 0 ? 1 : 0; // the probe after a pause
    }
    let best = 0;
    let bestGain = MIN_GAIN;
    for (let k = 1; k <= this.maxDrafts; k++) {
      const g = draftGain(this.#alpha, k, this.cost);
      if (g > bestGain) (best = k), (bestGain = g);
    }
    if (best === 0) {
      this.#pause = this.#nextPause;
      this.#nextPause = Math.min(MAX_PAUSE, this.#nextPause * 2);
    }
    return best;
  }

  /** A verification of `proposed` ≥ 1 drafts of which `accepted` were kept. */
  record(proposed: number, accepted: number): void {
    if (proposed <= 0) return;
    this.#alpha += ACCEPTANCE_EWMA_WEIGHT * (accepted / proposed - this.#alpha);
    if (draftGain(this.#alpha, 1, this.cost) > MIN_GAIN) this.#nextPause = FIRST_PAUSE; // paying off again: the next pause starts short
  }
}

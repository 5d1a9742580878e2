/**
 * How many draft tokens one sequence proposes next (adaptive speculation
 * length), so that speculating is never slower than plain decoding.
 *
 * Each verification of d drafts with a accepted updates an exponentially
 * weighted average of the acceptance rate α̂ = EWMA(a / d), which starts from
 * the engine's prior for this proposer (draft-prior.ts: the same average over
 * recent verifications of all sequences), not from 1. With per-draft
 * acceptance α, a step verifying k drafts yields (1 − α^(k+1)) / (1 − α)
 * tokens (Leviathan et al. 2023, eq. 1) and costs about 1 + c_k·k plain
 * steps, c_k the extra work of one query token in a decode step of 1 + k
 * tokens (DRAFT_TOKEN_COST, or measured by an engine given a clock,
 * step-cost.ts) plus,
 * for a draft model, one draft forward (its cost against a target step).
 * The next k is the one that maximizes tokens per cost; when no k beats
 * plain decoding by MIN_GAIN, the sequence stops proposing and counts its
 * steps in the prior's shared pause (8, 16, … 256 sequence-steps, doubling),
 * whose last step probes with one draft.
 *
 * a / d under-counts α (a run stops at its first rejection), so the choice
 * errs towards fewer drafts.
 */
import { checkInt } from "../tensor/check.js";
import { ACCEPTANCE_EWMA_WEIGHT, DraftPrior } from "./draft-prior.js";

export { ACCEPTANCE_EWMA_WEIGHT } from "./draft-prior.js";
/** Extra cost of one draft token in a decode step, as a fraction of the step, assumed until one is measured (bench spec: 1 + k rows of a q8 GEMM against 1 GEMV). */
export const DRAFT_TOKEN_COST = 0.2;
/** Expected tokens per cost a draft length must reach to be worth proposing. */
export const MIN_GAIN = 1.05;

/**
 * The cost of one draft in plain decode steps when k are verified together:
 * a constant, or a function of k ≥ 1 (the engine's measured costs).
 */
export type DraftCost = number | ((k: number) => number);

/** Expected tokens per unit cost of verifying k drafts at per-draft acceptance α, one draft costing `cost` plain steps. */
export function draftGain(alpha: number, k: number, cost = DRAFT_TOKEN_COST): number {
  const tokens = alpha >= 1 ? k + 1 : (1 - alpha ** (k + 1)) / (1 - alpha);
  return tokens / (1 + cost * k);
}

export class DraftLength {
  readonly maxDrafts: number;
  readonly #cost: (k: number) => number;
  readonly #prior: DraftPrior;
  /** This sequence's acceptance average, from the prior's. */
  #alpha: number;

  /**
   * `cost`: one draft's cost in plain steps (c above). `prior`: the engine's
   * prior for this proposer, shared by its sequences; a DraftLength of its
   * own by default (a lone sequence: starts at α = 1, pauses of its own).
   */
  constructor(maxDrafts: number, cost: DraftCost = DRAFT_TOKEN_COST, prior: DraftPrior = new DraftPrior()) {
    this.maxDrafts = checkInt("maxDrafts", maxDrafts, { min: 1 });
    if (typeof cost === "number") {
      if (!(cost >= 0 && Number.isFinite(cost))) throw new RangeError(`cost must be a finite number ≥ 0, got ${cost}`);
      this.#cost = () => cost;
    } else if (typeof cost === "function") this.#cost = cost;
    else throw new TypeError(`cost must be a number or a function of k, got ${String(cost)}`);
    this.#prior = prior;
    this.#alpha = prior.acceptance;
  }

  get acceptance(): number {
    return this.#alpha;
  }

  /** Drafts to propose this step (0: none). A sequence that does not propose counts the step in the prior's pause. */
  next(): number {
    let best = 0;
    let bestGain = MIN_GAIN;
    for (let k = 1; k <= this.maxDrafts; k++) {
      const g = draftGain(this.#alpha, k, this.#cost(k));
      if (g > bestGain) (best = k), (bestGain = g);
    }
    return best > 0 ? best : this.#prior.pausedStep();
  }

  /** A verification of `proposed` ≥ 1 drafts of which `accepted` were kept: this sequence's average and the prior's. */
  record(proposed: number, accepted: number): void {
    if (proposed <= 0) return;
    this.#alpha += ACCEPTANCE_EWMA_WEIGHT * (accepted / proposed - this.#alpha);
    this.#prior.record(proposed, accepted);
    if (draftGain(this.#alpha, 1, this.#cost(1)) > MIN_GAIN) this.#prior.resume(); // paying off again: the next pause starts short
  }
}

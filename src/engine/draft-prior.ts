/**
 * What a new sequence believes about its proposer before it has verified
 * anything: the engine-level prior of the adaptive draft length
 * (draft-length.ts), one per proposer (the engine has one; Engine holds it
 * beside the proposer).
 *
 * It keeps two things that outlive a request:
 * - `acceptance`: an exponentially weighted average of a / d over the recent
 *   verifications of every sequence (d drafts verified, a accepted). A new
 *   DraftLength starts from it instead of from 1.
 * - the pause schedule: when no draft length pays for a sequence, that
 *   sequence's steps count down one pause shared by all such sequences; when
 *   it ends, the step that ends it probes with one draft, and the next pause
 *   doubles (8, 16, … 256 sequence-steps) until a verification pays again.
 *
 * Why (neither vLLM nor llama.cpp has this: vLLM proposes a fixed
 * num_speculative_tokens for every request; llama.cpp's server drafts up to
 * --draft-max tokens and cuts a draft where the draft model's probability
 * falls below --draft-p-min, a rule per step with no memory of earlier
 * requests, and none for prompt lookup): a per-sequence estimate that starts
 * optimistic (α = 1) has to relearn, for every request, what the requests
 * before it already showed. Serving traffic is often a stream of requests
 * from one application with one prompt format, so the acceptance of the
 * requests before is the best guess for the next one; and a request's answer
 * is often short (26 tokens in bench spec's `define`), too short to amortize
 * the three or four rejected verifications a fresh α = 1 takes to fall below
 * the break-even point. With the prior, a workload whose drafts are always rejected pays
 * those verifications once per engine, then one probe per pause however many
 * requests arrive; one whose drafts pay keeps the full length from each new
 * request's first step. A sequence still adapts on its own evidence from its
 * first verification on, so a request that copies its context among ones
 * that do not climbs back as soon as a probe of its own is accepted.
 */

/** Weight of the latest verification in the acceptance averages (the prior's and a sequence's). */
export const ACCEPTANCE_EWMA_WEIGHT = 0.3;
/** The first pause after speculation stops paying, in sequence-steps; each pause after it doubles. */
export const FIRST_PAUSE = 8;
/** The longest pause, in sequence-steps. */
export const MAX_PAUSE = 256;

export class DraftPrior {
  /** Acceptance average over all sequences' verifications; starts optimistic (1) so the first request tries the full length. */
  #alpha = 1;
  /** Sequence-steps left in the running pause (0: none running). */
  #pause = 0;
  #nextPause = FIRST_PAUSE;

  /** The acceptance a new sequence starts from. */
  get acceptance(): number {
    return this.#alpha;
  }

  /** Length of the next pause, in sequence-steps. */
  get nextPause(): number {
    return this.#nextPause;
  }

  /** A verification of `proposed` ≥ 1 drafts, `accepted` of them kept, by any sequence. */
  record(proposed: number, accepted: number): void {
    if (proposed <= 0) return;
    this.#alpha += ACCEPTANCE_EWMA_WEIGHT * (accepted / proposed - this.#alpha);
  }

  /**
   * A step of a sequence for which no draft length pays: counts it in the
   * shared pause (starting one, of the next pause's length, when none runs)
   * and returns the drafts to propose: 1 for the step that ends the pause
   * (the probe), else 0.
   */
  pausedStep(): number {
    if (this.#pause === 0) {
      this.#pause = this.#nextPause;
      this.#nextPause = Math.min(MAX_PAUSE, this.#nextPause * 2);
      return 0;
    }
    this.#pause--;
    return this.#pause === 0 ? 1 : 0;
  }

  /** A sequence's drafts pay again: the next pause starts short. */
  resume(): void {
    this.#nextPause = FIRST_PAUSE;
  }
}

/**
 * Stopping a sequence, as OpenAI and vLLM do:
 *
 * - stop token ids (the model's EOS ids unless ignoreEos, and the request's
 *   stopTokenIds) end it with finish reason "stop"; the token's text is not output;
 * - stop strings are matched on the detokenized text; the output is cut
 *   before the match (or after it, with includeStopStrInOutput). While
 *   streaming, the tail of the text that could still become a stop string is
 *   held back, so no text that a later match would trim is ever emitted;
 * - maxTokens ends it with finish reason "length".
 *
 * StopStringMatcher is the string logic alone; StopChecker runs a sequence's
 * tokens through an IncrementalDetokenizer and the matcher.
 */
import { ArgumentError, show } from "../errors.js";
import { IncrementalDetokenizer } from "../tokenizer/detokenizer.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import type { FinishReason } from "./request.js";

/** How a stop check ends a request (aborts are the scheduler's business). */
export type StopFinishReason = Exclude<FinishReason, "abort">;

export interface MatchResult {
  /** Text that is now safe to emit. */
  emit: string;
  /** The stop string that matched, or null. */
  matched: string | null;
}

export class StopStringMatcher {
  readonly #stops: readonly string[];
  readonly #include: boolean;
  /** Text received but not yet emitted: the longest tail that is a proper prefix of some stop string. */
  #held = "";
  #done = false;

  constructor(stops: readonly string[], includeStopStr = false) {
    stops.forEach((s, i) => {
      if (typeof s !== "string" || s.length === 0) throw new ArgumentError(`stop[${i}]`, `must be a non-empty string, got ${show(s)}`);
    });
    this.#stops = stops;
    this.#include = includeStopStr;
  }

  /** The text held back right now. */
  get held(): string {
    return this.#held;
  }

  /**
   * Adds newly detokenized text. On a match (the earliest one; the longest
   * stop string among those at the same place), emits the text before it and
   * ignores everything after.
   */
  push(delta: string): MatchResult {
    if (this.#done) return { emit: "", matched: null };
    const text = this.#held + delta;
    let at = -1;
    let matched: string | null = null;
    for (const s of this.#stops) {
      const i = text.indexOf(s);
      if (i >= 0 && (at < 0 || i < at || (i === at && s.length > matched!.length))) {
        at = i;
        matched = s;
      }
    }
    if (matched !== null) {
      this.#done = true;
      this.#held = "";
      return { emit: text.slice(0, this.#include ? at + matched.length : at), matched };
    }
    const hold = this.#holdLength(text);
    this.#held = text.slice(text.length - hold);
    return { emit: text.slice(0, text.length - hold), matched: null };
  }

  /** Ends the text: whatever is held back cannot become a stop string any more. */
  flush(): string {
    const rest = this.#held;
    this.#held = "";
    this.#done = true;
    return rest;
  }

  /** Length of the longest suffix of `text` that is a proper prefix of a stop string. */
  #holdLength(text: string): number {
    let best = 0;
    for (const s of this.#stops) {
      for (let k = Math.min(s.length - 1, text.length); k > best; k--) {
        if (text.endsWith(s.slice(0, k))) {
          best = k;
          break;
        }
      }
    }
    return best;
  }
}

export interface StopOptions {
  /** Generated tokens after which the sequence ends ("length"). */
  maxTokens: number;
  stop?: readonly string[];
  stopTokenIds?: readonly number[];
  /** The model's EOS ids (ModelDir.eosTokenIds). */
  eosTokenIds?: readonly number[];
  ignoreEos?: boolean;
  includeStopStrInOutput?: boolean;
  /** The prompt's ids, for the detokenizer's left context. */
  promptIds?: readonly number[];
  /** Default true. */
  skipSpecialTokens?: boolean;
}

export interface StopUpdate {
  /** New output text (possibly ""). */
  delta: string;
  finished: boolean;
  finishReason: StopFinishReason | null;
  /** What stopped it: the stop string, the stop token id (null for an EOS id or for "length"). */
  stopReason: string | number | null;
}

/** One sequence's output: token ids in, text deltas and the finish decision out. */
export class StopChecker {
  readonly #detok: IncrementalDetokenizer;
  readonly #matcher: StopStringMatcher;
  readonly #maxTokens: number;
  readonly #eos: ReadonlySet<number>;
  readonly #stopIds: ReadonlySet<number>;
  readonly #ids: number[] = [];
  #text = "";
  #finishReason: StopFinishReason | null = null;

  constructor(tokenizer: Tokenizer, options: StopOptions) {
    if (!Number.isInteger(options.maxTokens) || options.maxTokens < 1) throw new ArgumentError("maxTokens", `must be an integer ≥ 1, got ${show(options.maxTokens)}`);
    this.#maxTokens = options.maxTokens;
    this.#detok = new IncrementalDetokenizer(tokenizer, {
      ...(options.promptIds ? { promptIds: options.promptIds } : {}),
      skipSpecialTokens: options.skipSpecialTokens ?? true,
    });
    this.#matcher = new StopStringMatcher(options.stop ?? [], options.includeStopStrInOutput ?? false);
    this.#eos = new Set(options.ignoreEos ? [] : (options.eosTokenIds ?? []));
    this.#stopIds = new Set(options.stopTokenIds ?? []);
  }

  /** The output text so far (what every delta added up to). */
  get text(): string {
    return this.#text;
  }

  get finished(): boolean {
    return this.#finishReason !== null;
  }

  /** Generated token ids so far (the stop token included). */
  get ids(): readonly number[] {
    return this.#ids;
  }

  /** Feeds the next generated token. Calling it after the sequence finished is an error. */
  push(token: number): StopUpdate {
    if (this.#finishReason !== null) throw new ArgumentError("token", `was pushed after the sequence finished (${this.#finishReason}), got ${show(token)}`);
    this.#ids.push(token);
    if (this.#eos.has(token) || this.#stopIds.has(token)) {
      const stopReason = this.#eos.has(token) ? null : token;
      return this.#end("", this.#detok.flush(), "stop", stopReason);
    }
    const r = this.#matcher.push(this.#detok.push(token));
    if (r.matched !== null) return this.#emit(r.emit, "stop", r.matched);
    if (this.#ids.length >= this.#maxTokens) return this.#end(r.emit, this.#detok.flush(), "length", null);
    return this.#emit(r.emit, null, null);
  }

  /**
   * Ends with `reason`: `head` is text already cleared by the matcher, `tail` the
   * detokenizer's last text; a stop string in the tail still wins, else the
   * matcher releases what it held.
   */
  #end(head: string, tail: string, reason: StopFinishReason, stopReason: string | number | null): StopUpdate {
    const r = this.#matcher.push(tail);
    if (r.matched !== null) return this.#emit(head + r.emit, "stop", r.matched);
    return this.#emit(head + r.emit + this.#matcher.flush(), reason, stopReason);
  }

  #emit(delta: string, reason: StopFinishReason | null, stopReason: string | number | null): StopUpdate {
    this.#text += delta;
    this.#finishReason = reason;
    return { delta, finished: reason !== null, finishReason: reason, stopReason };
  }
}

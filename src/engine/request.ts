/**
 * One generation request as the engine core sees it (vLLM v1's `Request`):
 * its tokens, how many of them have KV computed, and where it is in its life.
 *
 *   waiting ──schedule──▶ running ──finish──▶ finished (stop | length | abort)
 *      ▲                    │
 *      └──── preempted ◀────┘   (blocks freed; recomputed from token 0 later)
 *
 * "Known" tokens are the prompt followed by the outputs sampled so far; the
 * scheduler only ever asks for `numComputedTokens` to catch up with them.
 * The Scheduler and KvCacheManager own the mutable fields; callers read them.
 */
import { ArgumentError, show } from "../errors.js";
import { checkInt } from "../tensor/check.js";

export type RequestStatus = "waiting" | "running" | "preempted" | "finished";

/** Why a request finished (OpenAI's `finish_reason`, plus vLLM's "abort"). */
export type FinishReason = "stop" | "length" | "abort";

export interface RequestInit<P = unknown> {
  /** Unique among the scheduler's live requests. */
  requestId: string;
  /** Prompt token ids: ≥ 1 token, each an integer in [0, 2³¹). */
  promptTokenIds: ArrayLike<number>;
  /** Most output tokens to generate (finish reason "length"); unbounded (up to maxModelLen) if omitted. */
  maxTokens?: number;
  /** What the engine keeps per request (its RequestState: sampling, stop strings, …); the core only carries it. */
  state?: P;
  /** Mixed into the first block's hash: requests with different salts never share cached KV (vLLM's `cache_salt`). */
  cacheSalt?: string;
  /**
   * The client request this one belongs to (an HTTP request's prompts and
   * samples share it): the scheduler's waiting-queue bound counts client
   * requests, and admission is shared fairly between them. Default: requestId.
   */
  clientRequestId?: string;
}

export class Request<P = unknown> {
  readonly requestId: string;
  readonly numPromptTokens: number;
  /** Prompt then outputs: every known token. */
  readonly allTokenIds: number[];
  readonly outputTokenIds: number[] = [];
  /** Infinity when only maxModelLen bounds the output. */
  readonly maxTokens: number;
  /** RequestInit.state. */
  readonly state: P | undefined;
  readonly cacheSalt: string | undefined;
  /** RequestInit.clientRequestId (requestId when not given). */
  readonly clientRequestId: string;
  /** Chained hashes of the full blocks of allTokenIds, filled lazily by the KvCacheManager. */
  readonly blockHashes: string[] = [];

  status: RequestStatus = "waiting";
  finishReason: FinishReason | null = null;
  /** What stopped it, when the stop decision says (a stop token id or stop string). */
  stopReason: number | string | null = null;
  /** Tokens whose KV is computed (or scheduled to be in the step under way). */
  numComputedTokens = 0;
  /** Prompt tokens found in the prefix cache when first scheduled; −1 until then. */
  numCachedTokens = -1;
  numPreemptions = 0;
  /** FCFS order, assigned by Scheduler.addRequest; −1 before. */
  arrivalOrder = -1;

  constructor(init: RequestInit<P>) {
    if (typeof init.requestId !== "string" || init.requestId.length === 0) {
      throw new ArgumentError("requestId", `must be a non-empty string, got ${show(init.requestId)}`);
    }
    const prompt = init.promptTokenIds;
    if (prompt === null || typeof prompt !== "object" || typeof prompt.length !== "number") {
      throw new ArgumentError("promptTokenIds", `must be an array of token ids, got ${show(prompt)}`);
    }
    if (prompt.length === 0) throw new ArgumentError("promptTokenIds", "must hold at least one token, got 0");
    this.allTokenIds = Array.from(prompt, (t, i) => checkTokenId(`promptTokenIds[${i}]`, t));
    this.requestId = init.requestId;
    this.numPromptTokens = prompt.length;
    this.maxTokens = init.maxTokens === undefined ? Infinity : checkInt("maxTokens", init.maxTokens, { min: 1 });
    this.state = init.state;
    if (init.cacheSalt !== undefined && typeof init.cacheSalt !== "string") {
      throw new ArgumentError("cacheSalt", `must be a string, got ${show(init.cacheSalt)}`);
    }
    this.cacheSalt = init.cacheSalt;
    if (init.clientRequestId !== undefined && (typeof init.clientRequestId !== "string" || init.clientRequestId.length === 0)) {
      throw new ArgumentError("clientRequestId", `must be a non-empty string, got ${show(init.clientRequestId)}`);
    }
    this.clientRequestId = init.clientRequestId ?? init.requestId;
  }

  /** Known tokens: prompt + outputs. */
  get numTokens(): number {
    return this.allTokenIds.length;
  }

  get numOutputTokens(): number {
    return this.outputTokenIds.length;
  }

  get promptTokenIds(): number[] {
    return this.allTokenIds.slice(0, this.numPromptTokens);
  }

  get isFinished(): boolean {
    return this.status === "finished";
  }

  /** Appends a sampled token (the Scheduler does this in updateFromOutput). */
  appendOutputToken(tokenId: number): void {
    checkTokenId("tokenId", tokenId);
    this.allTokenIds.push(tokenId);
    this.outputTokenIds.push(tokenId);
  }
}

function checkTokenId(argument: string, t: unknown): number {
  return checkInt(argument, t, { min: 0, max: 2 ** 31 - 1 });
}

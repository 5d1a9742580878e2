/**
 * The continuous-batching scheduler (vLLM v1's `Scheduler`, FCFS policy).
 *
 * There is no prefill phase and no decode phase: each step, every scheduled
 * request just catches its computed tokens up to its known tokens (prompt +
 * outputs so far), within a token budget. Running requests go first, oldest
 * first, then waiting ones while the budget, `maxNumSeqs` and the KV pool
 * allow: preempted ones first, then the oldest request of the client request
 * with the fewest running (a client request's prompts share one
 * clientRequestId), so one request of 128 prompts cannot keep a 4-token
 * request from another client waiting for all of them, as strict FCFS by
 * sequence would (issue #14, item 11). The waiting-queue bound counts client
 * requests too. A prompt longer than the remaining budget is split
 * across steps (chunked prefill). When a running request needs a block and
 * none is free, the newest running request is preempted: its blocks are freed
 * and it goes back to the front of the waiting queue, to be recomputed from
 * its tokens later (prefix caching usually finds most of them again).
 *
 * One step is `schedule()` → forward (buildForwardBatch) → sample →
 * `updateFromOutput(sampled)`, strictly in that order on one thread.
 *
 * Speculative decoding (vLLM v1's spec_token_ids): `schedule(drafts)` gives a
 * decoding request its draft tokens as extra new tokens of the step (query
 * length 1 + k), with KV slots for them (lookahead slots, never cached), as
 * far as the budget, maxModelLen and maxTokens leave room. Its sampled tokens
 * are then the accepted drafts plus one more; updateFromOutput rolls the
 * rejected drafts back: numComputedTokens drops by their count and the
 * blocks that held only them go back to the pool.
 *
 * Stop conditions beyond length (EOS, stop tokens, stop strings) belong to the
 * caller: a `stopChecker` callback, or `finishRequest` after the fact.
 */
import { ArgumentError, show } from "../errors.js";
import { checkInt } from "../tensor/check.js";
import type { KvCacheManager, PrefixCacheStats } from "./kv-cache-manager.js";
import { type FinishReason, Request } from "./request.js";

/** A caller's verdict that a request stops after `tokenId` (just appended), or null to go on. */
export interface StopDecision {
  reason: "stop" | "length";
  /** The stop token id or string that matched, reported back as request.stopReason. */
  stopReason?: number | string;
}

export type StopCallback<P> = (request: Request<P>, tokenId: number) => StopDecision | null;

export interface SchedulerOptions<P> {
  kvCacheManager: KvCacheManager;
  /** Token budget of one step (vLLM's max_num_batched_tokens), ≥ 1. */
  maxNumBatchedTokens: number;
  /** Most running requests at once (vLLM's max_num_seqs), ≥ 1. */
  maxNumSeqs: number;
  /** Context length: prompt + output tokens ≤ maxModelLen. A sequence this long must fit in the KV pool. */
  maxModelLen: number;
  /** Most client requests (Request.clientRequestId) with a request waiting at once; addRequest returns false beyond it (HTTP 429). Default unbounded. */
  maxWaitingRequests?: number;
  /**
   * Called after each appended output token, unless a length limit already
   * finished the request. It must not throw: a throw leaves the step half
   * applied, and the next schedule() refuses to go on.
   */
  stopChecker?: StopCallback<P>;
  /**
   * Whether a request may be scheduled this step (default: all may). One that
   * is not keeps its place and its blocks, and is skipped: a constrained
   * request while its grammar's matchers are busy compiling (vLLM's
   * WAITING_FOR_FSM). Must not throw.
   */
  isReady?: (request: Request<P>) => boolean;
}

/** One request's share of a step. Its new tokens are allTokenIds[numComputedTokens, +numNewTokens). */
export interface ScheduledRequest<P = unknown> {
  readonly request: Request<P>;
  /** Tokens with KV before this step; the new tokens take positions numComputedTokens… */
  readonly numComputedTokens: number;
  readonly numNewTokens: number;
  /** The request's whole block table for this step (a copy). */
  readonly blockIds: readonly number[];
  /** Blocks allocated this step: a suffix of blockIds. */
  readonly newBlockIds: readonly number[];
  /** This step computes the request's last known token, so its logits are sampled. */
  readonly sampling: boolean;
  /**
   * Draft tokens after the known ones (speculative decoding), included in
   * numNewTokens: they take positions numTokens…, and a sampling request
   * then has 1 + specTokenIds.length logit rows. Empty for most requests.
   */
  readonly specTokenIds: readonly number[];
  /** Already running, newly admitted, or resumed after a preemption. */
  readonly kind: "running" | "new" | "resumed";
}

export interface SchedulerOutput<P = unknown> {
  /** In batch order: running requests, then those admitted this step. */
  readonly scheduled: readonly ScheduledRequest<P>[];
  /** Σ numNewTokens ≤ maxNumBatchedTokens. */
  readonly numScheduledTokens: number;
  /** Requests preempted by this step, newest first. */
  readonly preemptedRequestIds: readonly string[];
  /** Requests that finished or were aborted since the previous schedule(). */
  readonly finishedRequestIds: readonly string[];
  /** Leading blocks every running request shares (for cascade attention). */
  readonly numCommonPrefixBlocks: number;
}

/** What one step did to a request that sampled. */
export interface RequestOutput<P = unknown> {
  readonly request: Request<P>;
  readonly newTokenIds: readonly number[];
  readonly finishReason: FinishReason | null;
}

export interface SchedulerStats {
  numRunning: number;
  numWaiting: number;
  /** Preemptions since the scheduler started (vLLM's `vllm:num_preemptions`). */
  numPreemptions: number;
  /** Fraction of KV blocks in use (`vllm:kv_cache_usage_perc`). */
  kvCacheUsage: number;
  prefixCache: PrefixCacheStats;
}

const NO_SPEC: readonly number[] = Object.freeze([]) as readonly number[];
const NO_DRAFTS: ReadonlyMap<string, readonly number[]> = new Map();

export class Scheduler<P = unknown> {
  readonly maxNumBatchedTokens: number;
  readonly maxNumSeqs: number;
  readonly maxModelLen: number;
  readonly maxWaitingRequests: number;
  readonly #kv: KvCacheManager;
  readonly #stopChecker: StopCallback<P> | undefined;
  readonly #isReady: (request: Request<P>) => boolean;
  readonly #requests = new Map<string, Request<P>>();
  /** Admission order; the last is the newest (the first preempted). */
  readonly #running: Request<P>[] = [];
  /** Arrival order; preempted requests return to the front. Admission picks from it fairly (#nextWaiting). */
  readonly #waiting: Request<P>[] = [];
  /** Client request → its requests in #waiting. */
  readonly #waitingPerClient = new Map<string, number>();
  #finished: string[] = [];
  /** The last step's scheduled requests, until updateFromOutput consumes them. */
  #pending: ScheduledRequest<P>[] | null = null;
  #arrivals = 0;
  #numPreemptions = 0;

  constructor(options: SchedulerOptions<P>) {
    this.#kv = options.kvCacheManager;
    this.maxNumBatchedTokens = checkInt("maxNumBatchedTokens", options.maxNumBatchedTokens, { min: 1 });
    this.maxNumSeqs = checkInt("maxNumSeqs", options.maxNumSeqs, { min: 1 });
    this.maxModelLen = checkInt("maxModelLen", options.maxModelLen, { min: 2 });
    const capacity = this.#kv.pool.numBlocks * this.#kv.blockSize;
    if (this.maxModelLen > capacity) {
      throw new ArgumentError("maxModelLen", `must fit in the KV pool (${this.#kv.pool.numBlocks} blocks × ${this.#kv.blockSize} = ${capacity} tokens), got ${this.maxModelLen}`);
    }
    const maxWaiting = options.maxWaitingRequests ?? Infinity;
    if (maxWaiting !== Infinity) checkInt("maxWaitingRequests", maxWaiting, { min: 0 });
    this.maxWaitingRequests = maxWaiting;
    if (options.stopChecker !== undefined && typeof options.stopChecker !== "function") {
      throw new ArgumentError("stopChecker", `must be a function, got ${show(options.stopChecker)}`);
    }
    this.#stopChecker = options.stopChecker;
    if (options.isReady !== undefined && typeof options.isReady !== "function") throw new ArgumentError("isReady", `must be a function, got ${show(options.isReady)}`);
    this.#isReady = options.isReady ?? (() => true);
  }

  get numRunning(): number {
    return this.#running.length;
  }

  get numWaiting(): number {
    return this.#waiting.length;
  }

  /** Client requests with at least one request waiting (what maxWaitingRequests bounds). */
  get numWaitingClientRequests(): number {
    return this.#waitingPerClient.size;
  }

  /** Whether a request of this client request is waiting (another of its requests then needs no new place in the queue). */
  isWaitingClientRequest(clientRequestId: string): boolean {
    return this.#waitingPerClient.has(clientRequestId);
  }

  get numPreemptions(): number {
    return this.#numPreemptions;
  }

  get hasUnfinishedRequests(): boolean {
    return this.#requests.size > 0;
  }

  stats(): SchedulerStats {
    return {
      numRunning: this.#running.length,
      numWaiting: this.#waiting.length,
      numPreemptions: this.#numPreemptions,
      kvCacheUsage: this.#kv.usage,
      prefixCache: this.#kv.prefixCacheStats(),
    };
  }

  /** A live (not finished) request, or undefined. */
  getRequest(requestId: string): Request<P> | undefined {
    return this.#requests.get(requestId);
  }

  runningRequestIds(): string[] {
    return this.#running.map((r) => r.requestId);
  }

  waitingRequestIds(): string[] {
    return this.#waiting.map((r) => r.requestId);
  }

  /**
   * Queues a new request. Returns false, queueing nothing, when the waiting
   * queue is full: maxWaitingRequests client requests wait, none of them
   * this request's. Throws if the request is not new, its id is live, or its
   * prompt leaves no room for an output token within maxModelLen.
   */
  addRequest(request: Request<P>): boolean {
    if (!(request instanceof Request)) throw new ArgumentError("request", `must be a Request, got ${show(request)}`);
    if (request.arrivalOrder >= 0 || request.status !== "waiting") {
      throw new ArgumentError("request", `${show(request.requestId)} was already added to a scheduler`);
    }
    if (this.#requests.has(request.requestId)) throw new ArgumentError("request.requestId", `${show(request.requestId)} is already live`);
    if (request.numPromptTokens >= this.maxModelLen) {
      throw new ArgumentError(
        "promptTokenIds",
        `has ${request.numPromptTokens} tokens, but maxModelLen ${this.maxModelLen} leaves room for at most ${this.maxModelLen - 1} prompt tokens`,
      );
    }
    if (!this.#waitingPerClient.has(request.clientRequestId) && this.#waitingPerClient.size >= this.maxWaitingRequests) return false;
    request.arrivalOrder = this.#arrivals++;
    this.#requests.set(request.requestId, request);
    this.#enqueue(request, "back");
    return true;
  }

  /** Cancels a waiting or running request and frees its blocks now. False if it is not live. */
  abort(requestId: string): boolean {
    return this.finishRequest(requestId, "abort");
  }

  /**
   * Finishes a live request for a reason decided outside (a stop string seen
   * in the detokenized text, a client disconnect): frees its blocks at once.
   * Tokens it sampled in a step still in flight are then ignored.
   */
  finishRequest(requestId: string, reason: FinishReason, stopReason: number | string | null = null): boolean {
    if (reason !== "stop" && reason !== "length" && reason !== "abort") {
      throw new ArgumentError("reason", `must be "stop" | "length" | "abort", got ${show(reason)}`);
    }
    const request = this.#requests.get(requestId);
    if (request === undefined) return false;
    if (request.status === "running") this.#running.splice(this.#running.indexOf(request), 1);
    else this.#dequeue(this.#waiting.indexOf(request));
    this.#kv.free(request);
    request.status = "finished";
    request.finishReason = reason;
    request.stopReason = stopReason;
    this.#requests.delete(requestId);
    this.#finished.push(requestId);
    return true;
  }

  /**
   * Plans one step. Must be followed by updateFromOutput before the next
   * schedule() if it scheduled anything. `drafts`: draft tokens per request
   * id; only a running request with one known token left to compute (a
   * decoding one) takes them, cut to the room the step, maxModelLen and its
   * maxTokens leave, and dropped when its blocks would not fit.
   */
  schedule(drafts: ReadonlyMap<string, readonly number[]> = NO_DRAFTS): SchedulerOutput<P> {
    if (this.#pending !== null) throw new Error("Scheduler.schedule() called again before updateFromOutput() for the previous step");
    const stuck = this.#running.find((r) => r.numComputedTokens >= r.numTokens);
    if (stuck !== undefined) {
      throw new Error(`Scheduler: running request ${show(stuck.requestId)} has no known token left to compute: the previous step's output was not fully applied (did the stopChecker throw?)`);
    }
    const kv = this.#kv;
    let budget = this.maxNumBatchedTokens;
    const scheduled: ScheduledRequest<P>[] = [];
    const preempted: string[] = [];

    // Running requests, oldest first; preempt from the newest when blocks run out.
    for (let i = 0; i < this.#running.length && budget > 0; i++) {
      const request = this.#running[i]!;
      if (!this.#isReady(request)) continue;
      const numNew = Math.min(request.numTokens - request.numComputedTokens, budget);
      let spec = this.#draftsFor(request, drafts.get(request.requestId), budget);
      let newBlocks = kv.allocateSlots(request, numNew, { numLookaheadTokens: spec.length });
      if (newBlocks === null && spec.length > 0) newBlocks = kv.allocateSlots(request, numNew, { numLookaheadTokens: (spec = NO_SPEC).length });
      while (newBlocks === null) {
        const victim = this.#running.pop()!;
        this.#preempt(victim);
        preempted.push(victim.requestId);
        if (victim === request) break;
        newBlocks = kv.allocateSlots(request, numNew);
      }
      if (newBlocks === null) break;
      scheduled.push(this.#entry(request, numNew, newBlocks, "running", spec));
      budget -= numNew + spec.length;
    }

    // Waiting requests, shared fairly between client requests, unless this step had to preempt.
    const runningPerClient = new Map<string, number>();
    for (const r of this.#running) runningPerClient.set(r.clientRequestId, (runningPerClient.get(r.clientRequestId) ?? 0) + 1);
    while (preempted.length === 0 && this.#waiting.length > 0 && budget > 0 && this.#running.length < this.maxNumSeqs) {
      const at = this.#nextWaiting(runningPerClient);
      if (at < 0) break;
      const request = this.#waiting[at]!;
      const computed = kv.getComputedBlocks(request);
      const numNew = Math.min(request.numTokens - computed.numTokens, budget);
      const newBlocks = kv.allocateSlots(request, numNew, { computed });
      if (newBlocks === null) break; // head-of-line: keep the order
      this.#dequeue(at);
      runningPerClient.set(request.clientRequestId, (runningPerClient.get(request.clientRequestId) ?? 0) + 1);
      const kind = request.status === "preempted" ? "resumed" : "new";
      request.status = "running";
      request.numComputedTokens = computed.numTokens;
      if (request.numCachedTokens < 0) request.numCachedTokens = computed.numTokens;
      this.#running.push(request);
      scheduled.push(this.#entry(request, numNew, newBlocks, kind, NO_SPEC));
      budget -= numNew;
    }

    for (const s of scheduled) s.request.numComputedTokens += s.numNewTokens;
    const first = this.#running[0];
    const output: SchedulerOutput<P> = {
      scheduled,
      numScheduledTokens: this.maxNumBatchedTokens - budget,
      preemptedRequestIds: preempted,
      finishedRequestIds: this.#finished,
      numCommonPrefixBlocks: first === undefined ? 0 : kv.numCommonPrefixBlocks(first.requestId, this.#running.length),
    };
    this.#finished = [];
    if (scheduled.length > 0) this.#pending = scheduled;
    return output;
  }

  /**
   * Applies the sampled tokens of the last scheduled step: `sampled` maps the
   * id of every request that sampled (ScheduledRequest.sampling) to its new
   * token(s). Appends them, finishes requests that hit maxTokens, maxModelLen
   * or the stopChecker (dropping any tokens after the stop), and frees the
   * finished requests' blocks. Tokens for requests finished meanwhile are ignored.
   * A request that verified drafts gives its accepted drafts (a prefix of
   * specTokenIds, which must match) and one token more; the rest roll back.
   */
  updateFromOutput(sampled: ReadonlyMap<string, readonly number[]>): RequestOutput<P>[] {
    const pending = this.#pending ?? [];
    const pendingById = new Map(pending.map((s) => [s.request.requestId, s]));
    for (const [id, tokens] of sampled) {
      const entry = pendingById.get(id);
      if (entry?.request.isFinished) continue; // finished or aborted while the step ran
      if (entry === undefined || !entry.sampling) throw new ArgumentError(`sampled[${show(id)}]`, "is not a request that sampled in the last step");
      if (!Array.isArray(tokens) || tokens.length === 0) {
        throw new ArgumentError(`sampled[${show(id)}]`, `must be a non-empty array of token ids, got ${show(tokens)}`);
      }
      tokens.forEach((t, i) => checkInt(`sampled[${show(id)}][${i}]`, t, { min: 0, max: 2 ** 31 - 1 }));
      const spec = entry.specTokenIds;
      if (spec.length > 0 && (tokens.length > spec.length + 1 || tokens.slice(0, -1).some((t, i) => t !== spec[i]))) {
        throw new ArgumentError(`sampled[${show(id)}]`, `must be accepted drafts (a prefix of ${show(spec)}) and one token more, got ${show(tokens)}`);
      }
    }
    const sampling = pending.filter((s) => s.sampling && !s.request.isFinished).map((s) => s.request);
    for (const request of sampling) {
      if (!sampled.has(request.requestId)) {
        throw new ArgumentError("sampled", `lacks tokens for request ${show(request.requestId)}, which sampled in the last step`);
      }
    }
    this.#pending = null;

    for (const s of pending) {
      if (s.specTokenIds.length === 0 || s.request.isFinished) continue;
      // Rejected drafts: their KV is past numComputedTokens now, and blocks holding only them are freed.
      s.request.numComputedTokens -= s.specTokenIds.length + 1 - sampled.get(s.request.requestId)!.length;
      this.#kv.trim(s.request, s.request.numComputedTokens);
    }

    const outputs: RequestOutput<P>[] = [];
    for (const request of sampling) {
      const newTokenIds: number[] = [];
      let decision: StopDecision | null = null;
      for (const t of sampled.get(request.requestId)!) {
        request.appendOutputToken(t);
        newTokenIds.push(t);
        decision = this.#checkStop(request, t);
        if (decision !== null) break;
      }
      if (decision !== null) this.finishRequest(request.requestId, decision.reason, decision.stopReason ?? null);
      outputs.push({ request, newTokenIds, finishReason: decision?.reason ?? null });
    }
    return outputs;
  }

  #checkStop(request: Request<P>, tokenId: number): StopDecision | null {
    if (request.numTokens >= this.maxModelLen || request.numOutputTokens >= request.maxTokens) return { reason: "length" };
    const decision = this.#stopChecker?.(request, tokenId) ?? null;
    if (decision !== null && decision.reason !== "stop" && decision.reason !== "length") {
      throw new ArgumentError("stopChecker", `must return null or { reason: "stop" | "length" }, got ${show(decision)}`);
    }
    return decision;
  }

  #preempt(request: Request<P>): void {
    this.#kv.free(request);
    request.status = "preempted";
    request.numComputedTokens = 0;
    request.numPreemptions++;
    this.#numPreemptions++;
    this.#enqueue(request, "front");
  }

  /**
   * The waiting request to admit next: a preempted one (they wait at the
   * front) first; otherwise the oldest request of the client request with the
   * fewest running requests (ties: the oldest). Requests not ready are passed
   * over; -1 when none is ready.
   */
  #nextWaiting(runningPerClient: ReadonlyMap<string, number>): number {
    let best = -1;
    let fewest = Infinity;
    for (let i = 0; i < this.#waiting.length; i++) {
      const r = this.#waiting[i]!;
      if (!this.#isReady(r)) continue;
      if (r.status === "preempted") return i;
      const running = runningPerClient.get(r.clientRequestId) ?? 0;
      if (running < fewest) {
        best = i;
        fewest = running;
        if (running === 0) break;
      }
    }
    return best;
  }

  #enqueue(request: Request<P>, end: "front" | "back"): void {
    if (end === "front") this.#waiting.unshift(request);
    else this.#waiting.push(request);
    this.#waitingPerClient.set(request.clientRequestId, (this.#waitingPerClient.get(request.clientRequestId) ?? 0) + 1);
  }

  #dequeue(at: number): void {
    const [request] = this.#waiting.splice(at, 1);
    const left = this.#waitingPerClient.get(request!.clientRequestId)! - 1;
    if (left === 0) this.#waitingPerClient.delete(request!.clientRequestId);
    else this.#waitingPerClient.set(request!.clientRequestId, left);
  }

  /**
   * The drafts a running request verifies this step: none unless it is
   * decoding; at most what leaves room, after its known token, in the
   * budget, in maxModelLen and in its maxTokens for the accepted drafts and
   * the one token sampled after them.
   */
  #draftsFor(request: Request<P>, drafts: readonly number[] | undefined, budget: number): readonly number[] {
    if (drafts === undefined || drafts.length === 0 || request.numTokens - request.numComputedTokens !== 1) return NO_SPEC;
    const room = Math.min(budget - 1, this.maxModelLen - request.numTokens - 1, request.maxTokens - request.numOutputTokens - 1);
    if (room <= 0) return NO_SPEC;
    drafts.forEach((t, i) => checkInt(`drafts[${show(request.requestId)}][${i}]`, t, { min: 0, max: 2 ** 31 - 1 }));
    return drafts.length <= room ? [...drafts] : drafts.slice(0, room);
  }

  #entry(request: Request<P>, numNewTokens: number, newBlockIds: number[], kind: ScheduledRequest["kind"], spec: readonly number[]): ScheduledRequest<P> {
    return {
      request,
      numComputedTokens: request.numComputedTokens,
      numNewTokens: numNewTokens + spec.length,
      blockIds: [...this.#kv.blockIds(request.requestId)],
      newBlockIds,
      sampling: request.numComputedTokens + numNewTokens === request.numTokens,
      specTokenIds: spec,
      kind,
    };
  }
}

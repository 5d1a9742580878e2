/**
 * The engine: requests in, streamed outputs out, one batched forward a step
 * (vLLM v1's EngineCore.step plus its OutputProcessor):
 *
 *   scheduler.schedule()            which requests compute which tokens (continuous batching)
 *   buildForwardBatch(…)            the ragged batch over the paged KV cache
 *   grammar.masksFor(matchers)      constrained requests only: ask the grammar host (another
 *                                   thread) for their allowed tokens (XGrammar), filled while…
 *   runner.forward(batch)           f32 [S, V] logits, one row per sampling request (awaited when
 *                                   the runner is asynchronous: the WebGPU runner)
 *   sampler.sample(state, row, mask) each request with its own SamplingState (seeded stream, penalties);
 *                                   the token advances the request's grammar matcher
 *   scheduler.updateFromOutput(…)   append tokens; each passes the request's StopChecker
 *                                   (text delta, stop strings with holdback, stop ids / EOS, max tokens)
 *   → EngineOutput per request      text delta, token ids, logprobs, finish reason, token counts
 *
 * Single-threaded: the caller (engine-worker.ts, off the HTTP thread) calls
 * step() in a loop and addRequest / abort between steps. Synchronous with the
 * CPU decoder; with an asynchronous runner (WebGPU) step() returns a Promise
 * and "between steps" means after it settles.
 *
 * A constrained request (EngineRequest.grammar) gets its matcher from the
 * grammar backend when added (the caller has prepared, i.e. compiled, its
 * grammar); once the grammar is complete it finishes with "stop". With
 * ignore_eos it goes on inside its grammar while the grammar allows more than
 * EOS (EOS is masked there: #sampleMask), and stops only where it must end
 * (vLLM lets EOS through and then samples unconstrained after it). Preemption
 * keeps a request's output tokens (they are recomputed, not resampled), so its
 * matcher stays where it is. Unconstrained requests never touch a matcher.
 * While the grammar host a matcher lives in compiles a new grammar (its
 * matcher not `ready`), its mask would wait for that compile: that request is
 * held back from the schedule for those steps (vLLM's WAITING_FOR_FSM), and
 * the rest step on. The backend compiles new grammars in a host where no
 * live matcher is, so this is rare (a full pool of hosts, or a cache hit on a
 * host that compiles).
 *
 * Parallel samples (OpenAI's n): a request with `prefillAfter` names a sibling
 * with the same prompt. While that sibling's prompt is still being prefilled,
 * the request is parked outside the scheduler; it is queued once the prompt's
 * KV is computed, and finds those blocks in the prefix cache (prefill once).
 *
 * Speculative decoding (EngineOptions.speculativeConfig; the proposers are in
 * ngram-proposer.ts and draft-model-proposer.ts — a draft model drafts greedily,
 * or sampled (see below), for all requests in one batch and is told when a
 * request ends, release() —
 * the per-request draft length in draft-length.ts, which starts from the
 * engine's prior for the proposer, draft-prior.ts, and weighs the cost of a
 * draft, assumed or, with EngineOptions.stepClock, measured on batch-1 decode
 * steps, step-cost.ts): before each
 * schedule, every decoding request (while fewer than disable_by_batch_size
 * run) may propose k drafts, k chosen per request by its DraftLength; the
 * scheduler makes them extra query tokens of the step, the runner returns
 * k + 1 logit rows for the request, and #verify samples row j from the
 * target's distribution as plain decoding would, accepting draft j while the
 * sampled token equals it. For a draft that is one fixed token (a point mass
 * q = δ_d, as prompt lookup and a greedy draft model propose), this is exactly the rejection
 * sampling of Leviathan et al. / Chen et al. 2023: the draft is kept with
 * probability min(1, p(d)/q(d)) = p(d), and on rejection the token is drawn
 * from norm(max(0, p − q)), which is p with d removed and renormalized —
 * the law of "x ~ p given x ≠ d". So the output distribution is p's at
 * every position, a seeded request draws the same tokens with or without
 * speculation (one uniform per output token, as before), greedy output is
 * identical, logprobs are the target's at each accepted position, and a
 * grammar matcher only ever accepts tokens that are output (no rollback:
 * each row's mask follows the accepted tokens before it). Rejected drafts'
 * KV slots roll back in the scheduler (updateFromOutput). A draft model
 * drafts a constrained request under its grammar (DraftRequest.grammar): the
 * matcher is advanced over the drafts for their masks, then rolled back
 * before the step's masks are asked for (#draftMask).
 *
 * A draft model with sampled drafts (draft_sampling "sampled") proposes, for a
 * request that samples, drafts drawn from its own filtered distribution q and
 * keeps q per position (BatchDraftProposer.distributions). Those rows are
 * verified by the full rule (rejection-sampler.ts): draft x kept with
 * probability min(1, p(x)/q(x)), the first rejected one replaced by a draw
 * from norm(max(0, p − q)); if all are kept, the bonus token is sampled from
 * p as usual. The output distribution is still p's, and a seeded request is
 * reproducible (its draws come from its own stream and the draft's, seeded
 * from it), though not the same tokens as without speculation. With a
 * grammar, p is the target's grammar-masked distribution and q the draft's
 * under the same masks (the rule is exact for any q; a shared support is what
 * lets a good draft be accepted).
 *
 * Failure is contained. A request whose sampling or detokenizing throws
 * finishes alone with finishReason "error". A forward that throws leaves the
 * KV of its step undefined, and blocks it was filling are already registered
 * in the prefix cache; so every running request (the only holders of blocks)
 * finishes with "error", the prefix cache is reset (vLLM's reset_prefix_cache)
 * and waiting requests go on as if nothing happened.
 */
import { ArgumentError, show } from "../errors.js";
import { type ModelRunner, type StepResult, stepLogits } from "../model/model-runner.js";
import { checkInt } from "../tensor/check.js";
import type { ConstraintMatcher, GrammarBackendLike, StepMasks } from "../structured/grammar-backend.js";
import type { GrammarSpec } from "../structured/grammar-spec.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import { buildForwardBatch } from "./forward-batch-builder.js";
import { KvCacheManager } from "./kv-cache-manager.js";
import { type EngineFinishReason, EngineMetrics, type EngineMetricsSnapshot, SpecDecodeMetrics } from "./metrics.js";
import { Request } from "./request.js";
import type { Runtime } from "../runtime/runtime.js";
import { type SampleResult, Sampler, SamplingState, type TokenLogprob, createSampler } from "./sampler.js";
import { type TokenDistribution, verifyDraft } from "./rejection-sampler.js";
import type { ResolvedSamplingParams } from "./sampling-params.js";
import { type RequestOutput, Scheduler, type SchedulerOutput, type StopDecision } from "./scheduler.js";
import { StopChecker, type StopUpdate } from "./stop.js";
import { resolveEngineConfig } from "./engine-config.js";
import { DRAFT_TOKEN_COST, type DraftCost, DraftLength } from "./draft-length.js";
import { DraftPrior } from "./draft-prior.js";
import { StepCostMeter } from "./step-cost.js";
import { type DraftProposer, NgramProposer } from "./ngram-proposer.js";
import type { BatchDraftProposer, DraftRequest } from "./draft-model-proposer.js";
import type { SpeculativeConfig } from "./speculative-config.js";

/** The defaults live in engine-config.ts; re-exported for existing imports. */
export { DEFAULT_MAX_NUM_SEQS, defaultMaxNumBatchedTokens } from "./engine-config.js";

export interface EngineOptions<R extends ModelRunner = ModelRunner> {
  /** The model; a runner with an asynchronous forward makes step() asynchronous (see step). */
  runner: R;
  tokenizer: Tokenizer;
  /** The model's EOS ids (ModelDir.eosTokenIds): they stop a request unless it sets ignoreEos. */
  eosTokenIds: readonly number[];
  /** Most requests running at once (vLLM's max_num_seqs). Default 64. */
  maxNumSeqs?: number;
  /** Token budget of one step (vLLM's max_num_batched_tokens): bounds a prefill chunk. Default max(512, maxNumSeqs). */
  maxNumBatchedTokens?: number;
  /** Most client requests waiting at once (EngineRequest.clientRequestId); addRequest answers "queue_full" beyond it. Default unbounded. */
  maxWaitingRequests?: number;
  /** Automatic prefix caching. Default true. */
  enablePrefixCaching?: boolean;
  /** Clock in milliseconds, shared with the callers' arrival times. Default performance.timeOrigin + performance.now(). */
  now?: () => number;
  /** Grammars for constrained requests (structured/grammar-backend.ts). Without one, a request with a grammar is refused. */
  grammar?: GrammarBackendLike;
  /**
   * A runtime whose memory holds the sampler's scratch, so its O(V) passes run
   * as wasm SIMD kernels (sampler-kernels.ts; ~30 bytes a vocabulary entry).
   * Without one, or when that memory is full, they run in JavaScript.
   */
  runtime?: Runtime;
  /** Speculative decoding (vLLM's speculative_config: a resolved config, or its JSON object or text). Default: none. */
  speculativeConfig?: SpeculativeConfig | Record<string, unknown> | string;
  /**
   * Proposes the drafts instead of the config's method (its numSpeculativeTokens and disableByBatchSize still apply).
   * Required for the "draft_model" method: a DraftModelProposer over the loaded draft model (the caller loads it).
   */
  proposer?: DraftProposer | BatchDraftProposer;
  /**
   * Speculative decoding: a clock in milliseconds (performance.now, or a
   * test's virtual clock) that times the decode forwards at batch 1 by query
   * length, from which the cost of a draft token is measured (step-cost.ts).
   * Default null: the cost is assumed (DRAFT_TOKEN_COST). Not the default
   * because on a shared machine the measured cost follows the load: 0.01 to
   * 0.38 a draft over three rounds of one workload, and the drafting with it
   * (BENCHMARKS.md, spec, "Adaptivity across requests").
   */
  stepClock?: (() => number) | null;
}

export interface EngineRequest {
  /** Unique among live requests. */
  requestId: string;
  /** ≥ 1 token ids, each < runner.vocabSize; fewer than maxModelLen of them. */
  promptTokenIds: readonly number[];
  params: ResolvedSamplingParams;
  /** When the request arrived (the engine clock, ms): latencies count from here. Default: now. */
  arrivalTime?: number;
  /** Requests with different salts never share cached KV (vLLM's cache_salt). */
  cacheSalt?: string;
  /** Drop special tokens from the text. Default true. */
  skipSpecialTokens?: boolean;
  /** Constrain the output to this grammar (prepared with the engine's grammar backend first). */
  grammar?: GrammarSpec;
  /** A live request with the same prompt (and salt): wait for its prefill, then reuse its KV through the prefix cache. */
  prefillAfter?: string;
  /** The client request it belongs to (Request.clientRequestId: the queue bound and fair admission count client requests). Default: requestId. */
  clientRequestId?: string;
}

/** A generated token's raw log-probability and the request's top-n alternatives (best first). */
export interface TokenLogprobs {
  token: number;
  logprob: number;
  top: TokenLogprob[];
}

/** What one step did for one request. */
export interface EngineOutput {
  requestId: string;
  /** New text, possibly "" (held back while it may become a stop string, or an incomplete character). */
  text: string;
  /** Tokens generated this step; a stop token is included, its text is not. */
  tokenIds: number[];
  /** One entry per tokenIds entry when the request asked for logprobs, else null. */
  logprobs: TokenLogprobs[] | null;
  /** Set on the request's last output. */
  finishReason: EngineFinishReason | null;
  /** The stop string or stop token id that ended it (null for EOS, length, abort). */
  stopReason: string | number | null;
  /** Why it failed (finishReason "error"), else null. */
  error: string | null;
  numPromptTokens: number;
  /** Output tokens so far. */
  numOutputTokens: number;
  /** Prompt tokens found in the prefix cache when first scheduled (0 before). */
  numCachedTokens: number;
}

/** Per-request state the scheduler carries for the engine (Request.state). */
interface RequestState {
  readonly sampling: SamplingState;
  readonly stop: StopChecker;
  /** The request's place in its grammar, or null when unconstrained. */
  readonly matcher: ConstraintMatcher | null;
  /** Output count at which the grammar terminated (a verified run may go on past it: the tokens after are dropped), else null. */
  grammarEndAt: number | null;
  /** How many drafts the request proposes next, or null when the engine does not speculate. */
  readonly draftLength: DraftLength | null;
  readonly arrivalTime: number;
  /** Output tokens pushed through `stop` so far. */
  pushed: number;
  /** Text and logprobs produced in the current step, not yet output. */
  text: string;
  logprobs: TokenLogprobs[] | null;
  finish: StopUpdate | null;
  error: string | null;
  firstTokenTime: number | null;
  lastTokenTime: number;
}

export class Engine<R extends ModelRunner = ModelRunner> {
  readonly runner: R;
  readonly tokenizer: Tokenizer;
  readonly kvCacheManager: KvCacheManager;
  readonly scheduler: Scheduler<RequestState>;
  /** Longest prompt + output: the runner's, bounded by what the KV pool holds. */
  readonly maxModelLen: number;
  readonly metrics = new EngineMetrics();
  readonly #eos: readonly number[];
  readonly #sampler: Sampler;
  /** Rows past the tokenizer (checkpoints pad vocab_size) have no text and are never sampled, as in generate(). */
  readonly #textVocab: number;
  readonly #now: () => number;
  readonly #grammar: GrammarBackendLike | null;
  /** The matchers this step's schedule held back (not ready: their host compiles). */
  readonly #held = new Set<ConstraintMatcher>();
  /** Scratch for a draft row's grammar mask, Int32Array [ceil(V / 32)] (row 0's comes from masksFor). */
  readonly #mask: Int32Array;
  /** Scratch for row 0's mask with EOS dropped (ignore_eos, #sampleMask), Int32Array [ceil(V / 32)]. */
  readonly #eosFree: Int32Array;
  #heldForGrammar = false;
  /** Outputs produced between steps (aborts), returned by the next step(). */
  #pending: EngineOutput[] = [];
  /** Requests waiting for a sibling's prefill (EngineRequest.prefillAfter), in arrival order. */
  #parked: { request: Request<RequestState>; after: string }[] = [];
  /** This step's sampled drafts' distributions q, per request (#propose fills it, #verify reads it). */
  readonly #draftQ = new Map<string, readonly TokenDistribution[]>();
  /**
   * Speculative decoding, or null: the config, its proposer, the proposer's
   * prior (what a new sequence's DraftLength starts from), the cost of one
   * draft it weighs, and the meter and clock that measure that cost (null: assumed).
   */
  readonly #spec: {
    config: SpeculativeConfig;
    proposer: DraftProposer | BatchDraftProposer;
    prior: DraftPrior;
    cost: DraftCost;
    meter: { costs: StepCostMeter; clock: () => number } | null;
  } | null;

  constructor(options: EngineOptions<R>) {
    const runner = options.runner;
    if (runner === null || typeof runner !== "object" || typeof runner.forward !== "function") {
      throw new ArgumentError("runner", `must be a ModelRunner, got ${show(runner)}`);
    }
    this.runner = runner;
    this.tokenizer = options.tokenizer;
    this.#eos = [...options.eosTokenIds];
    this.#now = options.now ?? (() => performance.timeOrigin + performance.now());
    const { numBlocks, blockSize } = runner.kvCache;
    const config = resolveEngineConfig(options);
    this.kvCacheManager = new KvCacheManager({ numBlocks, blockSize, enablePrefixCaching: config.enablePrefixCaching });
    // The runner's maxModelLen is the load settings' value, resolved once against the model and the KV cache (model/max-model-len.ts, memory-plan.ts); the pool bounds a runner that did not.
    this.maxModelLen = Math.min(runner.maxModelLen, numBlocks * blockSize);
    this.scheduler = new Scheduler<RequestState>({
      kvCacheManager: this.kvCacheManager,
      maxNumSeqs: config.maxNumSeqs,
      maxNumBatchedTokens: config.maxNumBatchedTokens,
      maxModelLen: this.maxModelLen,
      ...(config.maxWaitingRequests === undefined ? {} : { maxWaitingRequests: config.maxWaitingRequests }),
      stopChecker: (request, token) => this.#stopCheck(request, token),
      isReady: (request) => this.#ready(request.state!.matcher),
    });
    this.#sampler = createSampler(runner.vocabSize, options.runtime);
    this.#textVocab = Math.min(options.tokenizer.vocabSize, runner.vocabSize);
    this.#grammar = options.grammar ?? null;
    if (this.#grammar !== null && this.#grammar.vocabSize !== runner.vocabSize) {
      throw new ArgumentError("grammar", `covers ${this.#grammar.vocabSize} tokens, the runner's vocabulary has ${runner.vocabSize}`);
    }
    this.#mask = new Int32Array(this.#grammar === null ? 0 : Math.ceil(runner.vocabSize / 32));
    this.#eosFree = new Int32Array(this.#mask.length);
    const spec = config.speculativeConfig;
    if (spec === undefined && options.proposer !== undefined) throw new ArgumentError("proposer", "needs a speculativeConfig (its num_speculative_tokens)");
    const proposer = options.proposer as Partial<DraftProposer & BatchDraftProposer> | undefined;
    if (proposer !== undefined && typeof proposer?.propose !== "function" && (typeof proposer?.proposeBatch !== "function" || typeof proposer.release !== "function")) {
      throw new ArgumentError("proposer", `must have a propose(tokens, k) method, or proposeBatch(seqs) and release(requestId), got ${show(options.proposer)}`);
    }
    if (spec?.method === "draft_model" && options.proposer === undefined) {
      throw new ArgumentError("proposer", `is required for the draft model ${show(spec.model)}: load it and pass a DraftModelProposer`);
    }
    const stepClock = options.stepClock ?? null;
    if (stepClock !== null && typeof stepClock !== "function") throw new ArgumentError("stepClock", `must be a function returning milliseconds, or null, got ${show(stepClock)}`);
    if (spec === undefined) this.#spec = null;
    else {
      const p = options.proposer ?? new NgramProposer(spec as SpeculativeConfig & { method: "ngram" });
      const draftForward = "draftCost" in p ? (p.draftCost ?? 0) : 0;
      const meter = stepClock === null ? null : { costs: new StepCostMeter({ maxDrafts: spec.numSpeculativeTokens }), clock: stepClock };
      const cost = meter === null ? DRAFT_TOKEN_COST + draftForward : (k: number) => meter.costs.perDraft(k) + draftForward;
      this.#spec = { config: spec, proposer: p, prior: new DraftPrior(), cost, meter };
    }
    if (spec !== undefined) this.metrics.specDecode = new SpecDecodeMetrics(spec.numSpeculativeTokens);
  }

  /** The resolved speculative decoding config, or null when the engine does not speculate. */
  get speculativeConfig(): SpeculativeConfig | null {
    return this.#spec?.config ?? null;
  }

  /**
   * The cost of one draft in plain decode steps that the adaptive draft length
   * weighs now, for k = 1 … num_speculative_tokens drafts at index k − 1
   * (measured or assumed, plus a draft model's forward), or null when the
   * engine does not speculate.
   */
  draftCosts(): number[] | null {
    const spec = this.#spec;
    if (spec === null) return null;
    const cost = spec.cost;
    return Array.from({ length: spec.config.numSpeculativeTokens }, (_, i) => (typeof cost === "number" ? cost : cost(i + 1)));
  }

  /** Where the sampler's O(V) passes run: "wasm" (EngineOptions.runtime) or "js". */
  get samplerPasses(): "wasm" | "js" {
    return this.#sampler.passes;
  }

  /** Frees the sampler's scratch in the runtime's memory (the runner is the caller's to dispose). */
  dispose(): void {
    this.#sampler.free();
  }

  get hasUnfinishedRequests(): boolean {
    return this.scheduler.hasUnfinishedRequests || this.#pending.length > 0 || this.#parked.length > 0;
  }

  /**
   * Queues a request. "queue_full" when the waiting queue is at its bound
   * (nothing queued: HTTP 429). Throws an ArgumentError naming the field for a
   * request that can never run (a token id outside the vocabulary, a prompt
   * that leaves no room for an output token, a live id).
   */
  addRequest(init: EngineRequest): "accepted" | "queue_full" {
    const prompt = init.promptTokenIds;
    if (!Array.isArray(prompt)) throw new ArgumentError("promptTokenIds", `must be an array of token ids, got ${show(prompt)}`);
    prompt.forEach((t, i) => checkInt(`promptTokenIds[${i}]`, t, { min: 0, max: this.runner.vocabSize - 1 }));
    const maxTokens = Math.min(init.params.maxTokens, Math.max(1, this.maxModelLen - prompt.length));
    if (init.grammar !== undefined && this.#grammar === null) throw new ArgumentError("grammar", "needs an engine with a grammar backend (EngineOptions.grammar)");
    const matcher = init.grammar === undefined ? null : this.#grammar!.matcher(init.grammar);
    const state: RequestState = {
      sampling: new SamplingState(init.params, prompt),
      stop: new StopChecker(this.tokenizer, {
        maxTokens,
        stop: init.params.stop,
        stopTokenIds: init.params.stopTokenIds,
        eosTokenIds: this.#eos,
        ignoreEos: init.params.ignoreEos,
        includeStopStrInOutput: init.params.includeStopStrInOutput,
        promptIds: prompt,
        skipSpecialTokens: init.skipSpecialTokens ?? true,
      }),
      matcher,
      grammarEndAt: null,
      draftLength: this.#spec === null ? null : new DraftLength(this.#spec.config.numSpeculativeTokens, this.#spec.cost, this.#spec.prior),
      arrivalTime: init.arrivalTime ?? this.#now(),
      pushed: 0,
      text: "",
      logprobs: null,
      finish: null,
      error: null,
      firstTokenTime: null,
      lastTokenTime: 0,
    };
    const request = new Request<RequestState>({
      requestId: init.requestId,
      promptTokenIds: prompt,
      maxTokens,
      state,
      ...(init.cacheSalt === undefined ? {} : { cacheSalt: init.cacheSalt }),
      ...(init.clientRequestId === undefined ? {} : { clientRequestId: init.clientRequestId }),
    });
    if (init.prefillAfter !== undefined && this.#prefilling(init.prefillAfter)) {
      if (this.scheduler.getRequest(init.requestId) !== undefined || this.#parked.some((p) => p.request.requestId === init.requestId)) {
        matcher?.dispose();
        throw new ArgumentError("requestId", `${show(init.requestId)} is already live`);
      }
      if (this.#queueFull(request.clientRequestId)) {
        matcher?.dispose();
        return "queue_full";
      }
      this.#parked.push({ request, after: init.prefillAfter });
      return "accepted";
    }
    if (this.scheduler.addRequest(request)) return "accepted";
    matcher?.dispose();
    return "queue_full";
  }

  /** Cancels a live request and frees its blocks now; its last output (finishReason "abort") comes with the next step(). */
  abort(requestId: string): boolean {
    const parked = this.#parked.findIndex((p) => p.request.requestId === requestId);
    if (parked >= 0) {
      const request = this.#parked.splice(parked, 1)[0]!.request;
      this.#pending.push(this.#finishOutput(request, "abort", null));
      return true;
    }
    const request = this.scheduler.getRequest(requestId);
    if (request === undefined || !this.scheduler.abort(requestId)) return false;
    this.#pending.push(this.#finishOutput(request, "abort", null));
    return true;
  }

  /** The last step scheduled nothing because its requests wait for their grammar host's compile (ConstraintMatcher.ready). */
  get heldForGrammar(): boolean {
    return this.#heldForGrammar;
  }

  /** Resolves once a request the last step held back for its grammar host can run (at once if none was held). */
  whenGrammarReady(): Promise<void> {
    const held = [...this.#held];
    return held.length === 0 ? Promise.resolve() : Promise.race(held.map((m) => m.whenReady()));
  }

  /** The scheduler's isReady: unconstrained, or its matcher's host has no compile to finish first. */
  #ready(matcher: ConstraintMatcher | null): boolean {
    if (matcher === null || matcher.ready) return true;
    this.#held.add(matcher);
    return false;
  }

  /**
   * Runs one step (if anything is schedulable) and returns every output it
   * produced, aborts since the last step first. With a runner whose forward
   * is asynchronous (the WebGPU runner) the step is too: it returns a Promise,
   * and the caller must not add or abort requests until it settles. A
   * synchronous runner's step stays synchronous (no Promise, no await).
   */
  step(): StepResult<R, EngineOutput[]> {
    this.#unpark();
    const outputs = this.#pending;
    this.#pending = [];
    this.#held.clear();
    const step = this.scheduler.schedule(this.#propose());
    this.#heldForGrammar = step.scheduled.length === 0 && this.#held.size > 0;
    if (step.scheduled.length === 0) return outputs;
    const batch = buildForwardBatch(step, this.kvCacheManager.blockSize);
    // Constrained rows' masks are filled in the grammar host while the forward runs.
    const constrained = step.scheduled.filter((s) => s.sampling && s.request.state!.matcher !== null);
    const masks = constrained.length === 0 ? null : this.#grammar!.masksFor(constrained.map((s) => s.request.state!.matcher!));
    const maskRowOf = new Map(constrained.map((s, i) => [s.request.requestId, i]));
    const timed = this.#timeForward(step);
    let logits: Float32Array | Promise<Float32Array>;
    try {
      logits = stepLogits(this.runner, batch); // read before the next step: no copy (ForwardOptions.view)
    } catch (e) {
      this.#failForward(e, outputs);
      return outputs;
    }
    if (logits instanceof Promise) {
      return logits.then(
        (l) => {
          timed?.();
          return this.#sampleStep(step, batch.logitIndices.length, l, outputs, masks, maskRowOf);
        },
        (e: unknown) => {
          this.#failForward(e, outputs);
          return outputs;
        },
      ) as StepResult<R, EngineOutput[]>;
    }
    timed?.();
    return this.#sampleStep(step, batch.logitIndices.length, logits, outputs, masks, maskRowOf);
  }

  /**
   * Starts timing the forward of a step the draft cost is measured on (one
   * sequence decoding alone, its query 1 + its drafts); returns what records
   * its time in the StepCostMeter once the logits are there. null for any
   * other step, or when the cost is assumed.
   */
  #timeForward(step: SchedulerOutput<RequestState>): (() => void) | null {
    const meter = this.#spec?.meter ?? null;
    if (meter === null || step.scheduled.length !== 1) return null;
    const s = step.scheduled[0]!;
    const queryLen = s.numNewTokens;
    if (!s.sampling || s.numComputedTokens < s.request.numPromptTokens || queryLen !== 1 + s.specTokenIds.length) return null;
    const t0 = meter.clock();
    return () => meter.costs.observe(queryLen, meter.clock() - t0);
  }

  /** The step after its forward: check the logits, sample each sampling request (under `masks`, row maskRowOf(id)), update the scheduler. */
  #sampleStep(step: SchedulerOutput<RequestState>, rows: number, logits: Float32Array, outputs: EngineOutput[], masks: StepMasks | null, maskRowOf: ReadonlyMap<string, number>): EngineOutput[] {
    const V = this.runner.vocabSize;
    if (!(logits instanceof Float32Array) || logits.length !== rows * V) {
      this.#failForward(new Error(`runner.forward returned ${show(logits)}, expected a Float32Array of ${rows} × ${V}`), outputs);
      return outputs;
    }
    const sampled = new Map<string, number[]>();
    let row = 0;
    for (const s of step.scheduled) {
      if (!s.sampling) continue;
      const r = row;
      const drafts = s.specTokenIds;
      row += 1 + drafts.length;
      const request = s.request;
      if (request.isFinished) continue; // aborted while the forward ran
      const st = request.state!;
      const m = maskRowOf.get(request.requestId);
      try {
        const tokens = this.#verify(request, logits, r, drafts, m === undefined ? null : masks!.mask(m), this.#draftQ.get(request.requestId));
        sampled.set(request.requestId, tokens);
        if (drafts.length > 0) {
          this.metrics.specDecode!.observe(drafts.length, tokens.length - 1);
          st.draftLength!.record(drafts.length, tokens.length - 1);
        }
      } catch (e) {
        this.scheduler.finishRequest(request.requestId, "abort");
        outputs.push(this.#finishOutput(request, "error", `sampling failed: ${(e as Error).message}`));
      }
    }
    const now = this.#now();
    for (const result of this.scheduler.updateFromOutput(sampled)) outputs.push(this.#output(result, now));
    return outputs;
  }

  /**
   * Samples the request's rows r0, r0 + 1, … as plain decoding would, each
   * after the tokens accepted before it, while the sampled token equals the
   * draft at that row (see the module comment: rejection sampling for a
   * point-mass draft). Returns the accepted drafts and the token after them.
   * `firstMask`: a constrained request's row-r0 mask, filled by the grammar
   * host during the forward; the rows after it ask the host for theirs.
   */
  #verify(request: Request<RequestState>, logits: Float32Array, r0: number, drafts: readonly number[], firstMask: Int32Array | null, qs?: readonly TokenDistribution[]): number[] {
    const st = request.state!;
    const V = this.runner.vocabSize;
    const tokens: number[] = [];
    for (let j = 0; ; j++) {
      const rowLogits = logits.subarray((r0 + j) * V, (r0 + j + 1) * V);
      if (this.#textVocab < V) rowLogits.fill(-Infinity, this.#textVocab);
      let mask: Int32Array | null = null;
      if (st.matcher !== null) {
        if (j > 0) st.matcher.fillNextMask(this.#mask);
        mask = j === 0 ? this.#sampleMask(st, firstMask!, this.#eosFree) : this.#sampleMask(st, this.#mask, this.#mask);
      }
      const q = j < drafts.length ? qs?.[j] : undefined;
      let result: SampleResult;
      if (q === undefined) result = this.#sampler.sample(st.sampling, rowLogits, mask);
      else {
        // A sampled draft: Leviathan / Chen's rule against the target's filtered p (rejection-sampler.ts).
        const p = this.#sampler.distribution(st.sampling, rowLogits, mask);
        const token = verifyDraft(p, q, drafts[j]!, st.sampling.rng).token;
        st.sampling.accept(token);
        result = this.#sampler.resultFor(st.sampling, rowLogits, token);
      }
      if (st.matcher !== null && !st.matcher.accept(result.token)) throw new Error(`the grammar rejected token ${result.token}, which its own mask allowed`);
      if (result.logprob !== null) (st.logprobs ??= []).push({ token: result.token, logprob: result.logprob, top: result.topLogprobs ?? [] });
      tokens.push(result.token);
      if (st.matcher?.isTerminated === true) {
        st.grammarEndAt = request.numOutputTokens + tokens.length;
        return tokens;
      }
      if (j === drafts.length || result.token !== drafts[j]) return tokens;
    }
  }

  /**
   * Drafts for this step: for every running request that decodes, up to the
   * k its DraftLength asks for; none while disable_by_batch_size or more
   * requests run.
   */
  #propose(): ReadonlyMap<string, readonly number[]> {
    const drafts = new Map<string, number[]>();
    this.#draftQ.clear();
    const spec = this.#spec;
    if (spec === null || this.scheduler.numRunning >= spec.config.disableByBatchSize) return drafts;
    const seqs: DraftRequest[] = [];
    const p = spec.proposer;
    /** Constrained requests' matchers, and how far their drafts advanced them (rolled back below). */
    const advanced: { matcher: ConstraintMatcher; n: number }[] = [];
    for (const id of this.scheduler.runningRequestIds()) {
      const request = this.scheduler.getRequest(id)!;
      if (request.numTokens - request.numComputedTokens !== 1) continue;
      const st = request.state!;
      if (st.matcher !== null && !st.matcher.ready) continue; // held back this step (its host compiles): no mask to draft under
      const k = st.draftLength!.next();
      if (k <= 0) continue;
      const seq: DraftRequest = { requestId: id, tokens: request.allTokenIds, k, penalties: { numPromptTokens: request.numPromptTokens, ...st.sampling.params }, sampling: { params: st.sampling.params, seed: st.sampling.seed } };
      if (st.matcher !== null && "proposeBatch" in p) {
        const a = { matcher: st.matcher, n: 0 };
        advanced.push(a);
        seq.grammar = { nextMask: (drafted) => this.#draftMask(st, a, drafted) };
      }
      seqs.push(seq);
    }
    if (seqs.length === 0) return drafts;
    let proposed: number[][];
    try {
      proposed = "proposeBatch" in p ? p.proposeBatch(seqs) : seqs.map((s) => p.propose(s.tokens, s.k));
    } finally {
      for (const a of advanced) if (a.n > 0) a.matcher.rollback(a.n);
    }
    seqs.forEach(({ requestId, k }, i) => {
      const d = proposed[i] ?? [];
      if (d.length === 0) return;
      drafts.set(requestId, d.length > k ? d.slice(0, k) : d);
      const q = "distributions" in p ? p.distributions?.(requestId) : undefined;
      if (q !== undefined && q.length >= Math.min(d.length, k)) this.#draftQ.set(requestId, q.slice(0, k));
    });
    return drafts;
  }

  /**
   * DraftGrammar.nextMask for a constrained request: its matcher advanced over
   * `drafted` (`a.n` counts the tokens accepted so far this step; #propose
   * rolls them back), then the mask its next row is verified under
   * (#sampleMask). null once the grammar ended or refused a draft.
   */
  #draftMask(st: RequestState, a: { matcher: ConstraintMatcher; n: number }, drafted: readonly number[]): Int32Array | null {
    for (; a.n < drafted.length; a.n++) if (a.matcher.isTerminated || !a.matcher.accept(drafted[a.n]!)) return null;
    if (a.matcher.isTerminated) return null;
    const mask = new Int32Array(this.#mask.length);
    try {
      a.matcher.fillNextMask(mask);
    } catch {
      return null; // its grammar host failed: the step's own masks fail the request alone
    }
    return this.#sampleMask(st, mask, mask);
  }

  /**
   * The mask a constrained request samples under, from its grammar's `mask`:
   * with ignore_eos, the model's EOS ids are dropped while the grammar allows
   * any other token, so the request goes on inside its grammar (to max_tokens)
   * rather than end where the grammar may; where EOS is all the grammar
   * allows, it must end, and the request stops there ("stop"). Returns `mask`
   * itself when nothing changes, else `into` (which may be `mask`) changed.
   */
  #sampleMask(st: RequestState, mask: Int32Array, into: Int32Array): Int32Array {
    if (!st.sampling.params.ignoreEos || this.#eos.length === 0) return mask;
    let eos = false;
    for (const t of this.#eos) eos ||= t >> 5 < mask.length && ((mask[t >> 5]! >>> (t & 31)) & 1) === 1;
    if (!eos) return mask;
    let other = false;
    for (let w = 0; w < mask.length && !other; w++) {
      let bits = mask[w]!;
      for (const t of this.#eos) if (t >> 5 === w) bits &= ~(1 << (t & 31));
      other = bits !== 0;
    }
    if (!other) return mask;
    if (into !== mask) into.set(mask);
    for (const t of this.#eos) if (t >> 5 < into.length) into[t >> 5]! &= ~(1 << (t & 31));
    return into;
  }

  /** Whether a new client request would go beyond the waiting-queue bound (parked requests wait too). */
  #queueFull(clientRequestId: string): boolean {
    const waiting = new Set(this.#parked.map((p) => p.request.clientRequestId));
    if (waiting.has(clientRequestId) || this.scheduler.isWaitingClientRequest(clientRequestId)) return false;
    for (const p of waiting) if (this.scheduler.isWaitingClientRequest(p)) waiting.delete(p);
    return this.scheduler.numWaitingClientRequests + waiting.size >= this.scheduler.maxWaitingRequests;
  }

  /** Whether `requestId` is live with prompt tokens still to compute. */
  #prefilling(requestId: string): boolean {
    const r = this.scheduler.getRequest(requestId);
    return r !== undefined && !r.isFinished && r.numComputedTokens < r.numPromptTokens;
  }

  /** Queues the parked requests whose sibling's prompt KV is computed (or that no longer has one to wait for). */
  #unpark(): void {
    if (this.#parked.length === 0) return;
    const still: { request: Request<RequestState>; after: string }[] = [];
    for (const p of this.#parked) {
      if (this.#prefilling(p.after)) still.push(p);
      else if (!this.scheduler.addRequest(p.request)) {
        this.#pending.push(this.#finishOutput(p.request, "error", `the waiting queue is full (${this.scheduler.maxWaitingRequests} requests)`));
      }
    }
    this.#parked = still;
  }

  /** Counters, gauges and histograms for the metrics endpoint. */
  stats(): EngineMetricsSnapshot {
    const s = this.scheduler.stats();
    const pool = this.kvCacheManager.pool;
    const m = this.metrics;
    return {
      numRequestsRunning: s.numRunning,
      numRequestsWaiting: s.numWaiting + this.#parked.length,
      kvCacheUsage: s.kvCacheUsage,
      numBlocks: pool.numBlocks,
      numFreeBlocks: pool.numFreeBlocks,
      prefixCacheQueries: s.prefixCache.queries,
      prefixCacheHits: s.prefixCache.hits,
      numPreemptions: s.numPreemptions,
      promptTokens: m.promptTokens,
      generationTokens: m.generationTokens,
      requestSuccess: { ...m.requestSuccess },
      numFailedForwards: m.numFailedForwards,
      timeToFirstToken: m.timeToFirstToken.snapshot(),
      interTokenLatency: m.interTokenLatency.snapshot(),
      e2eRequestLatency: m.e2eRequestLatency.snapshot(),
      specDecode: m.specDecode?.snapshot() ?? null,
    };
  }

  /** The scheduler's stop callback: the token goes through the request's StopChecker. Never throws. */
  #stopCheck(request: Request<RequestState>, token: number): StopDecision | null {
    const st = request.state!;
    let u = this.#pushStop(st, token);
    if (u === null && st.grammarEndAt !== null && request.numOutputTokens >= st.grammarEndAt) u = st.finish = { delta: "", finished: true, finishReason: "stop", stopReason: null };
    if (u === null) return null;
    return u.stopReason === null ? { reason: u.finishReason! } : { reason: u.finishReason!, stopReason: u.stopReason };
  }

  /** Feeds one output token to the StopChecker; returns its update when it finished the request. */
  #pushStop(st: RequestState, token: number): StopUpdate | null {
    st.pushed++;
    try {
      const u = st.stop.push(token);
      st.text += u.delta;
      if (!u.finished) return null;
      st.finish = u;
      return u;
    } catch (e) {
      st.error = `detokenizing token ${token} failed: ${(e as Error).message}`;
      return { delta: "", finished: true, finishReason: "stop", stopReason: null };
    }
  }

  #output(result: RequestOutput<RequestState>, now: number): EngineOutput {
    const request = result.request;
    const st = request.state!;
    // The scheduler's own length check (maxTokens, maxModelLen) finishes a request
    // without asking the StopChecker: feed it the tokens it has not seen.
    while (st.pushed < request.numOutputTokens && st.finish === null && st.error === null) {
      this.#pushStop(st, request.outputTokenIds[st.pushed]!);
    }
    const n = result.newTokenIds.length;
    const m = this.metrics;
    m.generationTokens += n;
    if (n > 0) {
      if (st.firstTokenTime === null) {
        st.firstTokenTime = now;
        m.promptTokens += request.numPromptTokens;
        m.timeToFirstToken.observe((now - st.arrivalTime) / 1000);
      } else {
        m.interTokenLatency.observe((now - st.lastTokenTime) / 1000 / n);
      }
      st.lastTokenTime = now;
    }
    let reason: EngineFinishReason | null = null;
    if (result.finishReason !== null) reason = st.error !== null ? "error" : (st.finish?.finishReason ?? result.finishReason);
    const out: EngineOutput = {
      requestId: request.requestId,
      text: st.text,
      tokenIds: [...result.newTokenIds],
      logprobs: st.logprobs === null ? null : st.logprobs.slice(0, n), // a verified run sampled past a stop: those are dropped
      finishReason: reason,
      stopReason: reason === null || reason === "error" ? null : (st.finish?.stopReason ?? request.stopReason),
      error: reason === "error" ? st.error : null,
      numPromptTokens: request.numPromptTokens,
      numOutputTokens: request.numOutputTokens,
      numCachedTokens: Math.max(0, request.numCachedTokens),
    };
    st.text = "";
    st.logprobs = null;
    if (reason !== null) this.#recordFinish(request, reason, now);
    return out;
  }

  /** The last output of a request finished outside a normal step (abort, error). */
  #finishOutput(request: Request<RequestState>, reason: "abort" | "error", error: string | null): EngineOutput {
    this.#recordFinish(request, reason, this.#now());
    return {
      requestId: request.requestId,
      text: "",
      tokenIds: [],
      logprobs: null,
      finishReason: reason,
      stopReason: null,
      error,
      numPromptTokens: request.numPromptTokens,
      numOutputTokens: request.numOutputTokens,
      numCachedTokens: Math.max(0, request.numCachedTokens),
    };
  }

  #recordFinish(request: Request<RequestState>, reason: EngineFinishReason, now: number): void {
    const st = request.state!;
    st.matcher?.dispose();
    const p = this.#spec?.proposer;
    if (p !== undefined && "release" in p) p.release(request.requestId);
    this.metrics.requestSuccess[reason]++;
    this.metrics.e2eRequestLatency.observe((now - st.arrivalTime) / 1000);
  }

  /** A forward threw: every request holding blocks fails, the prefix cache is reset, waiting requests go on. */
  #failForward(e: unknown, outputs: EngineOutput[]): void {
    this.metrics.numFailedForwards++;
    const message = `forward failed: ${e instanceof Error ? e.message : String(e)}`;
    for (const id of this.scheduler.runningRequestIds()) {
      const request = this.scheduler.getRequest(id)!;
      this.scheduler.finishRequest(id, "abort");
      outputs.push(this.#finishOutput(request, "error", message));
    }
    this.scheduler.updateFromOutput(new Map());
    this.kvCacheManager.resetPrefixCache();
  }
}

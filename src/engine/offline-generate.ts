/**
 * One request through the serving path: Scheduler + KvCacheManager →
 * buildForwardBatch → ModelRunner.forward → Sampler → StopChecker, step by
 * step — the loop of the seed xFasterTransformer's example (`while
 * (!model.isDone()) model.generate()`), on the same parts the server runs
 * (so `kvflash generate` exercises them: chunked prefill when the prompt is
 * longer than the step budget, block allocation, the stop logic).
 *
 *   const model = loadModel(rt, dir);
 *   const params = resolveSamplingParams({ temperature: 0, maxTokens: 32 }, model.config.vocabSize, samplingDefaults(model.generation));
 *   const r = generate({ runner: model.runner, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds,
 *                        promptIds: model.tokenizer.encode("Hello"), params, onText: (t) => process.stdout.write(t) });
 *   r.ids, r.text, r.logprobs, r.finishReason, r.prefill, r.decode
 *
 * With an asynchronous runner (the WebGPU one) the same loop awaits each
 * forward, and generate / promptLogits / runRequest return Promises; with the
 * CPU decoder they stay synchronous.
 */
import { ArgumentError, show } from "../errors.js";
import type { ModelRunner, StepResult } from "../model/model-runner.js";
import { checkInt } from "../tensor/check.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import { buildForwardBatch } from "./forward-batch-builder.js";
import { resolveEngineConfig } from "./engine-config.js";
import { KvCacheManager } from "./kv-cache-manager.js";
import { Request } from "./request.js";
import type { Runtime } from "../runtime/runtime.js";
import { Sampler, SamplingState, type TokenLogprob, argmax, createSampler } from "./sampler.js";
import type { ResolvedSamplingParams } from "./sampling-params.js";
import { Scheduler, type StopDecision } from "./scheduler.js";
import { type StopFinishReason, StopChecker, type StopUpdate } from "./stop.js";

/** Wall time of a phase and the tokens it handled. */
export interface PhaseTiming {
  tokens: number;
  ms: number;
  /** tokens / seconds (0 when nothing ran). */
  tokPerS: number;
}

export interface StepLoopOptions {
  /** Tokens per engine step (vLLM's max_num_batched_tokens); a longer prompt is prefilled in chunks. Default: EngineConfig's for one sequence (512). */
  maxNumBatchedTokens?: number;
}

export interface GenerateOptions<R extends ModelRunner = ModelRunner> extends StepLoopOptions {
  /** The model; with an asynchronous runner (WebGPU) generate returns a Promise. */
  runner: R;
  tokenizer: Tokenizer;
  /** ≥ 1 ids, each < runner.vocabSize; prompt + maxTokens are capped to runner.maxModelLen. */
  promptIds: readonly number[];
  /** resolveSamplingParams(...) of the request. */
  params: ResolvedSamplingParams;
  /** The model's EOS ids (LoadedModel.eosTokenIds). */
  eosTokenIds?: readonly number[];
  /** Each piece of output text as it is decided (stop strings held back until they cannot match). */
  onText?: (delta: string) => void;
  /** A runtime whose memory holds the sampler's scratch for the call (wasm passes: EngineOptions.runtime). Default: JavaScript passes. */
  runtime?: Runtime;
}

export interface GenerateResult {
  /** Generated ids, the stop token included (as vLLM's token_ids). */
  ids: number[];
  text: string;
  /** log-softmax of the raw logits at each generated id, or null unless params.logprobs is set (≥ 0). */
  logprobs: number[] | null;
  /** params.logprobs best alternatives per generated token, or null when not asked for. */
  topLogprobs: TokenLogprob[][] | null;
  finishReason: StopFinishReason;
  /** The stop string or stop token id that ended it (null for EOS and "length"). */
  stopReason: string | number | null;
  promptTokens: number;
  /** From the start to the first sampled token (every prefill step). */
  prefill: PhaseTiming;
  /** The steps after the first token: one token each. */
  decode: PhaseTiming;
}

function phase(tokens: number, ms: number): PhaseTiming {
  return { tokens, ms, tokPerS: ms > 0 ? (tokens * 1000) / ms : 0 };
}

/** What one engine step of a single request did. */
export interface StepInfo {
  /** New tokens the step ran (a prompt chunk, or 1 when decoding). */
  tokens: number;
  /** Wall time of the step: schedule, batch, forward, pick, update. */
  ms: number;
  /** Whether it sampled a token. */
  sampled: boolean;
}

export interface RunRequestOptions extends StepLoopOptions {
  /** Most tokens to generate. */
  maxTokens: number;
  /** Turns a sampled row's logits (f32 [V], valid during the call) into the next token, and says whether to stop after it. */
  pick: (logits: Float32Array) => { token: number; stop: StopDecision | null };
  /** Called after every step. */
  onStep?: (step: StepInfo) => void;
}

/**
 * The engine loop for one request (what generate, promptLogits and the model
 * benchmark run): a Scheduler and KvCacheManager over the runner's KV cache
 * geometry, each step buildForwardBatch → forward → pick → updateFromOutput,
 * until the request finishes. The prompt is not validated here.
 */
export function runRequest<R extends ModelRunner>(runner: R, promptIds: readonly number[], options: RunRequestOptions): StepResult<R, RequestTiming> {
  const kv = new KvCacheManager({ numBlocks: runner.kvCache.numBlocks, blockSize: runner.kvCache.blockSize, enablePrefixCaching: false });
  let decision: StopDecision | null = null;
  const config = resolveEngineConfig({ maxNumSeqs: 1, ...(options.maxNumBatchedTokens === undefined ? {} : { maxNumBatchedTokens: options.maxNumBatchedTokens }) });
  const scheduler = new Scheduler({
    kvCacheManager: kv,
    maxNumBatchedTokens: config.maxNumBatchedTokens,
    maxNumSeqs: config.maxNumSeqs,
    maxModelLen: runner.maxModelLen,
    stopChecker: () => decision,
  });
  const request = new Request({ requestId: "generate", promptTokenIds: promptIds, maxTokens: options.maxTokens });
  scheduler.addRequest(request);
  const start = performance.now();
  let firstTokenMs = -1;
  /** The step after its forward: pick the token, update the scheduler. */
  const finish = (t0: number, tokens: number, logits: Float32Array): void => {
    const sampled = new Map<string, number[]>();
    if (logits.length > 0) {
      const next = options.pick(logits.subarray(0, runner.vocabSize));
      decision = next.stop;
      sampled.set(request.requestId, [next.token]);
      if (firstTokenMs < 0) firstTokenMs = performance.now() - start;
    }
    scheduler.updateFromOutput(sampled);
    options.onStep?.({ tokens, ms: performance.now() - t0, sampled: logits.length > 0 });
  };
  // Synchronous while the runner is; an asynchronous forward continues the loop when it resolves.
  const loop = (): RequestTiming | Promise<RequestTiming> => {
    while (scheduler.hasUnfinishedRequests) {
      const t0 = performance.now();
      const step = scheduler.schedule();
      const logits = runner.forward(buildForwardBatch(step, kv.blockSize));
      if (logits instanceof Promise) {
        return logits.then((l) => {
          finish(t0, step.numScheduledTokens, l);
          return loop();
        });
      }
      finish(t0, step.numScheduledTokens, logits);
    }
    return { firstTokenMs, endMs: performance.now() - start };
  };
  return loop() as StepResult<R, RequestTiming>;
}

/** When runRequest's first token came and when it ended, in ms from its start. */
export interface RequestTiming {
  firstTokenMs: number;
  endMs: number;
}

/** `fn(value)`, now when `value` is not a Promise, else when it resolves. */
function then<T, U>(value: T | Promise<T>, fn: (v: T) => U): U | Promise<U> {
  return value instanceof Promise ? value.then(fn) : fn(value);
}

function checkPrompt(promptIds: readonly number[], runner: ModelRunner): void {
  if (!Array.isArray(promptIds) && !(promptIds instanceof Int32Array)) throw new ArgumentError("promptIds", `must be an array of token ids, got ${show(promptIds)}`);
  if (promptIds.length === 0) throw new ArgumentError("promptIds", "must hold at least one token, got 0");
  if (promptIds.length >= runner.maxModelLen) {
    throw new ArgumentError("promptIds", `has ${promptIds.length} tokens, but maxModelLen ${runner.maxModelLen} leaves room for at most ${runner.maxModelLen - 1}`);
  }
  promptIds.forEach((id, i) => checkInt(`promptIds[${i}]`, id, { min: 0, max: runner.vocabSize - 1 }));
}

/** Generates one completion of `promptIds` (see the module comment). */
export function generate<R extends ModelRunner>(options: GenerateOptions<R>): StepResult<R, GenerateResult> {
  const { runner, promptIds, params } = options;
  checkPrompt(promptIds, runner);
  // The model's length limit becomes the stop checker's, so text is flushed when it is reached.
  const maxTokens = Math.min(params.maxTokens, runner.maxModelLen - promptIds.length);
  const sampler = createSampler(runner.vocabSize, options.runtime);
  let result: GenerateResult | Promise<GenerateResult>;
  try {
    result = generateWith(sampler, options, maxTokens);
  } catch (e) {
    sampler.free();
    throw e;
  }
  if (!(result instanceof Promise)) {
    sampler.free();
    return result as StepResult<R, GenerateResult>;
  }
  return result.finally(() => sampler.free()) as StepResult<R, GenerateResult>;
}

function generateWith(sampler: Sampler, options: GenerateOptions, maxTokens: number): GenerateResult | Promise<GenerateResult> {
  const { runner, tokenizer, promptIds, params } = options;
  const state = new SamplingState(params, [...promptIds]);
  const stop = new StopChecker(tokenizer, { ...params, maxTokens, eosTokenIds: options.eosTokenIds ?? [], promptIds: [...promptIds] });
  const logprobs: number[] | null = params.logprobs !== null ? [] : null;
  const topLogprobs: TokenLogprob[][] | null = params.logprobs !== null && params.logprobs > 0 ? [] : null;
  let last: StopUpdate | null = null;

  // Rows past the tokenizer's vocabulary (checkpoints pad vocab_size) have no text: never sample them.
  const textVocab = Math.min(tokenizer.vocabSize, runner.vocabSize);
  const pick = (logits: Float32Array) => {
    logits.fill(-Infinity, textVocab);
    const r = sampler.sample(state, logits);
    if (logprobs && r.logprob !== null) logprobs.push(r.logprob);
    if (topLogprobs) topLogprobs.push(r.topLogprobs ?? []);
    last = stop.push(r.token);
    if (last.delta) options.onText?.(last.delta);
    return { token: r.token, stop: last.finished ? { reason: last.finishReason!, ...(last.stopReason === null ? {} : { stopReason: last.stopReason }) } : null };
  };
  return then(runRequest(runner, promptIds, { ...options, maxTokens, pick }), (t: RequestTiming): GenerateResult => {
    const final = last as StopUpdate | null;
    const generated = stop.ids.length;
    return {
      ids: [...stop.ids],
      text: stop.text,
      logprobs,
      topLogprobs,
      finishReason: final?.finishReason ?? "length",
      stopReason: final?.stopReason ?? null,
      promptTokens: promptIds.length,
      prefill: phase(promptIds.length, t.firstTokenMs),
      decode: phase(Math.max(0, generated - 1), t.endMs - t.firstTokenMs),
    };
  });
}

/**
 * The logits of the last prompt position (f32 [V], a copy), computed through
 * the same scheduler path as generate (chunked prefill for long prompts).
 */
export function promptLogits<R extends ModelRunner>(runner: R, promptIds: readonly number[], options: StepLoopOptions = {}): StepResult<R, Float32Array> {
  checkPrompt(promptIds, runner);
  let out: Float32Array | null = null;
  const pick = (logits: Float32Array) => {
    out = logits.slice();
    return { token: argmax(out), stop: null };
  };
  return then(runRequest(runner, promptIds, { ...options, maxTokens: 1, pick }), () => out!) as StepResult<R, Float32Array>;
}

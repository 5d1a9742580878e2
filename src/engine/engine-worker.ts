/**
 * The engine loop, in its own worker thread so the HTTP thread answers while
 * forwards run. The worker owns the runtime (which starts its kernel workers),
 * the model and the Engine.
 *
 * Between two steps the event loop runs (each step is scheduled with
 * setImmediate), so add / abort / stats messages are handled at step
 * boundaries: an abort frees its blocks before the next schedule(). Each
 * step's outputs go back in one message. Idle, the worker just waits for
 * messages. With an asynchronous runner (WebGPU) the event loop also runs
 * while a step's forward is on the GPU: adds and aborts then wait for the
 * step to settle (the engine is never changed under a step).
 *
 * A constrained request's grammar is compiled (GrammarBackend.prepare) before
 * it is added: first in the backend's sandbox worker (time budget, memory
 * cap), then in its grammar host worker, where the matchers live, while steps
 * go on; cached by its text, so a grammar seen before adds nothing. A request
 * aborted while "compiling" is dropped when its compile ends. When every
 * request waits for its grammar host's compile (Engine.heldForGrammar), the
 * loop sleeps until one can run instead of spinning.
 *
 * A pooling model (task "embed": an encoder, a cross-encoder, or a decoder
 * run as an embedder) is served by an EmbedEngine instead (embed-worker.ts):
 * the same step loop, "embed" messages in, "embedded" out.
 */
import { parentPort, workerData } from "node:worker_threads";
import { ArgumentError } from "../errors.js";
import { type Runtime, createRuntime } from "../runtime/runtime.js";
import { GrammarBackend, GrammarRejectedError } from "../structured/grammar-backend.js";
import { Engine, type EngineOutput, type EngineRequest } from "./engine.js";
import { resolveEngineConfig } from "./engine-config.js";
import type { LoadProgressInfo, EngineModel, ModelLoadOptions, ModelLoaderModule } from "./loader-module.js";
import { type DraftModelProposer, createDraftProposer } from "./draft-model-proposer.js";
import type { SyncModelRunner } from "../model/model-runner.js";
import type { EngineWorkerConfig, FromWorker, ToWorker } from "./protocol.js";
import type { EmbedEngine } from "./embed-engine.js";
import { EMBEDDING_MODEL_MESSAGE, loadEmbedEngine } from "./embed-worker.js";
import { modelRuntimeOptions } from "../model/gguf/kquant-source.js";

const port = parentPort;
if (port === null) throw new Error("engine-worker.js must run in a worker thread (EngineClient.start starts it)");
const config = workerData as EngineWorkerConfig;
const post = (m: FromWorker): void => port.postMessage(m);

let rt: Runtime | null = null;
let model: EngineModel | null = null;
/** The draft model of a draft_model speculative config (EngineWorkerConfig.draft), else null. */
let draftModel: EngineModel | null = null;
let engine: Engine | null = null;
/** The step loop of an embedding model (then engine stays null). */
let embedder: EmbedEngine | null = null;
let grammar: GrammarBackend | null = null;
/** Why there is no grammar backend (XGrammar failed to load for this tokenizer), for the requests that need one. */
let grammarUnavailable: string | null = null;
/** Requests whose grammar is compiling (not yet added); an abort removes its id, and the request is then dropped. */
const compiling = new Set<string>();
let stepScheduled = false;
let stopped = false;
/** An asynchronous step (the WebGPU runner's forward) is running: adds and aborts wait in `deferred` until it settles. */
let inFlight = false;
const deferred: (() => void)[] = [];

/** Runs `fn` now, or after the step in flight (the engine is not touched during an asynchronous step). */
function whenIdle(fn: () => void): void {
  if (inFlight) deferred.push(fn);
  else fn();
}

function scheduleStep(): void {
  if (stepScheduled || stopped || (engine === null && embedder === null)) return;
  stepScheduled = true;
  setImmediate(step);
}

function step(): void {
  stepScheduled = false;
  if (stopped) return;
  if (embedder !== null) {
    for (const output of embedder.step()) post({ type: "embedded", output });
    if (embedder.hasUnfinishedRequests) scheduleStep();
    return;
  }
  if (engine === null) return;
  let result: EngineOutput[] | Promise<EngineOutput[]>;
  try {
    result = engine.step();
  } catch (e) {
    return fatal(e);
  }
  if (!(result instanceof Promise)) return stepDone(result);
  inFlight = true;
  result.then(stepDone, fatal);
}

function stepDone(outputs: EngineOutput[]): void {
  inFlight = false;
  if (outputs.length > 0) post({ type: "outputs", outputs });
  for (const fn of deferred.splice(0)) fn();
  if (engine === null || !engine.hasUnfinishedRequests) return;
  if (engine.heldForGrammar) void engine.whenGrammarReady().then(scheduleStep);
  else scheduleStep();
}

/** A broken engine invariant (not a failed forward, which the engine contains): nothing can be trusted now. */
function fatal(e: unknown): void {
  inFlight = false;
  post({ type: "fatal", message: `engine step failed: ${(e as Error).stack ?? String(e)}` });
  stopped = true;
}

function handle(m: ToWorker): void {
  switch (m.type) {
    case "add": {
      const requests = m.requests;
      if (embedder !== null) {
        for (const { requestId } of requests) post({ type: "rejected", requestId, reason: "invalid", message: EMBEDDING_MODEL_MESSAGE, param: "model" });
        return;
      }
      const specs = requests.flatMap((r) => (r.grammar === undefined ? [] : [r.grammar]));
      if (specs.length === 0 || engine === null) return whenIdle(() => addGroup(requests));
      const rejectAll = (message: string, param: string): void => {
        for (const { requestId } of requests) post({ type: "rejected", requestId, reason: "invalid", message, param });
      };
      if (grammar === null) return rejectAll(`structured output is unavailable: ${grammarUnavailable ?? "no grammar backend"}`, "grammar");
      // "compiling": the request waits here, off the step loop, while the engine steps for everyone else.
      for (const { requestId } of requests) compiling.add(requestId);
      Promise.all(specs.map((spec) => grammar!.prepare(spec)))
        .then(
          () => {
            if (stopped) return;
            if (requests.some((r) => !compiling.has(r.requestId))) return rejectAll("the request was aborted while its grammar compiled", "grammar"); // the client left
            whenIdle(() => addGroup(requests));
          },
          (e: unknown) => {
            if (e instanceof ArgumentError) rejectAll((e as Error).message.slice(e.argument.length + 1), e.argument);
            else rejectAll(e instanceof GrammarRejectedError ? e.message : `the grammar does not compile: ${(e as Error).message}`, "grammar");
          },
        )
        .finally(() => requests.forEach((r) => compiling.delete(r.requestId)));
      return;
    }
    case "embed": {
      const { requestId } = m.request;
      if (embedder === null) return post({ type: "rejected", requestId, reason: "invalid", message: "the model does not support the Embeddings API (it is a generative model)", param: "model" });
      try {
        if (embedder.add(m.request) === "queue_full") return post({ type: "rejected", requestId, reason: "queue_full", message: `the waiting queue is full (${embedder.maxWaitingRequests} requests)`, param: null });
      } catch (e) {
        return post({ type: "rejected", requestId, reason: "invalid", message: (e as Error).message, param: e instanceof ArgumentError ? e.argument : null });
      }
      post({ type: "accepted", requestId });
      scheduleStep();
      return;
    }
    case "abort":
      if (embedder?.abort(m.requestId)) return;
      if (compiling.delete(m.requestId)) return;
      whenIdle(() => {
        if (engine?.abort(m.requestId)) scheduleStep();
      });
      return;
    case "stats":
      if (embedder !== null) post({ type: "stats", seq: m.seq, stats: embedder.stats() });
      else if (engine !== null) post({ type: "stats", seq: m.seq, stats: engine.stats() });
      return;
    case "shutdown":
      whenIdle(() => void shutdown()); // never dispose a runner under a running forward
      return;
  }
}

/** Admits one client request's engine requests together, or none (main's group rule); grammars already prepared. */
function addGroup(requests: EngineRequest[]): void {
  const ids = requests.map((r) => r.requestId);
  const rejectAll = (reason: "queue_full" | "invalid", message: string, param: string | null): void => {
    for (const requestId of ids) post({ type: "rejected", requestId, reason, message, param });
  };
  if (engine === null) return rejectAll("invalid", "the model is not loaded yet", null);
  // The queue counts client requests: the group takes one place, and its requests share one clientRequestId.
  const max = engine.scheduler.maxWaitingRequests;
  const full = (): void => rejectAll("queue_full", `the waiting queue is full (${max} requests)`, null);
  const clientRequestId = requests[0]?.clientRequestId ?? ids[0]!;
  const added: string[] = [];
  for (const request of requests) {
    try {
      if (engine.addRequest({ ...request, clientRequestId }) === "queue_full") return full(); // only the first can: then the group has its place
      added.push(request.requestId);
    } catch (e) {
      for (const id of added) engine.abort(id);
      return rejectAll("invalid", (e as Error).message, e instanceof ArgumentError ? e.argument : null);
    }
  }
  for (const requestId of ids) post({ type: "accepted", requestId });
  scheduleStep();
}

async function shutdown(): Promise<void> {
  stopped = true;
  try {
    engine?.dispose();
    model?.runner.dispose();
    draftModel?.runner.dispose();
    embedder?.model.dispose();
    await grammar?.dispose();
  } finally {
    await rt?.dispose();
    port!.close();
  }
}

/** Loads the draft model beside the target (`options.source` is the draft's) and pairs them (createDraftProposer checks the vocabulary). */
async function loadDraft(load: ModelLoaderModule["loadEngineModel"], options: ModelLoadOptions, target: EngineModel, sampled: boolean): Promise<DraftModelProposer> {
  draftModel = await load(rt!, options, () => {});
  const runner = draftModel.runner as SyncModelRunner; // loaded with device "cpu": the decoder's forward is synchronous (the proposer checks each result)
  return createDraftProposer({ name: config.load.source.path, tokenizer: target.tokenizer, runner: target.runner }, { name: options.source.path, tokenizer: draftModel.tokenizer, runner }, { sampled });
}

async function load(): Promise<void> {
  const start = performance.now();
  rt = await createRuntime(modelRuntimeOptions(config.load, config.load.source));
  let lastPost = 0;
  const onProgress = (p: LoadProgressInfo): void => {
    const now = performance.now();
    if (now - lastPost < 50 && p.done < p.total) return;
    lastPost = now;
    post({ type: "progress", progress: { done: p.done, total: p.total } });
  };
  if (config.task === "embed" || config.task === "score") {
    const loaded = await loadEmbedEngine(rt, config, onProgress);
    embedder = loaded.engine;
    post({ type: "ready", info: { ...loaded.info, loadSeconds: (performance.now() - start) / 1000 } });
    return;
  }
  const loader = (await import(config.loader)) as Partial<ModelLoaderModule>;
  if (typeof loader.loadEngineModel !== "function") throw new ArgumentError("loader", `module ${config.loader} does not export a loadEngineModel function`);
  const settings = resolveEngineConfig(config.engine); // once, before the runner sizes its step buffers from it
  const { maxNumSeqs, maxNumBatchedTokens } = settings;
  model = await loader.loadEngineModel(rt, { maxNumSeqs, maxNumBatchedTokens, ...config.load }, onProgress);
  const proposer = config.draft === undefined ? null : await loadDraft(loader.loadEngineModel, { maxNumSeqs, maxNumBatchedTokens, ...config.load, source: config.draft, device: "cpu" }, model, settings.speculativeConfig?.method === "draft_model" && settings.speculativeConfig.draftSampling === "sampled");
  try {
    grammar = await GrammarBackend.create({ tokenizer: model.tokenizer, vocabSize: model.runner.vocabSize, stopTokenIds: model.eosTokenIds });
  } catch (e) {
    grammarUnavailable = `XGrammar cannot load this tokenizer: ${(e as Error).message}`;
  }
  engine = new Engine({ runner: model.runner, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds, runtime: rt, ...settings, ...(grammar === null ? {} : { grammar }), ...(proposer === null ? {} : { proposer }) });
  const { numBlocks, blockSize } = model.runner.kvCache;
  post({
    type: "ready",
    info: {
      maxModelLen: engine.maxModelLen,
      vocabSize: model.runner.vocabSize,
      numBlocks,
      blockSize,
      maxNumSeqs: engine.scheduler.maxNumSeqs,
      threads: rt.threads,
      kernels: rt.kernels,
      int8Dot: rt.int8Dot,
      int8DotLowering: rt.int8DotLowering,
      ...(model.placement === undefined ? {} : { placement: model.placement }),
      loadSeconds: (performance.now() - start) / 1000,
    },
  });
}

port.on("message", (m: ToWorker) => {
  if (!stopped || m.type === "shutdown") handle(m);
});
load().catch((e: unknown) => {
  post({ type: "load_failed", message: e instanceof Error ? e.message : String(e), ...(e instanceof ArgumentError ? { argument: e.argument } : {}) });
});

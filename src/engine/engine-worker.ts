/**
 * The engine loop, in its own worker thread so the HTTP thread answers while
 * forwards run. The worker owns the runtime (which starts its kernel workers),
 * the model and the Engine.
 *
 * Between two steps the event loop runs (each step is scheduled with
 * setImmediate), so add / abort / stats messages are handled at step
 * boundaries: an abort frees its blocks before the next schedule(). Each
 * step's outputs go back in one message. Idle, the worker just waits for
 * messages.
 */
import { parentPort, workerData } from "node:worker_threads";
import { ArgumentError } from "../errors.js";
import { type Runtime, createRuntime } from "../runtime/runtime.js";
import { DEFAULT_MAX_NUM_SEQS, Engine, defaultMaxNumBatchedTokens } from "./engine.js";
import type { LoadProgressInfo, EngineModel, ModelLoaderModule } from "./model-loader.js";
import type { EngineWorkerConfig, FromWorker, ToWorker } from "./protocol.js";

const port = parentPort;
if (port === null) throw new Error("engine-worker.js must run in a worker thread (EngineClient.start starts it)");
const config = workerData as EngineWorkerConfig;
const post = (m: FromWorker): void => port.postMessage(m);

let rt: Runtime | null = null;
let model: EngineModel | null = null;
let engine: Engine | null = null;
let stepScheduled = false;
let stopped = false;

function scheduleStep(): void {
  if (stepScheduled || stopped || engine === null) return;
  stepScheduled = true;
  setImmediate(step);
}

function step(): void {
  stepScheduled = false;
  if (stopped || engine === null) return;
  try {
    const outputs = engine.step();
    if (outputs.length > 0) post({ type: "outputs", outputs });
  } catch (e) {
    // A broken engine invariant (not a failed forward, which the engine contains): nothing can be trusted now.
    post({ type: "fatal", message: `engine step failed: ${(e as Error).stack ?? String(e)}` });
    stopped = true;
    return;
  }
  if (engine.hasUnfinishedRequests) scheduleStep();
}

function handle(m: ToWorker): void {
  switch (m.type) {
    case "add": {
      const ids = m.requests.map((r) => r.requestId);
      const rejectAll = (reason: "queue_full" | "invalid", message: string, param: string | null): void => {
        for (const requestId of ids) post({ type: "rejected", requestId, reason, message, param });
      };
      if (engine === null) return rejectAll("invalid", "the model is not loaded yet", null);
      // The queue counts engine requests: a client request of k prompts needs k free places.
      const max = engine.scheduler.maxWaitingRequests;
      if (ids.length > 1 && ids.length > max) return rejectAll("invalid", `this request's ${ids.length} prompts are more than the waiting queue holds (${max} requests)`, "prompt");
      const full = (): void => rejectAll("queue_full", `the waiting queue is full (${max} requests${ids.length > 1 ? `; this request needs ${ids.length} places` : ""})`, null);
      if (ids.length > 1 && engine.scheduler.numWaiting + ids.length > max) return full();
      const added: string[] = [];
      for (const request of m.requests) {
        try {
          if (engine.addRequest(request) === "queue_full") return full(); // only a single request gets here: a group was checked above
          added.push(request.requestId);
        } catch (e) {
          for (const id of added) engine.abort(id);
          return rejectAll("invalid", (e as Error).message, e instanceof ArgumentError ? e.argument : null);
        }
      }
      for (const requestId of ids) post({ type: "accepted", requestId });
      scheduleStep();
      return;
    }
    case "abort":
      if (engine?.abort(m.requestId)) scheduleStep();
      return;
    case "stats":
      if (engine !== null) post({ type: "stats", seq: m.seq, stats: engine.stats() });
      return;
    case "shutdown":
      void shutdown();
      return;
  }
}

async function shutdown(): Promise<void> {
  stopped = true;
  try {
    model?.runner.dispose();
  } finally {
    await rt?.dispose();
    port!.close();
  }
}

async function load(): Promise<void> {
  const start = performance.now();
  rt = await createRuntime(config.threads === undefined ? {} : { threads: config.threads });
  const loader = (await import(config.loader)) as Partial<ModelLoaderModule>;
  if (typeof loader.loadEngineModel !== "function") throw new ArgumentError("loader", `module ${config.loader} does not export a loadEngineModel function`);
  let lastPost = 0;
  const onProgress = (p: LoadProgressInfo): void => {
    const now = performance.now();
    if (now - lastPost < 50 && p.done < p.total) return;
    lastPost = now;
    post({ type: "progress", progress: { done: p.done, total: p.total } });
  };
  const maxNumSeqs = config.engine.maxNumSeqs ?? DEFAULT_MAX_NUM_SEQS;
  const maxNumBatchedTokens = config.engine.maxNumBatchedTokens ?? defaultMaxNumBatchedTokens(maxNumSeqs);
  model = await loader.loadEngineModel(rt, { maxNumSeqs, maxNumBatchedTokens, ...config.load }, onProgress);
  engine = new Engine({ runner: model.runner, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds, ...config.engine });
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
      ...(model.placement === undefined ? {} : { placement: model.placement }),
      loadSeconds: (performance.now() - start) / 1000,
    },
  });
}

port.on("message", (m: ToWorker) => {
  if (!stopped || m.type === "shutdown") handle(m);
});
load().catch((e: unknown) => {
  post({ type: "load_failed", message: e instanceof Error ? e.message : String(e) });
});

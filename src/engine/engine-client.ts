/**
 * The HTTP thread's handle on the engine worker (vLLM's AsyncLLM over its
 * EngineCore process): starts the worker, tracks load progress, submits
 * requests and hands back each one's outputs as an async stream, aborts,
 * and asks for metrics. Requests are only accepted once the model is ready.
 *
 *   const engine = EngineClient.start(config);
 *   await engine.ready;                                  // EngineInfo
 *   const stream = await engine.submit(request);         // throws EngineRejectedError (queue full, invalid)
 *   const streams = await engine.submitAll(requests);    // one client request's prompts: all admitted or none
 *   for await (const out of stream) …                    // ends after the output with a finishReason
 *   engine.abort(request.requestId);                     // e.g. the client went away
 *   const { embeddings } = await engine.embed({ requestId, sequences });   // an embedding model (task "embed")
 */
import { Worker } from "node:worker_threads";
import { ArgumentError } from "../errors.js";
import { workerExecArgv } from "../runtime/worker-exec-argv.js";
import type { EngineOutput, EngineRequest } from "./engine.js";
import type { EmbedOutput, EmbedRequest } from "./embed-engine.js";
import type { EngineMetricsSnapshot } from "./metrics.js";
import type { LoadProgressInfo } from "./loader-module.js";
import type { EngineInfo, EngineWorkerConfig, FromWorker, ToWorker } from "./protocol.js";

export type EngineState =
  | { state: "loading"; progress: LoadProgressInfo | null }
  | { state: "ready"; info: EngineInfo }
  | { state: "failed"; message: string }
  | { state: "stopped" };

/** The engine refused a request: its waiting queue is full (HTTP 429), or the request is invalid (400). */
export class EngineRejectedError extends Error {
  readonly reason: "queue_full" | "invalid" | "unavailable";
  readonly param: string | null;
  constructor(reason: EngineRejectedError["reason"], message: string, param: string | null = null) {
    super(message);
    this.name = "EngineRejectedError";
    this.reason = reason;
    this.param = param;
  }
}

/**
 * `later` appended to `earlier`, as one output: what a consumer that fell
 * behind gets instead of a queue (vLLM's RequestOutputCollector merges
 * delta outputs the same way), so a slow reader — an SSE client whose socket
 * is full — holds at most one pending output per request, whose text and
 * tokens are bounded by the request's max_tokens.
 */
export function mergeOutputs(earlier: EngineOutput, later: EngineOutput): EngineOutput {
  return {
    ...later,
    text: earlier.text + later.text,
    tokenIds: [...earlier.tokenIds, ...later.tokenIds],
    logprobs: earlier.logprobs === null && later.logprobs === null ? null : [...(earlier.logprobs ?? []), ...(later.logprobs ?? [])],
    numPromptTokens: later.numPromptTokens > 0 ? later.numPromptTokens : earlier.numPromptTokens,
  };
}

/**
 * One request's outputs, in order; ends after the output that carries a
 * finishReason. Outputs that arrive while one is still waiting to be read
 * merge into it (mergeOutputs), so the buffer never holds more than one.
 */
export class OutputStream implements AsyncIterable<EngineOutput> {
  readonly requestId: string;
  readonly #buffer: EngineOutput[] = [];
  #wake: (() => void) | null = null;
  #done = false;

  constructor(requestId: string) {
    this.requestId = requestId;
  }

  get done(): boolean {
    return this.#done;
  }

  /** @internal */
  push(output: EngineOutput): void {
    if (this.#done) return;
    const waiting = this.#buffer.pop();
    this.#buffer.push(waiting === undefined ? output : mergeOutputs(waiting, output));
    if (output.finishReason !== null) this.#done = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<EngineOutput> {
    for (;;) {
      const next = this.#buffer.shift();
      if (next !== undefined) {
        yield next;
        if (next.finishReason !== null) return;
        continue;
      }
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = null;
    }
  }
}

function failedOutput(requestId: string, message: string): EngineOutput {
  return {
    requestId,
    text: "",
    tokenIds: [],
    logprobs: null,
    finishReason: "error",
    stopReason: null,
    error: message,
    numPromptTokens: 0,
    numOutputTokens: 0,
    numCachedTokens: 0,
  };
}

export class EngineClient {
  readonly ready: Promise<EngineInfo>;
  readonly #worker: Worker;
  #state: EngineState = { state: "loading", progress: null };
  readonly #streams = new Map<string, OutputStream>();
  readonly #submits = new Map<string, { resolve: (s: OutputStream) => void; reject: (e: Error) => void }>();
  readonly #statsWaiters = new Map<number, (s: EngineMetricsSnapshot) => void>();
  /** Embedding requests sent and not yet answered. */
  readonly #embeds = new Map<string, { resolve: (o: EmbedOutput) => void; reject: (e: Error) => void }>();
  #statsSeq = 0;
  #exited: Promise<void>;

  private constructor(config: EngineWorkerConfig) {
    this.#worker = new Worker(new URL("./engine-worker.js", import.meta.url), { execArgv: workerExecArgv(), workerData: config });
    let resolveReady!: (info: EngineInfo) => void;
    let rejectReady!: (e: Error) => void;
    this.ready = new Promise((resolve, reject) => ((resolveReady = resolve), (rejectReady = reject)));
    this.ready.catch(() => {}); // a load failure is also reported through state
    this.#worker.on("message", (m: FromWorker) => this.#onMessage(m, resolveReady, rejectReady));
    this.#worker.on("error", (e) => this.#fail(`engine worker crashed: ${e.message}`, rejectReady));
    this.#exited = new Promise((resolve) =>
      this.#worker.once("exit", (code) => {
        if (this.#state.state !== "stopped") this.#fail(`engine worker exited (code ${code})`, rejectReady);
        resolve();
      }),
    );
  }

  /** Starts the engine worker; it loads the model at once (see `ready` and `state`). */
  static start(config: EngineWorkerConfig): EngineClient {
    return new EngineClient(config);
  }

  get state(): EngineState {
    return this.#state;
  }

  /** Requests submitted and not yet finished. */
  get numInFlight(): number {
    return this.#streams.size + this.#submits.size + this.#embeds.size;
  }

  /**
   * Queues a request; resolves with its output stream once the engine has
   * accepted it. Rejects with EngineRejectedError: "queue_full" (429),
   * "invalid" (400: the engine's ArgumentError, naming the field), or
   * "unavailable" (503: not loaded, failed, stopping).
   */
  async submit(request: EngineRequest): Promise<OutputStream> {
    return (await this.submitAll([request]))[0]!;
  }

  /**
   * Queues one client request's engine requests together: the engine admits
   * all of them (k free places in its waiting queue) or none, so a prompt
   * list is never half queued. Rejects as `submit` does.
   */
  submitAll(requests: readonly EngineRequest[]): Promise<OutputStream[]> {
    if (this.#state.state !== "ready") return Promise.reject(new EngineRejectedError("unavailable", this.#unavailableMessage()));
    const ids = new Set<string>();
    for (const { requestId: id } of requests) {
      if (this.#streams.has(id) || this.#submits.has(id) || ids.has(id)) return Promise.reject(new EngineRejectedError("invalid", `request id ${JSON.stringify(id)} is already in flight`, "requestId"));
      ids.add(id);
    }
    const accepted = requests.map((r) => new Promise<OutputStream>((resolve, reject) => this.#submits.set(r.requestId, { resolve, reject })));
    accepted.forEach((p) => p.catch(() => {})); // the first rejection is reported below; the group's others echo it
    this.#post({ type: "add", requests: [...requests] });
    return Promise.all(accepted);
  }

  /**
   * Pools the request's token sequences on an embedding model (task "embed"):
   * resolves with one vector per sequence (or with `error` set when its
   * forward failed); rejects as `submit` does.
   */
  embed(request: EmbedRequest): Promise<EmbedOutput> {
    if (this.#state.state !== "ready") return Promise.reject(new EngineRejectedError("unavailable", this.#unavailableMessage()));
    const id = request.requestId;
    if (this.#streams.has(id) || this.#submits.has(id) || this.#embeds.has(id)) return Promise.reject(new EngineRejectedError("invalid", `request id ${JSON.stringify(id)} is already in flight`, "requestId"));
    const done = new Promise<EmbedOutput>((resolve, reject) => this.#embeds.set(id, { resolve, reject }));
    this.#post({ type: "embed", request });
    return done;
  }

  /** Cancels a request (its stream ends with finishReason "abort"). Unknown or finished ids are ignored. */
  abort(requestId: string): void {
    if (this.#state.state === "ready" && this.#embeds.has(requestId)) {
      this.#embeds.get(requestId)!.reject(new EngineRejectedError("invalid", "the request was aborted", null));
      this.#embeds.delete(requestId);
      this.#post({ type: "abort", requestId });
      return;
    }
    // Submitted and not yet accepted too: its grammar may be compiling (the worker then drops it).
    if (this.#state.state === "ready" && (this.#streams.has(requestId) || this.#submits.has(requestId))) this.#post({ type: "abort", requestId });
  }

  /** The engine's counters and histograms, or null when it is not running. */
  stats(): Promise<EngineMetricsSnapshot | null> {
    if (this.#state.state !== "ready") return Promise.resolve(null);
    const seq = ++this.#statsSeq;
    return new Promise((resolve) => {
      this.#statsWaiters.set(seq, resolve);
      this.#post({ type: "stats", seq });
    });
  }

  /** Stops the worker: in-flight requests end with finishReason "error" ("engine stopped"). */
  async shutdown(): Promise<void> {
    if (this.#state.state === "stopped") return this.#exited;
    const wasRunning = this.#state.state === "ready" || this.#state.state === "loading";
    this.#state = { state: "stopped" };
    this.#endAll("the engine stopped");
    if (wasRunning) {
      this.#post({ type: "shutdown" });
      const timer = setTimeout(() => void this.#worker.terminate(), 5000);
      await this.#exited;
      clearTimeout(timer);
    } else {
      await this.#worker.terminate();
      await this.#exited;
    }
  }

  #post(m: ToWorker): void {
    this.#worker.postMessage(m);
  }

  #unavailableMessage(): string {
    const s = this.#state;
    if (s.state === "loading") {
      const pct = s.progress && s.progress.total > 0 ? ` (${Math.floor((100 * s.progress.done) / s.progress.total)}%)` : "";
      return `the model is still loading${pct}`;
    }
    if (s.state === "failed") return `the engine failed: ${s.message}`;
    return "the server is shutting down";
  }

  #onMessage(m: FromWorker, resolveReady: (info: EngineInfo) => void, rejectReady: (e: Error) => void): void {
    switch (m.type) {
      case "progress":
        if (this.#state.state === "loading") this.#state = { state: "loading", progress: m.progress };
        return;
      case "ready":
        if (this.#state.state !== "loading") return;
        this.#state = { state: "ready", info: m.info };
        resolveReady(m.info);
        return;
      case "load_failed":
        // A bad setting (maxModelLen beyond the model, a KV cache too small…) comes back as the ArgumentError it was, naming the setting.
        this.#fail(`loading the model failed: ${m.message}`, rejectReady, m.argument === undefined || !m.message.startsWith(`${m.argument} `) ? undefined : new ArgumentError(m.argument, m.message.slice(m.argument.length + 1)));
        return;
      case "accepted": {
        const s = this.#submits.get(m.requestId);
        if (s === undefined) return;
        this.#submits.delete(m.requestId);
        const stream = new OutputStream(m.requestId);
        this.#streams.set(m.requestId, stream);
        s.resolve(stream);
        return;
      }
      case "embedded": {
        const e = this.#embeds.get(m.output.requestId);
        this.#embeds.delete(m.output.requestId);
        e?.resolve(m.output);
        return;
      }
      case "rejected": {
        const embed = this.#embeds.get(m.requestId);
        if (embed !== undefined) {
          this.#embeds.delete(m.requestId);
          return embed.reject(new EngineRejectedError(m.reason, m.message, m.param));
        }
        const s = this.#submits.get(m.requestId);
        this.#submits.delete(m.requestId);
        s?.reject(new EngineRejectedError(m.reason, m.message, m.param));
        return;
      }
      case "outputs":
        for (const out of m.outputs) {
          const stream = this.#streams.get(out.requestId);
          if (stream === undefined) continue;
          stream.push(out);
          if (out.finishReason !== null) this.#streams.delete(out.requestId);
        }
        return;
      case "stats": {
        const w = this.#statsWaiters.get(m.seq);
        this.#statsWaiters.delete(m.seq);
        w?.(m.stats);
        return;
      }
      case "fatal":
        this.#fail(m.message, rejectReady);
        void this.#worker.terminate();
        return;
    }
  }

  #fail(message: string, rejectReady: (e: Error) => void, error: Error = new Error(message)): void {
    if (this.#state.state === "failed" || this.#state.state === "stopped") return;
    this.#state = { state: "failed", message };
    rejectReady(error);
    this.#endAll(message);
  }

  /** Ends every pending submit and stream with `message`; pending stats answer null. */
  #endAll(message: string): void {
    for (const [, s] of this.#submits) s.reject(new EngineRejectedError("unavailable", message));
    this.#submits.clear();
    for (const [, e] of this.#embeds) e.reject(new EngineRejectedError("unavailable", message));
    this.#embeds.clear();
    for (const [id, stream] of this.#streams) stream.push(failedOutput(id, message));
    this.#streams.clear();
    for (const [, w] of this.#statsWaiters) (w as (s: EngineMetricsSnapshot | null) => void)(null);
    this.#statsWaiters.clear();
  }
}

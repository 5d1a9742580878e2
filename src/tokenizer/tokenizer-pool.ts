/**
 * Tokenization off the calling thread: a few worker threads, each owning a
 * Tokenizer built from the same model source (tokenizer-worker.ts); they
 * also parse big JSON bodies. The server encodes every prompt through here, so one long prompt occupies one
 * worker for a while and the HTTP thread keeps answering /health and feeding
 * other streams. A job goes to the worker with the fewest jobs queued (as a
 * least-connections balancer would); a worker that dies fails its jobs and
 * is started again on the next one.
 *
 * Jobs wait here, not in the worker's message queue: a worker is sent one job
 * at a time, so a job whose `signal` fires while it waits (its client left)
 * is dropped before any work; one already running finishes, and its result
 * is ignored. Either way the caller's promise rejects at once with a
 * JobCancelledError.
 *
 * Each job runs under a time bound (jobBudgetMs): a tokenizer's regexes are
 * tried at load (regex-check.ts), but a pattern linear on those texts may
 * still backtrack on a request's. JavaScript cannot interrupt a regex, so a
 * worker past the bound is terminated and replaced; that job alone fails
 * with a JobTimeoutError, and the jobs queued behind it run on the fresh one.
 *
 *   const pool = new TokenizerPool({ source });   // sources/source.ts: { kind: "dir" | "gguf", path }
 *   const ids = await pool.encode(text, { addSpecialTokens: true, stopAfter: maxModelLen });
 *   await pool.close();
 */
import { Worker } from "node:worker_threads";
import { workerExecArgv } from "../runtime/worker-exec-argv.js";
import { ArgumentError } from "../errors.js";
import type { EncodeOptions } from "./tokenizer.js";
import { type ChatPromptJob, ChatPromptError } from "./chat-prompt.js";
import { JsonBytesError } from "../json-bytes.js";
import type { LongPromptText } from "../prompt-text.js";
import type { ShapeBounds, ShapeViolation } from "../request-shape.js";
import type { ModelSource } from "../sources/source.js";
import type { WorkerData, WorkerJob, WorkerResult } from "./tokenizer-worker.js";

export interface TokenizerPoolOptions {
  /** The model whose tokenizer the workers build (model/source-tokenizer.ts): a Hugging Face directory or a GGUF file. */
  source: ModelSource;
  /** config.json's architecture, for the fallback chat template of a model that has none (chat prompts render in the workers). */
  architecture?: string;
  /** Worker threads. Default 2: one long prompt leaves one for everyone else. */
  size?: number;
  /** Wall time one job may run in its worker, ms (default JOB_BUDGET_MS); past it the worker is replaced and the job fails. */
  jobBudgetMs?: number;
}

/** A job whose signal fired before its result came: it was dropped, or its result ignored. */
export class JobCancelledError extends Error {
  constructor() {
    super("the job was cancelled (its request is gone)");
    this.name = "JobCancelledError";
  }
}

/** A job that ran past the pool's jobBudgetMs; its worker was replaced. */
export class JobTimeoutError extends Error {
  readonly budgetMs: number;
  constructor(kind: string, budgetMs: number) {
    super(`${kind === "json" ? "parsing the body" : kind === "decode" ? "decoding" : "tokenizing"} took longer than ${budgetMs} ms (a tokenizer regex that backtracks on this text?); the request was stopped`);
    this.name = "JobTimeoutError";
    this.budgetMs = budgetMs;
  }
}

/** Default bound on one job, ms: a 15 MB body parses and a context-length prompt tokenizes well within it, even on a loaded machine. */
export const JOB_BUDGET_MS = 30_000;

/** What any job takes besides its input. */
export interface JobOptions {
  /** Fires when the job's result is no longer wanted (server.ts: the client left). */
  signal?: AbortSignal;
}

interface Job {
  job: WorkerJob;
  resolve: (result: WorkerResult) => void;
  reject: (e: Error) => void;
  settled: boolean;
}

interface Slot {
  worker: Worker | null;
  /** Jobs not yet sent, in order. */
  queue: Job[];
  /** The job the worker runs (null: idle). */
  running: Job | null;
  /** The running job's time bound (it starts once the worker has loaded its tokenizer). */
  timer: NodeJS.Timeout | null;
  ready: boolean;
}

export class TokenizerPool {
  readonly source: ModelSource;
  readonly #architecture: string | undefined;
  readonly #slots: Slot[];
  #nextId = 0;
  #closed = false;
  readonly #budgetMs: number;
  /** Jobs a worker ran to the end (its result came back, wanted or not). */
  jobsRun = 0;
  /** Workers terminated for running past the budget. */
  workersReplaced = 0;

  constructor(options: TokenizerPoolOptions) {
    const size = options.size ?? 2;
    if (!Number.isInteger(size) || size < 1) throw new ArgumentError("size", `must be an integer ≥ 1, got ${size}`);
    this.source = options.source;
    this.#architecture = options.architecture;
    const budget = options.jobBudgetMs ?? JOB_BUDGET_MS;
    if (!(Number.isFinite(budget) && budget > 0)) throw new ArgumentError("jobBudgetMs", `must be a positive number of milliseconds, got ${budget}`);
    this.#budgetMs = budget;
    this.#slots = Array.from({ length: size }, () => ({ worker: null, queue: [], running: null, timer: null, ready: false }));
    for (const slot of this.#slots) this.#start(slot); // each reads the tokenizer now, not on the first request
  }

  /** Text → token ids, in a worker (Tokenizer.encode's semantics, stopAfter included). */
  async encode(text: string, options: EncodeOptions & JobOptions = {}): Promise<number[]> {
    if (typeof text !== "string") throw new ArgumentError("text", `must be a string, got ${typeof text}`);
    const r = await this.#run({ id: 0, kind: "encode", text, addSpecialTokens: options.addSpecialTokens ?? true, stopAfter: options.stopAfter ?? null }, options.signal);
    if ("error" in r) throw new ArgumentError("text", r.error);
    return Array.from((r as { ids: Int32Array }).ids);
  }

  /**
   * A chat request's messages → prompt token ids, in a worker: rendered with
   * the chat template (chat-prompt.ts), then encoded (stopAfter as in encode).
   * Throws a ChatPromptError naming the request field at fault.
   */
  async encodeChat(chat: ChatPromptJob, options: EncodeOptions & JobOptions = {}): Promise<number[]> {
    const r = await this.#run({ id: 0, kind: "chat", chat, addSpecialTokens: options.addSpecialTokens ?? false, stopAfter: options.stopAfter ?? null }, options.signal);
    if ("error" in r) throw new ChatPromptError(r.param ?? "messages", r.error);
    return Array.from((r as { ids: Int32Array }).ids);
  }

  /** A pair of texts → one cross-encoder input (Tokenizer.encodePair), in a worker. */
  async encodePair(a: string, b: string, options: JobOptions = {}): Promise<{ ids: number[]; typeIds: number[] }> {
    if (typeof a !== "string" || typeof b !== "string") throw new ArgumentError("text", `must be two strings, got ${typeof a} and ${typeof b}`);
    const r = await this.#run({ id: 0, kind: "pair", a, b }, options.signal);
    if ("error" in r) throw new ArgumentError("text", r.error);
    const { ids, typeIds } = r as { ids: Int32Array; typeIds: Int32Array };
    return { ids: Array.from(ids), typeIds: Array.from(typeIds) };
  }

  /** Token ids → text, in a worker (Tokenizer.decode: special tokens kept; an id outside the vocabulary is an ArgumentError). */
  async decode(ids: readonly number[], options: JobOptions = {}): Promise<string> {
    const r = await this.#run({ id: 0, kind: "decode", ids: Int32Array.from(ids) }, options.signal);
    if ("error" in r) throw new ArgumentError("ids", r.error);
    return (r as { text: string }).text;
  }

  /**
   * UTF-8 JSON bytes, in order in `segments`, → a value, in a worker
   * (json-bytes.ts parseJsonBytes; throws its JsonBytesError). With
   * `maxPromptChars`, a body with a longer prompt text (prompt-text.ts) comes
   * back as `{ longPrompt }` instead of the value, and with `shape`, a body
   * that breaks a shape bound (request-shape.ts) as `{ shape }`. Segments on
   * SharedArrayBuffers reach the worker without a copy.
   */
  async parseJson(
    segments: Uint8Array[],
    maxDepth: number,
    maxPromptChars: number | null = null,
    shape: ShapeBounds | null = null,
    options: JobOptions = {},
  ): Promise<{ value: unknown } | { longPrompt: LongPromptText } | { shape: ShapeViolation }> {
    const r = await this.#run({ id: 0, kind: "json", segments, maxDepth, maxPromptChars, shape }, options.signal);
    if ("error" in r) throw r.json ? new JsonBytesError(r.error) : new Error(r.error);
    if ("shape" in r) return { shape: r.shape };
    return "longPrompt" in r ? { longPrompt: r.longPrompt } : { value: (r as { value: unknown }).value };
  }

  /** Jobs waiting or running, in all workers. */
  get pending(): number {
    return this.#slots.reduce((n, s) => n + s.queue.length + (s.running === null ? 0 : 1), 0);
  }

  #run(job: WorkerJob, signal: AbortSignal | undefined): Promise<WorkerResult> {
    if (this.#closed) return Promise.reject(new Error("the tokenizer pool is closed"));
    if (signal?.aborted === true) return Promise.reject(new JobCancelledError());
    const load = (s: Slot) => s.queue.length + (s.running === null ? 0 : 1);
    const slot = this.#slots.reduce((a, b) => (load(b) < load(a) ? b : a));
    job.id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const entry: Job = { job, resolve, reject, settled: false };
      if (signal !== undefined) {
        const onAbort = (): void => {
          const at = slot.queue.indexOf(entry);
          if (at >= 0) slot.queue.splice(at, 1); // dropped before any work
          this.#settle(entry, null, new JobCancelledError());
        };
        signal.addEventListener("abort", onAbort, { once: true });
        const done = (): void => signal.removeEventListener("abort", onAbort);
        entry.resolve = (r) => (done(), resolve(r));
        entry.reject = (e) => (done(), reject(e));
      }
      slot.queue.push(entry);
      this.#pump(slot);
    });
  }

  #settle(job: Job, result: WorkerResult | null, error: Error | null): void {
    if (job.settled) return;
    job.settled = true;
    if (error !== null) job.reject(error);
    else job.resolve(result!);
  }

  /** Sends the slot's next job when its worker is idle. */
  #pump(slot: Slot): void {
    if (slot.running !== null || slot.queue.length === 0 || this.#closed) return;
    const worker = slot.worker ?? this.#start(slot);
    const next = slot.queue.shift()!;
    slot.running = next;
    worker.ref();
    if (slot.ready) this.#startTimer(slot, worker);
    worker.postMessage(next.job);
  }

  #startTimer(slot: Slot, worker: Worker): void {
    const job = slot.running;
    if (job !== null) slot.timer = setTimeout(() => this.#timeout(slot, worker, job), this.#budgetMs);
  }

  /** The running job is past its bound: its worker goes (a regex cannot be interrupted), the job fails alone, the queue goes on. */
  #timeout(slot: Slot, worker: Worker, job: Job): void {
    if (slot.running !== job || slot.worker !== worker) return;
    slot.worker = null; // its exit fails nothing now
    slot.running = null;
    slot.timer = null;
    this.workersReplaced++;
    void worker.terminate();
    this.#settle(job, null, new JobTimeoutError(job.job.kind, this.#budgetMs));
    this.#pump(slot);
  }

  /** Stops the workers; jobs still queued fail. */
  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#slots.map(async (slot) => slot.worker?.terminate()));
  }

  #start(slot: Slot): Worker {
    const worker = new Worker(new URL("./tokenizer-worker.js", import.meta.url), { execArgv: workerExecArgv(), workerData: { source: this.source, ...(this.#architecture === undefined ? {} : { architecture: this.#architecture }) } satisfies WorkerData });
    slot.worker = worker;
    slot.ready = false;
    worker.unref(); // an idle pool never keeps the process alive
    worker.on("message", (m: WorkerResult) => {
      if ("ready" in m) {
        slot.ready = true;
        return this.#startTimer(slot, worker);
      }
      const job = slot.running;
      if (job === null || job.job.id !== m.id) return;
      slot.running = null;
      if (slot.timer !== null) clearTimeout(slot.timer);
      slot.timer = null;
      this.jobsRun++;
      this.#settle(job, m, null); // a cancelled job's result is ignored
      if (slot.queue.length === 0) worker.unref();
      this.#pump(slot);
    });
    const fail = (message: string): void => {
      if (slot.worker !== worker) return;
      slot.worker = null;
      const lost = [...(slot.running === null ? [] : [slot.running]), ...slot.queue.splice(0)];
      slot.running = null;
      if (slot.timer !== null) clearTimeout(slot.timer);
      slot.timer = null;
      for (const job of lost) this.#settle(job, null, new Error(message));
    };
    worker.on("error", (e) => fail(`the tokenizer worker failed: ${e.message}`));
    worker.on("exit", (code) => fail(this.#closed ? "the tokenizer pool is closed" : `the tokenizer worker exited (code ${code})`));
    return worker;
  }
}

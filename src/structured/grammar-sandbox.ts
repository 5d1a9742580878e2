/**
 * Grammar compilation in isolation (issue #32 item 1): every grammar the
 * engine has not compiled before is first compiled here, in a worker of its
 * own (grammar-compile-worker.ts), under
 *
 *   a time budget     past it the worker is terminated and the grammar is
 *                     refused as too complex (GrammarRejectedError)
 *   a memory cap      the worker's JS heap (resourceLimits) and its XGrammar
 *                     wasm heap (loadXGrammar's heapMaxBytes)
 *
 * A worker whose XGrammar instance trapped (out-of-bounds access, abort,
 * out of memory), ran past the budget or died is thrown away and a fresh
 * one started, so no trap outlives the request that caused it. Jobs run one
 * at a time, in order; each one's budget starts when the worker takes it.
 *
 * Like vLLM's StructuredOutputManager, which compiles in a thread pool off
 * the engine's step; XGrammar's web build cannot serialize a compiled grammar
 * (its embind classes expose no such call), so the engine compiles again in
 * its own instance what passed here (grammar-backend.ts).
 */
import { Worker } from "node:worker_threads";
import { workerExecArgv } from "../runtime/worker-exec-argv.js";
import type { GrammarSpec } from "./grammar-spec.js";
import type { CompileReply, CompileWorkerData } from "./grammar-compile-worker.js";

/** A grammar refused by the sandbox: it does not compile, admits nothing, or is too complex for the budget or the memory cap. */
export class GrammarRejectedError extends Error {
  readonly reason: "invalid" | "too_complex";
  constructor(reason: GrammarRejectedError["reason"], message: string) {
    super(message);
    this.name = "GrammarRejectedError";
    this.reason = reason;
  }
}

export interface GrammarSandboxOptions extends Omit<CompileWorkerData, "heapMaxBytes"> {
  /** Wall time one compile may take, in ms. */
  budgetMs: number;
  /** XGrammar's wasm heap in the worker, bytes (multiple of 64 KiB). */
  heapMaxBytes: number;
  /** The worker's V8 old generation, MiB. */
  jsHeapMb: number;
}

interface Job {
  id: number;
  spec: GrammarSpec;
  resolve: (ms: number) => void;
  reject: (e: Error) => void;
}

export class GrammarSandbox {
  readonly #options: GrammarSandboxOptions;
  #worker: Worker | null = null;
  #ready = false;
  readonly #queue: Job[] = [];
  #current: Job | null = null;
  #timer: NodeJS.Timeout | null = null;
  #nextId = 1;
  #closed = false;
  /** Workers in a row that died before they were ready: the model's vocabulary cannot load, so stop retrying. */
  #loadFailures = 0;
  /** Workers started so far (the first one included): grows by one per trap, timeout or crash. */
  workersStarted = 0;

  constructor(options: GrammarSandboxOptions) {
    this.#options = options;
    this.#spawn();
  }

  /** Compiles `spec` in the sandbox; resolves with the milliseconds it took, rejects with GrammarRejectedError. */
  compile(spec: GrammarSpec): Promise<number> {
    if (this.#closed) return Promise.reject(new Error("the grammar sandbox is closed"));
    return new Promise((resolve, reject) => {
      this.#queue.push({ id: this.#nextId++, spec, resolve, reject });
      this.#holdAlive();
      this.#pump();
    });
  }

  /** Compiles waiting or running. */
  get pending(): number {
    return this.#queue.length + (this.#current === null ? 0 : 1);
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const job of this.#queue.splice(0)) job.reject(new Error("the grammar sandbox is closed"));
    this.#current?.reject(new Error("the grammar sandbox is closed"));
    this.#current = null;
    this.#clearTimer();
    const w = this.#worker;
    this.#worker = null;
    if (w !== null) await w.terminate();
  }

  #spawn(): void {
    const { budgetMs: _b, jsHeapMb, ...data } = this.#options;
    this.workersStarted++;
    const worker = new Worker(new URL("./grammar-compile-worker.js", import.meta.url), {
      execArgv: workerExecArgv(),
      workerData: data satisfies CompileWorkerData,
      resourceLimits: { maxOldGenerationSizeMb: jsHeapMb, maxYoungGenerationSizeMb: 16 },
    });
    this.#worker = worker;
    this.#ready = false;
    worker.on("message", (m: CompileReply) => {
      if (worker !== this.#worker) return;
      if ("type" in m) {
        this.#ready = true;
        this.#loadFailures = 0;
        this.#pump();
        return;
      }
      const job = this.#current;
      if (job === null || job.id !== m.id) return;
      this.#current = null;
      this.#clearTimer();
      if (m.ok) job.resolve(m.ms);
      else job.reject(new GrammarRejectedError(m.trapped ? "too_complex" : "invalid", m.trapped ? `the grammar is too complex: compiling it failed (${m.message})` : m.message));
      if (!m.ok && m.trapped) this.#replace();
      else this.#pump();
    });
    worker.on("error", (e: Error) => {
      if (worker !== this.#worker) return;
      this.#fail(`the grammar is too complex: its compiler ran out of memory or failed (${e.message})`);
    });
    worker.on("exit", (code) => {
      if (worker !== this.#worker || this.#closed) return;
      this.#fail(`the grammar is too complex: its compiler exited (code ${code})`);
    });
    this.#holdAlive(); // after the listeners (a "message" listener refs the port again)
  }

  /** The worker is gone or unusable: the running job fails, a fresh worker takes the queue. */
  #fail(message: string): void {
    const job = this.#current;
    this.#current = null;
    this.#clearTimer();
    job?.reject(new GrammarRejectedError("too_complex", message));
    this.#replace();
  }

  #replace(): void {
    const old = this.#worker;
    this.#worker = null;
    if (old !== null) void old.terminate();
    if (!this.#ready && ++this.#loadFailures >= 3) {
      this.#closed = true;
      for (const job of this.#queue.splice(0)) job.reject(new GrammarRejectedError("invalid", "structured output is unavailable: the grammar compiler failed to start three times"));
      return;
    }
    if (!this.#closed) this.#spawn();
  }

  #pump(): void {
    if (this.#current !== null || !this.#ready || this.#worker === null) return;
    const job = this.#queue.shift();
    if (job === undefined) return;
    this.#current = job;
    const worker = this.#worker;
    this.#timer = setTimeout(() => {
      if (this.#current !== job) return;
      this.#fail(`the grammar is too complex: compiling it took longer than ${this.#options.budgetMs} ms`);
    }, this.#options.budgetMs);
    worker.postMessage({ id: job.id, spec: job.spec });
  }

  #clearTimer(): void {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#holdAlive();
  }

  /** Compiles waiting or running keep the process (and their answers) alive; an idle sandbox never does. */
  #holdAlive(): void {
    if (this.pending > 0) this.#worker?.ref();
    else this.#worker?.unref();
  }
}

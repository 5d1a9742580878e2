/**
 * The engine thread's side of the grammar host (grammar-host-worker.ts): the
 * worker that owns the compiled grammars and the matchers, so that neither a
 * compile nor a matcher ever runs on the engine thread (vLLM's structured
 * output manager, with its bitmask fill overlapping the forward).
 *
 *   compile(key, spec)   async; the engine steps on while it runs. `idle` is
 *                        false until every compile sent has finished (read
 *                        from shared memory, so a synchronous step sees it):
 *                        a mask asked for then would wait behind the compile,
 *                        so the engine holds its constrained requests back.
 *   requestMasks(…)      posts one step's accepted tokens and mask requests;
 *   MaskBatch.wait()     then blocks (Atomics.wait) until the rows are written.
 *
 * Masks come back in a SharedArrayBuffer of rows: Int32Array
 * [rows status | rows × ceil(V / 32) masks], grown (and sent again) when a
 * step asks for more rows. A host whose instance trapped, that died, or that
 * does not answer a fill within FILL_TIMEOUT_MS is dead: its matchers fail
 * their requests, and the backend starts a fresh host. A host whose thread
 * stopped (a crash, an out-of-memory kill) is seen dead within
 * STOPPED_CHECK_MS of a step waiting on it, not FILL_TIMEOUT_MS.
 */
import { Worker } from "node:worker_threads";
import { workerExecArgv } from "../runtime/worker-exec-argv.js";
import type { GrammarSpec } from "./grammar-spec.js";
import { ACCEPTED, COMPILES_DONE, CTRL_WORDS, FILL_SEQ, type HostMessage, type HostReply, type HostWorkerData, STATUS_NO_MATCHER, STATUS_OK, STATUS_REJECTED } from "./grammar-host-protocol.js";

/** How long a step waits for its masks before the host is declared dead, ms. */
export const FILL_TIMEOUT_MS = 5000;

/** While a step waits for its masks, how often it checks that the host's thread still runs, ms. */
const STOPPED_CHECK_MS = 20;

export type GrammarHostOptions = Omit<HostWorkerData, "ctrl">;

/** One step's masks: rows in request order, written by the host while the forward runs. */
export interface MaskBatch {
  /** Blocks until the host wrote the rows; throws when the host is dead. */
  wait(): void;
  /** Row i (after wait): Int32Array [ceil(V / 32)], a view valid until the next requestMasks; throws if that matcher failed. */
  mask(i: number): Int32Array;
}

export class GrammarHostDeadError extends Error {}

export class GrammarHost {
  readonly #worker: Worker;
  readonly #ctrl: Int32Array;
  readonly #words: number;
  #rows = 0;
  #buf: SharedArrayBuffer | null = null;
  /** Compiles posted, the load counted as the first. */
  #compilesSent = 1;
  #nextCompile = 1;
  #nextMid = 1;
  #seq = 0;
  readonly #compiles = new Map<number, { resolve: () => void; reject: (e: Error) => void }>();
  readonly #idleWaiters: (() => void)[] = [];
  /** Tokens accepted since the last fill: [mid, token, …]. */
  #accepts: number[] = [];
  #dead: string | null = null;
  /** Called once when the host dies (trap, crash, timeout). */
  onDead: (reason: string) => void = () => {};

  constructor(options: GrammarHostOptions) {
    const ctrl = new SharedArrayBuffer(4 * CTRL_WORDS);
    this.#ctrl = new Int32Array(ctrl);
    this.#words = Math.ceil(options.vocabSize / 32);
    this.#worker = new Worker(new URL("./grammar-host-worker.js", import.meta.url), { execArgv: workerExecArgv(), workerData: { ...options, ctrl } satisfies HostWorkerData });
    this.#worker.on("message", (m: HostReply) => this.#onReply(m));
    this.#worker.on("error", (e: Error) => this.#die(`the grammar host failed: ${e.message}`));
    this.#worker.on("exit", (code) => this.#die(`the grammar host exited (code ${code})`));
    this.#worker.unref(); // after the listeners (adding a "message" listener refs the worker's port again): an idle host never keeps the process alive
  }

  /** Resolves once the host loaded the vocabulary; rejects if it could not. */
  ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.#dead !== null) return reject(new GrammarHostDeadError(this.#dead));
      if (this.idle) return resolve();
      this.#await(0, resolve, reject);
    });
  }

  /** No compile (nor the load) is running or queued in the host: a mask asked for now comes at once. */
  get idle(): boolean {
    return this.#dead !== null || Atomics.load(this.#ctrl, COMPILES_DONE) === this.#compilesSent;
  }

  /** Resolves when idle (or dead). */
  whenIdle(): Promise<void> {
    return this.idle ? Promise.resolve() : new Promise((r) => this.#idleWaiters.push(r));
  }

  get dead(): string | null {
    return this.#dead;
  }

  /** Compiles `spec` in the host and keeps it under `key`; rejects with XGrammar's message. */
  compile(key: string, spec: GrammarSpec): Promise<void> {
    if (this.#dead !== null) return Promise.reject(new GrammarHostDeadError(this.#dead));
    const id = this.#nextCompile++;
    this.#compilesSent++;
    this.#post({ t: "compile", id, key, spec });
    return new Promise((resolve, reject) => this.#await(id, resolve, reject));
  }

  /** A compile (or the load) is awaited: the host keeps the process alive until it answers. */
  #await(id: number, resolve: () => void, reject: (e: Error) => void): void {
    this.#compiles.set(id, { resolve, reject });
    this.#worker.ref();
  }

  evict(key: string): void {
    this.#post({ t: "evict", key });
  }

  /** A new matcher of the grammar kept under `key`; its id. A failure to start shows at its first mask. */
  openMatcher(key: string): number {
    const mid = this.#nextMid++;
    this.#post({ t: "matcher", mid, key });
    return mid;
  }

  /** Queues a token the mask allowed; the host accepts it before the next fill. */
  accept(mid: number, token: number): void {
    this.#accepts.push(mid, token);
  }

  /** Accepts one token now (a round trip): whether the grammar took it; a refused token changes nothing. */
  acceptNow(mid: number, token: number): boolean {
    this.#flushAccepts();
    const seq = (this.#seq = (this.#seq + 1) | 0);
    this.#post({ t: "accept", seq, mid, token });
    this.#waitFill(seq);
    return Atomics.load(this.#ctrl, ACCEPTED) === 1;
  }

  rollback(mid: number, n: number): void {
    this.#flushAccepts();
    this.#post({ t: "rollback", mid, n });
  }

  closeMatcher(mid: number): void {
    this.#post({ t: "dispose", mid });
  }

  /** Posts the accepted tokens and asks for the masks of `mids` (rows in that order); wait() on the result before reading. */
  requestMasks(mids: readonly number[]): MaskBatch {
    if (mids.length > this.#rows) this.#grow(mids.length);
    const seq = (this.#seq = (this.#seq + 1) | 0);
    const accept = this.#accepts;
    this.#accepts = [];
    this.#post({ t: "fill", seq, accept, mids: [...mids] });
    const status = new Int32Array(this.#buf!, 0, mids.length);
    const masks = new Int32Array(this.#buf!, 4 * this.#rows, this.#rows * this.#words);
    let done = false;
    return {
      wait: () => {
        if (done) return;
        this.#waitFill(seq);
        done = true;
      },
      mask: (i) => {
        const s = status[i]!;
        if (s !== STATUS_OK) {
          throw new Error(s === STATUS_REJECTED ? "the grammar rejected a token its own mask allowed" : s === STATUS_NO_MATCHER ? "its grammar matcher could not start" : "the grammar engine trapped");
        }
        return masks.subarray(i * this.#words, (i + 1) * this.#words);
      },
    };
  }

  /** Terminates the worker as a crash or an OOM kill would: its exit makes the host dead (onDead runs), unlike close(). */
  kill(): void {
    void this.#worker.terminate();
  }

  async close(): Promise<void> {
    this.#dead ??= "the grammar host is closed";
    this.#settle(new GrammarHostDeadError(this.#dead));
    await this.#worker.terminate();
  }

  #waitFill(seq: number): void {
    if (this.#dead !== null) throw new GrammarHostDeadError(this.#dead);
    const deadline = performance.now() + FILL_TIMEOUT_MS;
    for (let cur = Atomics.load(this.#ctrl, FILL_SEQ); cur !== seq; cur = Atomics.load(this.#ctrl, FILL_SEQ)) {
      const left = deadline - performance.now();
      if (left <= 0) {
        this.#die(`the grammar host did not answer a mask request within ${FILL_TIMEOUT_MS} ms`);
        void this.#worker.terminate();
        throw new GrammarHostDeadError(this.#dead!);
      }
      if (Atomics.wait(this.#ctrl, FILL_SEQ, cur, Math.min(left, STOPPED_CHECK_MS)) === "timed-out" && this.#stopped()) {
        this.#die("the grammar host exited (its thread stopped: a crash, an out-of-memory kill or a termination)");
        throw new GrammarHostDeadError(this.#dead!);
      }
    }
  }

  /**
   * Whether the worker's thread has stopped, seen synchronously: its "exit"
   * event cannot arrive while this thread blocks in Atomics.wait. A stopped
   * worker's event loop idle time reads -1 (Node's Worker::LoopIdleTime,
   * src/node_worker.cc, on Node 20 and 24), once eventLoopUtilization() was
   * first called while the loop ran (it caches the loop's start time then:
   * #onReply does it when the host has loaded). FILL_TIMEOUT_MS stays the
   * bound should that ever change.
   */
  #stopped(): boolean {
    return this.#worker.performance.eventLoopUtilization().idle < 0;
  }

  #grow(rows: number): void {
    this.#rows = Math.max(8, 2 ** Math.ceil(Math.log2(rows)));
    this.#buf = new SharedArrayBuffer(4 * this.#rows * (1 + this.#words));
    this.#post({ t: "rows", buf: this.#buf, rows: this.#rows });
  }

  #flushAccepts(): void {
    if (this.#accepts.length === 0) return;
    this.#post({ t: "fill", seq: this.#seq, accept: this.#accepts, mids: [] });
    this.#accepts = [];
  }

  #post(m: HostMessage): void {
    if (this.#dead === null) this.#worker.postMessage(m);
  }

  #onReply(m: HostReply): void {
    if (m.t === "trapped") return this.#die(`the grammar engine trapped (${m.message})`);
    if (m.id === 0) this.#worker.performance.eventLoopUtilization(); // its loop runs: #stopped can read it from now on
    const waiter = this.#compiles.get(m.id);
    this.#compiles.delete(m.id);
    if (this.#compiles.size === 0) this.#worker.unref();
    if (m.ok) waiter?.resolve();
    else waiter?.reject(new Error(m.message));
    if (this.idle) for (const r of this.#idleWaiters.splice(0)) r();
  }

  #die(reason: string): void {
    if (this.#dead !== null) return;
    this.#dead = reason;
    this.#settle(new GrammarHostDeadError(reason));
    this.onDead(reason);
  }

  #settle(e: Error): void {
    for (const w of this.#compiles.values()) w.reject(e);
    this.#compiles.clear();
    for (const r of this.#idleWaiters.splice(0)) r();
  }
}

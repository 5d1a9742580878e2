/**
 * WorkerPool: fork–join of one kernel over work items on every thread.
 *
 * The caller writes the task descriptor (control.ts), opens the task's door,
 * bumps GEN and notifies; the `threads − 1` workers that come in and the caller
 * itself then claim items with an atomic counter, so uneven items balance.
 * The caller joins by closing the door and waiting for the workers inside
 * (never for one that has not come in: that one runs nothing of this task).
 * A throw or trap on any thread is recorded in the descriptor and rethrown
 * here as a KernelError naming the kernel; the pool stays usable. Workers
 * spin ≈ 200 µs after a task before they sleep, so back-to-back tasks find
 * them awake. Workers are unref'd: a process that never calls dispose() exits.
 *
 * Every thread holds one instance of the module per shared memory; a task
 * names its memory (MEMORY slot), so any thread runs any kernel in any
 * memory. addMemory() posts a new memory to every worker's port and
 * broadcasts ADD_MEMORY; the descriptor itself stays in memory 0.
 */
import { MessageChannel, type MessagePort, Worker } from "node:worker_threads";
import { workerExecArgv } from "./worker-exec-argv.js";
import { ArgumentError, KernelError, show } from "../errors.js";
import {
  ADD_MEMORY,
  ARGS,
  CLOSED,
  CONTROL_SLOTS,
  COUNT,
  ERROR,
  ERR_ITEM,
  ERR_LEN,
  GEN,
  KERNEL,
  MEMORY,
  NEXT,
  PENDING,
  SPIN,
  STATE,
  STOP,
  type TaskKernel,
  closeTask,
  errorText,
  openTask,
  runItems,
} from "./control.js";
import { type KernelExports, kernelNames } from "./module.js";

export class WorkerPool {
  readonly threads: number;
  readonly #memory: WebAssembly.Memory;
  readonly #ctl: Int32Array;
  readonly #names: string[];
  readonly #index: Map<string, number>;
  /** #kernels[m][k]: kernel k of the calling thread's instance over memory m. */
  readonly #kernels: TaskKernel[][];
  readonly #workers: Worker[];
  readonly #ports: MessagePort[];
  readonly #health: { failure?: Error };
  #disposed = false;
  #forkJoins = 0;

  private constructor(
    memory: WebAssembly.Memory,
    ctl: Int32Array,
    names: string[],
    exports: KernelExports,
    workers: Worker[],
    ports: MessagePort[],
    health: { failure?: Error },
  ) {
    this.#memory = memory;
    this.#ctl = ctl;
    this.#names = names;
    this.#index = new Map(names.map((n, i) => [n, i]));
    this.#kernels = [names.map((n) => exports[n] as unknown as TaskKernel)];
    this.#workers = workers;
    this.#ports = ports;
    this.#health = health;
    this.threads = workers.length + 1;
  }

  /** Starts `threads − 1` workers on `memory`, each with its own instance of `module`. */
  static async start(
    module: WebAssembly.Module,
    memory: WebAssembly.Memory,
    exports: KernelExports,
    control: number,
    threads: number,
  ): Promise<WorkerPool> {
    const ctl = new Int32Array(memory.buffer, control, CONTROL_SLOTS);
    ctl.fill(0);
    Atomics.store(ctl, STATE, CLOSED);
    const url = new URL("./worker.js", import.meta.url);
    const workers: Worker[] = [];
    const ports: MessagePort[] = [];
    const ready: Promise<void>[] = [];
    for (let tid = 1; tid < threads; tid++) {
      const { port1, port2 } = new MessageChannel();
      const w = new Worker(url, { execArgv: workerExecArgv(), workerData: { module, memory, control, controlSlots: CONTROL_SLOTS, tid, port: port2 }, transferList: [port2] });
      workers.push(w);
      ports.push(port1);
      port1.unref();
      ready.push(
        new Promise<void>((resolve, reject) => {
          w.once("message", () => resolve());
          w.once("error", reject);
          w.once("exit", (code) => reject(new Error(`worker ${tid} exited with code ${code} before it was ready`)));
        }),
      );
    }
    try {
      await Promise.all(ready);
    } catch (e) {
      await Promise.all(workers.map((w) => w.terminate()));
      throw e;
    }
    // A worker that dies outside a kernel (its kernels' errors are caught) leaves
    // the pool unable to join: remember why and refuse further tasks.
    const health: { failure?: Error } = {};
    workers.forEach((w, i) => {
      w.removeAllListeners();
      w.on("error", (e) => (health.failure ??= new Error(`worker ${i + 1} failed: ${e.message}`)));
      w.on("exit", (code) => (health.failure ??= new Error(`worker ${i + 1} exited with code ${code}`)));
      w.unref();
    });
    return new WorkerPool(memory, ctl, kernelNames(module), exports, workers, ports, health);
  }

  /** Memories the threads hold an instance for. */
  get memories(): number {
    return this.#kernels.length;
  }

  /**
   * Makes every thread able to run kernels in `memory`: the caller's instance
   * (`exports`) is given, each worker instantiates its own. Returns the new
   * memory's index for parallelFor.
   */
  addMemory(memory: WebAssembly.Memory, exports: KernelExports): number {
    this.#usable();
    for (const port of this.#ports) port.postMessage(memory);
    if (this.#workers.length > 0) {
      const ctl = this.#ctl;
      Atomics.store(ctl, KERNEL, ADD_MEMORY);
      Atomics.store(ctl, MEMORY, this.#kernels.length); // the index the new memory gets
      Atomics.store(ctl, COUNT, 0);
      Atomics.store(ctl, PENDING, this.#workers.length);
      openTask(ctl);
      Atomics.add(ctl, GEN, 1);
      Atomics.notify(ctl, GEN);
      this.#waitPending();
      closeTask(ctl);
      if (this.#health.failure) throw this.#health.failure;
    }
    this.#kernels.push(this.#names.map((n) => exports[n] as unknown as TaskKernel));
    return this.#kernels.length - 1;
  }

  #usable(): void {
    if (this.#disposed) throw new Error("parallelFor called after dispose()");
    if (this.#health.failure) throw this.#health.failure;
  }

  /** Tasks handed to the workers so far (parallelFor calls that did not run on the caller alone). */
  get forkJoins(): number {
    return this.#forkJoins;
  }

  hasKernel(name: string): boolean {
    return this.#index.has(name);
  }

  /**
   * Runs `kernel(item, tid, args)` for every item in [0, items) across all
   * threads and returns when all are done. `kernel` is an exported function
   * of the kernel module with the signature (item: i32, tid: i32, args: usize),
   * run by every thread's instance over memory `memory` (0 unless addMemory was called).
   */
  parallelFor(kernel: string, items: number, args = 0, memory = 0): void {
    this.#usable();
    const k = this.#index.get(kernel);
    if (k === undefined) throw new ArgumentError("kernel", `must name an exported kernel, got ${show(kernel)}`);
    if (!Number.isInteger(items) || items < 0 || items > 0x7fffffff) {
      throw new ArgumentError("items", `must be an integer in [0, 2^31), got ${show(items)}`);
    }
    if (items === 0) return;
    const ctl = this.#ctl;
    if (items === 1 || this.#workers.length === 0) {
      // Nothing to share: run on the calling thread, same error contract.
      for (let i = 0; i < items; i++) {
        try {
          this.#kernels[memory]![k]!(i, 0, args);
        } catch (e) {
          throw new KernelError(kernel, `${describe(e)} (thread 0, item ${i})`);
        }
      }
      return;
    }
    this.#forkJoins++;
    Atomics.store(ctl, KERNEL, k);
    Atomics.store(ctl, MEMORY, memory);
    Atomics.store(ctl, COUNT, items);
    Atomics.store(ctl, ARGS, args | 0);
    Atomics.store(ctl, NEXT, 0);
    Atomics.store(ctl, ERROR, 0);
    Atomics.store(ctl, ERR_LEN, 0);
    openTask(ctl);
    Atomics.add(ctl, GEN, 1);
    Atomics.notify(ctl, GEN);
    runItems(ctl, this.#memory, this.#kernels, 0);
    closeTask(ctl); // waits for the workers that came in, not for those that did not
    const failed = Atomics.load(ctl, ERROR);
    if (failed) {
      throw new KernelError(kernel, `${errorText(ctl, this.#memory)} (thread ${failed - 1}, item ${Atomics.load(ctl, ERR_ITEM)})`);
    }
  }

  /** Waits until every worker has taken the ADD_MEMORY broadcast. */
  #waitPending(): void {
    const ctl = this.#ctl;
    let pending = Atomics.load(ctl, PENDING);
    for (let spin = 0; pending !== 0 && spin < SPIN; spin++) pending = Atomics.load(ctl, PENDING);
    while (pending !== 0) {
      Atomics.wait(ctl, PENDING, pending);
      pending = Atomics.load(ctl, PENDING);
    }
  }

  /** Stops and terminates the workers. Idempotent. */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    Atomics.store(this.#ctl, STOP, 1);
    Atomics.add(this.#ctl, GEN, 1);
    Atomics.notify(this.#ctl, GEN);
    await Promise.all(this.#workers.map((w) => w.terminate()));
    for (const port of this.#ports) port.close();
  }

  get kernelNames(): readonly string[] {
    return this.#names;
  }
}

function describe(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

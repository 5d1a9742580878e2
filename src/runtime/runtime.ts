/**
 * The runtime: one compiled kernel module, one shared WebAssembly.Memory, a
 * pool of worker threads each running its own instance over that memory, and
 * the allocators that carve the memory up.
 *
 *   const rt = await createRuntime({ threads: 2 });
 *   const x = rt.tensor("f32", [1024]);
 *   rt.parallelFor("some_kernel", items, rt.args().ptr(x.ptr).i32(1024).end());
 *   await rt.dispose();
 */
import { availableParallelism } from "node:os";
import { ArgumentError, show } from "../errors.js";
import type { DType } from "../tensor/dtype.js";
import { DTYPE_BYTES } from "../tensor/dtype.js";
import { checkShapeArray, numel } from "../tensor/check.js";
import { Tensor } from "../tensor/tensor.js";
import { Allocator, StepArena } from "./allocator.js";
import { ArgsWriter } from "./args.js";
import { CONTROL_BYTES } from "./control.js";
import { type KernelExports, type KernelFlavor, MAX_PAGES, WASM_PAGE, instantiate, kernelModule, resolveKernelFlavor } from "./module.js";
import { WorkerPool } from "./pool.js";

export interface RuntimeOptions {
  /** Threads including the caller's. Default: $KVFLASH_THREADS, else os.availableParallelism(). */
  threads?: number;
  /** Initial memory size in bytes (it grows on demand). Default 16 MiB. */
  initialMemoryBytes?: number;
  /** Kernel flavor (module.ts). Default: $KVFLASH_KERNELS, else relaxed where the engine supports it, else baseline. */
  kernels?: KernelFlavor;
}

export const MAX_THREADS = 256;

/** Resolves the thread count: the option, else $KVFLASH_THREADS, else the machine's parallelism. */
export function resolveThreads(threads?: number): number {
  if (threads !== undefined) {
    if (!Number.isInteger(threads) || threads < 1 || threads > MAX_THREADS) {
      throw new ArgumentError("threads", `must be an integer in [1, ${MAX_THREADS}], got ${show(threads)}`);
    }
    return threads;
  }
  const env = process.env["KVFLASH_THREADS"];
  if (env !== undefined && env !== "") {
    const n = Number(env);
    if (!Number.isInteger(n) || n < 1 || n > MAX_THREADS) {
      throw new ArgumentError("KVFLASH_THREADS", `must be an integer in [1, ${MAX_THREADS}], got ${show(env)}`);
    }
    return n;
  }
  return availableParallelism();
}

export class Runtime {
  readonly memory: WebAssembly.Memory;
  /** The calling thread's instance: call exported functions directly for serial work. */
  readonly exports: KernelExports;
  /** The kernel flavor every thread runs: "baseline" (SIMD128) or "relaxed" (relaxed SIMD). */
  readonly kernels: KernelFlavor;
  /** Long-lived allocations: weights, KV pool, workspaces. */
  readonly heap: Allocator;
  /** Per-step scratch, reset by the caller at the start of each step. */
  readonly arena: StepArena;
  readonly #pool: WorkerPool;
  readonly #argsPtr: number;
  #scratch = { ptr: 0, stride: 0 };

  /** @internal use createRuntime() */
  constructor(memory: WebAssembly.Memory, kernels: KernelExports, heap: Allocator, pool: WorkerPool, argsPtr: number, flavor: KernelFlavor = "baseline") {
    this.memory = memory;
    this.exports = kernels;
    this.kernels = flavor;
    this.heap = heap;
    this.arena = new StepArena(heap);
    this.#pool = pool;
    this.#argsPtr = argsPtr;
  }

  /** Threads that run kernels, the caller's included. */
  get threads(): number {
    return this.#pool.threads;
  }

  /** Runs `kernel(item, tid, args)` for items [0, items) on every thread; see WorkerPool. */
  parallelFor(kernel: string, items: number, args = 0): void {
    this.#pool.parallelFor(kernel, items, args);
  }

  hasKernel(name: string): boolean {
    return this.#pool.hasKernel(name);
  }

  /**
   * Starts a kernel argument struct in the runtime's argument buffer and returns
   * its writer; `.end()` gives the address to pass to parallelFor. The buffer is
   * reused by the next call, so write the arguments just before launching.
   */
  args(): ArgsWriter {
    return new ArgsWriter(this.memory, this.#argsPtr);
  }

  /**
   * A per-thread scratch region of at least `bytesPerThread` for each thread:
   * thread `tid` uses [ptr + tid·stride, ptr + tid·stride + bytesPerThread).
   * The region is kept and reused; a larger request replaces it.
   */
  threadScratch(bytesPerThread: number): { ptr: number; stride: number } {
    const stride = Math.ceil(Math.max(bytesPerThread, 64) / 64) * 64;
    if (stride > this.#scratch.stride) {
      if (this.#scratch.ptr) this.heap.free(this.#scratch.ptr);
      this.#scratch = { ptr: this.heap.alloc(stride * this.threads, "thread scratch"), stride };
    }
    return this.#scratch;
  }

  /** Allocates a long-lived tensor (contiguous, contents unspecified); free it with free(). */
  tensor(dtype: DType, shape: readonly number[], label = "tensor"): Tensor {
    checkShapeArray("shape", shape);
    const ptr = this.heap.alloc(numel(shape) * DTYPE_BYTES[dtype], label);
    return new Tensor(this.memory, ptr, dtype, shape);
  }

  /** Allocates a tensor from the step arena (gone at the next arena.reset()). */
  scratchTensor(dtype: DType, shape: readonly number[]): Tensor {
    checkShapeArray("shape", shape);
    const ptr = this.arena.alloc(numel(shape) * DTYPE_BYTES[dtype]);
    return new Tensor(this.memory, ptr, dtype, shape);
  }

  /** Frees a tensor made by tensor(), or a raw heap address. */
  free(what: Tensor | number): void {
    this.heap.free(typeof what === "number" ? what : what.ptr);
  }

  /** Stops the worker threads. The runtime cannot run kernels afterwards. */
  async dispose(): Promise<void> {
    await this.#pool.dispose();
  }
}

/** Compiles the kernels (once per process), creates the shared memory and starts the workers. */
export async function createRuntime(options: RuntimeOptions = {}): Promise<Runtime> {
  const threads = resolveThreads(options.threads);
  const initialBytes = options.initialMemoryBytes ?? 16 << 20;
  if (!Number.isInteger(initialBytes) || initialBytes < WASM_PAGE || initialBytes > MAX_PAGES * WASM_PAGE) {
    throw new ArgumentError("initialMemoryBytes", `must be an integer in [64 KiB, 4 GiB], got ${show(initialBytes)}`);
  }
  const flavor = resolveKernelFlavor(options.kernels);
  const module = kernelModule(flavor);
  const memory = new WebAssembly.Memory({ initial: Math.ceil(initialBytes / WASM_PAGE), maximum: MAX_PAGES, shared: true });
  const kernels = instantiate(module, memory);
  const heap = new Allocator(memory, kernels["heap_base"]!() >>> 0);
  const control = heap.alloc(CONTROL_BYTES, "fork-join control");
  const argsPtr = heap.alloc(ArgsWriter.CAPACITY, "kernel arguments");
  const pool = await WorkerPool.start(module, memory, kernels, control, threads);
  return new Runtime(memory, kernels, heap, pool, argsPtr, flavor);
}

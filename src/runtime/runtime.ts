/**
 * The runtime: one compiled kernel module, shared WebAssembly.Memory objects
 * (one to start with, more on demand: wasm32 caps each at 4 GiB), a pool of
 * worker threads each running its own instance over every memory, and per
 * memory the allocators that carve it up.
 *
 *   const rt = await createRuntime({ threads: 2 });
 *   const x = rt.tensor("f32", [1024]);
 *   rt.parallelFor("some_kernel", items, rt.args().ptr(x.ptr).i32(1024).end());
 *   const rt1 = rt.addMemory();                 // a second memory, same threads
 *   const y = rt1.tensor("f32", [1024]);        // lives in memory 1
 *   copyTensor(x, y);                           // across memories
 *   await rt.dispose();
 *
 * A `Runtime` is the view of one memory: its allocators, argument buffer and
 * scratch, and parallelFor over that memory's instances. `rt.memories` lists
 * the views of all of them (rt.memories[0] is the one createRuntime returns).
 * Ops run in the memory of the view they are given and refuse tensors from
 * another (checkTensor), so a model placed across memories passes each layer
 * the view its weights live in. Devices in one address space, as accelerate's
 * device_map hands each module its device.
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
import { nameMemory } from "../tensor/tensor.js";
import { INT8_DOT_MODES, type Int8DotLowering, type Int8DotMode, type KernelExports, type KernelFlavor, MAX_PAGES, WASM_PAGE, defaultInt8Dot, instantiate, kernelModule, kquantWideDefault, probeInt8DotLowering, probeInt8DotPairs, resolveKernelFlavor, v8Major } from "./module.js";
import { WorkerPool } from "./pool.js";

export interface RuntimeOptions {
  /** Threads including the caller's. Default: $KVFLASH_THREADS, else os.availableParallelism(). */
  threads?: number;
  /** Initial memory size in bytes (it grows on demand). Default 16 MiB. */
  initialMemoryBytes?: number;
  /** Kernel flavor (module.ts). Default: $KVFLASH_KERNELS, else relaxed where the engine supports it, else baseline. */
  kernels?: KernelFlavor;
  /**
   * The q8 / q4 kernels' integer dot (module.ts Int8DotMode). Default:
   * $KVFLASH_INT8_DOT, else defaultInt8Dot for how the relaxed dot lowers (probeInt8DotLowering). The relaxed flavor takes
   * "i7" and "i16" anywhere (tests compare the modes) and "u8" only where
   * probed; the baseline flavor only "i16". Anything else is an ArgumentError.
   */
  int8Dot?: Int8DotMode;
  /**
   * Whether most of the model's bytes are K-quant matrices kept natively (GGUF
   * Q2_K … Q6_K, IQ4_XS under --weights auto: model/gguf/kquant-source.ts): the
   * default flavor weighs it (module.ts relaxedPreferred). Default false.
   */
  kquantWeights?: boolean;
  /**
   * Whether the K-quant prefill widens each quad's codes to int16 once
   * (assembly/linalg/kquant-dot.ts widenQ45KQuad, widenQ6KQuad). Default: on
   * the baseline flavor, and on the relaxed one under V8 < 13, where it is
   * faster (kquantWideDefault); tests set it to compare both paths.
   */
  kquantWide?: boolean;
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

/** What every memory's view shares: the module, the threads, the list of views. */
interface RuntimeShared {
  module: WebAssembly.Module;
  flavor: KernelFlavor;
  int8Dot: Int8DotMode;
  int8DotLowering: Int8DotLowering | null;
  kquantPairs: boolean;
  kquantWide: boolean;
  pool: WorkerPool;
  views: Runtime[];
  initialBytes: number;
}

export class Runtime {
  readonly memory: WebAssembly.Memory;
  /** Position of this memory in `memories` (0: the first). */
  readonly index: number;
  /** The calling thread's instance over this memory: call exported functions directly for serial work. */
  readonly exports: KernelExports;
  /** The kernel flavor every thread runs: "baseline" (SIMD128) or "relaxed" (relaxed SIMD). */
  readonly kernels: KernelFlavor;
  /** How the q8 / q4 kernels take integer dot products (module.ts Int8DotMode): "u8" (AVX-VNNI's unsigned operand), "i7" (the portable relaxed dot) or "i16" (the int16 dot; always on baseline). */
  readonly int8Dot: Int8DotMode;
  /** How the relaxed kernels' int8 dot lowers on this engine and CPU (module.ts Int8DotLowering); null on baseline. */
  readonly int8DotLowering: Int8DotLowering | null;
  /** Whether the K-quant kernels sum their int8 dots in int16 pairs (module.ts probeInt8DotPairs): the relaxed dot lowers "saturating" and the pairs are exact here. */
  readonly kquantPairs: boolean;
  /** Whether the K-quant prefill (T ≥ 8) runs on codes widened to int16 once per quad (RuntimeOptions.kquantWide). */
  readonly kquantWide: boolean;
  /** Long-lived allocations: weights, KV pool, workspaces. */
  readonly heap: Allocator;
  /** Per-step scratch, reset by the caller at the start of each step. */
  readonly arena: StepArena;
  readonly #shared: RuntimeShared;
  readonly #pool: WorkerPool;
  /** The one writer over the argument buffer (a DataView over a fixed region: still valid after the memory grows). */
  readonly #args: ArgsWriter;
  #scratch = { ptr: 0, stride: 0 };

  /** @internal use createRuntime() / addMemory() */
  constructor(shared: RuntimeShared, index: number, memory: WebAssembly.Memory, kernels: KernelExports, heap: Allocator, argsPtr: number) {
    this.memory = memory;
    this.index = index;
    this.exports = kernels;
    this.kernels = shared.flavor;
    this.int8Dot = shared.int8Dot;
    this.int8DotLowering = shared.int8DotLowering;
    this.kquantPairs = shared.kquantPairs;
    this.kquantWide = shared.kquantWide;
    this.heap = heap;
    this.arena = new StepArena(heap);
    this.#shared = shared;
    this.#pool = shared.pool;
    this.#args = new ArgsWriter(memory, argsPtr);
  }

  /** Every memory's view, in the order they were added ([0] is createRuntime's). */
  get memories(): readonly Runtime[] {
    return this.#shared.views;
  }

  /**
   * Adds a shared memory (initial size as createRuntime's, growing on demand
   * to 4 GiB): every worker instantiates the module over it, so every thread
   * can run any kernel in it. Returns its view.
   */
  addMemory(): Runtime {
    const shared = this.#shared;
    const memory = new WebAssembly.Memory({ initial: Math.ceil(shared.initialBytes / WASM_PAGE), maximum: MAX_PAGES, shared: true });
    const kernels = instantiate(shared.module, memory);
    const index = shared.pool.addMemory(memory, kernels);
    return addView(shared, index, memory, kernels);
  }

  /** Memory `index`'s view, adding memories until there is one. */
  memoryAt(index: number): Runtime {
    if (!Number.isInteger(index) || index < 0 || index > 255) throw new ArgumentError("memory", `must be an integer in [0, 255], got ${show(index)}`);
    while (this.#shared.views.length <= index) this.addMemory();
    return this.#shared.views[index]!;
  }

  /** The view of `memory`, one of this runtime's memories. */
  of(memory: WebAssembly.Memory): Runtime {
    const view = this.#shared.views.find((v) => v.memory === memory);
    if (!view) throw new ArgumentError("memory", "must be one of this runtime's memories, got a memory it did not create");
    return view;
  }

  /** Bytes in use and held, per memory. */
  memoryUsage(): { memory: number; inUse: number; capacity: number }[] {
    return this.#shared.views.map((v) => ({ memory: v.index, inUse: v.heap.inUse, capacity: v.heap.capacity }));
  }

  /** Threads that run kernels, the caller's included. */
  get threads(): number {
    return this.#pool.threads;
  }

  /** parallelFor calls so far (every memory's) that forked to the workers rather than running on the caller alone: a profiling count. */
  get forkJoins(): number {
    return this.#pool.forkJoins;
  }

  /** Runs `kernel(item, tid, args)` for items [0, items) on every thread, in this memory; see WorkerPool. */
  parallelFor(kernel: string, items: number, args = 0): void {
    this.#pool.parallelFor(kernel, items, args, this.index);
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
    return this.#args.reset();
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

  /** Stops the worker threads (of every memory's view). The runtime cannot run kernels afterwards. */
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
  const flavor = resolveKernelFlavor(options.kernels, options.kquantWeights ?? false);
  const module = kernelModule(flavor);
  const memory = new WebAssembly.Memory({ initial: Math.ceil(initialBytes / WASM_PAGE), maximum: MAX_PAGES, shared: true });
  const kernels = instantiate(module, memory);
  const int8DotLowering = probeInt8DotLowering(flavor, kernels);
  const int8Dot = resolveInt8Dot(options.int8Dot, flavor, int8DotLowering);
  const kquantPairs = probeInt8DotPairs(flavor, kernels, int8DotLowering);
  const heap = new Allocator(memory, kernels["heap_base"]!() >>> 0);
  const control = heap.alloc(CONTROL_BYTES, "fork-join control");
  const pool = await WorkerPool.start(module, memory, kernels, control, threads);
  const kquantWide = options.kquantWide ?? kquantWideDefault(flavor, v8Major());
  const shared: RuntimeShared = { module, flavor, int8Dot, int8DotLowering, kquantPairs, kquantWide, pool, views: [], initialBytes };
  return addView(shared, 0, memory, kernels, heap);
}

/**
 * The int8Dot option, else $KVFLASH_INT8_DOT (how benchmarks and tests pick a
 * mode for a whole process), else defaultInt8Dot for how the flavor's
 * relaxed dot lowers. A mode the flavor or the lowering cannot take is an
 * ArgumentError naming where it came from and the value.
 */
function resolveInt8Dot(requested: Int8DotMode | undefined, flavor: KernelFlavor, lowering: Int8DotLowering | null): Int8DotMode {
  const env = process.env["KVFLASH_INT8_DOT"];
  const [name, value]: [string, string | undefined] = requested !== undefined ? ["int8Dot", requested] : ["KVFLASH_INT8_DOT", env === "" ? undefined : env];
  if (value === undefined) return defaultInt8Dot(flavor, process.arch, lowering);
  if (!(INT8_DOT_MODES as readonly string[]).includes(value)) {
    throw new ArgumentError(name, `must be one of ${INT8_DOT_MODES.map((m) => JSON.stringify(m)).join(", ")}, got ${show(value)}`);
  }
  if (flavor !== "relaxed" && value !== "i16") {
    throw new ArgumentError(name, `is ${show(value)}, but the ${flavor} kernels take only "i16" (the relaxed int8 dot needs kernels: "relaxed")`);
  }
  if (value === "u8" && lowering !== "unsigned") {
    throw new ArgumentError(name, `is "u8", but this engine's relaxed int8 dot is not exact on unsigned 8-bit operands here (probe: ${lowering ?? "none"}; needs the relaxed kernels on a CPU with AVX-VNNI and V8 ≥ 13)`);
  }
  return value as Int8DotMode;
}

/** Makes memory `index`'s view: its allocator (unless given), its argument buffer. */
function addView(shared: RuntimeShared, index: number, memory: WebAssembly.Memory, kernels: KernelExports, heap?: Allocator): Runtime {
  nameMemory(memory, `memory ${index}`);
  const h = heap ?? new Allocator(memory, kernels["heap_base"]!() >>> 0);
  const argsPtr = h.alloc(ArgsWriter.CAPACITY, "kernel arguments");
  const view = new Runtime(shared, index, memory, kernels, h, argsPtr);
  shared.views.push(view);
  return view;
}

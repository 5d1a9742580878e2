/**
 * The machine's ceilings, measured in the same run as the suite that uses
 * them: wasm SIMD f32 throughput and memory read bandwidth on one thread and
 * on all threads, and the fork–join overhead of parallelFor.
 */
import { type Runtime } from "../src/ops-entry.js";
import { type Ceilings, median, timeMedian } from "./harness.js";

export type { Ceilings };

const FLOPS_PER_ITERATION = 96; // 12 chains × 4 lanes × (mul + add)

export function measureCeilings(rt: Runtime, quick = false): Ceilings {
  const threads = rt.threads;

  // --- SIMD throughput -------------------------------------------------------
  const simd = new SimdProbe(rt, quick ? 200_000 : 1_000_000);
  const simd1 = simd.gflops(timeMedian(() => simd.runOneThread(), { minTimeMs: quick ? 100 : 400 }), false);
  const simdAll = simd.gflops(timeMedian(() => simd.runAllThreads(), { minTimeMs: quick ? 100 : 400 }), true);
  simd.free();

  // --- read bandwidth --------------------------------------------------------
  const { oneThread: read1, allThreads: readAll } = measureReadBandwidth(rt, quick);

  // --- fork–join overhead ----------------------------------------------------
  const batch = 1000;
  const batches: number[] = [];
  for (let b = 0; b < (quick ? 5 : 21); b++) {
    const t0 = performance.now();
    for (let i = 0; i < batch; i++) rt.parallelFor("task_noop", threads);
    batches.push(((performance.now() - t0) * 1000) / batch);
  }

  const idle = new Int32Array(new SharedArrayBuffer(4));
  const cold: number[] = [];
  for (let b = 0; b < (quick ? 10 : 50); b++) {
    Atomics.wait(idle, 0, 0, 2);
    const t0 = performance.now();
    rt.parallelFor("task_noop", threads);
    cold.push((performance.now() - t0) * 1000);
  }

  return {
    threads,
    simd_gflops_1t: simd1,
    simd_gflops_all: simdAll,
    read_gbps_1t: read1,
    read_gbps_all: readAll,
    forkjoin_us: median(batches),
    forkjoin_cold_us: median(cold),
  };
}

/**
 * The SIMD f32 peak probe (assembly/bench/roofline.ts bench_simd_flops: 12
 * independent chains of the flavor's multiply-add, fmadd: one FMA on the
 * relaxed flavor, mul + add on the baseline), run on one thread or as
 * 4 items a thread on all threads. Suites whose rows run long time it round by
 * round beside their own work (embed.ts), so load drifting on the shared
 * machine hits the ceiling and the row alike; `iterations` sets one run's
 * length (1e6: 96 MFLOP an item).
 */
export class SimdProbe {
  readonly #rt: Runtime;
  readonly #iterations: number;
  readonly #sink: number;

  constructor(rt: Runtime, iterations: number) {
    this.#rt = rt;
    this.#iterations = iterations;
    this.#sink = rt.heap.alloc(4 * 64 * rt.threads, "bench sink");
  }

  /** The multiply-add this flavor's probe (and its kernels' fmadd) runs. */
  get op(): "fma" | "mul+add" {
    return this.#rt.kernels === "relaxed" ? "fma" : "mul+add";
  }

  runOneThread(): void {
    this.#rt.exports["bench_simd_flops"]!(0, 0, this.#args());
  }

  runAllThreads(): void {
    this.#rt.parallelFor("bench_simd_flops", this.#rt.threads * 4, this.#args());
  }

  /** GFLOP/s of a run that took `ms` (all threads' or one thread's). */
  gflops(ms: number, allThreads: boolean): number {
    return (FLOPS_PER_ITERATION * this.#iterations * (allThreads ? this.#rt.threads * 4 : 1)) / (ms * 1e6);
  }

  free(): void {
    this.#rt.free(this.#sink);
  }

  #args(): number {
    return this.#rt.args().i32(this.#iterations).ptr(this.#sink).end();
  }
}

/**
 * Streaming read bandwidth (GB/s) on one thread and on all threads: v128 reads
 * of a buffer far larger than the last-level cache, its pages written first so
 * the reads hit real memory. Suites whose rows run long also call it next to
 * the rows it normalizes (the machine's bandwidth drifts within a run);
 * `oneThread` false skips the one-thread measurement (NaN).
 */
export function measureReadBandwidth(rt: Runtime, quick = false, oneThread = true): { oneThread: number; allThreads: number } {
  const k = rt.exports;
  const bytes = (quick ? 256 : 512) << 20; // ≫ a 32 MiB L3
  const chunk = 1 << 20;
  const items = bytes / chunk;
  const buf = rt.heap.alloc(bytes, "bandwidth probe");
  const readSink = rt.heap.alloc(items * 4, "bench sink");
  try {
    const readArgs = () => rt.args().ptr(buf).i32(chunk).ptr(readSink).end();
    rt.parallelFor("bench_fill", items, readArgs()); // touch every page for real
    const r1 = oneThread
      ? timeMedian(
          () => {
            const a = readArgs();
            for (let i = 0; i < items; i++) k["bench_read"]!(i, 0, a);
          },
          { minReps: quick ? 3 : 5, minTimeMs: quick ? 200 : 1000 },
        )
      : NaN;
    const rAll = timeMedian(() => rt.parallelFor("bench_read", items, readArgs()), { minReps: quick ? 3 : 5, minTimeMs: quick ? 200 : 1000 });
    return { oneThread: bytes / (r1 * 1e6), allThreads: bytes / (rAll * 1e6) };
  } finally {
    rt.free(buf);
    rt.free(readSink);
  }
}

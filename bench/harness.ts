/**
 * The benchmark harness every suite reports into. A suite measures the
 * machine's ceilings in its own run (ceilings.ts), times its cases with
 * median-of-repetitions, and reports rows as fractions of those ceilings and
 * as ratios against a baseline run in the same process.
 *
 * Output: a table on stdout and `{ machine, ceilings, rows }` as JSON.
 */
import { cpus, totalmem } from "node:os";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { type KernelFlavor, type Runtime } from "../src/ops-entry.js";
import type { Measurement } from "./lockstep.js";

export type Row = Record<string, string | number | boolean | null>;

/** The machine's ceilings, measured by ceilings.ts in the same run (declared here, where every suite reads them, so ceilings.ts's import of the timing helpers is no cycle). */
export interface Ceilings {
  threads: number;
  /** f32x4 mul+add chains, GFLOP/s. */
  simd_gflops_1t: number;
  simd_gflops_all: number;
  /** Streaming reads of a buffer far larger than the last-level cache, GB/s (1e9 bytes). */
  read_gbps_1t: number;
  read_gbps_all: number;
  /** parallelFor of a no-op over `threads` items, back to back (workers spinning), µs per call. */
  forkjoin_us: number;
  /** The same after 2 ms idle (workers asleep in Atomics.wait), µs per call. */
  forkjoin_cold_us: number;
}

export interface SuiteContext {
  rt: Runtime;
  quick: boolean;
  ceilings: Ceilings;
  /** Every kernel flavor this run measures (one, or baseline and relaxed in lockstep). */
  flavors: readonly KernelFlavor[];
  /** Whether --kernels or $KVFLASH_KERNELS chose the flavor; else a suite may run a model on the flavor its weights get by default (RuntimeOptions.kquantWeights). */
  kernelsGiven?: boolean;
  /** Progress lines go to stderr so stdout stays the table. */
  log: (line: string) => void;
  /*
   * Measurements. When several kernel flavors run the suite in lockstep
   * (run.ts, lockstep.ts), each call is alternated run by run with the other
   * flavors' same call; alone, they run as written.
   */
  /** Median wall time of `fn` in ms (timeMedian's rules). */
  time(fn: () => void, options?: TimingOptions): Promise<number>;
  /** Median ms of each function, timed in alternating rounds (timeInterleavedMeasurement). */
  timeInterleaved(fns: readonly (() => void)[], minTimeMs: number, minRounds?: number): Promise<number[]>;
  /** Runs `fn` n times (each run in turn with the other flavors' runs) and returns what each run returned. */
  repeat<T>(fn: () => T | Promise<T>, n: number): Promise<T[]>;
}

export interface Suite {
  name: string;
  description: string;
  run(ctx: SuiteContext): Promise<Row[]> | Row[];
  /** Without --kernels, run once per kernel flavor (baseline, relaxed) in one process. */
  bothKernels?: boolean;
}

export interface MachineInfo {
  cpu: string;
  cores: number;
  memory_gib: number;
  node: string;
  v8: string;
  platform: string;
  threads: number;
  date: string;
  /** The kernel flavor(s) the rows ran on: "baseline", "relaxed" or "baseline+relaxed" (rows name theirs). */
  kernels?: string;
  /** The integer dot of the q8 / q4 kernels (Runtime.int8Dot) on the relaxed runtime, else the baseline's: "u8" (AVX-VNNI's unsigned operand), "i7" or "i16". */
  int8Dot?: string;
}

export function machineInfo(threads: number): MachineInfo {
  const c = cpus();
  return {
    cpu: c[0]?.model ?? "unknown",
    cores: c.length,
    memory_gib: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    v8: process.versions.v8,
    platform: `${process.platform}-${process.arch}`,
    threads,
    date: new Date().toISOString(),
  };
}

/**
 * The CPU as bench rows name it (issue #30): the model and whether it has
 * AVX-VNNI, the feature V8 ≥ 13 lowers the relaxed int8 dot to, and whether
 * this process turned it off in V8 (--no-enable-avx-vnni, how a CPU with it
 * stands in for one without): "Intel(R) Xeon(R) Processor, AVX-VNNI (off in
 * V8: --no-enable-avx-vnni)". The flag comes from /proc/cpuinfo (Linux);
 * elsewhere "AVX-VNNI unknown".
 */
export function cpuSummary(): string {
  const model = cpus()[0]?.model.trim() ?? "unknown";
  let vnni = "AVX-VNNI unknown";
  try {
    const flags = /^flags\s*:(.*)$/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1]?.split(/\s+/) ?? [];
    vnni = flags.includes("avx_vnni") ? "AVX-VNNI" : "no AVX-VNNI";
  } catch {
    // not Linux: leave it unknown
  }
  const off = process.execArgv.filter((a) => /^--no-enable-(avx|sse)/.test(a));
  return `${model}, ${vnni}${off.length > 0 ? ` (off in V8: ${off.join(" ")})` : ""}`;
}

/** The q8 / q4 integer dot as bench rows name it: "i16, relaxed dot saturating", "u8, relaxed dot unsigned", "i16, baseline kernels". */
export function int8DotSummary(rt: Runtime): string {
  return rt.kernels === "relaxed" ? `${rt.int8Dot}, relaxed dot ${rt.int8DotLowering ?? "unknown"}` : `${rt.int8Dot}, ${rt.kernels} kernels`;
}

export interface TimingOptions {
  /** Untimed runs first. Default 1. */
  warmup?: number;
  /** At least this many timed runs. Default 5. */
  minReps?: number;
  /** Keep repeating until this much time has been spent (ms). Default 300. */
  minTimeMs?: number;
  /** Never more than this many timed runs. Default 1000. */
  maxReps?: number;
}

/** timeMedian as one side of an alternated measurement: one timed call a round. */
export function timeMeasurement(fn: () => void, options: TimingOptions = {}): Measurement<number> {
  const { warmup = 1, minReps = 5, minTimeMs = 300, maxReps = 1000 } = options;
  const times: number[] = [];
  let spent = 0;
  return {
    kind: "time",
    warm: () => {
      for (let i = 0; i < warmup; i++) fn();
    },
    round: () => {
      const t0 = performance.now();
      fn();
      const t = performance.now() - t0;
      times.push(t);
      spent += t;
    },
    done: () => (times.length >= minReps && spent >= minTimeMs) || times.length >= maxReps,
    result: () => median(times),
  };
}

/**
 * Median time (ms) of each function, measured in alternating rounds so that
 * drifting load on the shared machine hits all of them alike; each round runs
 * every function enough times to take ≥ 20 ms (calibrated once, after a
 * warm-up call), for at least minRounds rounds and minTimeMs per function.
 */
export function timeInterleavedMeasurement(fns: readonly (() => void)[], minTimeMs: number, minRounds = 5): Measurement<number[]> {
  const reps: number[] = [];
  const times: number[][] = fns.map(() => []);
  let rounds = 0;
  let spent = 0;
  return {
    kind: "interleaved",
    warm: () => {
      for (const f of fns) f();
      for (const f of fns) {
        const t0 = performance.now();
        f();
        reps.push(Math.max(1, Math.ceil(20 / Math.max(0.01, performance.now() - t0))));
      }
    },
    round: () => {
      const start = performance.now();
      fns.forEach((f, i) => {
        const t0 = performance.now();
        for (let k = 0; k < reps[i]!; k++) f();
        times[i]!.push((performance.now() - t0) / reps[i]!);
      });
      rounds++;
      spent += performance.now() - start;
    },
    done: () => rounds >= minRounds && spent >= minTimeMs * fns.length,
    result: () => times.map((t) => median(t)),
  };
}

/** n runs of `fn`, one a round; the result is what each run returned. */
export function repeatMeasurement<T>(fn: () => T | Promise<T>, n: number): Measurement<T[]> {
  const results: T[] = [];
  return {
    kind: "repeat",
    round: async () => {
      results.push(await fn());
    },
    done: () => results.length >= n,
    result: () => results,
  };
}

/** Runs one side alone: what a measurement gives without other flavors. */
export async function runAlone<T>(m: Measurement<T>): Promise<T> {
  await m.warm?.();
  do await m.round();
  while (!m.done());
  return m.result();
}

/** Median wall time of `fn` in milliseconds. */
export function timeMedian(fn: () => void, options: TimingOptions = {}): number {
  const { warmup = 1, minReps = 5, minTimeMs = 300, maxReps = 1000 } = options;
  for (let i = 0; i < warmup; i++) fn();
  const times: number[] = [];
  const start = performance.now();
  while (times.length < minReps || (performance.now() - start < minTimeMs && times.length < maxReps)) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  return median(times);
}

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The q-quantile (0..1) of xs by linear interpolation between order statistics. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo]! + (s[hi]! - s[lo]!) * (pos - lo);
}

/** Rounds for display and JSON: 4 significant digits. */
export function round4(x: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  const digits = Math.max(0, 3 - Math.floor(Math.log10(Math.abs(x))));
  return Number(x.toFixed(Math.min(digits, 8)));
}

export function formatTable(rows: readonly Row[]): string {
  if (rows.length === 0) return "(no rows)";
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (v: Row[string] | undefined): string => (v === undefined || v === null ? "" : typeof v === "number" ? String(round4(v)) : String(v));
  const widths = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => `| ${vals.map((v, i) => v.padEnd(widths[i]!)).join(" | ")} |`;
  return [line(cols), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map((r) => line(cols.map((c) => cell(r[c]))))].join("\n");
}

export function writeResults(path: string, result: { machine: MachineInfo; ceilings: Ceilings; ceilings_by_kernels?: Partial<Record<string, Ceilings>>; rows: Row[] }): void {
  mkdirSync(dirname(path), { recursive: true });
  const rows = result.rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, typeof v === "number" ? round4(v) : v])));
  const ceilings = Object.fromEntries(Object.entries(result.ceilings).map(([k, v]) => [k, round4(v)]));
  const byKernels = result.ceilings_by_kernels &&
    Object.fromEntries(Object.entries(result.ceilings_by_kernels).map(([f, c]) => [f, Object.fromEntries(Object.entries(c!).map(([k, v]) => [k, round4(v)]))]));
  writeFileSync(path, `${JSON.stringify({ machine: result.machine, ceilings, ...(byKernels ? { ceilings_by_kernels: byKernels } : {}), rows }, null, 2)}\n`);
}

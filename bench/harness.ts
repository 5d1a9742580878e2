/**
 * The benchmark harness every suite reports into. A suite measures the
 * machine's ceilings in its own run (ceilings.ts), times its cases with
 * median-of-repetitions, and reports rows as fractions of those ceilings and
 * as ratios against a baseline run in the same process.
 *
 * Output: a table on stdout and `{ machine, ceilings, rows }` as JSON.
 */
import { cpus, totalmem } from "node:os";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { Runtime } from "../src/index.js";
import type { Ceilings } from "./ceilings.js";

export type Row = Record<string, string | number | boolean | null>;

export interface SuiteContext {
  rt: Runtime;
  quick: boolean;
  ceilings: Ceilings;
  /** Progress lines go to stderr so stdout stays the table. */
  log: (line: string) => void;
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

/**
 * Benchmark entry point.
 *
 *   npm run bench -- <suite> [--quick] [--threads N] [--kernels baseline|relaxed] [--out FILE]
 *
 * Prints the suite's table and writes `{ machine, ceilings, rows }` to
 * bench/results/<suite>.json (a full run from the repository), to --out, or
 * nowhere (a --quick run without --out).
 *
 * Kernel flavors (src/runtime/module.ts): `--kernels` runs one. Without it, a
 * suite marked `bothKernels` runs on every flavor this engine can run, in one
 * process, side by side: one runtime per flavor (both alive), the suite's
 * copies in lockstep, each measurement alternated run by run between the
 * flavors (lockstep.ts). Ceilings are measured per flavor; each row names its
 * `kernels`, rows come in pairs (baseline, relaxed) and the relaxed row adds
 * `speedup_vs_baseline`. The other suites run the default flavor.
 * `machine.kernels` names what ran.
 */
import { fileURLToPath } from "node:url";
import { ArgumentError, show } from "../src/errors.js";
import { KERNEL_FLAVORS, type KernelFlavor, type Runtime, createRuntime, kernelFlavorAvailable, resolveKernelFlavor } from "../src/ops-entry.js";
import { describeKernels } from "../src/runtime/module.js";
import { type Ceilings, measureCeilings } from "./ceilings.js";
import {
  type Row,
  type SuiteContext,
  formatTable,
  machineInfo,
  repeatMeasurement,
  runAlone,
  timeInterleavedMeasurement,
  timeMeasurement,
  writeResults,
} from "./harness.js";
import { Lockstep, type Measurement } from "./lockstep.js";
import { SUITES } from "./suites/index.js";

export interface BenchArgs {
  suite: string;
  quick: boolean;
  threads?: number;
  out?: string;
  /** One kernel flavor; absent: both where the suite supports it. */
  kernels?: KernelFlavor;
  /** Write bench/results/<suite>.json when no --out is given (the repository's `npm run bench`). */
  writeDefault: boolean;
}

export const USAGE = `usage: bench <suite> [--quick] [--threads N] [--kernels baseline|relaxed] [--out FILE]\nsuites: ${SUITES.map((s) => s.name).join(", ")}`;

export function parseBenchArgs(argv: readonly string[], writeDefault: boolean): BenchArgs {
  const args: BenchArgs = { suite: "", quick: false, writeDefault };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--quick") args.quick = true;
    else if (a === "--threads") args.threads = Number(argv[++i]);
    else if (a === "--out") args.out = argv[++i];
    else if (a === "--kernels") {
      const k = argv[++i];
      if (!(KERNEL_FLAVORS as readonly (string | undefined)[]).includes(k)) throw new ArgumentError("--kernels", `must be baseline or relaxed, got ${show(k)}`);
      args.kernels = k as KernelFlavor;
    }
    else if (a.startsWith("--")) throw new Error(`unknown option ${a}\n${USAGE}`);
    else if (!args.suite) args.suite = a;
    else throw new Error(`unexpected argument ${a}\n${USAGE}`);
  }
  if (!args.suite) args.suite = args.quick ? "roofline" : "";
  if (!args.suite) throw new Error(USAGE);
  return args;
}

export async function runBench(args: BenchArgs): Promise<void> {
  const suite = SUITES.find((s) => s.name === args.suite);
  if (!suite) throw new Error(`unknown suite ${JSON.stringify(args.suite)}\n${USAGE}`);
  const flavors: KernelFlavor[] =
    args.kernels !== undefined ? [resolveKernelFlavor(args.kernels)]
    : suite.bothKernels && kernelFlavorAvailable("relaxed") ? ["baseline", "relaxed"]
    : [resolveKernelFlavor()];
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const byFlavor: Partial<Record<KernelFlavor, Ceilings>> = {};
  const runtimes: Runtime[] = [];
  let rowsByFlavor: Row[][];
  try {
    for (const kernels of flavors) {
      const rt = await createRuntime({ kernels, ...(args.threads === undefined ? {} : { threads: args.threads }) });
      runtimes.push(rt);
      log(`kvflash bench ${suite.name}${args.quick ? " --quick" : ""}: ${suite.description} (${rt.threads} threads, ${describeKernels(kernels, rt.int8Dot, rt.int8DotLowering)})`);
      log("measuring ceilings…");
      byFlavor[kernels] = measureCeilings(rt, args.quick);
    }
    if (flavors.length > 1) log(`running the ${flavors.join(" and ")} kernels side by side, each measurement alternated between them`);
    const lockstep = new Lockstep(flavors);
    rowsByFlavor = await Promise.all(flavors.map(async (kernels, i) => {
      const flavorLog = flavors.length > 1 ? (line: string) => log(`[${kernels}] ${line}`) : log;
      const measure = <T>(m: Measurement<T>): Promise<T> => (flavors.length > 1 ? lockstep.measure(i, m) : runAlone(m));
      const ctx: SuiteContext = {
        rt: runtimes[i]!,
        quick: args.quick,
        ceilings: byFlavor[kernels]!,
        flavors,
        kernelsGiven: args.kernels !== undefined || (process.env["KVFLASH_KERNELS"] ?? "") !== "",
        log: flavorLog,
        time: (fn, options) => measure(timeMeasurement(fn, options)),
        timeInterleaved: (fns, minTimeMs, minRounds) => measure(timeInterleavedMeasurement(fns, minTimeMs, minRounds)),
        repeat: (fn, n) => measure(repeatMeasurement(fn, n)),
      };
      try {
        const rows = await suite.run(ctx);
        lockstep.leave(i);
        return rows.map((r) => ({ kernels, ...r }));
      } catch (e) {
        lockstep.leave(i, e as Error);
        throw e;
      }
    }));
  } finally {
    for (const rt of runtimes) await rt.dispose();
  }
  const rows = pairRows(rowsByFlavor);
  const machine = { ...machineInfo(runtimes[0]!.threads), kernels: flavors.join("+"), int8Dot: (runtimes.find((r) => r.kernels === "relaxed") ?? runtimes[0]!).int8Dot };
  process.stdout.write(`${formatTable(rows)}\n`);
  const out = args.out ?? (args.writeDefault && !args.quick ? fileURLToPath(new URL(`../../bench/results/${suite.name}.json`, import.meta.url)) : undefined);
  if (out) {
    const ceilings = byFlavor[flavors[0]!]!;
    writeResults(out, { machine, ceilings, ...(flavors.length > 1 ? { ceilings_by_kernels: byFlavor } : {}), rows });
    log(`wrote ${out}`);
  }
}

/**
 * One flavor's rows as they are; several flavors' rows side by side (row i of
 * each, in flavor order), each later flavor's row with `speedup_vs_baseline`
 * = the first flavor's time / its own (`ms` or `us`), or its `tok_s` / the
 * first flavor's where a row has no time (serve). A llama.cpp row (serve:
 * measured beside each flavor's server, not on a flavor) gets none.
 */
export function pairRows(byFlavor: readonly Row[][]): Row[] {
  if (byFlavor.length === 1) return byFlavor[0]!;
  // Rows pair up by position; a suite that measures something on one flavor
  // only (model: the 8B rows) puts those rows last, after the pairs.
  const n = Math.min(...byFlavor.map((rows) => rows.length));
  const out: Row[] = [];
  for (let i = 0; i < n; i++) {
    const base = byFlavor[0]![i]!;
    out.push(base);
    for (const rows of byFlavor.slice(1)) {
      const row = rows[i]!;
      const both = (k: string) => typeof base[k] === "number" && typeof row[k] === "number";
      const time = ["ms", "us"].find(both);
      const speedup = row["engine"] === "llama.cpp" ? undefined : time ? (base[time] as number) / (row[time] as number) : both("tok_s") ? (row["tok_s"] as number) / (base["tok_s"] as number) : undefined;
      out.push(speedup === undefined ? row : { ...row, speedup_vs_baseline: speedup });
    }
  }
  for (const rows of byFlavor) out.push(...rows.slice(n));
  return out;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  runBench(parseBenchArgs(process.argv.slice(2), true)).catch((e: Error) => {
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
  });
}

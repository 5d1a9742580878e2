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
 * suite marked `bothKernels` runs once per flavor this engine can run, in one
 * process (ceilings measured per flavor; each row names its `kernels`), and
 * the others run the default flavor. `machine.kernels` names what ran.
 */
import { fileURLToPath } from "node:url";
import { ArgumentError, show } from "../src/errors.js";
import { KERNEL_FLAVORS, type KernelFlavor, createRuntime, kernelFlavorAvailable, resolveKernelFlavor } from "../src/index.js";
import { type Ceilings, measureCeilings } from "./ceilings.js";
import { type Row, formatTable, machineInfo, writeResults } from "./harness.js";
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
  const rows: Row[] = [];
  const byFlavor: Partial<Record<KernelFlavor, Ceilings>> = {};
  let threads = 0;
  const env = process.env["KVFLASH_KERNELS"];
  try {
    for (const kernels of flavors) {
      // Runtimes the suite makes itself (one-thread rows, a server's engine) run the same flavor.
      process.env["KVFLASH_KERNELS"] = kernels;
      const rt = await createRuntime({ kernels, ...(args.threads === undefined ? {} : { threads: args.threads }) });
      try {
        threads = rt.threads;
        log(`kvflash bench ${suite.name}${args.quick ? " --quick" : ""}: ${suite.description} (${rt.threads} threads, ${kernels} kernels)`);
        log("measuring ceilings…");
        const ceilings = measureCeilings(rt, args.quick);
        byFlavor[kernels] = ceilings;
        const flavorRows = await suite.run({ rt, quick: args.quick, ceilings, log });
        rows.push(...flavorRows.map((r) => ({ kernels, ...r })));
      } finally {
        await rt.dispose();
      }
    }
  } finally {
    if (env === undefined) delete process.env["KVFLASH_KERNELS"];
    else process.env["KVFLASH_KERNELS"] = env;
  }
  const machine = { ...machineInfo(threads), kernels: flavors.join("+") };
  process.stdout.write(`${formatTable(rows)}\n`);
  const out = args.out ?? (args.writeDefault && !args.quick ? fileURLToPath(new URL(`../../bench/results/${suite.name}.json`, import.meta.url)) : undefined);
  if (out) {
    const ceilings = byFlavor[flavors[0]!]!;
    writeResults(out, { machine, ceilings, ...(flavors.length > 1 ? { ceilings_by_kernels: byFlavor } : {}), rows });
    log(`wrote ${out}`);
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  runBench(parseBenchArgs(process.argv.slice(2), true)).catch((e: Error) => {
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
  });
}

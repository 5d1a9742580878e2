/**
 * Benchmark entry point.
 *
 *   npm run bench -- <suite> [--quick] [--threads N] [--out FILE]
 *
 * Prints the suite's table and writes `{ machine, ceilings, rows }` to
 * bench/results/<suite>.json (a full run from the repository), to --out, or
 * nowhere (a --quick run without --out).
 */
import { fileURLToPath } from "node:url";
import { createRuntime } from "../src/index.js";
import { measureCeilings } from "./ceilings.js";
import { formatTable, machineInfo, writeResults } from "./harness.js";
import { SUITES } from "./suites/index.js";

export interface BenchArgs {
  suite: string;
  quick: boolean;
  threads?: number;
  out?: string;
  /** Write bench/results/<suite>.json when no --out is given (the repository's `npm run bench`). */
  writeDefault: boolean;
}

export const USAGE = `usage: bench <suite> [--quick] [--threads N] [--out FILE]\nsuites: ${SUITES.map((s) => s.name).join(", ")}`;

export function parseBenchArgs(argv: readonly string[], writeDefault: boolean): BenchArgs {
  const args: BenchArgs = { suite: "", quick: false, writeDefault };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--quick") args.quick = true;
    else if (a === "--threads") args.threads = Number(argv[++i]);
    else if (a === "--out") args.out = argv[++i];
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
  const rt = await createRuntime(args.threads === undefined ? {} : { threads: args.threads });
  try {
    const log = (line: string) => process.stderr.write(`${line}\n`);
    log(`kvflash bench ${suite.name}${args.quick ? " --quick" : ""}: ${suite.description} (${rt.threads} threads)`);
    log("measuring ceilings…");
    const ceilings = measureCeilings(rt, args.quick);
    const rows = await suite.run({ rt, quick: args.quick, ceilings, log });
    const machine = machineInfo(rt.threads);
    process.stdout.write(`${formatTable(rows)}\n`);
    const out = args.out ?? (args.writeDefault && !args.quick ? fileURLToPath(new URL(`../../bench/results/${suite.name}.json`, import.meta.url)) : undefined);
    if (out) {
      writeResults(out, { machine, ceilings, rows });
      log(`wrote ${out}`);
    }
  } finally {
    await rt.dispose();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  runBench(parseBenchArgs(process.argv.slice(2), true)).catch((e: Error) => {
    process.stderr.write(`${e.message}\n`);
    process.exit(1);
  });
}

#!/usr/bin/env node
/**
 * The test command (`npm test` runs it after the build), the same on Node 20,
 * 22 and 24. `node --test DIR` only works on Node 20 (from Node 21 on, --test
 * takes files and globs), and a glob can miss files silently, so this script
 * lists the test files itself, hands them to node's runner, and checks the
 * count afterwards:
 *
 *   - every test/**\/*.test.ts has its compiled dist/test/**\/*.test.js, and
 *     every one of them reported at least one test;
 *   - with --expect FILE (a summary an earlier run wrote), every file reported
 *     exactly as many tests as it did there: CI runs the suite on Node 20,
 *     then on Node 24 with --expect, so the suite cannot shrink on either.
 *
 * Two kernel flavors (src/runtime/module.ts): a full run goes on with the
 * kernel conformance suites (OTHER_FLAVOR_SUITES) on the flavor the runtime
 * did not pick by default, where this Node can run it: on Node ≥ 22 the
 * default is relaxed SIMD, so the suites run again on baseline; Node 20 runs
 * only baseline (its V8 computes the relaxed int8 dot product wrong).
 *
 * Files run CONCURRENCY at a time (node's --test-concurrency), two by
 * default: most files spend their time waiting on the processes they start
 * (servers, llama.cpp, haproxy, chromium, npm), not on the CPU. On a 2-core
 * machine the Node 20 pass took 434 s two at a time against 688 s one at a
 * time, and the Node 24 pass 776 s against 1011 s (node's own default there
 * is availableParallelism() − 1 = 1). The WebGPU suites (test/gpu) gain
 * nothing alone: SwiftShader keeps both cores busy (354 s two at a time
 * against 355 s one by one); spreading them between the other files, so that
 * two rarely met, made no difference either (744 s against about 750 s).
 *
 * Usage: node scripts/run-tests.mjs [--summary FILE] [--expect FILE] [--slowest N]
 *                                   [--kernels baseline|relaxed] [--concurrency N] [PATH_PREFIX…]
 *   PATH_PREFIX  run only the test files under these source paths (test/attention, test/ops/rope.test.ts)
 *   --kernels    run on this flavor only (sets $KVFLASH_KERNELS for the tests)
 *   --summary / --expect  concern the default-flavor run
 *   --slowest N  after each pass, list its N slowest files with the wall time of
 *                each file's process (CI prints 15: where the suite's time goes;
 *                with files running side by side, a file's time includes its
 *                waits for the CPU the others held)
 *   --concurrency N  test files at once (default 2; 1 runs them one by one); the
 *                files of RUN_ALONE always run one by one, after the others
 *
 * Prints node's spec report, then one closing line: `tests: N passed, N failed, N skipped`.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
const REPORTER = fileURLToPath(new URL("./test-count-reporter.mjs", import.meta.url));
const KERNELS = ["baseline", "relaxed"];
const DEFAULT_CONCURRENCY = 2;
/**
 * Files that run alone, after the others: their tests hold the server to its
 * own time budgets (the grammar host answers a mask request within 5 s, or the
 * request fails), which a neighbour's load made one fuzzed grammar exceed.
 */
const RUN_ALONE = ["test/server/grammar-isolation.test.ts", "test/server/grammar-host-crash.test.ts"];
/** The kernel conformance suites and a decoder-vs-reference test, run on both flavors. */
const OTHER_FLAVOR_SUITES = [
  "test/attention",
  "test/kv",
  "test/ops",
  "test/runtime/kernel-flavor.test.ts",
  "test/engine/sampler-kernels.test.ts",
  "test/model/decoder.test.ts",
  "test/model/decoder-formats.test.ts",
];

function fail(message) {
  console.error(`run-tests: ${message}`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { summary: undefined, expect: undefined, kernels: undefined, slowest: undefined, concurrency: DEFAULT_CONCURRENCY, prefixes: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--summary" || a === "--expect" || a === "--kernels" || a === "--slowest" || a === "--concurrency") {
      const value = argv[++i];
      if (value === undefined || value.startsWith("--")) fail(`${a} needs a value`);
      args[a.slice(2)] = value;
    } else if (a.startsWith("--")) {
      fail(`unknown flag ${a}; flags: --summary FILE, --expect FILE, --kernels baseline|relaxed, --slowest N, --concurrency N`);
    } else {
      args.prefixes.push(a.replace(/\/+$/, ""));
    }
  }
  if (args.kernels !== undefined && !KERNELS.includes(args.kernels)) fail(`--kernels must be one of ${KERNELS.join(", ")}, got ${JSON.stringify(args.kernels)}`);
  for (const flag of ["slowest", "concurrency"]) {
    if (args[flag] === undefined || typeof args[flag] === "number") continue;
    const n = Number(args[flag]);
    if (!Number.isInteger(n) || n < 1) fail(`--${flag} must be a whole number ≥ 1, got ${JSON.stringify(args[flag])}`);
    args[flag] = n;
  }
  return args;
}

/** test/**\/*.test.ts, as paths relative to the repository root with "/" separators, sorted. */
function sourceTestFiles(dir = join(ROOT, "test")) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceTestFiles(path));
    else if (entry.name.endsWith(".test.ts")) out.push(relative(ROOT, path).split(sep).join("/"));
  }
  return out.sort();
}

function selected(files, prefixes) {
  if (prefixes.length === 0) return files;
  const picked = files.filter((f) => prefixes.some((p) => f === p || f.startsWith(`${p}/`)));
  if (picked.length === 0) fail(`no test file under ${prefixes.join(", ")}`);
  return picked;
}

const compiled = (src) => `dist/${src.replace(/\.ts$/, ".js")}`;

function runNode(files, kernels, concurrency, countsFile) {
  const env = kernels === undefined ? process.env : { ...process.env, KVFLASH_KERNELS: kernels };
  const result = spawnSync(
    process.execPath,
    [
      "--test",
      `--test-concurrency=${concurrency}`,
      "--test-reporter=spec",
      "--test-reporter-destination=stdout",
      `--test-reporter=${REPORTER}`,
      `--test-reporter-destination=${countsFile}`,
      ...files.map(compiled),
    ],
    { cwd: ROOT, env, stdio: "inherit" },
  );
  if (result.error) fail(`cannot start ${process.execPath}: ${result.error.message}`);
  return result.status ?? 1;
}

/** Per source file: tests passed, failed, skipped, from the reporter's lines (in any of `countsFiles`); and the wall time (ms) of each file's process. */
function countByFile(files, countsFiles) {
  const byCompiled = new Map(files.map((f) => [resolve(ROOT, compiled(f)), f]));
  const counts = Object.fromEntries(files.map((f) => [f, { tests: 0, passed: 0, failed: 0, skipped: 0 }]));
  const fileMs = new Map();
  const text = countsFiles.map((f) => (existsSync(f) ? readFileSync(f, "utf8") : "")).join("\n");
  for (const line of text.split("\n")) {
    if (!line) continue;
    const record = JSON.parse(line);
    const src = byCompiled.get(resolve(record.file));
    if (src === undefined) continue;
    if (record.fileMs !== undefined) {
      fileMs.set(src, record.fileMs);
      continue;
    }
    const { outcome } = record;
    const c = counts[src];
    c.tests++;
    if (outcome === "fail") c.failed++;
    else if (outcome === "skip") c.skipped++;
    else c.passed++;
  }
  return { counts, fileMs };
}

/** The `n` slowest files of a pass, one line each: seconds, share of the pass's file time, path. */
function printSlowest(label, fileMs, n) {
  const rows = [...fileMs].sort((a, b) => b[1] - a[1]);
  const sum = rows.reduce((s, [, ms]) => s + ms, 0);
  console.log(`\nslowest test files, ${label} (wall time of each file's process; ${rows.length} files, ${(sum / 1000).toFixed(1)} s in all):`);
  for (const [file, ms] of rows.slice(0, n)) {
    console.log(`${(ms / 1000).toFixed(1).padStart(8)} s ${((100 * ms) / sum).toFixed(1).padStart(5)} %  ${file}`);
  }
}

/**
 * Runs `files` on `kernels` (undefined: the runtime's default), `concurrency` files at a
 * time, then those of RUN_ALONE one by one, and counts their tests file by file; `wallS`:
 * the pass's wall time, seconds.
 */
function runPass(files, kernels, concurrency) {
  const work = mkdtempSync(join(tmpdir(), "kvflash-tests-"));
  const alone = files.filter((f) => RUN_ALONE.includes(f));
  const batches = [[files.filter((f) => !RUN_ALONE.includes(f)), concurrency], [alone, 1]].filter(([batch]) => batch.length > 0);
  const countsFiles = batches.map((_, i) => join(work, `counts-${i}.jsonl`));
  try {
    const start = performance.now();
    let status = 0;
    batches.forEach(([batch, c], i) => {
      const s = runNode(batch, kernels, c, countsFiles[i]);
      if (s !== 0) status = s;
    });
    const wallS = (performance.now() - start) / 1000;
    return { status, wallS, ...countByFile(files, countsFiles) };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function totals(counts) {
  const total = { tests: 0, passed: 0, failed: 0, skipped: 0 };
  for (const c of Object.values(counts)) for (const k of Object.keys(total)) total[k] += c[k];
  return total;
}

/** The flavor a runtime picks by default here, and whether the other one runs on this Node (from the built runtime). */
async function flavors() {
  const { defaultKernelFlavor, kernelFlavorAvailable } = await import(pathToFileURL(join(ROOT, "dist/src/runtime/module.js")).href);
  const byDefault = defaultKernelFlavor();
  const other = byDefault === "relaxed" ? "baseline" : "relaxed";
  return { byDefault, other, otherRuns: kernelFlavorAvailable(other), available: kernelFlavorAvailable };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const files = selected(sourceTestFiles(), args.prefixes);
  const missing = files.filter((f) => !existsSync(join(ROOT, compiled(f))));
  if (missing.length > 0) fail(`not compiled (run \`npm run build\`): ${missing.map(compiled).join(", ")}`);
  const flavor = await flavors();
  if (args.kernels !== undefined && !flavor.available(args.kernels)) {
    fail(`--kernels ${args.kernels}: Node ${process.version} (V8 ${process.versions.v8}) cannot run these kernels; use Node ≥ 22`);
  }

  const { status, wallS, counts, fileMs } = runPass(files, args.kernels, args.concurrency);
  const problems = [];
  for (const [file, c] of Object.entries(counts)) if (c.tests === 0) problems.push(`${file} reported no tests`);
  if (args.expect !== undefined) {
    const expected = JSON.parse(readFileSync(args.expect, "utf8"));
    for (const [file, c] of Object.entries(expected.files)) {
      if (!(file in counts)) problems.push(`${file} ran with ${expected.node} but not here`);
      else if (counts[file].tests !== c.tests) problems.push(`${file}: ${counts[file].tests} tests here, ${c.tests} with ${expected.node}`);
    }
    for (const file of Object.keys(counts)) if (!(file in expected.files)) problems.push(`${file} ran here but not with ${expected.node}`);
  }
  const kernels = args.kernels ?? process.env["KVFLASH_KERNELS"] ?? flavor.byDefault;
  const total = totals(counts);
  if (args.summary !== undefined) {
    writeFileSync(args.summary, `${JSON.stringify({ node: process.version, kernels, total, files: counts }, null, 1)}\n`);
  }
  const pace = (s) => `${s.toFixed(0)} s, ${args.concurrency} file(s) at a time`;
  console.log(`\nnode ${process.version}, ${kernels} kernels: ${files.length} test files, ${total.tests} tests, ${total.passed} passed, ${total.failed} failed (${pace(wallS)})`);
  if (args.slowest !== undefined) printSlowest(`node ${process.version}, ${kernels} kernels`, fileMs, args.slowest);

  // The other flavor: the conformance suites again, on a full default run only.
  let otherStatus = 0;
  const all = { ...total };
  const fullDefaultRun = args.prefixes.length === 0 && args.kernels === undefined && !process.env["KVFLASH_KERNELS"];
  if (fullDefaultRun && flavor.otherRuns) {
    const other = runPass(selected(files, OTHER_FLAVOR_SUITES), flavor.other, args.concurrency);
    otherStatus = other.status;
    const t = totals(other.counts);
    for (const k of Object.keys(all)) all[k] += t[k];
    console.log(`\nnode ${process.version}, ${flavor.other} kernels (conformance suites): ${t.tests} tests, ${t.passed} passed, ${t.failed} failed (${pace(other.wallS)})`);
    if (args.slowest !== undefined) printSlowest(`node ${process.version}, ${flavor.other} kernels (conformance suites)`, other.fileMs, args.slowest);
  } else if (fullDefaultRun) {
    console.log(`the ${flavor.other} kernels need Node ≥ 22 (V8 ≥ 11.4): not run on Node ${process.version}; CI runs them on Node 24`);
  }

  for (const p of problems) console.log(`count check failed: ${p}`);
  console.log(`tests: ${all.passed} passed, ${all.failed} failed, ${all.skipped} skipped`);
  process.exit(status !== 0 || otherStatus !== 0 || all.failed > 0 || problems.length > 0 ? 1 : 0);
}

await main();

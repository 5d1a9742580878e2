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
 * Usage: node scripts/run-tests.mjs [--summary FILE] [--expect FILE]
 *                                   [--kernels baseline|relaxed] [PATH_PREFIX…]
 *   PATH_PREFIX  run only the test files under these source paths (test/attention, test/ops/rope.test.ts)
 *   --kernels    sets $KVFLASH_KERNELS for the tests; "relaxed" on Node 20 adds
 *                --experimental-wasm-relaxed-simd (Node ≥ 22 has it on by default)
 *
 * Prints node's spec report, then one closing line: `tests: N passed, N failed, N skipped`.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
const REPORTER = fileURLToPath(new URL("./test-count-reporter.mjs", import.meta.url));
const KERNELS = ["baseline", "relaxed"];

function fail(message) {
  console.error(`run-tests: ${message}`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { summary: undefined, expect: undefined, kernels: undefined, prefixes: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--summary" || a === "--expect" || a === "--kernels") {
      const value = argv[++i];
      if (value === undefined || value.startsWith("--")) fail(`${a} needs a value`);
      args[a.slice(2)] = value;
    } else if (a.startsWith("--")) {
      fail(`unknown flag ${a}; flags: --summary FILE, --expect FILE, --kernels baseline|relaxed`);
    } else {
      args.prefixes.push(a.replace(/\/+$/, ""));
    }
  }
  if (args.kernels !== undefined && !KERNELS.includes(args.kernels)) fail(`--kernels must be one of ${KERNELS.join(", ")}, got ${JSON.stringify(args.kernels)}`);
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

function runNode(files, kernels, countsFile) {
  const major = Number(process.versions.node.split(".")[0]);
  const flags = kernels === "relaxed" && major < 22 ? ["--experimental-wasm-relaxed-simd"] : [];
  const env = kernels === undefined ? process.env : { ...process.env, KVFLASH_KERNELS: kernels };
  const result = spawnSync(
    process.execPath,
    [
      ...flags,
      "--test",
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

/** Per source file: tests passed, failed, skipped, from the reporter's lines. */
function countByFile(files, countsFile) {
  const byCompiled = new Map(files.map((f) => [resolve(ROOT, compiled(f)), f]));
  const counts = Object.fromEntries(files.map((f) => [f, { tests: 0, passed: 0, failed: 0, skipped: 0 }]));
  const text = existsSync(countsFile) ? readFileSync(countsFile, "utf8") : "";
  for (const line of text.split("\n")) {
    if (!line) continue;
    const { file, outcome } = JSON.parse(line);
    const src = byCompiled.get(resolve(file));
    if (src === undefined) continue;
    const c = counts[src];
    c.tests++;
    if (outcome === "fail") c.failed++;
    else if (outcome === "skip") c.skipped++;
    else c.passed++;
  }
  return counts;
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const files = selected(sourceTestFiles(), args.prefixes);
  const missing = files.filter((f) => !existsSync(join(ROOT, compiled(f))));
  if (missing.length > 0) fail(`not compiled (run \`npm run build\`): ${missing.map(compiled).join(", ")}`);

  const work = mkdtempSync(join(tmpdir(), "kvflash-tests-"));
  const countsFile = join(work, "counts.jsonl");
  let status;
  let counts;
  try {
    status = runNode(files, args.kernels, countsFile);
    counts = countByFile(files, countsFile);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }

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

  const total = { tests: 0, passed: 0, failed: 0, skipped: 0 };
  for (const c of Object.values(counts)) for (const k of Object.keys(total)) total[k] += c[k];
  const kernels = args.kernels ?? process.env["KVFLASH_KERNELS"] ?? "default";
  if (args.summary !== undefined) {
    writeFileSync(args.summary, `${JSON.stringify({ node: process.version, kernels, total, files: counts }, null, 1)}\n`);
  }

  console.log(`\nnode ${process.version}, kernels ${kernels}: ${files.length} test files, ${total.tests} tests`);
  for (const p of problems) console.log(`count check failed: ${p}`);
  console.log(`tests: ${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped`);
  process.exit(status !== 0 || total.failed > 0 || problems.length > 0 ? 1 : 0);
}

main();

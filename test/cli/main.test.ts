// The kvflash command itself, as a child process: --version, bench --help
// (the benchmarks are not in the package), "did you mean" for a mistyped
// command, one error for a missing model directory in serve and generate, and
// coarse load progress from generate when stderr is not a terminal, and a
// serve that exits on SIGTERM while its model is still loading.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { closest, editDistance } from "../../src/cli/suggest.js";
import { faultyModelArgs, startServer } from "../server/harness.js";

const MAIN = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const PACKAGE = fileURLToPath(new URL("../../../package.json", import.meta.url));
const run = promisify(execFile);

async function kvflash(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [MAIN, ...args], { env: { ...process.env, KVFLASH_THREADS: "1" } });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? -1, stdout: err.stdout ?? "", stderr: err.stderr ?? "" };
  }
}

let root: string;
before(() => {
  root = mkdtempSync(join(tmpdir(), "kvflash-main-"));
});
after(() => rmSync(root, { recursive: true, force: true }));

test("--version prints package.json's version", async () => {
  const { version } = JSON.parse(readFileSync(PACKAGE, "utf8")) as { version: string };
  const out = await kvflash("--version");
  assert.equal(out.code, 0, out.stderr);
  assert.equal(out.stdout, `kvflash ${version}\n`);
});

test("bench --help points to npm run bench in a checkout; bench alone fails saying so", async () => {
  const help = await kvflash("bench", "--help");
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /npm run bench -- <suite> \[--quick\]/);
  const bench = await kvflash("bench", "roofline");
  assert.equal(bench.code, 1);
  assert.match(bench.stderr, /the benchmarks are not installed with kvflash[\s\S]*npm run bench/);
});

test("a mistyped command gets a suggestion; a far-off one gets none", async () => {
  const typo = await kvflash("genrate", "--prompt", "x");
  assert.equal(typo.code, 1);
  assert.match(typo.stderr, /^unknown command "genrate" \(did you mean "generate"\?\)\nkvflash — /);
  const far = await kvflash("frobnicate");
  assert.equal(far.code, 1);
  assert.match(far.stderr, /^unknown command "frobnicate"\n/);
  const commands = ["serve", "generate", "logits", "bench", "help"];
  assert.equal(closest("srve", commands), "serve");
  assert.equal(closest("sevre", commands), "serve");
  assert.equal(closest("Serve", commands), "serve");
  assert.equal(closest("logit", commands), "logits");
  assert.equal(closest("gen", commands), "generate");
  assert.equal(closest("x", commands), null);
  assert.equal(closest("benchmark", commands), null);
  assert.equal(editDistance("", "abc"), 3);
  assert.equal(editDistance("abcd", "acbd"), 1);
  assert.equal(editDistance("kitten", "sitting"), 3);
});

test("serve and generate give the same error for a missing or non-model directory", async () => {
  const missing = join(root, "nowhere");
  const file = join(root, "file.txt");
  writeFileSync(file, "not a directory");
  const cases: [string, RegExp][] = [
    [missing, /^kvflash: --model ".*nowhere": no such file or directory/],
    [file, /^kvflash: --model ".*file\.txt" is a file but not a GGUF file/],
    [root, /^kvflash: --model ".*kvflash-main-\w+" has no config\.json \(is it a Hugging Face model directory\?\)\n$/],
  ];
  for (const [dir, message] of cases) {
    const serve = await kvflash("serve", "--model", dir, "--port", "0");
    const generate = await kvflash("generate", "--model", dir, "--prompt", "x");
    assert.equal(serve.code, 1);
    assert.equal(generate.code, 1);
    assert.match(serve.stderr, message);
    assert.equal(generate.stderr, serve.stderr);
  }
});

test("generate off a terminal logs the load in coarse lines, as serve does", async () => {
  const out = await kvflash("generate", "--prompt", "Hi", "--max-tokens", "2");
  assert.equal(out.code, 0, out.stderr);
  const lines = out.stderr.split("\n").filter((l) => l.startsWith("loading weights"));
  assert.ok(lines.length >= 2 && lines.length <= 11, out.stderr);
  for (const line of lines) assert.match(line, /^loading weights \d+% \([\d.]+ \w+ of [\d.]+ MiB, [\d.]+ \S+\/s\)$/);
  assert.match(lines.at(-1)!, /^loading weights 100% /);
  assert.ok(!out.stderr.includes("\r") && !out.stderr.includes("\x1b"));
});

test("serve exits on SIGTERM while the model is still loading", { timeout: 60_000 }, async () => {
  // The loader waits 60 s before loading: the signal arrives in the loading state.
  const server = await startServer(faultyModelArgs(-1, {}, 60_000), { waitReady: false });
  const health = await fetch(`${server.url}/health`);
  assert.equal(health.status, 503);
  assert.equal(((await health.json()) as { status: string }).status, "loading");
  const stopped = server.stop("SIGTERM");
  const kill = setTimeout(() => server.proc.kill("SIGKILL"), 30_000); // a hang fails the test (exit code null) rather than the run
  const code = await stopped;
  clearTimeout(kill);
  assert.equal(code, 0, server.stderr());
  assert.match(server.stderr(), /SIGTERM: shutting down\nkvflash: stopped\n$/);
});

// `kvflash show` and `kvflash rm` as real processes, offline (HF_HUB_OFFLINE=1,
// and the mock hub closed before they run), over a temporary Hugging Face
// cache filled from a mock hub: a safetensors repository and a GGUF
// repository with two quants in two commits that share their blobs.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import type { HubSettings } from "../../src/sources/hub/hub-settings.js";
import { readModelDirInfo } from "../../src/model/model-dir.js";
import type { ModelSummary } from "../../src/model/model-summary.js";
import { resolveModelSource } from "../../src/sources/source.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { MockHub, readTree } from "../helpers/mock-hub.js";

const MAIN = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const run = promisify(execFile);

let root: string;
let cacheDir: string;
let dir: string;
let q8: string;
let f16: string;
let ggufCommits: string[];
let tinyCommit: string;
/** Elements of the tiny model's weights, from the loader's own view of the directory. */
let parameters: number;

interface Shown {
  model: string;
  path: string;
  hub: { repo: string; revision: string; commit: string } | null;
  summary: ModelSummary;
}

/** The CLI with no network: HF_HUB_OFFLINE=1 and an endpoint nothing listens on. */
async function kvflash(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("HF_") && !k.startsWith("HUGGING")));
  const env = { ...clean, HF_HUB_CACHE: cacheDir, HF_HOME: join(root, "home"), HF_HUB_OFFLINE: "1", HF_ENDPOINT: "http://127.0.0.1:9" };
  try {
    const { stdout, stderr } = await run(process.execPath, [MAIN, ...args], { env });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? -1, stdout: err.stdout ?? "", stderr: err.stderr ?? "" };
  }
}

async function show(model: string, ...more: string[]): Promise<Shown> {
  const r = await kvflash("show", model, "--json", ...more);
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Shown;
}

const blobsOf = (repo: string): string[] => {
  const d = join(cacheDir, `models--${repo.replace("/", "--")}`, "blobs");
  return existsSync(d) ? readdirSync(d).sort() : [];
};

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-cache-cli-"));
  cacheDir = join(root, "hub-cache");
  dir = writeTinyModel(join(root, "tiny"), { arch: "qwen2", seed: 5, maxPositionEmbeddings: 4096 }).dir;
  parameters = readModelDirInfo(dir).weights.reduce((s, w) => s + w.shape.reduce((a, b) => a * b, 1), 0);
  q8 = join(root, "tiny-Q8_0.gguf");
  f16 = join(root, "tiny-F16.gguf");
  convertModelDirToGguf(dir, q8, { type: "Q8_0" });
  convertModelDirToGguf(dir, f16, { type: "F16" });
  const hub = await MockHub.start();
  try {
    tinyCommit = hub.addCommit("org/tiny", readTree(dir));
    const files = new Map([
      ["tiny-Q8_0.gguf", readFileSync(q8)],
      ["tiny-F16.gguf", readFileSync(f16)],
      ["README.md", Buffer.from("# tiny\n")],
    ]);
    ggufCommits = [hub.addCommit("org/tiny-gguf", files, ["v1"]), hub.addCommit("org/tiny-gguf", new Map([...files, ["README.md", Buffer.from("# tiny, again\n")]]))];
    const settings: HubSettings = { cacheDir, endpoint: hub.url, token: null, offline: false };
    for (const [spec, revision] of [["org/tiny", "main"], ["org/tiny-gguf:Q8_0", "v1"], ["org/tiny-gguf:F16", "v1"], ["org/tiny-gguf:Q8_0", "main"], ["org/tiny-gguf:F16", "main"]] as const) {
      await resolveModelSource(spec, { settings, revision, progress: false });
    }
  } finally {
    await hub.close(); // from here on nothing can reach a hub
  }
});
after(() => rmSync(root, { recursive: true, force: true }));

test("show: a model directory's architecture, parameters, quant, context length, template, files and size", async () => {
  const s = await show(dir);
  assert.equal(s.hub, null);
  assert.equal(s.summary.format, "safetensors");
  assert.equal(s.summary.architecture, "Qwen2ForCausalLM (qwen2)");
  assert.equal(s.summary.parameters, parameters);
  assert.equal(s.summary.contextLength, 4096);
  assert.equal(s.summary.template?.origin, "tokenizer_config.json");
  assert.equal(s.summary.template?.family, "chatml");
  assert.equal(s.summary.supported, "yes");
  const files = [...readTree(dir)].map(([path, bytes]) => ({ path, bytes: bytes.length })).sort((a, b) => (a.path < b.path ? -1 : 1));
  assert.deepEqual(s.summary.files, files);
  assert.equal(s.summary.bytes, files.reduce((n, f) => n + f.bytes, 0));
  assert.deepEqual(Object.keys(s.summary.tensorTypes), [s.summary.quant]);

  const text = await kvflash("show", dir);
  assert.equal(text.code, 0, text.stderr);
  for (const row of ["architecture +Qwen2ForCausalLM \\(qwen2\\)", "parameters +\\d+\\.\\d\\dK", "context length +4096", "chat template +chatml \\(tokenizer_config.json\\): ", "supported +yes", "files +\\d+, "]) {
    assert.match(text.stdout, new RegExp(`^${row}`, "m"));
  }
  assert.match(text.stdout, /^ +model\.safetensors +[\d.]+ KiB$/m);
});

test("show: a GGUF file reads its own metadata: the same parameters, its quant and tensor types, the embedded template", async () => {
  const s = await show(q8);
  assert.equal(s.summary.format, "gguf");
  assert.equal(s.summary.architecture, "qwen2");
  assert.equal(s.summary.parameters, parameters);
  assert.equal(s.summary.quant, "Q8_0");
  assert.deepEqual(Object.keys(s.summary.tensorTypes).sort(), ["F32", "Q8_0"]);
  assert.equal(s.summary.contextLength, 4096);
  assert.equal(s.summary.template?.origin, "tokenizer.chat_template");
  assert.equal(s.summary.template?.family, "chatml");
  assert.deepEqual(s.summary.files, [{ path: "tiny-Q8_0.gguf", bytes: statSync(q8).size }]);
  assert.equal(s.summary.supported, "yes");
  assert.equal((await show(f16)).summary.quant, "F16");
});

test("show: a hub spec comes from the cache, offline, at a revision; one that is not cached is an error that says so", async () => {
  const tiny = await show("org/tiny");
  assert.deepEqual(tiny.hub, { repo: "org/tiny", revision: "main", commit: tinyCommit });
  assert.equal(tiny.path, join(cacheDir, "models--org--tiny", "snapshots", tinyCommit));
  assert.equal(tiny.summary.parameters, parameters);
  const quant = await show("org/tiny-gguf:q8_0", "--revision", "v1");
  assert.equal(quant.hub?.commit, ggufCommits[0]);
  assert.equal(quant.summary.quant, "Q8_0");
  assert.equal(quant.summary.bytes, statSync(q8).size);
  assert.equal((await show("org/tiny-gguf/tiny-F16.gguf")).hub?.commit, ggufCommits[1]);

  const missing = await kvflash("show", "org/absent");
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /MODEL "org\/absent": the Hugging Face cache \(.*hub-cache\) has no snapshot of org\/absent at revision main; show reads the cache only: kvflash pull org\/absent first/);
  const noQuant = await kvflash("show", "org/tiny-gguf:Q4_K_M");
  assert.equal(noQuant.code, 1);
  assert.match(noQuant.stderr, /has org\/tiny-gguf at main \(commit [0-9a-f]{10}\) but not all of org\/tiny-gguf:Q4_K_M/);
  const revisionOfPath = await kvflash("show", dir, "--revision", "v1");
  assert.match(revisionOfPath.stderr, /--revision applies to hub repositories/);
});

test("rm org/name:QUANT removes that quant from every snapshot and its blob once no link needs it; the rest stays", async () => {
  const before = blobsOf("org/tiny-gguf");
  const r = await kvflash("rm", "org/tiny-gguf:Q8_0");
  assert.equal(r.code, 0, r.stderr);
  const freed = statSync(q8).size;
  assert.equal(r.stdout, `removed ${ggufCommits[0]!.slice(0, 10)}/tiny-Q8_0.gguf, ${ggufCommits[1]!.slice(0, 10)}/tiny-Q8_0.gguf from ${cacheDir}: ${(freed / 1024).toFixed(1)} KiB freed\n`);
  assert.equal(blobsOf("org/tiny-gguf").length, before.length - 1, "the two links shared one blob");
  assert.equal((await show("org/tiny-gguf:F16")).summary.quant, "F16");
  const gone = await kvflash("show", "org/tiny-gguf:Q8_0");
  assert.equal(gone.code, 1);

  const again = await kvflash("rm", "org/tiny-gguf:Q8_0");
  assert.equal(again.code, 1);
  assert.match(again.stderr, /MODEL "org\/tiny-gguf:Q8_0" is not in the Hugging Face cache: org\/tiny-gguf is cached with the GGUF files F16 \(tiny-F16.gguf\)/);
});

test("rm org/name removes the whole repository; a live download's lock refuses; specs that are not cached repositories are errors", async () => {
  const locks = join(cacheDir, ".locks", "models--org--tiny");
  mkdirSync(locks, { recursive: true });
  writeFileSync(join(locks, "0123.kvflash.lock"), String(process.pid)); // this test's process: alive
  const busy = await kvflash("rm", "org/tiny");
  assert.equal(busy.code, 1);
  assert.match(busy.stderr, new RegExp(`org/tiny is being downloaded by process ${process.pid}`));
  writeFileSync(join(locks, "0123.kvflash.lock"), "999999999"); // a process that is gone: a stale lock

  const blobBytes = blobsOf("org/tiny").reduce((s, b) => s + statSync(join(cacheDir, "models--org--tiny", "blobs", b)).size, 0);
  const r = await kvflash("rm", "org/tiny");
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^removed org/tiny \\(the whole repository, ${readTree(dir).size} file\\(s\\)\\) from .*: `));
  assert.ok(r.stdout.endsWith(`: ${(blobBytes / 1024).toFixed(1)} KiB freed\n`) || r.stdout.endsWith(`: ${(blobBytes / 2 ** 20).toFixed(2)} MiB freed\n`), r.stdout);
  assert.ok(!existsSync(join(cacheDir, "models--org--tiny")));
  assert.ok(!existsSync(locks));
  const ls = JSON.parse((await kvflash("ls", "--json")).stdout) as { repo: string }[];
  assert.deepEqual([...new Set(ls.map((x) => x.repo))], ["org/tiny-gguf"]);

  assert.match((await kvflash("rm", "org/tiny")).stderr, /MODEL "org\/tiny" is not in the Hugging Face cache \(.*\); kvflash ls lists what is/);
  assert.match((await kvflash("rm", dir)).stderr, /SPEC must be a Hugging Face repository .* rm never deletes local paths/);
  assert.ok(existsSync(dir));
  assert.match((await kvflash("rm")).stderr, /SPEC is required/);
});

test("rm of the last file a repository has in the cache removes the repository", async () => {
  const r = await kvflash("rm", "org/tiny-gguf/tiny-F16.gguf");
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^removed ${ggufCommits[0]!.slice(0, 10)}/tiny-F16.gguf, ${ggufCommits[1]!.slice(0, 10)}/tiny-F16.gguf from .*: ${(statSync(f16).size / 1024).toFixed(1)} KiB freed \\(nothing else of org/tiny-gguf was cached: its folder went too\\)\n$`));
  assert.ok(!existsSync(join(cacheDir, "models--org--tiny-gguf")));
  assert.equal((await kvflash("ls")).stdout.split("\n")[0], `no models in ${cacheDir} (get one with: kvflash pull org/name)`);
});

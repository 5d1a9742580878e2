// `kvflash pull`, `kvflash ls` and `generate --model org/name` as real
// processes against a mock hub on 127.0.0.1 (HF_ENDPOINT) and a temporary
// cache (HF_HUB_CACHE): the downloaded model generates exactly what the same
// model does from a local directory.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { writeTinyModel } from "../../src/index.js";
import { MockHub, readTree } from "../helpers/mock-hub.js";
import { startServer } from "../server/harness.js";

const MAIN = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const run = promisify(execFile);

let hub: MockHub;
let root: string;
let dir: string;
let commit: string;

async function kvflash(env: Record<string, string>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("HF_") && !k.startsWith("HUGGING")));
  try {
    const { stdout, stderr } = await run(process.execPath, [MAIN, ...args], { env: { ...clean, KVFLASH_THREADS: "2", HF_HOME: join(root, "home"), HF_ENDPOINT: hub.url, ...env } });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? -1, stdout: err.stdout ?? "", stderr: err.stderr ?? "" };
  }
}

before(async () => {
  hub = await MockHub.start();
  root = mkdtempSync(join(tmpdir(), "kvflash-hub-cli-"));
  dir = writeTinyModel(join(root, "tiny"), { arch: "qwen2", seed: 5, embeddingStd: 0.05 }).dir;
  commit = hub.addCommit("org/tiny", readTree(dir));
  hub.addCommit("org/gguf", new Map([["tiny-Q8_0.gguf", Buffer.from("GGUF....")]]));
});
after(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

test("kvflash pull downloads into HF_HUB_CACHE and prints the path; kvflash ls lists it", async () => {
  const cache = join(root, "cache-pull");
  const pull = await kvflash({ HF_HUB_CACHE: cache }, "pull", "org/tiny");
  assert.equal(pull.code, 0, pull.stderr);
  const snapshot = join(cache, "models--org--tiny", "snapshots", commit);
  assert.equal(pull.stdout, `${snapshot}\n`);
  assert.match(pull.stderr, /org\/tiny @ main \(commit [0-9a-f]{10}\): model.safetensors — /);
  assert.match(pull.stderr, /downloading org\/tiny \[#{20}\] 100%/);
  assert.match(pull.stderr, /serve it with: kvflash serve --model org\/tiny/);

  const ls = await kvflash({ HF_HUB_CACHE: cache }, "ls");
  assert.equal(ls.code, 0, ls.stderr);
  const files = readTree(dir);
  const bytes = [...files.values()].reduce((s, b) => s + b.length, 0);
  assert.match(ls.stdout, new RegExp(`^REPO +REVISION +COMMIT +FILES +SIZE +MODEL FILES\\norg/tiny +main +${commit.slice(0, 10)} +${files.size} +[\\d.]+ [KM]iB +model.safetensors\\n`));
  const json = JSON.parse((await kvflash({ HF_HUB_CACHE: cache }, "ls", "--json")).stdout) as { repo: string; revisions: string[]; commit: string; files: string[]; bytes: number; path: string }[];
  assert.deepEqual(json, [{ repo: "org/tiny", revisions: ["main"], commit, files: [...files.keys()].sort(), bytes, path: snapshot }]);

  const empty = await kvflash({ HF_HUB_CACHE: join(root, "cache-empty") }, "ls");
  assert.match(empty.stdout, /^no models in .*cache-empty \(get one with: kvflash pull org\/name\)/);
});

test("generate --model org/name downloads and generates what the local directory does; offline it runs from the cache", async () => {
  const cache = join(root, "cache-generate");
  const args = ["--prompt", "Hello hub", "--temperature", "0", "--max-tokens", "6", "--ignore-eos", "--json"];
  const local = await kvflash({}, "generate", "--model", dir, ...args);
  assert.equal(local.code, 0, local.stderr);
  const viaHub = await kvflash({ HF_HUB_CACHE: cache }, "generate", "--model", "org/tiny", ...args);
  assert.equal(viaHub.code, 0, viaHub.stderr);
  assert.match(viaHub.stderr, /org\/tiny → .*models--org--tiny[/\\]snapshots[/\\][0-9a-f]{40} \(from the hub, commit/);
  assert.deepEqual(JSON.parse(viaHub.stdout), JSON.parse(local.stdout));
  hub.requests.length = 0;
  const offline = await kvflash({ HF_HUB_CACHE: cache, HF_HUB_OFFLINE: "1" }, "generate", "--model", "org/tiny", ...args);
  assert.equal(offline.code, 0, offline.stderr);
  assert.match(offline.stderr, /\(from the cache, commit/);
  assert.deepEqual(JSON.parse(offline.stdout), JSON.parse(local.stdout));
  assert.equal(hub.requests.length, 0);
});

test("pull errors: a quant that is not there lists the ones that are; HF_HUB_OFFLINE; a missing spec", async () => {
  const cache = join(root, "cache-errors");
  const quant = await kvflash({ HF_HUB_CACHE: cache }, "pull", "org/gguf:Q4_K_M");
  assert.equal(quant.code, 1);
  assert.match(quant.stderr, /--model "org\/gguf:Q4_K_M": the repository has no GGUF file for quant Q4_K_M; it has Q8_0 \(tiny-Q8_0.gguf\)/);
  const offline = await kvflash({ HF_HUB_CACHE: cache, HF_HUB_OFFLINE: "1" }, "pull", "org/tiny");
  assert.equal(offline.code, 1);
  assert.match(offline.stderr, /HF_HUB_OFFLINE is set: kvflash pull needs the network/);
  const none = await kvflash({ HF_HUB_CACHE: cache }, "pull");
  assert.match(none.stderr, /SPEC is required/);
  const revision = await kvflash({ HF_HUB_CACHE: cache }, "generate", "--prompt", "x", "--revision", "v1");
  assert.match(revision.stderr, /--revision needs a hub --model/);
});

test("serve --model org/name downloads, then serves it under that name", { timeout: 90_000 }, async () => {
  for (const k of Object.keys(process.env)) if (k.startsWith("HF_") || k.startsWith("HUGGING")) delete process.env[k];
  Object.assign(process.env, { HF_ENDPOINT: hub.url, HF_HUB_CACHE: join(root, "cache-serve"), HF_HOME: join(root, "home") });
  const server = await startServer(["--model", "org/tiny", "--num-gpu-blocks-override", "64"]);
  try {
    assert.match(server.stderr(), /org\/tiny → .*models--org--tiny[/\\]snapshots[/\\][0-9a-f]{40} \(from the hub/);
    const models = await server.openai.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ["org/tiny"]);
    const r = await server.openai.completions.create({ model: "org/tiny", prompt: "Hello hub", max_tokens: 4, temperature: 0 });
    assert.equal(r.model, "org/tiny");
    const n = r.usage?.completion_tokens ?? 0;
    assert.ok(n >= 1 && n <= 4, `completion_tokens ${n}`);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

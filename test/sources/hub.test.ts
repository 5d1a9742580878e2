// The hub resolver against a mock hub on 127.0.0.1 (test/helpers/mock-hub.ts):
// only the needed files are fetched into huggingface_hub's cache layout, a cut
// connection resumes with a Range request, a wrong checksum leaves nothing in
// the cache, revisions pin commits, gated repos need HF_TOKEN, offline uses
// the cache only, and a GGUF quant is picked by name (or the ones there are listed).
// Hostile servers and caches: a size that disagrees with the hub's stops the
// download (at once, or after a bounded number of requests when the server
// states no size), and a symlink planted as a blob's .incomplete file is not followed.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, beforeEach, test } from "node:test";
import { writeTinyModel } from "../../src/testing/index.js";
import { HubError } from "../../src/sources/hub/hub-client.js";
import type { HubSettings } from "../../src/sources/hub/hub-settings.js";
import { parseHubSpec } from "../../src/sources/hub/model-spec.js";
import { chooseGguf } from "../../src/sources/hub/repo-files.js";
import { type ResolveModelOptions, resolveModelSource } from "../../src/sources/source.js";
import { MockHub, readTree } from "../helpers/mock-hub.js";

let hub: MockHub;
let root: string;
let cacheDir: string;
let tiny: Map<string, Buffer>;
let tinyCommit: string;

const settings = (over: Partial<HubSettings> = {}): HubSettings => ({ cacheDir, endpoint: hub.url, token: null, offline: false, ...over });
const resolve = (spec: string, options: ResolveModelOptions = {}) => resolveModelSource(spec, { settings: settings(), progress: false, ...options });
const repoDir = (repo: string): string => join(cacheDir, `models--${repo.replace("/", "--")}`);
const gguf = (tag: string): Buffer => Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(3000, tag)]);

before(async () => {
  hub = await MockHub.start();
  root = mkdtempSync(join(tmpdir(), "kvflash-hub-"));
  const dir = writeTinyModel(join(root, "tiny"), { arch: "qwen2", seed: 3, shards: 2 }).dir;
  tiny = readTree(dir);
  // Files a model repository also has that kvflash must not fetch.
  const extra = new Map([...tiny, ["README.md", Buffer.from("# tiny\n")], ["pytorch_model.bin", Buffer.alloc(5000, 1)], ["onnx/model.onnx", Buffer.alloc(100, 2)]]);
  tinyCommit = hub.addCommit("org/tiny", extra);
  hub.addCommit("org/gguf", new Map([["model-Q4_K_M.gguf", gguf("a")], ["model-Q8_0.gguf", gguf("b")], ["mmproj-model-f16.gguf", gguf("c")], ["README.md", Buffer.from("x")]]));
});
after(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});
beforeEach(() => {
  cacheDir = mkdtempSync(join(root, "cache-"));
  hub.requests.length = 0;
  hub.cuts.clear();
  hub.corrupt.clear();
  hub.oversize.clear();
  hub.unsized.clear();
});

test("org/name downloads only the model's files into the hub cache layout, then is a cache hit offline", async () => {
  const r = await resolve("org/tiny");
  assert.equal(r.from, "hub");
  assert.deepEqual(r.source, { kind: "dir", path: join(repoDir("org/tiny"), "snapshots", tinyCommit) });
  assert.equal(readFileSync(join(repoDir("org/tiny"), "refs", "main"), "utf8"), tinyCommit);
  const got = readTree(r.source.path);
  assert.deepEqual([...got.keys()].sort(), [...tiny.keys()].sort()); // no README, .bin or onnx
  for (const [path, bytes] of tiny) {
    assert.ok(got.get(path)!.equals(bytes), path);
    const link = join(r.source.path, path);
    assert.ok(lstatSync(link).isSymbolicLink(), `${path} is a link`);
    assert.equal(readlinkSync(link), `../../blobs/${hub.etag("org/tiny", tinyCommit, path)}`);
  }
  assert.ok(!hub.requests.some((q) => /README|pytorch_model|onnx/.test(q.path)));
  assert.ok(!readdirSync(join(repoDir("org/tiny"), "blobs")).some((b) => b.endsWith(".incomplete")));

  hub.requests.length = 0;
  const again = await resolve("org/tiny", { settings: settings({ offline: true }) });
  assert.deepEqual(again, { source: r.source, from: "cache", hub: { repo: "org/tiny", revision: "main", commit: tinyCommit } });
  const online = await resolve("org/tiny");
  assert.equal(online.from, "cache");
  assert.equal(hub.requests.length, 0, "a complete cached model needs no request");
});

test("offline without the model in the cache: a clear error naming HF_HUB_OFFLINE and kvflash pull", async () => {
  await assert.rejects(resolve("org/tiny", { settings: settings({ offline: true }) }), /HF_HUB_OFFLINE is set and the Hugging Face cache .* has no snapshot of org\/tiny at revision main.*kvflash pull org\/tiny/);
  assert.equal(hub.requests.length, 0);
});

test("a cut connection resumes with a Range request from the bytes on disk (in the same run, and in the next)", async () => {
  const shard = [...tiny.keys()].find((f) => f.endsWith(".safetensors"))!;
  const etag = hub.etag("org/tiny", tinyCommit, shard);
  hub.cuts.set(etag, { times: 1, afterBytes: 1000 });
  const r = await resolve("org/tiny");
  assert.ok(readFileSync(join(r.source.path, shard)).equals(tiny.get(shard)!));
  const gets = hub.requests.filter((q) => q.method === "GET" && q.path === `/cdn/${etag}`);
  assert.deepEqual(gets.map((q) => q.range), [null, "bytes=1000-"]);

  // Cut more often than one run retries (3): the run fails, keeping the bytes; the next run resumes.
  cacheDir = mkdtempSync(join(root, "cache-"));
  hub.requests.length = 0;
  hub.cuts.set(etag, { times: 5, afterBytes: 700 });
  await assert.rejects(resolve("org/tiny"), (e: Error) => e instanceof HubError && /stopped after 2800 of \d+ bytes .*run the command again to resume/.test(e.message));
  const blobs = join(repoDir("org/tiny"), "blobs");
  assert.equal(statSync(join(blobs, `${etag}.incomplete`)).size, 2800);
  assert.ok(!existsSync(join(blobs, etag)));
  assert.ok(!existsSync(join(repoDir("org/tiny"), "refs", "main")), "no ref before every file is in");
  hub.requests.length = 0;
  const resumed = await resolve("org/tiny");
  assert.equal(resumed.from, "hub");
  assert.ok(readFileSync(join(resumed.source.path, shard)).equals(tiny.get(shard)!));
  assert.deepEqual(hub.requests.filter((q) => q.path === `/cdn/${etag}`).map((q) => q.range), ["bytes=2800-", "bytes=3500-"]);
});

test("a server that sends fewer bytes than the hub announced is refused at its first response, naming both sizes", { timeout: 20_000 }, async () => {
  const shard = [...tiny.keys()].find((f) => f.endsWith(".safetensors"))!;
  const etag = hub.etag("org/tiny", tinyCommit, shard);
  const size = tiny.get(shard)!.length;
  hub.oversize.set(etag, 100);
  await assert.rejects(
    resolve("org/tiny"),
    (e: Error) => e instanceof HubError && e.kind === "protocol" && e.message.includes(`${shard}: the server at ${hub.url} sends a file of ${size} bytes, but the hub announced ${size + 100}; refused`),
  );
  assert.equal(hub.requests.filter((q) => q.path === `/cdn/${etag}`).length, 1);
  assert.ok(!existsSync(join(repoDir("org/tiny"), "refs", "main")));
});

test("a server that states no size and ignores Range: a bounded number of full downloads, then an error (not an endless loop)", { timeout: 20_000 }, async () => {
  const shard = [...tiny.keys()].find((f) => f.endsWith(".safetensors"))!;
  const etag = hub.etag("org/tiny", tinyCommit, shard);
  const size = tiny.get(shard)!.length;
  hub.oversize.set(etag, 100);
  hub.unsized.add(etag);
  await assert.rejects(resolve("org/tiny"), (e: Error) => e instanceof HubError && e.kind === "network" && e.message.includes(`stopped after ${size} of ${size + 100} bytes (the response ended after ${size} of ${size + 100} bytes)`));
  // The first request and 3 retries (DownloadFileOptions.retries), each starting over: the server ignores Range.
  assert.deepEqual(hub.requests.filter((q) => q.path === `/cdn/${etag}`).map((q) => q.range), [null, `bytes=${size}-`, `bytes=${size}-`, `bytes=${size}-`]);
  assert.equal(statSync(join(repoDir("org/tiny"), "blobs", `${etag}.incomplete`)).size, size);
});

test("a symlink planted as a blob's .incomplete file is removed, never written through", async () => {
  const shard = [...tiny.keys()].find((f) => f.endsWith(".safetensors"))!;
  const etag = hub.etag("org/tiny", tinyCommit, shard);
  const victim = join(root, `victim-${Date.now()}`);
  writeFileSync(victim, "outside the cache\n");
  const blobs = join(repoDir("org/tiny"), "blobs");
  mkdirSync(blobs, { recursive: true });
  symlinkSync(victim, join(blobs, `${etag}.incomplete`));
  const r = await resolve("org/tiny");
  assert.equal(readFileSync(victim, "utf8"), "outside the cache\n", "the file the link pointed at is untouched");
  assert.ok(readFileSync(join(r.source.path, shard)).equals(tiny.get(shard)!));
  assert.ok(lstatSync(join(blobs, etag)).isFile());
  assert.deepEqual(hub.requests.filter((q) => q.path === `/cdn/${etag}`).map((q) => q.range), [null], "downloaded from byte 0, not resumed from the link's target");
});

test("a blob another live process is downloading is refused with its pid; a stale lock is taken over", async () => {
  const shard = [...tiny.keys()].find((f) => f.endsWith(".safetensors"))!;
  const lock = join(cacheDir, ".locks", "models--org--tiny", `${hub.etag("org/tiny", tinyCommit, shard)}.kvflash.lock`);
  mkdirSync(dirname(lock), { recursive: true });
  writeFileSync(lock, String(process.pid));
  await assert.rejects(resolve("org/tiny"), (e: Error) => e instanceof HubError && e.kind === "busy" && e.message.startsWith(`another process (pid ${process.pid}) is downloading ${shard} of org/tiny`));
  writeFileSync(lock, String(spawnSync(process.execPath, ["-e", ""]).pid)); // a process that has exited
  assert.equal((await resolve("org/tiny")).from, "hub");
  assert.ok(!existsSync(lock), "the lock is released");
});

test("a wrong checksum is refused and leaves nothing half-written in the cache", async () => {
  for (const path of ["config.json", [...tiny.keys()].find((f) => f.endsWith(".safetensors"))!]) {
    cacheDir = mkdtempSync(join(root, "cache-"));
    const etag = hub.etag("org/tiny", tinyCommit, path);
    hub.corrupt.clear();
    hub.corrupt.add(etag);
    const kind = etag.length === 64 ? "sha256" : "git sha1";
    await assert.rejects(resolve("org/tiny"), (e: Error) => e instanceof HubError && e.kind === "checksum" && e.message.includes(`${path} of org/tiny: the downloaded bytes have ${kind}`) && /refused and deleted/.test(e.message));
    const blobs = readdirSync(join(repoDir("org/tiny"), "blobs"));
    assert.ok(!blobs.some((b) => b.startsWith(etag)), `no blob or .incomplete for ${path}: ${blobs.join(", ")}`);
    assert.ok(!existsSync(join(repoDir("org/tiny"), "snapshots", tinyCommit, path)));
    assert.ok(!existsSync(join(repoDir("org/tiny"), "refs", "main")));
    await assert.rejects(resolve("org/tiny", { settings: settings({ offline: true }) }), /not all of org\/tiny|has no snapshot/);
  }
  hub.corrupt.clear();
  assert.equal((await resolve("org/tiny")).from, "hub");
});

test("--revision pins a commit: a tag, a commit hash, offline by hash; an unknown revision is a 404", async () => {
  const old = new Map(tiny);
  old.set("generation_config.json", Buffer.from('{"temperature": 0.25}\n'));
  const v1 = hub.addCommit("org/pinned", old, ["v1"]);
  const main = hub.addCommit("org/pinned", tiny, ["main"]);
  assert.notEqual(v1, main);
  const a = await resolve("org/pinned", { revision: "v1" });
  assert.equal(a.hub!.commit, v1);
  assert.equal(readFileSync(join(a.source.path, "generation_config.json"), "utf8"), '{"temperature": 0.25}\n');
  assert.equal(readFileSync(join(repoDir("org/pinned"), "refs", "v1"), "utf8"), v1);
  const b = await resolve("org/pinned");
  assert.equal(b.hub!.commit, main);
  assert.ok(readFileSync(join(b.source.path, "generation_config.json")).equals(tiny.get("generation_config.json")!));
  // The blobs both commits share are stored once.
  const blobs = readdirSync(join(repoDir("org/pinned"), "blobs"));
  assert.equal(blobs.length, tiny.size + 1);
  const byHash = await resolve("org/pinned", { revision: v1, settings: settings({ offline: true }) });
  assert.deepEqual(byHash.source, a.source);
  await assert.rejects(resolve("org/pinned", { revision: "v9" }), (e: Error) => e instanceof HubError && e.status === 404 && /org\/pinned has no revision "v9"/.test(e.message));
});

test("a gated repository: 401 says how to set HF_TOKEN; with the token it downloads", async () => {
  hub.addCommit("org/gated", tiny);
  hub.gate("org/gated", "hf_secret");
  await assert.rejects(resolve("org/gated"), (e: Error) => e instanceof HubError && e.kind === "auth" && e.status === 401 && /org\/gated is gated, private or does not exist \(HTTP 401 GatedRepo.*export HF_TOKEN=/.test(e.message));
  await assert.rejects(resolve("org/gated", { settings: settings({ token: "hf_wrong" }) }), /HF_TOKEN is set but was refused or lacks access/);
  hub.requests.length = 0;
  const r = await resolve("org/gated", { settings: settings({ token: "hf_secret" }) });
  assert.equal(r.from, "hub");
  assert.ok(hub.requests.filter((q) => !q.path.startsWith("/cdn/")).every((q) => q.authorization === "Bearer hf_secret"));
});

test("missing repository or file, and no network: clear errors; a cached model survives a network failure", async () => {
  await assert.rejects(resolve("org/nothing"), /org\/nothing is gated, private or does not exist/);
  await assert.rejects(resolve("org/gguf/missing-Q2_K.gguf"), (e: Error) => e instanceof HubError && e.status === 404 && /org\/gguf has no file "missing-Q2_K.gguf".*Q4_K_M \(model-Q4_K_M.gguf\)/.test(e.message));
  const closed = await MockHub.start();
  await closed.close();
  const dead = settings({ endpoint: closed.url });
  await assert.rejects(resolve("org/tiny", { settings: dead }), (e: Error) => e instanceof HubError && e.kind === "network" && e.message.startsWith(`cannot reach the Hugging Face hub at ${closed.url} (ECONNREFUSED`) && /HF_HUB_OFFLINE=1/.test(e.message));
  await resolve("org/tiny");
  const lines: string[] = [];
  const r = await resolve("org/tiny", { settings: dead, refresh: true, log: (l) => lines.push(l) });
  assert.equal(r.from, "cache");
  assert.match(lines.join("\n"), /cannot reach .* using the cached snapshot/);
});

test("GGUF in a hub repo: by quant (any case), by path, the Q4_K_M default; a missing quant lists the ones there are", async () => {
  const q8 = await resolve("org/gguf:q8_0");
  assert.equal(q8.source.kind, "gguf");
  assert.ok(q8.source.path.endsWith("model-Q8_0.gguf"));
  assert.ok(readFileSync(q8.source.path).equals(gguf("b")));
  assert.deepEqual(readdirSync(join(repoDir("org/gguf"), "snapshots", q8.hub!.commit)), ["model-Q8_0.gguf"]);
  assert.ok((await resolve("org/gguf/model-Q8_0.gguf", { settings: settings({ offline: true }) })).source.path.endsWith("model-Q8_0.gguf"));
  // Without a quant, the cache's only GGUF of the repo is the one (offline too); a fresh cache gets Q4_K_M, llama.cpp's default.
  assert.ok((await resolve("org/gguf", { settings: settings({ offline: true }) })).source.path.endsWith("model-Q8_0.gguf"));
  cacheDir = mkdtempSync(join(root, "cache-"));
  assert.ok((await resolve("org/gguf")).source.path.endsWith("model-Q4_K_M.gguf"));
  await assert.rejects(
    resolve("org/gguf:Q5_K_S"),
    (e: Error) => e.message === '--model "org/gguf:Q5_K_S": the repository has no GGUF file for quant Q5_K_S; it has Q4_K_M (model-Q4_K_M.gguf), Q8_0 (model-Q8_0.gguf). Pick one with org/gguf:QUANT',
  );
  const local = join(root, "local.gguf");
  writeFileSync(local, gguf("z"));
  assert.deepEqual((await resolve(local)).source, { kind: "gguf", path: local });
});

test("choosing GGUF files: word boundaries, split files with all their parts, the only file without a quant", () => {
  const files = ["a-Q4_K.gguf", "a-Q4_K_M-00001-of-00002.gguf", "a-Q4_K_M-00002-of-00002.gguf", "sub/a-Q4_K_M.gguf", "a-IQ4_XS.gguf"];
  assert.deepEqual(chooseGguf("o/r", files, "q4_k_m"), ["a-Q4_K_M-00001-of-00002.gguf", "a-Q4_K_M-00002-of-00002.gguf"]);
  assert.deepEqual(chooseGguf("o/r", files, "Q4_K"), ["a-Q4_K.gguf"]);
  assert.deepEqual(chooseGguf("o/r", files, "iq4_xs"), ["a-IQ4_XS.gguf"]);
  assert.throws(() => chooseGguf("o/r", files, "Q4_X"), /has Q4_K \(a-Q4_K.gguf\), Q4_K_M \(a-Q4_K_M-00001-of-00002.gguf, 2 parts\), Q4_K_M \(sub\/a-Q4_K_M.gguf\), IQ4_XS \(a-IQ4_XS.gguf\)\. Pick one/);
  assert.deepEqual(chooseGguf("o/r", ["only.F16.gguf", "mmproj.gguf"], null), ["only.F16.gguf"]);
  assert.throws(() => chooseGguf("o/r", ["x-Q8_0.gguf", "x-F16.gguf"], null), /no Q4_K_M \(the default\) and more than one GGUF file/);
  assert.throws(() => chooseGguf("o/r", ["a-Q4_K_M-00001-of-00003.gguf"], "Q4_K_M"), /has 1 of its 3 parts/);
});

test("spec parsing: hub forms, and what can only be a local path", () => {
  assert.deepEqual(parseHubSpec("Qwen/Qwen2.5-0.5B-Instruct"), { repo: "Qwen/Qwen2.5-0.5B-Instruct" });
  assert.deepEqual(parseHubSpec("hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M"), { repo: "bartowski/Llama-3.2-1B-Instruct-GGUF", quant: "Q4_K_M" });
  assert.deepEqual(parseHubSpec("org/name/sub/file.gguf"), { repo: "org/name", file: "sub/file.gguf" });
  for (const local of ["./org/name", "/abs/dir", "~/models/x", "name", "org/name/config.json", "org/na--me", "org/../x", "a/b/../c.gguf"]) assert.equal(parseHubSpec(local), null, local);
  assert.throws(() => parseHubSpec("org/name:Q4 K"), /--model quant after ":" must be a name such as Q4_K_M/);
});

test("--model that is neither a path nor a hub spec names the value", async () => {
  await assert.rejects(resolve(join(root, "nowhere")), /--model ".*nowhere": no such file or directory, and not a Hugging Face spec/);
  writeFileSync(join(root, "notes.txt"), "hello");
  await assert.rejects(resolve(join(root, "notes.txt")), /is a file but not a GGUF file/);
  await assert.rejects(resolve("org/tiny", { revision: "../x" }), /--revision must be a branch, tag or commit hash, got "..\/x"/);
});

// LLM.load takes the model sources the CLI takes (src/sources/source.ts): a
// local model directory, a .gguf file and a hub spec downloaded from a mock
// hub on 127.0.0.1 (HF_ENDPOINT) into a temporary cache (HF_HUB_CACHE) with
// download progress; each then answers exactly what the directory answers.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError, LLM, type LoadProgressEvent } from "../../src/index.js";
import { convertModelDirToGguf, writeTinyModel } from "../../src/testing/index.js";
import { MockHub, readTree } from "../helpers/mock-hub.js";

let hub: MockHub;
let root: string;
let dir: string;
let want: string;
const PROMPT = "Once upon a time";
const GREEDY = { maxTokens: 12, temperature: 0, ignoreEos: true } as const;

before(async () => {
  hub = await MockHub.start();
  root = mkdtempSync(join(tmpdir(), "kvflash-llm-sources-"));
  dir = writeTinyModel(join(root, "tiny"), { arch: "qwen2", seed: 5, embeddingStd: 0.05 }).dir;
  hub.addCommit("org/tiny", readTree(dir));
});
after(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

test("a local model directory loads, reports load progress and completes a prompt", async () => {
  const events: LoadProgressEvent[] = [];
  const llm = await LLM.load(dir, { threads: 1, onProgress: (e) => events.push(e) });
  try {
    assert.equal(llm.model, dir);
    const c = await llm.complete(PROMPT, GREEDY);
    assert.equal(c.usage.completion_tokens, 12);
    want = c.text;
    assert.ok(events.length > 0 && events.every((e) => e.phase === "load"), JSON.stringify(events));
  } finally {
    await llm.close();
  }
  await assert.rejects(llm.complete(PROMPT, GREEDY), /closed/);
});

test("a .gguf file loads and answers as its directory does", async () => {
  const gguf = join(root, "tiny-f32.gguf");
  convertModelDirToGguf(dir, gguf, { type: "F32" });
  const llm = await LLM.load(gguf, { threads: 1 });
  try {
    assert.equal((await llm.complete(PROMPT, GREEDY)).text, want);
  } finally {
    await llm.close();
  }
});

test("a hub spec downloads through HF_ENDPOINT into HF_HUB_CACHE with download progress, and answers as the directory does", async () => {
  const saved = { endpoint: process.env["HF_ENDPOINT"], cache: process.env["HF_HUB_CACHE"] };
  process.env["HF_ENDPOINT"] = hub.url;
  process.env["HF_HUB_CACHE"] = join(root, "cache");
  try {
    const events: LoadProgressEvent[] = [];
    const llm = await LLM.load("org/tiny", { threads: 1, onProgress: (e) => events.push(e) });
    try {
      assert.equal(llm.model, "org/tiny");
      assert.equal((await llm.complete(PROMPT, GREEDY)).text, want);
    } finally {
      await llm.close();
    }
    const download = events.filter((e) => e.phase === "download");
    assert.ok(download.length > 0, JSON.stringify(events));
    const last = download[download.length - 1]!;
    assert.ok(last.total > 0 && last.done === last.total, JSON.stringify(last));
    const firstLoad = events.findIndex((e) => e.phase === "load");
    assert.ok(firstLoad > events.lastIndexOf(last), "the download comes before the load");
  } finally {
    for (const [name, value] of [["HF_ENDPOINT", saved.endpoint], ["HF_HUB_CACHE", saved.cache]] as const) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
});

test("a source that is none of these is an ArgumentError naming it", async () => {
  await assert.rejects(LLM.load(join(root, "no-such-model")), (e: unknown) => e instanceof ArgumentError && e.argument === "model" && /^model ".*no-such-model": no such file/.test(e.message));
  await assert.rejects(LLM.load(undefined, { revision: "v1" }), (e: unknown) => e instanceof ArgumentError && e.argument === "options.revision");
  await assert.rejects(LLM.load(42 as unknown as string), (e: unknown) => e instanceof ArgumentError && e.argument === "model" && /got 42/.test(e.message));
});

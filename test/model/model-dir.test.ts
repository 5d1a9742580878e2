// Model directories as users download them: single and sharded weights,
// tokenizer, generation config; and directories that must fail clearly
// (wrong shapes, missing tensors, bad indexes, no weights).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Runtime, createRuntime, loadModelDir } from "../../src/ops-entry.js";
import { expectedWeights } from "../../src/model/weight-names.js";
import { parseGenerationConfig } from "../../src/model/generation-config.js";
import { readModelDirInfo } from "../../src/model/model-dir.js";
import { readSafetensorsHeader } from "../../src/sources/safetensors.js";
import { writeSafetensors } from "../../src/sources/safetensors-writer.js";
import { writeTinyModel } from "../../src/testing/index.js";

let rt: Runtime;
let root: string;
before(async () => {
  rt = await createRuntime({ threads: 1 });
  root = mkdtempSync(join(tmpdir(), "kvflash-dir-"));
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

let n = 0;
const fresh = (): string => join(root, `m${n++}`);
const readJson = (path: string): Record<string, unknown> => JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
const writeJson = (path: string, v: unknown): void => writeFileSync(path, JSON.stringify(v));

test("a sharded checkpoint loads the same tensors as a single file", () => {
  const single = writeTinyModel(fresh(), { arch: "qwen2", seed: 3 });
  const sharded = writeTinyModel(fresh(), { arch: "qwen2", seed: 3, shards: 3 });
  assert.deepEqual(sharded.files.filter((f) => f.endsWith(".safetensors")), [
    "model-00001-of-00003.safetensors",
    "model-00002-of-00003.safetensors",
    "model-00003-of-00003.safetensors",
  ]);
  const index = readJson(join(sharded.dir, "model.safetensors.index.json"));
  assert.equal(Object.keys(index["weight_map"] as object).length, expectedWeights(sharded.config).length);
  const live = rt.heap.liveCount;
  const a = loadModelDir(rt, single.dir, { progress: false });
  const b = loadModelDir(rt, sharded.dir, { progress: false });
  assert.equal(b.weightFiles.length, 3);
  assert.equal(a.tensors.size, expectedWeights(a.config).length);
  assert.deepEqual([...a.tensors.keys()].sort(), [...b.tensors.keys()].sort());
  for (const [name, t] of a.tensors) {
    const u = b.tensors.get(name)!;
    assert.equal(u.dtype, "f32");
    assert.deepEqual(u.shape, t.shape);
    assert.deepEqual(new Uint8Array(rt.memory.buffer, u.ptr, u.byteLength), new Uint8Array(rt.memory.buffer, t.ptr, t.byteLength), name);
  }
  assert.equal(a.weightBytes, b.weightBytes);
  a.free();
  b.free();
  assert.equal(rt.heap.liveCount, live, "free() returns every tensor");
});

test("config, tokenizer and generation config come back together; eos ids are the union", () => {
  const m = writeTinyModel(fresh(), { arch: "llama", generation: { temperature: 0.7, top_k: 20 } });
  const dir = loadModelDir(rt, m.dir, { progress: false });
  assert.equal(dir.config.architecture, "LlamaForCausalLM");
  assert.equal(dir.generation.temperature, 0.7);
  assert.equal(dir.generation.topK, 20);
  const eot = dir.tokenizer.tokenToId("<|eot_id|>")!;
  const eotext = dir.tokenizer.tokenToId("<|end_of_text|>")!;
  assert.deepEqual([...dir.eosTokenIds].sort(), [eot, eotext].sort());
  assert.equal(dir.tokenizer.encode("hi")[0], dir.config.bosTokenId);
  dir.free();
});

test("progress reaches 100 % of the weight bytes", () => {
  const m = writeTinyModel(fresh(), { arch: "mistral", shards: 2 });
  const lines: string[] = [];
  const dir = loadModelDir(rt, m.dir, { progress: { enabled: true, stream: { isTTY: false, write: (s: string) => lines.push(s) } } });
  assert.match(lines.at(-1)!, /100%/);
  assert.ok(lines.at(-1)!.includes(`of ${(dir.weightBytes / 1024).toFixed(1)} KiB`), lines.at(-1));
  dir.free();
});

test("a config that disagrees with the weights names the tensor and both shapes", () => {
  const m = writeTinyModel(fresh(), { arch: "llama" });
  const cfg = readJson(join(m.dir, "config.json"));
  writeJson(join(m.dir, "config.json"), { ...cfg, intermediate_size: 96 });
  assert.throws(
    () => loadModelDir(rt, m.dir),
    /model\.safetensors does not match config\.json \(6 problems\): tensor model\.layers\.0\.mlp\.gate_proj\.weight has shape \[128, 64\], expected \[96, 64\]/,
  );
  writeJson(join(m.dir, "config.json"), { ...cfg, num_hidden_layers: 3 });
  assert.throws(() => readModelDirInfo(m.dir), /missing tensor model\.layers\.2\.input_layernorm\.weight/);
  writeJson(join(m.dir, "config.json"), { ...cfg, num_hidden_layers: 1 });
  assert.throws(() => readModelDirInfo(m.dir), /unexpected tensor model\.layers\.1\./);
  writeJson(join(m.dir, "config.json"), { ...cfg, architectures: ["BertModel"] });
  assert.throws(() => readModelDirInfo(m.dir), /config\.json architectures names an unsupported architecture "BertModel"/);
});

test("a missing tensor is named before anything is loaded", () => {
  const m = writeTinyModel(fresh(), { arch: "qwen3" });
  const path = join(m.dir, "model.safetensors");
  const header = readSafetensorsHeader(path);
  const bytes = readFileSync(path);
  const keep = header.tensors.filter((t) => t.name !== "model.layers.1.self_attn.k_norm.weight");
  writeSafetensors(
    path,
    keep.map((t) => ({ name: t.name, dtype: t.dtype, shape: t.shape, data: new Uint8Array(bytes.subarray(t.begin, t.end)) })),
  );
  const live = rt.heap.liveCount;
  assert.throws(() => loadModelDir(rt, m.dir), /missing tensor model\.layers\.1\.self_attn\.k_norm\.weight \(shape \[32\]\)/);
  assert.equal(rt.heap.liveCount, live);
});

test("hostile or broken shard indexes", () => {
  const m = writeTinyModel(fresh(), { arch: "qwen2", shards: 2 });
  const indexPath = join(m.dir, "model.safetensors.index.json");
  const index = readJson(indexPath);
  const map = index["weight_map"] as Record<string, string>;
  writeJson(indexPath, { ...index, weight_map: { ...map, "model.norm.weight": "../../etc/passwd" } });
  assert.throws(() => readModelDirInfo(m.dir), /weight_map\["model\.norm\.weight"\] must be a file name in the model directory, got "\.\.\/\.\.\/etc\/passwd"/);
  writeJson(indexPath, { ...index, weight_map: { ...map, "model.norm.weight": "model-00009-of-00009.safetensors" } });
  assert.throws(() => readModelDirInfo(m.dir), /lists shard model-00009-of-00009\.safetensors, which is not in/);
  writeJson(indexPath, { ...index, weight_map: { ...map, "model.norm.weight": "model-00001-of-00002.safetensors" } });
  assert.throws(() => readModelDirInfo(m.dir), /model-00001-of-00002\.safetensors has no tensor "model\.norm\.weight", which model\.safetensors\.index\.json places in it/);
  writeJson(indexPath, { metadata: {} });
  assert.throws(() => readModelDirInfo(m.dir), /weight_map must be an object of tensor name → file, got undefined/);
  writeFileSync(indexPath, "{ not json");
  assert.throws(() => readModelDirInfo(m.dir), /model\.safetensors\.index\.json is not valid JSON/);
});

test("directories without weights, config or tokenizer, and a vocabulary smaller than the tokenizer", () => {
  const m = writeTinyModel(fresh(), { arch: "llama" });
  unlinkSync(join(m.dir, "model.safetensors"));
  writeFileSync(join(m.dir, "pytorch_model.bin"), "");
  assert.throws(() => readModelDirInfo(m.dir), /has neither model\.safetensors nor model\.safetensors\.index\.json \(found: .*pytorch_model\.bin.*\); PyTorch pickle checkpoints/);
  assert.throws(() => readModelDirInfo(join(root, "absent")), /dir does not exist/);
  const empty = fresh();
  writeTinyModel(empty, { arch: "llama" });
  unlinkSync(join(empty, "config.json"));
  assert.throws(() => readModelDirInfo(empty), /has no config\.json/);

  const small = writeTinyModel(fresh(), { arch: "mistral" });
  const cfg = readJson(join(small.dir, "config.json"));
  const header = readSafetensorsHeader(join(small.dir, "model.safetensors"));
  const size = header.tensors.find((t) => t.name === "model.embed_tokens.weight")!.shape[0]!;
  assert.ok(size >= 256);
  // Cut the vocabulary below the tokenizer's size, weights and config alike.
  const bytes = readFileSync(join(small.dir, "model.safetensors"));
  writeSafetensors(
    join(small.dir, "model.safetensors"),
    header.tensors.map((t) => {
      const cut = t.name === "model.embed_tokens.weight" || t.name === "lm_head.weight";
      const shape = cut ? [100, t.shape[1]!] : t.shape;
      const data = new Uint8Array(bytes.subarray(t.begin, cut ? t.begin + 100 * t.shape[1]! * 4 : t.end));
      return { name: t.name, dtype: t.dtype, shape, data };
    }),
  );
  writeJson(join(small.dir, "config.json"), { ...cfg, vocab_size: 100 });
  assert.throws(() => loadModelDir(rt, small.dir), /vocab_size 100 is smaller than the tokenizer's \d+ tokens/);

  const noTok = writeTinyModel(fresh(), { arch: "qwen3" });
  unlinkSync(join(noTok.dir, "tokenizer.json"));
  assert.throws(() => loadModelDir(rt, noTok.dir), /has no tokenizer\.json/);
});

test("generation_config.json: eos id or list, defaults, and typed errors", () => {
  const g = parseGenerationConfig({ bos_token_id: 1, eos_token_id: [2, 32000], do_sample: true, temperature: 0.6, top_p: 0.9, max_new_tokens: 64 });
  assert.deepEqual(g.eosTokenIds, [2, 32000]);
  assert.equal(g.topP, 0.9);
  assert.equal(g.maxNewTokens, 64);
  assert.equal(g.minP, null);
  assert.deepEqual(parseGenerationConfig({ eos_token_id: 7 }).eosTokenIds, [7]);
  assert.throws(() => parseGenerationConfig({ top_p: 1.5 }), /generation_config\.json top_p must be a number in \(0, 1\], got 1\.5/);
  assert.throws(() => parseGenerationConfig({ eos_token_id: ["2"] }), /eos_token_id must be a token id or a list of token ids, got \["2"\]/);
  assert.throws(() => parseGenerationConfig({ do_sample: "yes" }), /do_sample must be true or false/);
});

test("8000 shards are matched to the index in linear time: every tensor in the shard the index names (a liveness bound, not a benchmark)", () => {
  // 900 layers of a hidden size 8 Llama: 8103 tensors in 8000 files. Matched pairwise (shards × tensors) this took minutes.
  const dir = fresh();
  writeTinyModel(dir, { arch: "llama", hiddenSize: 8, numHeads: 2, numKvHeads: 1, intermediateSize: 8, numLayers: 900, shards: 8000 });
  const index = (readJson(join(dir, "model.safetensors.index.json"))["weight_map"]) as Record<string, string>;
  const t0 = performance.now();
  const info = readModelDirInfo(dir);
  const seconds = (performance.now() - t0) / 1000;
  assert.ok(seconds < 20, `matching 8000 shards took ${seconds.toFixed(1)} s`);
  assert.equal(info.weightFiles.length, 8000);
  assert.equal(info.weights.length, Object.keys(index).length);
  for (const w of info.weights) assert.equal(w.file, join(dir, index[w.name]!), w.name);
  rmSync(dir, { recursive: true });
});

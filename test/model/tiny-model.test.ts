// The tiny-model writer (every architecture, deterministic, real tokenizer
// files) and the fixtures' home, kvflash/testing. The embedded default model
// has its own tests (default-model.test.ts).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Runtime, createRuntime, loadModelDir, roundTo } from "../../src/ops-entry.js";
import { expectedWeights } from "../../src/model/weight-names.js";
import { TINY_ARCHS, writeTinyModel } from "../../src/testing/index.js";

let rt: Runtime;
let root: string;
before(async () => {
  rt = await createRuntime({ threads: 1 });
  root = mkdtempSync(join(tmpdir(), "kvflash-tiny-"));
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

const filesOf = (dir: string): Map<string, Buffer> => new Map(readdirSync(dir).sort().map((f) => [f, readFileSync(join(dir, f))]));

test("every architecture writes a directory that loads, with its own flags", () => {
  for (const arch of TINY_ARCHS) {
    const m = writeTinyModel(join(root, arch), { arch });
    const dir = loadModelDir(rt, m.dir, { progress: false });
    const c = dir.config;
    assert.equal(dir.tensors.size, expectedWeights(c).length, arch);
    assert.equal(c.qkvBias, arch === "qwen2", arch);
    assert.equal(c.qkNorm, arch === "qwen3" || arch === "gemma3", arch);
    assert.equal(c.headDim, arch === "qwen3" ? 32 : 16, arch);
    assert.equal(c.tieWordEmbeddings, arch !== "llama" && arch !== "mistral" && arch !== "phi3", arch);
    assert.deepEqual(c.layerRope.map((r) => r === null), [false, arch === "smollm3"], `${arch}: SmolLM3's layer 1 is NoPE`);
    assert.equal(c.fusedProjections, arch === "phi3", arch);
    assert.equal(c.rotaryDim, arch === "phi3" ? 12 : c.headDim, arch);
    const windows: Record<string, (number | null)[]> = { mistral: [16, 16], gemma2: [16, null], gemma3: [16, null] }; // Gemma: layer 0 slides, layer 1 is global
    assert.deepEqual(c.layerWindows, windows[arch] ?? [null, null], arch);
    assert.equal(c.sandwichNorms, arch.startsWith("gemma"), arch);
    assert.ok(c.vocabSize % 64 === 0 && c.vocabSize >= dir.tokenizer.vocabSize, arch);
    // The synthetic byte-level BPE tokenizer is lossless and has its family's chat format.
    const text = "Hello world, the fox! 你好 🤗";
    assert.equal(dir.tokenizer.decode(dir.tokenizer.encode(text), { skipSpecialTokens: true }), text, arch);
    const prompt = dir.tokenizer.applyChatTemplate([{ role: "user", content: "hi" }]);
    assert.match(prompt, { llama: /<\|start_header_id\|>assistant/, mistral: /\[INST\] hi \[\/INST\]$/, qwen2: /<\|im_start\|>assistant\n$/, qwen3: /<\|im_start\|>assistant\n$/, phi3: /<\|im_start\|>assistant\n$/, smollm3: /<\|im_start\|>assistant\n$/, gemma2: /<\|im_start\|>assistant\n$/, gemma3: /<\|im_start\|>assistant\n$/ }[arch]);
    assert.ok(dir.eosTokenIds.length > 0 && dir.eosTokenIds.every((id) => dir.tokenizer.isSpecial(id)), arch);
    // Norm weights are near 1 but not 1 (Gemma's, used as 1 + w: near 0); linear weights lie within ±1/√fanIn.
    const norm = dir.tensors.get("model.layers.0.input_layernorm.weight")!.toFloat32();
    assert.ok(norm.every((v) => v + c.normOffset > 0.9 && v + c.normOffset < 1.1) && norm.some((v) => v + c.normOffset !== 1));
    const down = dir.tensors.get("model.layers.1.mlp.down_proj.weight")!.toFloat32();
    const bound = 1 / Math.sqrt(c.intermediateSize);
    assert.ok(down.every((v) => Math.abs(v) <= bound));
    dir.free();
  }
});

test("the same options write the same bytes; another seed other weights; bf16 is the rounded f32", () => {
  const a = writeTinyModel(join(root, "a"), { arch: "qwen3", seed: 7 });
  const b = writeTinyModel(join(root, "b"), { arch: "qwen3", seed: 7 });
  const c = writeTinyModel(join(root, "c"), { arch: "qwen3", seed: 8 });
  const h = writeTinyModel(join(root, "h"), { arch: "qwen3", seed: 7, dtype: "bf16" });
  assert.deepEqual(filesOf(a.dir), filesOf(b.dir));
  assert.notDeepEqual(filesOf(a.dir).get("model.safetensors"), filesOf(c.dir).get("model.safetensors"));
  const fa = loadModelDir(rt, a.dir, { progress: false });
  const fh = loadModelDir(rt, h.dir, { progress: false });
  for (const name of ["model.embed_tokens.weight", "model.layers.1.self_attn.q_norm.weight", "model.layers.0.mlp.up_proj.weight"]) {
    const f32 = fa.tensors.get(name)!.toFloat32();
    const bf16 = fh.tensors.get(name)!;
    assert.equal(bf16.dtype, "bf16");
    assert.deepEqual(bf16.toFloat32(), f32.map((v) => roundTo("bf16", v)), name);
  }
  fa.free();
  fh.free();
});

test("RoPE scaling and sizes pass through to config.json", () => {
  const m = writeTinyModel(join(root, "rope"), {
    arch: "llama",
    numLayers: 3,
    hiddenSize: 48,
    numHeads: 6,
    numKvHeads: 1,
    ropeTheta: 500000,
    ropeScaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 64 },
  });
  const c = loadModelDir(rt, m.dir, { progress: false });
  assert.deepEqual(c.config.ropeScaling, { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 64 });
  assert.deepEqual([c.config.numLayers, c.config.headDim, c.config.numKvHeads, c.config.ropeTheta], [3, 8, 1, 500000]);
  c.free();
});

test("options are validated", () => {
  assert.throws(() => writeTinyModel(join(root, "x"), { arch: "gpt2" as never }), /arch must be one of "llama" \| "mistral" \| "qwen2" \| "qwen3" \| "phi3" \| "smollm3" \| "gemma2" \| "gemma3", got "gpt2"/);
  assert.throws(() => writeTinyModel(join(root, "x"), { arch: "llama", numKvHeads: 3 }), /num_key_value_heads must divide num_attention_heads \(4\), got 3/);
  assert.throws(() => writeTinyModel(join(root, "x"), { arch: "llama", vocabSize: 10 }), /vocabSize must be ≥ \d+, got 10/);
  assert.throws(() => writeTinyModel(join(root, "x"), { arch: "llama", shards: 500 }), /shards must be ≤ the 21 tensors, got 500/);
});

test("the fixtures are reachable from kvflash/testing, not from the main entry point", async () => {
  const main = (await import("kvflash")) as Record<string, unknown>;
  const testing = (await import("kvflash/testing")) as Record<string, unknown>;
  const kinds: Record<string, string> = { writeTinyModel: "function", TINY_ARCHS: "object", llama2Tokenizer: "function", llama2TokenizerDir: "function", LLAMA2_CHAT_TEMPLATE: "string" };
  for (const [name, kind] of Object.entries(kinds)) {
    assert.equal(main[name], undefined, `kvflash exports ${name}`);
    assert.equal(typeof testing[name], kind, `kvflash/testing lacks ${name}`);
  }
  assert.equal(typeof main["defaultModelDir"], "function", "the default model's location stays public");
});

// The spec bench's weight-bound model (bench/inflated-model.ts): the default model widened and
// deepened by zero padding must compute the default model's function. Checked on a smaller target
// than the bench's (hidden 384, 6 query heads over the 2 KV heads, MLP 768, 6 layers: the same
// code, an 18 MB file instead of 723 MB) against the trained default model itself: logits of every
// prompt position in f32, and greedy text in f32 and in q8 (the bench's format).
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type LoadedModel, type Runtime, createRuntime, generate, loadModel, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { QWEN25_05B_CONFIG_JSON } from "../../src/testing/index.js";
import { type InflateTarget, QWEN25_05B_LAYER_SHAPES, inflatedConfig, inflatedHead, inflatedModelDir } from "../../bench/inflated-model.js";
import { makeBatch } from "../model/decoder-support.js";

const SMALL: InflateTarget = { hiddenSize: 384, numAttentionHeads: 6, intermediateSize: 768, numHiddenLayers: 6 };
const QUESTIONS = ["What is a river?", "Define happy.", "What is a violin?", "Hello"];

let rt: Runtime;
let dir: string;
before(async () => {
  rt = await createRuntime({ threads: 1 });
  dir = inflatedModelDir(defaultModelDir(), SMALL).dir;
});
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  await rt.dispose();
});

const sourceConfig = () => JSON.parse(readFileSync(join(defaultModelDir(), "config.json"), "utf8")) as Record<string, unknown>;

/** Logits [T, V] of every position of `prompt` (one prefill). */
function allLogits(m: LoadedModel, prompt: number[]): Float32Array {
  const bs = m.runner.cache.blockSize;
  const blocks = Array.from({ length: Math.ceil(prompt.length / bs) }, (_, i) => i);
  return m.runner.forward(makeBatch([{ blocks, start: 0, tokens: prompt, logits: "all" }], bs)).slice();
}

test("the default target has Qwen2.5-0.5B's layer shapes over the default model's KV heads, head_dim, vocabulary and RoPE", () => {
  const c = inflatedConfig(sourceConfig());
  for (const k of ["hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size", "num_hidden_layers"]) assert.equal(c[k], QWEN25_05B_CONFIG_JSON[k], k);
  assert.equal(c["head_dim"], (QWEN25_05B_CONFIG_JSON["hidden_size"] as number) / (QWEN25_05B_CONFIG_JSON["num_attention_heads"] as number));
  assert.deepEqual([c["architectures"], c["vocab_size"], c["rope_theta"], c["tie_word_embeddings"]], [["LlamaForCausalLM"], 4096, 10000, true]);
  assert.ok(Math.abs((c["rms_norm_eps"] as number) - (1e-5 * 256) / 896) < 1e-20);
  assert.deepEqual(QWEN25_05B_LAYER_SHAPES, { hiddenSize: 896, numAttentionHeads: 14, intermediateSize: 4864, numHiddenLayers: 24 });
});

test("trained heads keep their KV head: 4 → 14 heads over 2 KV heads puts them at 0, 1, 7, 8", () => {
  assert.deepEqual([0, 1, 2, 3].map((s) => inflatedHead(s, 4, 14, 2)), [0, 1, 7, 8]);
  assert.deepEqual([0, 1, 2, 3].map((s) => inflatedHead(s, 4, 6, 2)), [0, 1, 3, 4]);
  // KV head of target head t is ⌊t / (N / kv)⌋; of source head s, ⌊s / (n / kv)⌋.
  for (let s = 0; s < 4; s++) assert.equal(Math.floor(inflatedHead(s, 4, 14, 2) / 7), Math.floor(s / 2));
});

test("a target that shrinks anything, or splits a KV group unevenly, is refused naming the field", () => {
  assert.throws(() => inflatedConfig(sourceConfig(), { ...SMALL, hiddenSize: 128 }), /target\.hiddenSize.*≥ the source's 256, got 128/);
  assert.throws(() => inflatedConfig(sourceConfig(), { ...SMALL, numHiddenLayers: 3 }), /target\.numHiddenLayers/);
  assert.throws(() => inflatedConfig(sourceConfig(), { ...SMALL, numAttentionHeads: 7 }), /target\.numAttentionHeads.*multiple of the 2 KV heads, got 7/);
  assert.throws(() => inflatedConfig({ ...sourceConfig(), architectures: ["Qwen2ForCausalLM"] }), /architectures/);
});

test("f32: the inflated model's logits equal the default model's at every prompt position (max |Δ| / max |logit| ≤ 2e-5)", () => {
  const a = loadModel(rt, defaultModelDir(), { progress: false, weights: "f32" });
  const b = loadModel(rt, dir, { progress: false, weights: "f32" });
  try {
    assert.deepEqual([b.config.hiddenSize, b.config.numHeads, b.config.numKvHeads, b.config.intermediateSize, b.config.numLayers], [384, 6, 2, 768, 6]);
    for (const q of QUESTIONS) {
      const prompt = a.tokenizer.encodeChat([{ role: "user", content: q }]);
      const x = allLogits(a, prompt);
      const y = allLogits(b, prompt);
      assert.equal(y.length, x.length);
      let maxDiff = 0;
      let maxAbs = 0;
      for (let i = 0; i < x.length; i++) {
        maxDiff = Math.max(maxDiff, Math.abs(x[i]! - y[i]!));
        maxAbs = Math.max(maxAbs, Math.abs(x[i]!));
      }
      assert.ok(maxAbs > 5, `logits are not trivial (max |logit| ${maxAbs})`);
      // Two f32 forwards that sum in different orders (rows of 384 against 256, RMSNorm over 384) and
      // round the scaled norm weights: measured 2.5e-7 to 1.2e-5 of max |logit| (≤ 2.2e-4 of logits
      // up to ~21). Checked to fail: heads at 0-3 (2, 3 on the wrong KV head) are off by 5.2, an
      // unscaled rms_norm_eps by 7.8e-3 (3.9e-4 of max |logit|).
      assert.ok(maxDiff <= 2e-5 * maxAbs, `${q}: max |Δlogit| ${maxDiff} over ${prompt.length} positions (max |logit| ${maxAbs})`);
    }
  } finally {
    a.runner.dispose();
    b.runner.dispose();
  }
});

test("f32 and q8: greedy answers of the inflated model are the default model's, token for token", () => {
  for (const weights of ["f32", "q8"] as const) {
    const a = loadModel(rt, defaultModelDir(), { progress: false, weights });
    const b = loadModel(rt, dir, { progress: false, weights });
    try {
      const params = resolveSamplingParams({ temperature: 0, maxTokens: 48 }, a.config.vocabSize);
      for (const q of QUESTIONS) {
        const ask = (m: LoadedModel) => generate({ runner: m.runner, tokenizer: m.tokenizer, eosTokenIds: m.eosTokenIds, promptIds: m.tokenizer.encodeChat([{ role: "user", content: q }]), params });
        const x = ask(a);
        const y = ask(b);
        assert.ok(x.ids.length > 5, `${weights} ${q}: ${x.text}`);
        assert.deepEqual(y.ids, x.ids, `${weights} ${q}: ${x.text} | ${y.text}`);
      }
    } finally {
      a.runner.dispose();
      b.runner.dispose();
    }
  }
});

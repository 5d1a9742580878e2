// config.json parsing for the supported architectures (the shapes of real
// published checkpoints), the expected weight list, and the errors for
// unsupported, missing or mistyped keys and for checkpoints that do not match.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type ModelConfig } from "../../src/ops-entry.js";
import { checkWeights, expectedWeights } from "../../src/model/weight-names.js";
import { parseModelConfig } from "../../src/model/config.js";

// Key values as published in each model's config.json.
const LLAMA31_8B = {
  architectures: ["LlamaForCausalLM"],
  model_type: "llama",
  hidden_size: 4096,
  intermediate_size: 14336,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  vocab_size: 128256,
  max_position_embeddings: 131072,
  rms_norm_eps: 1e-5,
  rope_theta: 500000.0,
  rope_scaling: { factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 8192, rope_type: "llama3" },
  tie_word_embeddings: false,
  attention_bias: false,
  mlp_bias: false,
  hidden_act: "silu",
  bos_token_id: 128000,
  eos_token_id: [128001, 128008, 128009],
  torch_dtype: "bfloat16",
};
const TINYLLAMA = {
  architectures: ["LlamaForCausalLM"],
  hidden_size: 2048,
  intermediate_size: 5632,
  num_hidden_layers: 22,
  num_attention_heads: 32,
  num_key_value_heads: 4,
  vocab_size: 32000,
  max_position_embeddings: 2048,
  rms_norm_eps: 1e-5,
  rope_scaling: null,
  bos_token_id: 1,
  eos_token_id: 2,
};
const SMOLLM_135M = {
  architectures: ["LlamaForCausalLM"],
  hidden_size: 576,
  intermediate_size: 1536,
  num_hidden_layers: 30,
  num_attention_heads: 9,
  num_key_value_heads: 3,
  vocab_size: 49152,
  max_position_embeddings: 2048,
  rope_theta: 10000.0,
  tie_word_embeddings: true,
};
const MISTRAL_7B = {
  architectures: ["MistralForCausalLM"],
  hidden_size: 4096,
  intermediate_size: 14336,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  vocab_size: 32000,
  max_position_embeddings: 32768,
  rope_theta: 10000.0,
  sliding_window: 4096,
  rms_norm_eps: 1e-5,
};
const QWEN25_05B = {
  architectures: ["Qwen2ForCausalLM"],
  hidden_size: 896,
  intermediate_size: 4864,
  num_hidden_layers: 24,
  num_attention_heads: 14,
  num_key_value_heads: 2,
  vocab_size: 151936,
  max_position_embeddings: 32768,
  max_window_layers: 21,
  rope_theta: 1000000.0,
  rms_norm_eps: 1e-6,
  sliding_window: 32768,
  use_sliding_window: false,
  tie_word_embeddings: true,
  bos_token_id: 151643,
  eos_token_id: 151643,
};
const QWEN3_06B = {
  architectures: ["Qwen3ForCausalLM"],
  hidden_size: 1024,
  intermediate_size: 3072,
  num_hidden_layers: 28,
  num_attention_heads: 16,
  num_key_value_heads: 8,
  head_dim: 128,
  vocab_size: 151936,
  max_position_embeddings: 40960,
  rope_theta: 1000000,
  rms_norm_eps: 1e-6,
  attention_bias: false,
  sliding_window: null,
  use_sliding_window: false,
  tie_word_embeddings: true,
};

const shapeOf = (c: ModelConfig, name: string) => expectedWeights(c).find((w) => w.name === name)?.shape;

test("Llama 3.1 8B: GQA, llama3 RoPE scaling, eos list, untied lm_head", () => {
  const c = parseModelConfig(LLAMA31_8B);
  assert.equal(c.architecture, "LlamaForCausalLM");
  assert.equal(c.headDim, 128);
  assert.equal(c.numKvHeads, 8);
  assert.equal(c.ropeTheta, 500000);
  assert.deepEqual(c.ropeScaling, { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 });
  assert.deepEqual(c.eosTokenIds, [128001, 128008, 128009]);
  assert.equal(c.bosTokenId, 128000);
  assert.equal(c.torchDtype, "bfloat16");
  assert.ok(c.layerWindows.every((w) => w === null));
  const w = expectedWeights(c);
  assert.equal(w.length, 1 + 32 * 9 + 2);
  assert.deepEqual(shapeOf(c, "model.layers.31.self_attn.k_proj.weight"), [1024, 4096]);
  assert.deepEqual(shapeOf(c, "model.layers.0.mlp.down_proj.weight"), [4096, 14336]);
  assert.deepEqual(shapeOf(c, "lm_head.weight"), [128256, 4096]);
  assert.equal(shapeOf(c, "model.layers.0.self_attn.q_proj.bias"), undefined);
});

test("TinyLlama and SmolLM: Llama defaults fill the keys they omit; SmolLM ties embeddings", () => {
  const t = parseModelConfig(TINYLLAMA);
  assert.equal(t.headDim, 64);
  assert.equal(t.ropeTheta, 10000);
  assert.deepEqual(t.ropeScaling, { type: "default" });
  assert.equal(t.tieWordEmbeddings, false);
  assert.deepEqual(t.eosTokenIds, [2]);
  const s = parseModelConfig(SMOLLM_135M);
  assert.equal(s.headDim, 64);
  assert.equal(s.rmsNormEps, 1e-6);
  assert.equal(s.tieWordEmbeddings, true);
  assert.equal(shapeOf(s, "lm_head.weight"), undefined);
  assert.deepEqual(shapeOf(s, "model.layers.0.self_attn.v_proj.weight"), [192, 576]);
});

test("Mistral: sliding window on every layer; defaults to 4096 when the key is absent, none when null", () => {
  const m = parseModelConfig(MISTRAL_7B);
  assert.equal(m.layerWindows.length, 32);
  assert.ok(m.layerWindows.every((w) => w === 4096));
  const { sliding_window: _drop, ...noKey } = MISTRAL_7B;
  assert.ok(parseModelConfig(noKey).layerWindows.every((w) => w === 4096));
  assert.ok(parseModelConfig({ ...MISTRAL_7B, sliding_window: null }).layerWindows.every((w) => w === null));
});

test("Qwen2.5 0.5B: q/k/v biases, no o_proj bias, tied; the sliding window is off unless use_sliding_window", () => {
  const q = parseModelConfig(QWEN25_05B);
  assert.equal(q.headDim, 64);
  assert.equal(q.qkvBias, true);
  assert.equal(q.oProjBias, false);
  assert.ok(q.layerWindows.every((w) => w === null));
  const w = expectedWeights(q);
  assert.equal(w.length, 1 + 24 * 12 + 1);
  assert.deepEqual(shapeOf(q, "model.layers.0.self_attn.k_proj.bias"), [128]);
  assert.deepEqual(shapeOf(q, "model.layers.0.self_attn.q_proj.bias"), [896]);
  assert.equal(shapeOf(q, "model.layers.0.self_attn.o_proj.bias"), undefined);
  const sliding = parseModelConfig({ ...QWEN25_05B, use_sliding_window: true, sliding_window: 4096 });
  assert.deepEqual(sliding.layerWindows.slice(19, 23), [null, null, 4096, 4096], "layers ≥ max_window_layers slide");
});

test("Qwen3 0.6B: explicit head_dim ≠ hidden/heads, q/k norms", () => {
  const q = parseModelConfig(QWEN3_06B);
  assert.equal(q.headDim, 128);
  assert.equal(q.qkNorm, true);
  assert.equal(q.qkvBias, false);
  assert.deepEqual(shapeOf(q, "model.layers.0.self_attn.q_proj.weight"), [2048, 1024]);
  assert.deepEqual(shapeOf(q, "model.layers.0.self_attn.o_proj.weight"), [1024, 2048]);
  assert.deepEqual(shapeOf(q, "model.layers.27.self_attn.k_norm.weight"), [128]);
  assert.equal(expectedWeights(q).length, 1 + 28 * 11 + 1);
  const { head_dim: _drop, ...noHeadDim } = QWEN3_06B;
  assert.equal(parseModelConfig(noHeadDim).headDim, 128, "Qwen3Config's default head_dim");
});

test("rope: linear scaling, legacy `type` key, transformers 5 rope_parameters, layer_types", () => {
  assert.deepEqual(parseModelConfig({ ...TINYLLAMA, rope_scaling: { type: "linear", factor: 4 } }).ropeScaling, { type: "linear", factor: 4 });
  assert.deepEqual(parseModelConfig({ ...TINYLLAMA, rope_scaling: { rope_type: "default" } }).ropeScaling, { type: "default" });
  const v5 = parseModelConfig({ ...TINYLLAMA, rope_parameters: { rope_type: "llama3", rope_theta: 500000, factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 } });
  assert.equal(v5.ropeTheta, 500000);
  assert.equal(v5.ropeScaling.type, "llama3");
  const lt = parseModelConfig({ ...QWEN3_06B, num_hidden_layers: 3, sliding_window: 128, layer_types: ["sliding_attention", "full_attention", "sliding_attention"] });
  assert.deepEqual(lt.layerWindows, [128, null, 128]);
  const noArch = parseModelConfig({ ...TINYLLAMA, architectures: undefined, model_type: "qwen2" });
  assert.equal(noArch.architecture, "Qwen2ForCausalLM");
});

test("errors name the key and the value", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...TINYLLAMA, architectures: ["GPT2LMHeadModel"] }, /config\.json architectures names an unsupported architecture "GPT2LMHeadModel" \(supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, SmolLM3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM\)/],
    [{ ...TINYLLAMA, architectures: undefined, model_type: "gpt_neox" }, /architectures is missing and model_type "gpt_neox" is not one of .*supported: LlamaForCausalLM/],
    [{ ...TINYLLAMA, hidden_size: undefined }, /config\.json hidden_size is required for LlamaForCausalLM, got undefined/],
    [{ ...TINYLLAMA, vocab_size: null }, /vocab_size is required for LlamaForCausalLM, got null/],
    [{ ...TINYLLAMA, num_hidden_layers: "22" }, /num_hidden_layers must be an integer, got "22"/],
    [{ ...TINYLLAMA, num_attention_heads: 0 }, /num_attention_heads must be ≥ 1, got 0/],
    [{ ...TINYLLAMA, num_key_value_heads: 5 }, /num_key_value_heads must divide num_attention_heads \(32\), got 5/],
    [{ ...TINYLLAMA, hidden_size: 2050 }, /hidden_size must be a multiple of num_attention_heads \(32\) when head_dim is absent, got 2050/],
    [{ ...TINYLLAMA, rms_norm_eps: -1 }, /rms_norm_eps must be a positive number, got -1/],
    [{ ...TINYLLAMA, tie_word_embeddings: "yes" }, /tie_word_embeddings must be true or false, got "yes"/],
    [{ ...TINYLLAMA, hidden_act: "gelu" }, /hidden_act must be "silu" \(SwiGLU MLP\), got "gelu"/],
    [{ ...TINYLLAMA, rope_scaling: { rope_type: "yarn", factor: 4 } }, /rope_scaling\.rope_type must be "default", "linear", "llama3" or "longrope", got "yarn"/],
    [{ ...TINYLLAMA, rope_scaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4 } }, /rope_scaling\.original_max_position_embeddings is required for rope type "llama3", got undefined/],
    [{ ...TINYLLAMA, rope_scaling: { type: "linear", factor: "2" } }, /rope_scaling\.factor must be a positive number, got "2"/],
    [{ ...TINYLLAMA, eos_token_id: [2, -1] }, /eos_token_id\[1\] must be a token id \(integer ≥ 0\), got -1/],
    [{ ...QWEN3_06B, num_hidden_layers: 2, layer_types: ["full_attention"] }, /layer_types must be a list of 2 layer types/],
  ];
  for (const [json, error] of cases) assert.throws(() => parseModelConfig(json), error);
  assert.throws(() => parseModelConfig([1, 2]), /config\.json must be a JSON object/);
  assert.throws(() => parseModelConfig({ ...TINYLLAMA, hidden_size: "x" }, { source: "/m/config.json" }), /^ArgumentError: \/m\/config\.json hidden_size/);
});

test("absurd sizes are refused by key before anything is sized from them (never a V8 abort)", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...LLAMA31_8B, num_hidden_layers: 1e9 }, /config\.json num_hidden_layers must be ≤ 1024 \(.*\), got 1000000000/],
    [{ ...LLAMA31_8B, hidden_size: 1e9, num_attention_heads: 32 }, /hidden_size must be ≤ 65536 .*got 1000000000/],
    [{ ...LLAMA31_8B, vocab_size: 1e12 }, /vocab_size must be ≤ 16777216 .*got 1000000000000/],
    [{ ...LLAMA31_8B, intermediate_size: 2 ** 40 }, /intermediate_size must be ≤ 262144/],
    [{ ...LLAMA31_8B, num_attention_heads: 4096, num_key_value_heads: 8 }, /num_attention_heads must be ≤ 1024/],
    [{ ...LLAMA31_8B, head_dim: 512 }, /head_dim must be ≤ 256 \(the attention kernels' largest head dim\), got 512/],
    [{ ...LLAMA31_8B, num_attention_heads: 8 }, /num_attention_heads must give hidden_size \/ num_attention_heads ≤ 256 .* got 4096 \/ 8 = 512/],
    [{ ...LLAMA31_8B, max_position_embeddings: 2 ** 40 }, /max_position_embeddings must be ≤ 134217728/],
    [{ ...MISTRAL_7B, sliding_window: 2 ** 40 }, /sliding_window must be ≤ 134217728/],
  ];
  // Before this check, num_hidden_layers 1e9 aborted the process (exit 134) building a per-layer array.
  for (const [json, error] of cases) assert.throws(() => parseModelConfig(json), error);
});

test("checkWeights: missing, misshapen and unexpected tensors are listed; inv_freq and a tied lm_head are ignored", () => {
  const c = parseModelConfig({ ...SMOLLM_135M, num_hidden_layers: 1 });
  const good = new Map(expectedWeights(c).map((w) => [w.name, w.shape]));
  assert.equal(checkWeights(c, good).length, good.size);

  const extra = new Map(good);
  extra.set("model.layers.0.self_attn.rotary_emb.inv_freq", [32]);
  extra.set("lm_head.weight", [49152, 576]);
  assert.equal(checkWeights(c, extra).length, good.size);

  const bad = new Map(good);
  bad.delete("model.norm.weight");
  bad.set("model.layers.0.mlp.up_proj.weight", [1536, 577]);
  bad.set("model.layers.1.input_layernorm.weight", [576]);
  assert.throws(
    () => checkWeights(c, bad, "ckpt"),
    (e: Error) =>
      /^ckpt does not match config\.json \(3 problems\)/.test(e.message) &&
      e.message.includes("missing tensor model.norm.weight (shape [576])") &&
      e.message.includes("tensor model.layers.0.mlp.up_proj.weight has shape [1536, 577], expected [1536, 576]") &&
      e.message.includes("unexpected tensor model.layers.1.input_layernorm.weight"),
  );
});

test("Gemma 2 (google/gemma-2-2b) and Gemma 3 (google/gemma-3-1b-it) config.json: sandwich norms, GeGLU, softcaps, window pattern, local/global RoPE", () => {
  const g2 = parseModelConfig({
    architectures: ["Gemma2ForCausalLM"], attn_logit_softcapping: 50.0, bos_token_id: 2, cache_implementation: "hybrid", eos_token_id: [1, 107], final_logit_softcapping: 30.0,
    head_dim: 256, hidden_act: "gelu_pytorch_tanh", hidden_activation: "gelu_pytorch_tanh", hidden_size: 2304, intermediate_size: 9216, max_position_embeddings: 8192,
    model_type: "gemma2", num_attention_heads: 8, num_hidden_layers: 26, num_key_value_heads: 4, pad_token_id: 0, query_pre_attn_scalar: 224, rms_norm_eps: 1e-6,
    rope_theta: 10000.0, sliding_window: 4096, torch_dtype: "float32", vocab_size: 256000,
  });
  assert.equal(g2.hiddenAct, "gelu_pytorch_tanh");
  assert.equal(g2.normOffset, 1);
  assert.equal(g2.embeddingScale, Math.fround(48));
  assert.equal(g2.sandwichNorms, true);
  assert.equal(g2.attentionScale, 1 / Math.sqrt(224), "query_pre_attn_scalar, not head_dim");
  assert.deepEqual([g2.attnLogitSoftcap, g2.finalLogitSoftcap], [50, 30]);
  assert.equal(g2.tieWordEmbeddings, true, "Gemma2Config ties by default");
  assert.deepEqual(g2.layerWindows.slice(0, 4), [4096, null, 4096, null], "even layers slide");
  assert.deepEqual(g2.eosTokenIds, [1, 107]);
  const g3 = parseModelConfig({
    architectures: ["Gemma3ForCausalLM"], attention_bias: false, attn_logit_softcapping: null, bos_token_id: 2, eos_token_id: [1, 106], final_logit_softcapping: null,
    head_dim: 256, hidden_activation: "gelu_pytorch_tanh", hidden_size: 1152, intermediate_size: 6912, max_position_embeddings: 32768, model_type: "gemma3_text",
    num_attention_heads: 4, num_hidden_layers: 26, num_key_value_heads: 1, query_pre_attn_scalar: 256, rms_norm_eps: 1e-6, rope_local_base_freq: 10000,
    rope_scaling: null, rope_theta: 1000000, sliding_window: 512, sliding_window_pattern: 6, torch_dtype: "bfloat16", vocab_size: 262144,
  });
  assert.equal(g3.qkNorm, true);
  assert.deepEqual([g3.attnLogitSoftcap, g3.finalLogitSoftcap], [0, 0]);
  assert.deepEqual(g3.layerWindows.slice(0, 12), [512, 512, 512, 512, 512, null, 512, 512, 512, 512, 512, null], "5 local : 1 global");
  assert.deepEqual(g3.layerRope.slice(4, 7).map((r) => r!.theta), [10000, 1e6, 10000]);
  assert.throws(() => parseModelConfig({ ...{ architectures: ["Gemma2ForCausalLM"], hidden_size: 8, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 1, vocab_size: 8 }, hidden_activation: "silu" }), /hidden_activation must be "gelu_pytorch_tanh" \(GeGLU MLP\), got "silu"/);
});

test("Phi-4-mini-instruct's config.json: fused projections, partial rotary 0.75, LongRoPE with its attention factor", () => {
  const short = Array.from({ length: 48 }, (_, i) => 1 + i / 100);
  const long = Array.from({ length: 48 }, (_, i) => 1 + i);
  const c = parseModelConfig({
    architectures: ["Phi3ForCausalLM"], attention_bias: false, bos_token_id: 199999, eos_token_id: 199999, hidden_act: "silu", hidden_size: 3072, intermediate_size: 8192,
    max_position_embeddings: 131072, model_type: "phi3", num_attention_heads: 24, num_hidden_layers: 32, num_key_value_heads: 8, original_max_position_embeddings: 4096,
    pad_token_id: 199999, partial_rotary_factor: 0.75, rms_norm_eps: 1e-5, rope_scaling: { long_factor: long, short_factor: short, type: "longrope" }, rope_theta: 10000.0,
    sliding_window: 262144, tie_word_embeddings: true, torch_dtype: "bfloat16", vocab_size: 200064,
  });
  assert.equal(c.fusedProjections, true);
  assert.deepEqual([c.headDim, c.rotaryDim], [128, 96]);
  assert.equal(c.ropeScaling.type, "longrope");
  if (c.ropeScaling.type === "longrope") {
    assert.deepEqual([c.ropeScaling.shortFactor, c.ropeScaling.longFactor, c.ropeScaling.originalMaxPositionEmbeddings], [short, long, 4096]);
    assert.equal(c.ropeScaling.attentionFactor, Math.sqrt(1 + Math.log(32) / Math.log(4096)), "transformers' default: √(1 + ln(131072/4096) / ln 4096)");
  }
  assert.ok(c.layerWindows.every((w) => w === 262144));
  assert.throws(() => parseModelConfig({ architectures: ["Phi3ForCausalLM"], hidden_size: 64, intermediate_size: 8, num_hidden_layers: 1, num_attention_heads: 4, vocab_size: 8, partial_rotary_factor: 0.5, rope_scaling: { type: "longrope", short_factor: [1, 1, 1], long_factor: [1, 1, 1, 1] } }), /rope_scaling\.short_factor must hold one factor per rotated frequency \(4\), got 3/);
});

test("SmolLM3 config.json: no_rope_layers (1 = RoPE) or, absent, every no_rope_layer_interval-th layer (default 4) skips RoPE", () => {
  const base = { architectures: ["SmolLM3ForCausalLM"], hidden_size: 2048, intermediate_size: 11008, num_hidden_layers: 8, num_attention_heads: 16, num_key_value_heads: 4, vocab_size: 128256, rope_theta: 5000000.0, tie_word_embeddings: true };
  const nope = (json: Record<string, unknown>) => parseModelConfig(json).layerRope.flatMap((r, i) => (r === null ? [i] : []));
  assert.deepEqual(nope(base), [3, 7]);
  assert.deepEqual(nope({ ...base, no_rope_layer_interval: 2 }), [1, 3, 5, 7]);
  assert.deepEqual(nope({ ...base, no_rope_layers: [1, 1, 0, 1, 1, 1, 1, 0] }), [2, 7]);
  assert.equal(parseModelConfig(base).layerRope[0]!.theta, 5e6);
  assert.throws(() => parseModelConfig({ ...base, no_rope_layers: [1, 0] }), /no_rope_layers must be a list of 8 flags \(num_hidden_layers; 1 = the layer applies RoPE\), got \[1, 0\]/);
});

/**
 * GGUF files end to end through loadModel: tiny Llama / Qwen2 / Qwen3 models
 * converted (src/model/gguf/convert.ts) to every tensor type, loaded from the
 * .gguf path, give
 *   - the logits of their safetensors twin (a directory holding exactly the
 *     values the GGUF decodes to) — equal, at --weights f32 and q8;
 *   - the logits of the original model within each type's stated error;
 * and the default model converted to Q8_0 keeps its config, tokenizer ids,
 * chat template and stop ids. Llama files exercise the Q/K row permutation.
 */
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Runtime, type WeightsSetting, createRuntime, loadModel, loadModelDir } from "../../src/ops-entry.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { convertModelDirToGguf, matrixType, type GgufQuantMix } from "../../src/model/gguf/convert.js";
import { dequantize } from "../../src/tensor/ggml-dequantize.js";
import { GGML_TYPES } from "../../src/tensor/ggml-types.js";
import { openGgufModel } from "../../src/model/gguf/gguf-model.js";
import { quantize } from "../../src/sources/gguf/quantize.js";
import { writeSafetensors } from "../../src/sources/safetensors-writer.js";
import { gguf, writeGguf } from "../../src/sources/gguf/writer.js";
import { makeBatch, relErr } from "./decoder-support.js";

let rt: Runtime;
let root: string;
before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-gguf-model-"));
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

const SHAPE = { hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, embeddingStd: 0.5 };
const TOKENS = [3, 17, 42, 5, 99, 7, 130, 12, 64, 1, 8];
const batch = () => makeBatch([{ blocks: [0], start: 0, tokens: TOKENS, logits: "all" }], 16);

function logits(path: string, weights: WeightsSetting): Float32Array {
  // kvDtype f32: a GGUF of a quantized type would pick a bf16 cache under "auto".
  const m = loadModel(rt, path, { weights, kvDtype: "f32", numBlocks: 2, blockSize: 16, progress: false, maxBatchTokens: 16 });
  try {
    return m.runner.forward(batch());
  } finally {
    m.runner.dispose();
  }
}

/** A copy of `dir` whose weights are what the GGUF's types decode to: each matrix quantized and dequantized row by row. */
function writeTwin(dir: string, twin: string, mix: GgufQuantMix): void {
  mkdirSync(twin, { recursive: true });
  for (const f of ["config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"]) copyFileSync(join(dir, f), join(twin, f));
  const m = loadModelDir(rt, dir, { progress: false });
  try {
    const tensors = [...m.tensors].map(([name, t]) => {
      const values = t.toFloat32();
      const cols = t.shape[t.shape.length - 1]!;
      if (t.shape.length === 2 && !name.includes("norm")) {
        const gg = name === "lm_head.weight" ? "output.weight" : name.replace(/.*self_attn\.v_proj.*/, "attn_v.weight").replace(/.*mlp\.down_proj.*/, "ffn_down.weight");
        const type = GGML_TYPES[matrixType(gg, cols, mix)];
        dequantize(type, quantize(type.name, values, cols), values.length, values);
      }
      return { name, dtype: "f32" as const, shape: [...t.shape], data: new Uint8Array(values.buffer) };
    });
    writeSafetensors(join(twin, "model.safetensors"), tensors);
  } finally {
    m.free();
  }
}

/**
 * Max relative logit error against the original f32 model that each type stays within: about twice what
 * was measured on these random-weight tiny models (F16 9e-5, BF16 8e-4, Q8_0 7e-3, Q4_0 0.031, Q4_1 0.027,
 * Q5_0 0.054 and Q5_K 0.050 on untied llama, Q5_1 0.011, Q4_K 0.031, Q6_K 0.006, Q4_K_M 0.088,
 * Q2_K 0.128, IQ4_XS 0.030 on qwen3 (Q3_K 0.287 on llama, IQ4_NL 0.028 on qwen2): the test quantizer's plain
 * rounding, whose relative RMS error on Gaussian rows is 0.35 for Q2_K and 0.16 for Q3_K, against 0.086 for Q4_0).
 */
const STATED: Readonly<Record<GgufQuantMix, number>> = {
  F32: 0, F16: 5e-4, BF16: 4e-3, Q8_0: 0.02, Q4_0: 0.08, Q4_1: 0.08, Q5_0: 0.1, Q5_1: 0.04, Q4_K: 0.08, Q5_K: 0.1, Q6_K: 0.02, Q4_K_M: 0.15,
  Q2_K: 0.25, Q3_K: 0.6, IQ4_NL: 0.06, IQ4_XS: 0.06,
};
const CASES: [GgufQuantMix, "llama" | "qwen2" | "qwen3"][] = [
  ["F32", "llama"], ["F16", "qwen2"], ["BF16", "qwen3"], ["Q8_0", "llama"], ["Q4_0", "qwen2"], ["Q4_1", "qwen3"],
  ["Q5_0", "llama"], ["Q5_1", "qwen2"], ["Q4_K", "qwen3"], ["Q5_K", "llama"], ["Q6_K", "qwen2"], ["Q4_K_M", "llama"],
  ["Q2_K", "qwen3"], ["IQ4_XS", "qwen3"], // Q3_K and IQ4_NL: in gguf-lowbit.test.ts and gguf-oracle.test.ts
];

for (const [type, arch] of CASES) {
  test(`${type} (${arch}): logits equal the safetensors twin's and stay within ${STATED[type]} of the original`, () => {
    const dir = writeTinyModel(join(root, `${type}-src`), { arch, seed: 7, ...SHAPE }).dir;
    const file = join(root, `${type}.gguf`);
    const types = convertModelDirToGguf(dir, file, { type });
    if (type === "Q4_K_M") assert.deepEqual(new Set(types.values()), new Set(["Q4_K", "Q6_K", "F32"]));
    const twin = join(root, `${type}-twin`);
    writeTwin(dir, twin, type);
    const original = logits(dir, "f32");
    const got = logits(file, "f32");
    assert.ok(relErr(got, logits(twin, "f32")) <= 1e-6, `f32 twin: ${relErr(got, logits(twin, "f32"))}`);
    assert.ok(relErr(logits(file, "q8"), logits(twin, "q8")) <= 1e-6, "q8 twin");
    const err = relErr(got, original);
    assert.ok(err <= STATED[type], `error vs the original ${err} > ${STATED[type]}`);
  });
}

for (const arch of ["gemma2", "gemma3", "phi3", "smollm3"] as const) {
  test(`${arch} F32 GGUF (Gemma: norms stored as 1 + w, its tensor names and keys; Phi-3: fused tensors, LongRoPE factor tensors; SmolLM3: permuted Q/K, NoPE every 4th layer): the same config and logits as its safetensors directory`, () => {
    const dir = writeTinyModel(join(root, `${arch}-src`), { arch, seed: 9, ...SHAPE, slidingWindow: 5, ...(arch === "smollm3" ? { numLayers: 4, noRopeLayerInterval: 4 } : {}) }).dir;
    const file = join(root, `${arch}.gguf`);
    convertModelDirToGguf(dir, file, { type: "F32" });
    const g = openGgufModel(file);
    const hf = loadModelDir(rt, dir, { progress: false });
    try {
      // GGUF keeps one eos id in the config (its stop ids are GgufModel.eosTokenIds).
      const { torchDtype: _a, eosTokenIds: _c, normOffset: offHf, ...want } = hf.config;
      const { torchDtype: _b, eosTokenIds: _d, normOffset: offGguf, ...have } = g.config;
      assert.deepEqual(have, want);
      assert.deepEqual([offHf, offGguf], arch.startsWith("gemma") ? [1, 0] : [0, 0], "the converter folded the 1 of (1 + w) into the file");
      assert.ok(g.tensors.has({ phi3: "model.layers.1.mlp.gate_up_proj.weight", smollm3: "model.layers.1.mlp.up_proj.weight" }[arch as string] ?? "model.layers.1.post_feedforward_layernorm.weight"));
    } finally {
      hf.free();
    }
    const err = relErr(logits(file, "f32"), logits(dir, "f32"));
    assert.ok(err <= 1e-6, `relErr ${err}`);
  });
}

test("a SmolLM3 whose NoPE layers are not every 4th cannot be written as GGUF (llama.cpp fixes the step at 4)", () => {
  const dir = writeTinyModel(join(root, "smollm3-nope2"), { arch: "smollm3", seed: 9, ...SHAPE, noRopeLayerInterval: 2 }).dir;
  assert.throws(() => convertModelDirToGguf(dir, join(root, "nope2.gguf"), { type: "F32" }), /config\.layerRope must skip RoPE on every 4th layer exactly .*got NoPE on layers \[1\]/);
});

test("the default model as Q8_0 GGUF: same config, tokenizer ids, chat template and stop ids; 'auto' keeps q8", () => {
  const file = join(root, "default-q8.gguf");
  convertModelDirToGguf("models/default", file, { type: "Q8_0" });
  const g = openGgufModel(file);
  const hf = loadModel(rt, "models/default", { weights: "q8", numBlocks: 4, progress: false });
  const m = loadModel(rt, file, { numBlocks: 4, progress: false });
  try {
    assert.equal(m.runner.weights.format, "q8");
    const { torchDtype: _a, ...want } = hf.config;
    const { torchDtype: _b, ...have } = m.config;
    assert.deepEqual(have, want);
    const text = "Hello world! 1234 ünïcödé 🦙 <s>";
    assert.deepEqual(m.tokenizer.encode(text), hf.tokenizer.encode(text));
    assert.equal(m.tokenizer.chatTemplate, hf.tokenizer.chatTemplate);
    assert.deepEqual(m.eosTokenIds, hf.eosTokenIds);
    assert.equal(g.config.vocabSize, hf.config.vocabSize);
    const b = () => makeBatch([{ blocks: [0, 1, 2], start: 0, tokens: hf.tokenizer.encode(text) }], 16);
    assert.ok(relErr(m.runner.forward(b()), hf.runner.forward(b())) <= 0.05);
  } finally {
    hf.runner.dispose();
    m.runner.dispose();
  }
});

test("a .gguf path that is not GGUF, or a GGUF of another architecture, fails with the reader's error", () => {
  const junk = join(root, "junk.gguf");
  writeFileSync(junk, "not a gguf file at all, just text");
  assert.throws(() => loadModel(rt, junk, { progress: false }), /junk\.gguf is not a GGUF file: magic 0x20746f6e/);
  const bert = join(root, "bert.gguf");
  writeGguf(bert, { metadata: { "general.architecture": gguf.str("bert") }, tensors: [] });
  assert.throws(() => loadModel(rt, bert, { progress: false }), /bert\.gguf general\.architecture must be one of "llama", "qwen2", "qwen3", "phi3", "smollm3", "gemma2", "gemma3", got "bert"/);
});

/**
 * GGUF K-quant files run natively under --weights auto: a Q4_K_M file
 * (Q4_K matrices, Q6_K for attn_v, ffn_down and output, as llama.cpp's mix)
 * written by the test-helper converter loads with its matrices kept as
 * q4_k / q6_k Weights (a fused QKV becomes a stack of both), not requantized
 * to q8; its logits stay within a stated error of the same file decoded to
 * f32 (--weights f32: llama.cpp's dequantized values), the only difference
 * being the activation's Q8_K quantization, as in llama.cpp; and the memory
 * plan counts the real K-quant sizes.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Runtime, WeightStack, createRuntime, dequantizeWeight, loadModel } from "../../src/ops-entry.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { ggufWeightSizes, openGgufModel, resolveGgufWeights } from "../../src/model/gguf/gguf-model.js";
import { makeBatch, relErr } from "./decoder-support.js";

let rt: Runtime;
let root: string;
before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-gguf-kquant-"));
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

const SHAPE = { hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, embeddingStd: 0.5 };
const TOKENS = [3, 17, 42, 5, 99, 7, 130, 12, 64, 1, 8];
const batch = () => makeBatch([{ blocks: [0], start: 0, tokens: TOKENS, logits: "all" }], 16);

/**
 * Max relative logit error of the native run against the f32-decoded run: the
 * activation quantized per 256 to int8 (Q8_K) before every K-quant matrix.
 * Measured 0.002 (qwen2) and 0.008 (llama) on these models; stated with room.
 */
const NATIVE_VS_F32 = 0.03;

for (const arch of ["llama", "qwen2"] as const) {
  test(`Q4_K_M (${arch}) under auto: q4_k / q6_k weights, logits within ${NATIVE_VS_F32} of the f32 decode, K-quant memory footprint`, () => {
    const dir = writeTinyModel(join(root, `${arch}-src`), { arch, seed: 11, ...SHAPE }).dir;
    const file = join(root, `${arch}.gguf`);
    convertModelDirToGguf(dir, file, { type: "Q4_K_M" });
    const run = (weights: "auto" | "f32" | "q8") => loadModel(rt, file, { weights, kvDtype: "f32", numBlocks: 2, blockSize: 16, progress: false, maxBatchTokens: 16 });

    const native = run("auto");
    const f32 = run("f32");
    const q8 = run("q8");
    try {
      const w = native.runner.weights;
      assert.equal(w.format, "q4_k");
      const layer = w.layers[0]!;
      assert.ok(layer.qkv instanceof WeightStack, "Q and K (Q4_K) and V (Q6_K) stack");
      assert.deepEqual(layer.qkv.parts.map((p) => [p.format, p.rows]), [["q4_k", 256 + 128], ["q6_k", 128]]);
      assert.equal(layer.gateUp.format, "q4_k");
      assert.equal(layer.down.format, "q6_k");
      assert.equal(w.embedding.format, "q4_k");
      // output.weight is Q6_K; qwen2's tied head is the Q4_K token_embd itself.
      assert.equal(w.lmHead.format, native.config.tieWordEmbeddings ? "q4_k" : "q6_k");

      const err = relErr(native.runner.forward(batch()), f32.runner.forward(batch()));
      assert.ok(err <= NATIVE_VS_F32, `native vs f32 decode: ${err}`);

      // The footprint: the plan counts what was allocated, at K-quant sizes (≈ 5 bits a weight here), not q8's 9.
      const g = openGgufModel(file);
      const sizes = ggufWeightSizes(g, resolveGgufWeights("auto", g));
      assert.equal(sizes.embedding + sizes.layers.reduce((a, b) => a + b, 0) + sizes.lmHead, w.bytes);
      const params = [w.embedding, w.lmHead, ...w.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])].reduce((n, m) => n + m.rows * m.cols, 0);
      const bits = (8 * w.bytes) / params;
      assert.ok(bits > 4.75 && bits < 6, `bits per weight ${bits}`);
      assert.ok(native.plan.weightBytes < 0.7 * q8.plan.weightBytes, `plan ${native.plan.weightBytes} vs q8 ${q8.plan.weightBytes}`);
      assert.equal(q8.runner.weights.format, "q8", "--weights q8 still converts everything");
    } finally {
      native.runner.dispose();
      f32.runner.dispose();
      q8.runner.dispose();
    }
  });
}

test("a Q4_K_M file's decode step equals the same tokens in a prefill batch (GEMV = GEMM rows)", () => {
  const dir = writeTinyModel(join(root, "qwen3-src"), { arch: "qwen3", seed: 5, ...SHAPE }).dir;
  const file = join(root, "qwen3.gguf");
  convertModelDirToGguf(dir, file, { type: "Q4_K_M" });
  const m = loadModel(rt, file, { kvDtype: "f32", numBlocks: 4, blockSize: 16, progress: false, maxBatchTokens: 16 });
  try {
    const all = m.runner.forward(makeBatch([{ blocks: [0], start: 0, tokens: TOKENS, logits: "all" }], 16));
    const last = m.runner.forward(makeBatch([{ blocks: [1], start: 0, tokens: TOKENS.slice(0, -1), logits: "last" }], 16));
    assert.ok(last.length > 0);
    const step = m.runner.forward(makeBatch([{ blocks: [1], start: TOKENS.length - 1, tokens: TOKENS.slice(-1), logits: "all" }], 16));
    const V = step.length;
    assert.ok(relErr(step, all.subarray(all.length - V)) <= 1e-5, `decode vs prefill ${relErr(step, all.subarray(all.length - V))}`);
  } finally {
    m.runner.dispose();
  }
});

test(`a Q5_K file under auto keeps q5_k weights, logits within ${NATIVE_VS_F32} of the f32 decode`, () => {
  const dir = writeTinyModel(join(root, "q5k-src"), { arch: "qwen3", seed: 3, ...SHAPE }).dir;
  const file = join(root, "q5k.gguf");
  convertModelDirToGguf(dir, file, { type: "Q5_K" });
  const run = (weights: "auto" | "f32") => loadModel(rt, file, { weights, kvDtype: "f32", numBlocks: 2, blockSize: 16, progress: false, maxBatchTokens: 16 });
  const native = run("auto");
  const f32 = run("f32");
  try {
    const w = native.runner.weights;
    assert.deepEqual([w.format, w.layers[1]!.qkv.format, w.layers[1]!.down.format, w.embedding.format], ["q5_k", "q5_k", "q5_k", "q5_k"]);
    const err = relErr(native.runner.forward(batch()), f32.runner.forward(batch()));
    assert.ok(err <= NATIVE_VS_F32, `native vs f32 decode: ${err}`);
  } finally {
    native.runner.dispose();
    f32.runner.dispose();
  }
});

test("Q4_K_M of a model whose widths are not multiples of 256: llama.cpp's Q5_0 / Q8_0 fallbacks are kept exactly as q5 / q8, Q6_K natively", () => {
  // hidden 160: q, k, o, gate, up and token_embd fall back to Q5_0, v and output to Q8_0; down (cols 512) stays Q6_K.
  const dir = writeTinyModel(join(root, "odd-src"), { arch: "llama", seed: 9, ...SHAPE, hiddenSize: 160 }).dir;
  const file = join(root, "odd.gguf");
  const types = convertModelDirToGguf(dir, file, { type: "Q4_K_M" });
  assert.deepEqual(new Set(types.values()), new Set(["Q5_0", "Q8_0", "Q6_K", "F32"]));
  const run = (weights: "auto" | "f32") => loadModel(rt, file, { weights, kvDtype: "f32", numBlocks: 2, blockSize: 16, progress: false, maxBatchTokens: 16 });
  const native = run("auto");
  const f32 = run("f32");
  try {
    const w = native.runner.weights;
    const qkv = w.layers[0]!.qkv;
    assert.deepEqual([qkv.format, qkv instanceof WeightStack && qkv.parts.map((p) => p.format), w.layers[0]!.down.format, w.embedding.format], ["q5", ["q5", "q8"], "q6_k", "q5"]);
    // The q5 and q8 rows hold the file's values exactly: decoded, they equal the f32 load's matrix.
    const a = rt.tensor("f32", [w.layers[0]!.qkv.rows, 160]);
    const b = rt.tensor("f32", [w.layers[0]!.qkv.rows, 160]);
    dequantizeWeight(rt, { weight: w.layers[0]!.qkv, out: a });
    dequantizeWeight(rt, { weight: f32.runner.weights.layers[0]!.qkv, out: b });
    assert.deepEqual(a.data(), b.data());
    rt.free(a);
    rt.free(b);
    const err = relErr(native.runner.forward(batch()), f32.runner.forward(batch()));
    assert.ok(err <= NATIVE_VS_F32, `native vs f32 decode: ${err}`);
  } finally {
    native.runner.dispose();
    f32.runner.dispose();
  }
});

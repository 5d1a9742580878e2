// Gemma 2 and Gemma 3 on the WebGPU ModelRunner against the CPU decoder, on
// SwiftShader in CI, with tiny fixture models (src/testing/tiny-model.ts:
// hidden 64, 4 query heads over 2 KV heads of 16, 2 layers) whose Gemma
// features are all on and checked to be: GeGLU (tanh GELU), the embedding
// scale √hidden, the sandwich norms (Gemma's (1 + w) weights), a
// query_pre_attn_scalar (24) other than the head dim, a 6-token sliding
// window on layer 0 and full attention on layer 1 (the steps reach 25 tokens),
// and
//   gemma2  attention-score softcap 3 and final-logit softcap 10
//   gemma3  per-head q/k RMSNorm, and RoPE base 10000 on the sliding layer,
//           1e6 on the global one
// The same ForwardBatches (runner-support.ts: a ragged prefill of two
// sequences, a decode step, a chunk after a cached prefix, a step that
// samples nothing) give logits within 2e-4 · max(1, max |cpu|) per row and
// the same greedy token where it is clear (the tolerance of the other
// architectures, model-runner.test.ts). And the user's path: `kvflash
// generate --device webgpu` prints the greedy ids and text of `kvflash
// generate --device cpu` on a Gemma 2 fixture, its 8 tokens past the window.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import type { GpuDevice } from "../../src/gpu/index.js";
import { GpuModelRunner } from "../../src/gpu/model-runner.js";
import type { KvCacheDType } from "../../src/kv/kv-quant.js";
import type { ModelConfig } from "../../src/model/config.js";
import type { WeightFormat } from "../../src/ops/weight.js";
import { type Runtime, createRuntime, loadModel } from "../../src/ops-entry.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { openTestGpu } from "./support.js";
import { assertLogitsClose, runnerSteps } from "./runner-support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);
const MAIN = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const WINDOW = 6;

/** The fixture's Gemma features, so a fixture change cannot turn these rows into a Llama's. */
function assertGemmaFeatures(c: ModelConfig): void {
  const gemma2 = c.architecture === "Gemma2ForCausalLM";
  assert.equal(c.hiddenAct, "gelu_pytorch_tanh");
  assert.equal(c.embeddingScale, Math.fround(Math.sqrt(c.hiddenSize)));
  assert.equal(c.sandwichNorms, true);
  assert.equal(c.normOffset, 1);
  assert.equal(c.attentionScale, 1 / Math.sqrt(24));
  assert.deepEqual(c.layerWindows, [WINDOW, null]);
  assert.deepEqual([c.attnLogitSoftcap, c.finalLogitSoftcap], gemma2 ? [3, 10] : [0, 0]);
  assert.equal(c.qkNorm, !gemma2);
  if (!gemma2) assert.deepEqual(c.layerRope.map((r) => r?.theta), [10000, 1e6]);
}

describe("Gemma 2 and Gemma 3 on the WebGPU ModelRunner against the CPU decoder", () => {
  let rt: Runtime;
  let gpu: GpuDevice;
  let root: string;
  before(async () => {
    rt = await createRuntime({ threads: 1 });
    root = mkdtempSync(join(tmpdir(), "kvflash-gpu-gemma-"));
    if (opened.gpu) gpu = opened.gpu;
  });
  after(async () => {
    opened.gpu?.destroy();
    await rt.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  async function compare(arch: "gemma2" | "gemma3", weights: WeightFormat, kvDtype: KvCacheDType & ("f32" | "f16" | "bf16")): Promise<void> {
    const dir = writeTinyModel(join(root, arch), { arch, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, slidingWindow: WINDOW, queryPreAttnScalar: 24 }).dir;
    const blockSize = 4;
    const cpu = loadModel(rt, dir, { weights, kvDtype, blockSize, numBlocks: 64, progress: false });
    assertGemmaFeatures(cpu.config);
    const runner = await GpuModelRunner.create(gpu, rt, { config: cpu.config, weights: cpu.runner.weights, numBlocks: 64, blockSize, kvDtype });
    try {
      const V = cpu.config.vocabSize;
      for (const [i, batch] of runnerSteps(blockSize, V).entries()) {
        const want = cpu.runner.forward(batch);
        const got = await runner.forward(batch);
        assertLogitsClose(`${arch} ${weights} KV ${kvDtype} step ${i}`, got, want, V, 2e-4);
      }
    } finally {
      runner.dispose();
      cpu.runner.dispose();
    }
  }

  gpuTest("gemma2 (GeGLU, embedding × √hidden, sandwich norms, score softcap 3, final softcap 10, a 6-token window on every other layer), f32 weights, f32 KV", () => compare("gemma2", "f32", "f32"));
  gpuTest("gemma3 (the same without softcaps, with q/k norms and the sliding layer's own RoPE base), bf16 weights, f16 KV", () => compare("gemma3", "bf16", "f16"));

  gpuTest("kvflash generate --device webgpu gives the greedy ids and text of --device cpu (gemma2, 2 + 8 tokens: past its 6-token window)", async () => {
    // An untied head (the tied one repeats the prompt's last token at this size), so the greedy text moves. A 2-token
    // prompt keeps the process on the decode attention kernel (FlashAttention-2's compile costs SwiftShader seconds;
    // the rows above run it, windowed and softcapped).
    const dir = writeTinyModel(join(root, "generate"), { arch: "gemma2", seed: 2, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, slidingWindow: WINDOW, queryPreAttnScalar: 24, embeddingStd: 0.3, tieWordEmbeddings: false }).dir;
    const args = ["generate", "--model", dir, "--prompt", "Hi", "--max-tokens", "8", "--temperature", "0", "--ignore-eos", "--json", "--weights", "f32", "--kv-dtype", "f32"];
    const exec = (device: string) => promisify(execFile)(process.execPath, [MAIN, ...args, "--device", device], { env: { ...process.env, KVFLASH_THREADS: "1" } });
    const [onGpu, onCpu] = await Promise.all([exec("webgpu"), exec("cpu")]);
    assert.match(onGpu.stderr, /Gemma2ForCausalLM, on webgpu: /, onGpu.stderr);
    const [got, want] = [onGpu, onCpu].map((r) => JSON.parse(r.stdout) as { ids: number[]; text: string });
    assert.equal(want!.ids.length, 8);
    assert.ok(new Set(want!.ids).size >= 4, `the greedy text moves: ${JSON.stringify(want!.text)}`);
    assert.deepEqual([got!.ids, got!.text], [want!.ids, want!.text]);
  });
});

// The WebGPU ModelRunner on GGUF files whose matrices are all Q2_K, Q3_K or
// IQ4_XS (a tiny llama written by the test converter, src/model/gguf/
// convert.ts: hidden 256, MLP 512, 1 layer, an untied head, so every matrix
// is whole 256-value superblocks of the type), on SwiftShader in CI:
//   - the GPU holds every matrix as the file's ggml blocks (weightFormat is
//     the type alone: no "f32 (from …)"), split by rows into 16 KiB buffers,
//     and the bytes uploaded are the f32 upload's with each matrix's 4 bytes a
//     value replaced by the block's bytes / 256 (within 4 bytes a buffer for
//     the rounding to words);
//   - a ragged prefill of two sequences (every row's logits) and a decode
//     step give the logits of the CPU decoder over the same decoded values
//     (an f32 twin: dequantizeWeight, ggml's f32 steps; the CPU's native
//     K-quant kernels quantize the activations to Q8_K and are not the twin)
//     within max |gpu − cpu| ≤ 2e-4 · max(1, max |cpu|) a row (f32 sums in
//     another order), with the same greedy token where the top two are apart;
//   - Q3_K (the 110-byte blocks at odd word offsets): generate() (greedy, 4
//     tokens, through the engine) on the GPU runner gives the twin's ids and
//     text (one type only: the engine's path is the same for every type).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { GpuDevice } from "../../src/gpu/index.js";
import { GpuModelRunner } from "../../src/gpu/model-runner.js";
import type { DecoderWeights } from "../../src/model/decoder-weights.js";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { GGML_TYPES } from "../../src/tensor/ggml-types.js";
import { createDecoder } from "../../src/model/loader.js";
import { type Runtime, type Weight, createRuntime, generate, loadModel, resolveSamplingParams } from "../../src/ops-entry.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { assertLogitsClose, f32Twin, runnerSteps } from "./runner-support.js";
import { openTestGpu } from "./support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);

/** Values of every matrix of `w` (the head once when tied). */
function matrixValues(w: DecoderWeights): number {
  const ms: Weight[] = [w.embedding, ...w.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])];
  if (w.lmHead !== w.embedding) ms.push(w.lmHead);
  return ms.reduce((n, m) => n + m.rows * m.cols, 0);
}

describe("WebGPU ModelRunner on Q2_K, Q3_K and IQ4_XS GGUF files: ggml blocks on the GPU", () => {
  let rt: Runtime;
  let gpu: GpuDevice;
  let root: string;
  before(async () => {
    rt = await createRuntime({ threads: 1 });
    root = mkdtempSync(join(tmpdir(), "kvflash-gpu-kquant-"));
    if (opened.gpu) gpu = opened.gpu;
  });
  after(async () => {
    opened.gpu?.destroy();
    await rt.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  for (const type of ["Q2_K", "Q3_K", "IQ4_XS"] as const) {
    const format = type.toLowerCase();
    const greedy = type === "Q3_K";
    gpuTest(`llama ${type} GGUF: ${format} blocks on the GPU (bytes ${GGML_TYPES[type].typeSize}/1024 of f32's), the CPU twin's logits over a ragged prefill and a decode step${greedy ? ", and its greedy text" : ""}`, async () => {
      const dir = join(root, type);
      writeTinyModel(dir, { arch: "llama", seed: 3, hiddenSize: 256, intermediateSize: 512, numLayers: 1, numHeads: 4, numKvHeads: 2, tieWordEmbeddings: false, embeddingStd: 0.3 });
      const gguf = `${dir}.gguf`;
      convertModelDirToGguf(dir, gguf, { type });
      const blockSize = 4;
      const loaded = loadModel(rt, gguf, { weights: "auto", kvDtype: "f32", blockSize, numBlocks: 64, progress: false });
      const cpu = createDecoder(rt, loaded.config, f32Twin(rt, loaded.runner.weights), { kvDtype: "f32", blockSize, numBlocks: 64 });
      const runner = await GpuModelRunner.create(gpu, rt, { config: loaded.config, weights: loaded.runner.weights, numBlocks: 64, blockSize, kvDtype: "f32", maxBindingBytes: 16384 });
      try {
        assert.equal(loaded.runner.weights.format, format, "the CPU loader keeps the file's blocks");
        assert.equal(runner.weightFormat, format);
        const f32 = await GpuModelRunner.create(gpu, rt, { config: loaded.config, weights: cpu.weights, numBlocks: 1, blockSize, kvDtype: "f32" });
        const f32Bytes = f32.weightBytes;
        f32.dispose();
        const n = matrixValues(loaded.runner.weights);
        const want = f32Bytes - 4 * n + (n / 256) * GGML_TYPES[type].typeSize;
        assert.ok(runner.weightBytes >= want && runner.weightBytes <= want + 4 * 64, `weights on the GPU: ${runner.weightBytes} bytes, expected ${want} (the f32 upload: ${f32Bytes})`);

        const V = loaded.config.vocabSize;
        for (const [i, batch] of runnerSteps(blockSize, V).slice(0, 2).entries()) assertLogitsClose(`${type} step ${i}`, await runner.forward(batch), cpu.forward(batch), V, 2e-4);
        if (!greedy) return;

        const params = resolveSamplingParams({ temperature: 0, maxTokens: 4, ignoreEos: true }, V);
        const promptIds = loaded.tokenizer.encode("a tiny prompt");
        const twin = generate({ runner: cpu, tokenizer: loaded.tokenizer, promptIds, params });
        const got = await generate({ runner, tokenizer: loaded.tokenizer, promptIds, params });
        assert.deepEqual([got.ids, got.text], [twin.ids, twin.text]);
      } finally {
        runner.dispose();
        cpu.dispose();
        loaded.runner.dispose();
      }
    });
  }
});

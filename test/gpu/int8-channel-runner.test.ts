// The WebGPU ModelRunner with an int8 KV cache of static per-channel scales
// and offsets (GpuModelRunnerOptions.int8, as PagedKvCacheOptions.int8)
// against the CPU Decoder over a PagedKvCache with the same setting, on a
// tiny Llama fixture (src/testing/tiny-model.ts; GQA 4/2, head dim 16, 2
// layers, f32 weights). The scales and offsets are calibrated per layer and
// channel from the K and V an f32 run of the same steps wrote (asymmetric:
// [min, max] widened by 10% onto the codes [−128, 127]), so the codes are
// used across their range, as a real calibration would. Checked:
// - the steps of runner-support.ts (a ragged prefill, a decode step, a chunk
//   after a cached prefix beside a decode, a step sampling nothing) give the
//   CPU's logits per row within
//     max |gpu − cpu| ≤ 2e-4 · max(1, max |cpu|)
//   (the f32 runners' tolerance; the K and V rows the GPU quantizes may
//   differ from the CPU's in the last f32 bits, which can move a value across
//   a rounding boundary by one code step; measured on SwiftShader: 1.0e-5,
//   while the int8 cache moves the CPU's logits 4.3e-3 from its f32 cache's,
//   so a wrong scale or offset cannot pass) and the same greedy token
//   wherever the CPU's top two logits are more than twice that apart;
// - 8 greedy decode steps after a prompt, each runner fed its own argmax,
//   give the same token ids;
// - a bad setting is an ArgumentError naming it, before anything is uploaded.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { GpuDevice } from "../../src/gpu/index.js";
import { GpuModelRunner } from "../../src/gpu/model-runner.js";
import { Decoder } from "../../src/model/decoder.js";
import type { ModelRunner } from "../../src/model/model-runner.js";
import { ArgumentError, type Int8PerChannel, PagedKvCache, type Runtime, createRuntime, loadModel } from "../../src/ops-entry.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { Blocks, argmaxOf, makeBatch } from "../model/decoder-support.js";
import { openTestGpu } from "./support.js";
import { assertLogitsClose, f32Twin, runnerSteps } from "./runner-support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);
const TOL = 2e-4;
const BLOCK_SIZE = 4;
const NUM_BLOCKS = 64;

/**
 * Per-channel scales and offsets [numLayers, Hkv, D] from the K and V an f32
 * CPU decoder wrote into the slots `slots`: x = (q + offset) · scale maps
 * q = −128 … 127 onto [min, max] of each channel widened by 10%.
 */
function calibrate(cpu: Decoder, slots: Iterable<number>): Int8PerChannel {
  const { numLayers, numKvHeads: hkv, headDim: d } = cpu.cache;
  const n = hkv * d;
  const out = { kScale: new Float32Array(numLayers * n), vScale: new Float32Array(numLayers * n), kOffset: new Float32Array(numLayers * n), vOffset: new Float32Array(numLayers * n) };
  const written = [...slots];
  for (let l = 0; l < numLayers; l++) {
    for (const which of ["k", "v"] as const) {
      const x = cpu.cache.layer(l)[which].data() as Float32Array;
      for (let c = 0; c < n; c++) {
        let [lo, hi] = [Infinity, -Infinity];
        for (const s of written) (lo = Math.min(lo, x[s * n + c]!)), (hi = Math.max(hi, x[s * n + c]!));
        const pad = 0.05 * (hi - lo) + 1e-3;
        [lo, hi] = [lo - pad, hi + pad];
        const scale = (hi - lo) / 255;
        out[`${which}Scale`][l * n + c] = scale;
        out[`${which}Offset`][l * n + c] = lo / scale + 128;
      }
    }
  }
  return { mode: "per-channel", ...out };
}

/** Greedy ids: the prompt as one prefill on `blocks`, then `steps` decode steps each fed the last argmax. */
async function greedy(runner: ModelRunner, blocks: number[], prompt: number[], steps: number): Promise<number[]> {
  const ids: number[] = [];
  let logits = await runner.forward(makeBatch([{ blocks, start: 0, tokens: prompt }], BLOCK_SIZE));
  for (let i = 0; i < steps; i++) {
    ids.push(argmaxOf(logits));
    logits = await runner.forward(makeBatch([{ blocks, start: prompt.length + i, tokens: [ids[i]!] }], BLOCK_SIZE));
  }
  return ids;
}

describe("WebGPU ModelRunner with an int8 KV cache of static per-channel scales against the CPU decoder", () => {
  let rt: Runtime;
  let gpu: GpuDevice;
  let root: string;
  let dir: string;
  before(async () => {
    rt = await createRuntime({ threads: 1 });
    root = mkdtempSync(join(tmpdir(), "kvflash-gpu-int8ch-"));
    dir = writeTinyModel(join(root, "llama"), { arch: "llama", seed: 4, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, tieWordEmbeddings: false, embeddingStd: 0.3 }).dir;
    if (opened.gpu) gpu = opened.gpu;
  });
  after(async () => {
    opened.gpu?.destroy();
    await rt.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  gpuTest("calibrated per-channel scales and offsets: the CPU's logits over a ragged prefill, a decode step and a chunk after a cached prefix, and the same 8 greedy tokens", async () => {
    const f32 = loadModel(rt, dir, { weights: "f32", kvDtype: "f32", blockSize: BLOCK_SIZE, numBlocks: NUM_BLOCKS, progress: false });
    const { config } = f32;
    const V = config.vocabSize;
    const steps = runnerSteps(BLOCK_SIZE, V);
    for (const batch of steps) f32.runner.forward(batch);
    const int8 = calibrate(f32.runner as Decoder, steps.flatMap((b) => Array.from(b.slotMapping)));
    const cache = new PagedKvCache(rt, { numLayers: config.numLayers, numBlocks: NUM_BLOCKS, blockSize: BLOCK_SIZE, numKvHeads: config.numKvHeads, headDim: config.headDim, dtype: "int8", int8 });
    const cpu = new Decoder(rt, { config, weights: f32Twin(rt, f32.runner.weights), cache, maxModelLen: f32.runner.maxModelLen });
    const runner = await GpuModelRunner.create(gpu, rt, { config, weights: f32.runner.weights, numBlocks: NUM_BLOCKS, blockSize: BLOCK_SIZE, kvDtype: "int8", int8 });
    try {
      assert.match(String(runner), /KV int8 per-channel/);
      for (const [i, batch] of steps.entries()) {
        const want = cpu.forward(batch);
        const got = await runner.forward(batch);
        assertLogitsClose(`int8 per-channel KV step ${i}`, got, want, V, TOL);
      }
      // The greedy path on fresh blocks, past the two sequences of the steps (40 tokens each).
      const prompt = Array.from({ length: 6 }, (_, i) => (i * 11 + 5) % V);
      const fresh = new Blocks(BLOCK_SIZE);
      fresh.take(80);
      const blocks = fresh.take(prompt.length + 8);
      const [want, got] = [await greedy(cpu, blocks, prompt, 8), await greedy(runner, blocks, prompt, 8)];
      assert.deepEqual(got, want, "greedy ids");
    } finally {
      runner.dispose();
      cpu.dispose();
      f32.runner.dispose();
    }
  });

  gpuTest("a bad per-channel setting is an ArgumentError naming it, as the CPU's PagedKvCache says it", async () => {
    const f32 = loadModel(rt, dir, { weights: "f32", kvDtype: "f32", blockSize: BLOCK_SIZE, numBlocks: 4, progress: false });
    try {
      const { config } = f32;
      const n = config.numKvHeads * config.headDim;
      const ones = new Float32Array(n).fill(1);
      const create = (o: { kvDtype: "int8" | "f16"; int8: Int8PerChannel }) => GpuModelRunner.create(gpu, rt, { config, weights: f32.runner.weights, numBlocks: 4, blockSize: BLOCK_SIZE, ...o });
      const cases: [{ kvDtype: "int8" | "f16"; int8: Int8PerChannel }, RegExp][] = [
        [{ kvDtype: "int8", int8: { mode: "per-channel", kScale: ones.subarray(1), vScale: ones } }, new RegExp(`^int8\\.kScale must have Hkv·D = ${n} or numLayers·Hkv·D = ${2 * n} values, got ${n - 1}$`)],
        [{ kvDtype: "int8", int8: { mode: "per-channel", kScale: ones, vScale: ones.map((x, i) => (i === 5 ? 0 : x)) } }, /^int8\.vScale\[5\] must be a finite positive number, got 0$/],
        [{ kvDtype: "int8", int8: { mode: "per-channel", kScale: ones, vScale: ones, kOffset: ones.map((x, i) => (i === 3 ? NaN : x)) } }, /^int8\.kOffset\[3\] must be a finite number, got NaN$/],
        [{ kvDtype: "f16", int8: { mode: "per-channel", kScale: ones, vScale: ones } }, /^int8 applies to kvDtype int8 only, got kvDtype "f16"$/],
      ];
      for (const [options, message] of cases) await assert.rejects(create(options), (e: Error) => e instanceof ArgumentError && message.test(e.message));
      const cache = () => new PagedKvCache(rt, { numLayers: 2, numBlocks: 4, blockSize: BLOCK_SIZE, numKvHeads: config.numKvHeads, headDim: config.headDim, dtype: "int8", int8: { mode: "per-channel", kScale: ones.subarray(1), vScale: ones } });
      assert.throws(cache, (e: Error) => e instanceof ArgumentError && cases[0]![1].test(e.message)); // the same words on the CPU
    } finally {
      f32.runner.dispose();
    }
  });
});

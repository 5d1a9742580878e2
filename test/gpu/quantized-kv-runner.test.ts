// The WebGPU ModelRunner with an int8 (per-token scales) or fp8 KV cache
// against the CPU decoder with the same cache dtype, on a tiny Llama fixture
// (src/testing/tiny-model.ts; GQA 4/2, head dim 16, 2 layers, f32 weights):
// the same ForwardBatches (a ragged prefill of two sequences, a decode step,
// a chunk after a cached prefix beside a decode) give logits per row within
//   max |gpu − cpu| ≤ 2e-4 · max(1, max |cpu|)
// (the f32 runners' tolerance, model-runner.test.ts; measured here on
// SwiftShader: int8 1.1e-5, fp8 5e-7 — the K and V rows the GPU quantizes
// may differ from the CPU's in the last f32 bits, which can move a value
// across a rounding boundary by one code step) and the same greedy token
// wherever the
// CPU's top two logits are more than twice that apart. And the user's path:
// `kvflash generate --device webgpu --kv-dtype int8` prints the greedy ids
// and text of the library's CPU generate with an int8 cache.
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
import { ArgumentError } from "../../src/index.js";
import { type Runtime, createRuntime, generate, loadModel, resolveSamplingParams, samplingDefaults } from "../../src/ops-entry.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { Blocks, makeBatch } from "../model/decoder-support.js";
import { openTestGpu } from "./support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);
const MAIN = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const TOL = 2e-4;

function argmax(a: ArrayLike<number>, from: number, n: number): number {
  let best = from;
  for (let i = from; i < from + n; i++) if (a[i]! > a[best]!) best = i;
  return best - from;
}

/** Per row: max |gpu − cpu| / max(1, max |cpu|), checked against TOL, and the greedy token where the CPU's is clear. Returns the worst ratio. */
function assertLogitsClose(what: string, gpu: Float32Array, cpu: Float32Array, V: number): number {
  assert.equal(gpu.length, cpu.length, `${what}: length`);
  let worst = 0;
  for (let r = 0; r < cpu.length / V; r++) {
    let scale = 1;
    for (let i = 0; i < V; i++) scale = Math.max(scale, Math.abs(cpu[r * V + i]!));
    for (let i = 0; i < V; i++) {
      const d = Math.abs(gpu[r * V + i]! - cpu[r * V + i]!);
      worst = Math.max(worst, d / scale);
      if (!(d <= TOL * scale)) assert.fail(`${what}: row ${r}, logit ${i}: gpu ${gpu[r * V + i]}, cpu ${cpu[r * V + i]} (tolerance ${TOL * scale})`);
    }
    const top = argmax(cpu, r * V, V);
    let second = -Infinity;
    for (let i = 0; i < V; i++) if (i !== top) second = Math.max(second, cpu[r * V + i]!);
    if (cpu[r * V + top]! - second > 2 * TOL * scale) assert.equal(argmax(gpu, r * V, V), top, `${what}: row ${r}: greedy token`);
  }
  return worst;
}

describe("WebGPU ModelRunner with int8 and fp8 KV caches against the CPU decoder", () => {
  let rt: Runtime;
  let gpu: GpuDevice;
  let root: string;
  let dir: string;
  before(async () => {
    rt = await createRuntime({ threads: 1 });
    root = mkdtempSync(join(tmpdir(), "kvflash-gpu-qkv-"));
    dir = writeTinyModel(join(root, "llama"), { arch: "llama", seed: 4, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, tieWordEmbeddings: false, embeddingStd: 0.3 }).dir;
    if (opened.gpu) gpu = opened.gpu;
  });
  after(async () => {
    opened.gpu?.destroy();
    await rt.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  for (const kvDtype of ["int8", "fp8e4m3", "fp8e5m2"] as const) {
    gpuTest(`llama, f32 weights, ${kvDtype} KV: the CPU's logits over a ragged prefill, a decode step and a chunk after a cached prefix`, async () => {
      const blockSize = 4;
      const cpu = loadModel(rt, dir, { weights: "f32", kvDtype, blockSize, numBlocks: 64, progress: false });
      const runner = await GpuModelRunner.create(gpu, rt, { config: cpu.config, weights: cpu.runner.weights, numBlocks: 64, blockSize, kvDtype });
      try {
        assert.equal(runner.kvDtype, kvDtype);
        const V = cpu.config.vocabSize;
        const blocks = new Blocks(blockSize);
        const a = { blocks: blocks.take(40), prompt: Array.from({ length: 11 }, (_, i) => (i * 7 + 3) % V) };
        const b = { blocks: blocks.take(40), prompt: Array.from({ length: 5 }, (_, i) => (i * 13 + 1) % V) };
        const steps = [
          makeBatch([{ blocks: a.blocks, start: 0, tokens: a.prompt, logits: "all" }, { blocks: b.blocks, start: 0, tokens: b.prompt }], blockSize),
          makeBatch([{ blocks: a.blocks, start: 11, tokens: [5] }, { blocks: b.blocks, start: 5, tokens: [9] }], blockSize),
          makeBatch([{ blocks: a.blocks, start: 12, tokens: Array.from({ length: 10 }, (_, i) => (i * 5 + 2) % V) }, { blocks: b.blocks, start: 6, tokens: [4] }], blockSize),
        ];
        for (const [i, batch] of steps.entries()) {
          const want = cpu.runner.forward(batch);
          const got = await runner.forward(batch);
          assertLogitsClose(`${kvDtype} KV step ${i}`, got, want, V);
        }
      } finally {
        runner.dispose();
        cpu.runner.dispose();
      }
    });
  }

  gpuTest("a head dim that is not a multiple of 4 is refused for a 1-byte KV cache, by name", async () => {
    const cpu = loadModel(rt, dir, { weights: "f32", kvDtype: "f32", blockSize: 4, numBlocks: 4, progress: false });
    try {
      const config = { ...cpu.config, headDim: 18, rotaryDim: 18 };
      await assert.rejects(GpuModelRunner.create(gpu, rt, { config, weights: cpu.runner.weights, numBlocks: 4, blockSize: 4, kvDtype: "int8" }), (e: Error) => e instanceof ArgumentError && /^kvDtype int8 needs a head dim that is a multiple of 4 on the webgpu device, got 18$/.test(e.message));
    } finally {
      cpu.runner.dispose();
    }
  });

  gpuTest("kvflash generate --device webgpu --kv-dtype int8: the greedy ids and text of the CPU with an int8 cache", async () => {
    const args = ["generate", "--model", dir, "--prompt", "a tiny prompt", "--max-tokens", "8", "--temperature", "0", "--ignore-eos", "--json", "--kv-dtype", "int8", "--device", "webgpu"];
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [MAIN, ...args], { env: { ...process.env, KVFLASH_THREADS: "1" } });
    assert.match(stderr, /KV int8/);
    const json = JSON.parse(stdout) as { ids: number[]; text: string };
    const cpu = loadModel(rt, dir, { kvDtype: "int8", progress: false });
    try {
      const params = resolveSamplingParams({ temperature: 0, maxTokens: 8, ignoreEos: true }, cpu.config.vocabSize, samplingDefaults(cpu.generation));
      const want = generate({ runner: cpu.runner, tokenizer: cpu.tokenizer, promptIds: cpu.tokenizer.encode("a tiny prompt"), params, eosTokenIds: cpu.eosTokenIds, runtime: rt });
      assert.deepEqual([json.ids, json.text], [want.ids, want.text]);
    } finally {
      cpu.runner.dispose();
    }
  });
});

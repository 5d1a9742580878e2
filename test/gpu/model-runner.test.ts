// The WebGPU ModelRunner against the CPU decoder on tiny fixture models
// (src/testing/tiny-model.ts), on SwiftShader in CI: the same DecoderWeights
// go up to the GPU, the same ForwardBatches run on both (a ragged step of two
// prefills, decode steps, a chunked prefill after a cached prefix, a sliding
// window), and the logits agree per row within
//   max |gpu − cpu| ≤ tol · max(1, max |cpu|)
//   tol = 2e-4 (f32 accumulation in another order, through 2 layers)
// and their argmax (the greedy token) is the same wherever the CPU's top two
// logits are more than 2 · tol · scale apart (else either is a right answer).
// q8 and q4 weights: the CPU's q8 GEMV also quantizes the activations to Q8_0
// (int8 dot products) while the GPU's multiplies the f32 activations, so the
// CPU side there is an f32 decoder over the dequantized q8 / q4 values — the
// numbers the GPU multiplies by — and the same tolerance holds. Architectures: Llama
// (GQA, no bias), Qwen2 (qkv bias, tied head), Qwen3 (per-head q/k norm,
// head_dim ≠ hidden / heads), Mistral (a 16-token sliding window). Weights f32,
// bf16, q8 and q4 (q4 as q4_0 blocks); KV f32, f16 and bf16; weights split
// by rows into several buffers (as beyond maxStorageBufferBindingSize).
// A Q4_K_M GGUF (llama.cpp's mix: Q4_K, with V, down and the head in Q6_K;
// written by the test converter) runs with its matrices kept as ggml blocks
// on the GPU (q4_k, q6_k; the fused QKV a stack of both; 1 layer and two
// steps, to stay within SwiftShader's time), against the CPU's
// f32 decoder over the same decoded values (the CPU's native K-quant kernels
// quantize the activations to Q8_K), same tolerance; its weights take under
// a fifth of the bytes the f32 expansion took.
// The per-kernel GPU time of a step (src/gpu/step-profiler.ts, the runner's
// `profile`; here, where the q8 kernels are compiled already): a profiled
// runner gives the unprofiled one's logits bit for bit, and every dispatch
// of each step is in lastStep.kernels (counts summing to lastStep.dispatches,
// times finite, ≥ 0 and not all 0; a decode step lists the q8 GEMV and the
// attention). SwiftShader's timestamps are the software driver's CPU time:
// only the accounting is checked, never a speed. Without timestamp-query,
// an ArgumentError; begin() forgets a step that failed before read().
// Each runner compiles only the matrix kernels its weight formats use
// (GpuModelRunner.kernels): no q8 GEMV/GEMM for f32, bf16 or K-quant weights.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { GpuDevice } from "../../src/gpu/index.js";
import { GpuModelRunner } from "../../src/gpu/model-runner.js";
import { GpuStepProfiler } from "../../src/gpu/step-profiler.js";
import { Engine } from "../../src/engine/engine.js";
import { createDecoder } from "../../src/model/loader.js";
import { ArgumentError, type Runtime, createRuntime, generate, loadModel, resolveSamplingParams } from "../../src/ops-entry.js";
import type { KvCacheDType } from "../../src/kv/kv-quant.js";
import type { WeightFormat } from "../../src/ops/weight.js";
import { type TinyArch, writeTinyModel } from "../../src/testing/index.js";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { openTestGpu } from "./support.js";
import { assertLogitsClose, f32Twin, runnerSteps } from "./runner-support.js";

const opened = await openTestGpu();

/** A kernel that doubles b in place (the profiler's own test). */
const DOUBLE = `@group(0) @binding(0) var<storage, read_write> b: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < arrayLength(&b)) { b[g.x] = 2.0 * b[g.x]; }
}`;
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);

/** The matrix kernels a runner over these weights compiles: one GEMV and GEMM per format, the embedding's gather. */
const KERNELS: Record<WeightFormat | "Q4_K_M", string[]> = {
  f32: ["embedding", "gemm", "gemv f32"],
  bf16: ["embedding", "gemm", "gemv f32"],
  q8: ["embedding", "gemm q8", "gemv q8"],
  q4: ["embedding blocks", "gemm blocks", "gemv q4_0"],
  Q4_K_M: ["embedding blocks", "gemm blocks", "gemv q4_k", "gemv q6_k"],
};

describe("WebGPU ModelRunner against the CPU decoder", () => {
  let rt: Runtime;
  let gpu: GpuDevice;
  let root: string;
  before(async () => {
    rt = await createRuntime({ threads: 1 });
    root = mkdtempSync(join(tmpdir(), "kvflash-gpu-runner-"));
    if (opened.gpu) gpu = opened.gpu;
  });
  after(async () => {
    opened.gpu?.destroy();
    await rt.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  /** Runs the same steps on both runners and compares every step's logits. */
  async function compare(arch: TinyArch, weights: WeightFormat | "Q4_K_M", kvDtype: KvCacheDType, extra: { slidingWindow?: number | null } = {}, maxBindingBytes?: number, check?: (r: GpuModelRunner, f32Bytes: number) => void, stepCount = 4): Promise<void> {
    const dir = join(root, `${arch}-${weights}-${kvDtype}`);
    // A Q4_K_M file needs widths that are whole 256-value superblocks (else llama.cpp's fallbacks: Q5_0, Q8_0).
    const shape = weights === "Q4_K_M" ? { hiddenSize: 256, intermediateSize: 512, tieWordEmbeddings: false, numLayers: 1 } : { hiddenSize: 64, numLayers: 2 };
    writeTinyModel(dir, { arch, numHeads: 4, numKvHeads: 2, ...shape, ...extra });
    let source = dir;
    if (weights === "Q4_K_M") convertModelDirToGguf(dir, (source = `${dir}.gguf`), { type: "Q4_K_M" });
    const blockSize = 4;
    const loaded = loadModel(rt, source, { weights: weights === "Q4_K_M" ? "auto" : weights, kvDtype, blockSize, numBlocks: 64, progress: false });
    const quantized = weights !== "f32" && weights !== "bf16";
    const cpu = quantized ? { config: loaded.config, runner: createDecoder(rt, loaded.config, f32Twin(rt, loaded.runner.weights), { kvDtype, blockSize, numBlocks: 64 }) } : loaded;
    const runner = await GpuModelRunner.create(gpu, rt, { config: cpu.config, weights: loaded.runner.weights, numBlocks: 64, blockSize, kvDtype: kvDtype as "f32", ...(maxBindingBytes === undefined ? {} : { maxBindingBytes }) });
    try {
      assert.deepEqual(runner.kernels, KERNELS[weights], `${weights} weights: the matrix kernels compiled`);
      if (check) {
        const f32 = await GpuModelRunner.create(gpu, rt, { config: cpu.config, weights: cpu.runner.weights, numBlocks: 1, blockSize, kvDtype: "f32" });
        const f32Bytes = f32.weightBytes;
        f32.dispose();
        check(runner, f32Bytes);
      }
      const V = cpu.config.vocabSize;
      const steps = runnerSteps(blockSize, V);
      for (const [i, batch] of steps.slice(0, stepCount).entries()) {
        const want = cpu.runner.forward(batch);
        const got = await runner.forward(batch);
        assertLogitsClose(`${arch} ${weights} KV ${kvDtype} step ${i}`, got, want, V, 2e-4);
      }
    } finally {
      runner.dispose();
      cpu.runner.dispose();
      if (quantized) loaded.runner.dispose();
    }
  }

  gpuTest("llama, f32 weights, f32 KV", () => compare("llama", "f32", "f32"));

  gpuTest("generate() on the GPU runner (awaited) gives the CPU decoder's greedy ids and text", async () => {
    const dir = join(root, "generate");
    writeTinyModel(dir, { arch: "llama", seed: 4, hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, tieWordEmbeddings: false, embeddingStd: 0.3 });
    const cpu = loadModel(rt, dir, { weights: "bf16", kvDtype: "bf16", numBlocks: 16, progress: false });
    const runner = await GpuModelRunner.create(gpu, rt, { config: cpu.config, weights: cpu.runner.weights, numBlocks: 16, blockSize: cpu.runner.kvCache.blockSize, kvDtype: "bf16" });
    try {
      const params = resolveSamplingParams({ temperature: 0, maxTokens: 6, ignoreEos: true }, cpu.config.vocabSize);
      const promptIds = cpu.tokenizer.encode("a tiny prompt");
      const want = generate({ runner: cpu.runner, tokenizer: cpu.tokenizer, promptIds, params });
      const got = await generate({ runner, tokenizer: cpu.tokenizer, promptIds, params });
      assert.deepEqual([got.ids, got.text], [want.ids, want.text]);
    } finally {
      runner.dispose();
      cpu.runner.dispose();
    }
  });

  gpuTest("qwen2 (qkv bias, tied head), bf16 weights, bf16 KV", () => compare("qwen2", "bf16", "bf16"));
  gpuTest("qwen3 (per-head q/k norm), q8 weights, f16 KV", () => compare("qwen3", "q8", "f16"));
  gpuTest("phi3 (fused qkv and gate_up, partial rotary 12 of 16, LongRoPE long factors and attention factor), f32 weights, f32 KV", () => compare("phi3", "f32", "f32"));
  gpuTest("smollm3 (NoPE on every 2nd layer), bf16 weights, f16 KV", () => compare("smollm3", "bf16", "f16"));
  gpuTest("mistral (sliding window 16), q4 weights, f32 KV, every matrix split by rows into 6 KiB buffers (embedding and head too)", () => compare("mistral", "q4", "f32", { slidingWindow: 16 }, 6144));

  gpuTest("llama Q4_K_M GGUF (1 layer; a ragged prefill, then a decode step): q4_k and q6_k blocks on the GPU (no f32 expansion), f16 KV, split by rows into 16 KiB buffers", () =>
    compare("llama", "Q4_K_M", "f16", {}, 16384, (r, f32Bytes) => {
      assert.equal(r.weightFormat, "q6_k, q4_k + q6_k, q4_k"); // head, qkv (V in Q6_K), o and gate_up; down is Q6_K too
      assert.ok(r.weightBytes < 0.2 * f32Bytes, `weights on the GPU: ${r.weightBytes} bytes, the f32 expansion ${f32Bytes}`);
    }, 2));

  gpuTest("a profiled runner computes the same logits and accounts for every dispatch of each step", async () => {
    assert.ok(gpu.features.has("timestamp-query"), `the test adapter offers timestamp-query (${gpu.describe()})`);
    const dir = join(root, "profile");
    writeTinyModel(dir, { arch: "llama", numHeads: 4, numKvHeads: 2, hiddenSize: 64, numLayers: 2 });
    const blockSize = 4;
    const loaded = loadModel(rt, dir, { weights: "q8", kvDtype: "f16", blockSize, numBlocks: 64, progress: false });
    const make = () => GpuModelRunner.create(gpu, rt, { config: loaded.config, weights: loaded.runner.weights, numBlocks: 64, blockSize, kvDtype: "f16" });
    const [plain, profiled] = [await make(), await make()];
    try {
      profiled.profile = true;
      assert.equal(profiled.profile, true);
      for (const [i, batch] of runnerSteps(blockSize, loaded.config.vocabSize).entries()) {
        const want = await plain.forward(batch);
        const got = await profiled.forward(batch);
        assert.deepEqual(got, want, `step ${i}: logits`);
        assert.equal(plain.lastStep.kernels, undefined);
        const { kernels, dispatches } = profiled.lastStep;
        assert.ok(kernels, `step ${i}: kernels`);
        assert.equal(dispatches, plain.lastStep.dispatches, `step ${i}: the same dispatches`);
        assert.equal(kernels.reduce((n, k) => n + k.dispatches, 0), dispatches, `step ${i}: every dispatch timed`);
        for (const k of kernels) assert.ok(Number.isFinite(k.ms) && k.ms >= 0 && k.kernel.length > 0, `step ${i}: ${JSON.stringify(k)}`);
        assert.ok(kernels.some((k) => k.ms > 0), `step ${i}: some time measured`);
        for (let j = 1; j < kernels.length; j++) assert.ok(kernels[j - 1]!.ms >= kernels[j]!.ms, "most time first");
        if (i === 1) {
          // The decode step (one token each of two sequences): the GEMVs and the attention.
          const names = kernels.map((k) => k.kernel);
          assert.ok(names.includes("gemv q8"), names.join(", "));
          assert.ok(names.includes("lm head: gemv q8"), names.join(", "));
          assert.ok(names.some((n) => /attention/.test(n)), names.join(", "));
        }
      }
      profiled.profile = false;
      await profiled.forward(runnerSteps(blockSize, loaded.config.vocabSize)[1]!);
      assert.equal(profiled.lastStep.kernels, undefined, "profile off: no kernels");
    } finally {
      plain.dispose();
      profiled.dispose();
      loaded.runner.dispose();
    }
  });

  gpuTest("begin() forgets a step that failed before read(); the profiler refuses out-of-order calls", async () => {
    const prof = new GpuStepProfiler(gpu, 4);
    const pipeline = await gpu.pipeline(DOUBLE, "double in place");
    const buf = gpu.upload(new Uint8Array(new Float32Array(64).fill(1).buffer), "b");
    try {
      const group = gpu.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: buf } }] });
      const enc = gpu.device.createCommandEncoder();
      assert.throws(() => prof.pass(enc), /begin\(\) the step first/);
      prof.begin();
      const lost = prof.pass(enc); // a step that records 3 dispatches and then fails
      for (let i = 0; i < 3; i++) gpu.dispatch(lost, pipeline, group, 1);
      prof.begin();
      const pass = prof.pass(enc);
      for (let i = 0; i < 6; i++) gpu.dispatch(pass, pipeline, group, 1); // 2 past capacity 4
      pass.end();
      prof.resolve(enc);
      gpu.device.queue.submit([enc.finish()]);
      const kernels = await prof.read();
      assert.deepEqual(kernels.map((k) => [k.kernel, k.dispatches]), [["double in place", 4]]);
      assert.equal(prof.untimed, 2);
      await assert.rejects(prof.read(), /resolve\(\) the step first/);
    } finally {
      gpu.pool.release(buf);
      prof.destroy();
    }
  });

  gpuTest("an adapter without timestamp-query: profile = true is an ArgumentError naming the feature", async () => {
    const bare = (await GpuDevice.open({ device: "webgpu", disable: ["timestamp-query"] }))!;
    try {
      assert.equal(bare.features.has("timestamp-query"), false);
      assert.throws(() => new GpuStepProfiler(bare), (e: Error) => e instanceof ArgumentError && /^profile needs the adapter's timestamp-query feature/.test(e.message));
    } finally {
      bare.destroy();
    }
  });

  gpuTest("a lost device fails the engine's running requests with the loss, and the engine steps on (last: it loses the suite's device)", async () => {
    const dir = join(root, "lost");
    writeTinyModel(dir, { arch: "llama", hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2 });
    const cpu = loadModel(rt, dir, { weights: "f32", kvDtype: "f32", numBlocks: 16, progress: false });
    const runner = await GpuModelRunner.create(gpu, rt, { config: cpu.config, weights: cpu.runner.weights, numBlocks: 16, blockSize: cpu.runner.kvCache.blockSize, kvDtype: "f32" });
    try {
      const engine = new Engine({ runner, tokenizer: cpu.tokenizer, eosTokenIds: [] });
      const params = resolveSamplingParams({ temperature: 0, maxTokens: 4, ignoreEos: true }, cpu.config.vocabSize);
      engine.addRequest({ requestId: "a", promptTokenIds: [3, 4, 5], params });
      gpu.device.destroy(); // what a driver reset or a GPU removal looks like to WebGPU
      const outs = await engine.step();
      assert.deepEqual(outs.map((o) => [o.requestId, o.finishReason]), [["a", "error"]]);
      assert.match(outs[0]!.error!, /^forward failed: .*WebGPU device was (lost|destroyed)/);
      engine.addRequest({ requestId: "b", promptTokenIds: [3], params });
      const again = await engine.step();
      assert.deepEqual(again.map((o) => [o.requestId, o.finishReason]), [["b", "error"]]);
    } finally {
      runner.dispose();
      cpu.runner.dispose();
    }
  });
});

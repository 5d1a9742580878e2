/**
 * Model rows of the `webgpu` suite: the WebGPU ModelRunner (src/gpu/model-runner.ts)
 * against the wasm decoder on the same synthetic weights, in the same run:
 * prefill (one step of the whole prompt) and decode (one token a step) tok/s
 * through runRequest (the `kvflash generate` loop), and `over_cpu` = GPU tok/s
 * over the CPU's. Qwen2.5-0.5B-shaped, q8 and bf16 weights, bf16 KV; on a
 * software adapter (SwiftShader runs every workgroup on the CPU) a 2-layer
 * model of hidden 128 with a 1024-token vocabulary and a 16-token prompt:
 * the rows then show that the path runs, never GPU speed (`software` says so).
 *
 * Decode rows also carry `gbps` = the runner's weight bytes (GpuModelRunner.weightBytes,
 * every matrix read once a token; the KV cache's few MB left out) × tok/s, and
 * `roofline` = gbps over the copy bandwidth measured in the same run (target ≥ 0.5
 * for the q8 model), and the step's host split: `record_ms` (recording its
 * dispatches) and `wait_ms` (submit to logits on the CPU), and `dispatches` (compute
 * dispatches a step records: GpuModelRunner.lastStep), medians over the steps.
 *
 * Where the adapter has timestamp-query, `phase: "decode profile"` rows follow
 * each decode row: the same decode steps run again with the runner's
 * `profile` on (src/gpu/step-profiler.ts: each dispatch in a pass of its
 * own, timed on the GPU), one row a kernel (pipeline label) with its
 * `dispatches` and `gpu_ms` a step (means over the steps) and `share`, its
 * fraction of the profiled step's summed kernel time. They split a step's
 * `wait_ms` into kernels; profiled steps are slower than the measured ones
 * (a barrier between every two dispatches), so shares, not times, are what
 * they are for. On a software adapter they are the driver's CPU time.
 */
import { argmax } from "../src/engine/sampler.js";
import type { GpuDevice } from "../src/gpu/device.js";
import { GpuModelRunner } from "../src/gpu/model-runner.js";
import { type Decoder, type ModelRunner, type Runtime, type WeightFormat, runRequest } from "../src/ops-entry.js";
import { createSyntheticModel, qwen25HalfBConfig } from "../src/testing/index.js";
import { type GpuCeilings, adapterName } from "./gpu-ceilings.js";
import { type Row, median } from "./harness.js";

export async function modelRows(rt: Runtime, gpu: GpuDevice, ceil: GpuCeilings, small: boolean, log: (line: string) => void): Promise<Row[]> {
  const full = qwen25HalfBConfig();
  // SwiftShader: hidden 128, 2 layers, a 1024-token vocabulary (a few seconds a step there).
  const config = small ? { ...full, hiddenSize: 128, intermediateSize: 384, numHeads: 2, numKvHeads: 1, headDim: 64, numLayers: 2, vocabSize: 1024, layerWindows: full.layerWindows.slice(0, 2), layerRope: full.layerRope.slice(0, 2) } : full;
  const prompt = small ? 16 : 512;
  const decodeSteps = small ? 4 : 64;
  const rows: Row[] = [];
  for (const weights of ["q8", "bf16"] as const satisfies readonly WeightFormat[]) {
    const cpu: Decoder = createSyntheticModel(rt, { config, weights, kvDtype: "bf16", numBlocks: Math.ceil((prompt + decodeSteps + 1) / 16), maxBatchTokens: prompt });
    let gpuRunner: GpuModelRunner | null = null;
    try {
      gpuRunner = await GpuModelRunner.create(gpu, rt, { config, weights: cpu.weights, numBlocks: cpu.kvCache.numBlocks, blockSize: cpu.kvCache.blockSize, kvDtype: "bf16" });
      const ids = Array.from({ length: prompt }, (_, i) => ((i * 2654435761) >>> 0) % config.vocabSize);
      const records: number[] = [];
      const waits: number[] = [];
      const dispatches: number[] = [];
      const measure = async (runner: ModelRunner): Promise<{ prefill: number; decode: number }> => {
        const prefills: number[] = [];
        const decodes: number[] = [];
        records.length = waits.length = dispatches.length = 0;
        await runRequest(runner, ids, {
          maxTokens: 1 + decodeSteps,
          maxNumBatchedTokens: prompt,
          pick: (logits) => ({ token: argmax(logits), stop: null }),
          onStep: (s) => {
            (s.tokens === prompt ? prefills : decodes).push(s.ms);
            if (s.tokens !== prompt && runner === gpuRunner) records.push(gpuRunner.lastStep.recordMs), waits.push(gpuRunner.lastStep.waitMs), dispatches.push(gpuRunner.lastStep.dispatches);
          },
        });
        return { prefill: (prompt * 1000) / Math.min(...prefills), decode: 1000 / median(decodes) };
      };
      await measure(gpuRunner); // compiles the pipelines
      const g = await measure(gpuRunner);
      const [recordMs, waitMs, steps] = [median(records), median(waits), median(dispatches)];
      log(`model ${weights} decode step on the GPU runner: ${steps} dispatches (${config.numLayers} layers), ${recordMs.toFixed(3)} ms recording (${((1000 * recordMs) / steps).toFixed(1)} µs a dispatch), ${waitMs.toFixed(2)} ms submit to logits (medians); bind groups held ${gpu.bindGroups.stats.held}, created ${gpu.bindGroups.stats.created}`);
      const c = await measure(cpu);
      log(`model ${weights}: prefill ${g.prefill.toFixed(1)} tok/s on the GPU, ${c.prefill.toFixed(1)} on the CPU; decode ${g.decode.toFixed(1)} and ${c.decode.toFixed(1)}`);
      const common: Row = { adapter: adapterName(gpu), model: small ? "qwen2-shaped, hidden 128, 2 layers" : "qwen2.5-0.5b", weights, kv_dtype: "bf16", software: gpu.adapter.software };
      rows.push({ ...common, phase: "prefill", tokens: prompt, tok_s: g.prefill, cpu_tok_s: c.prefill, over_cpu: g.prefill / c.prefill });
      const gbps = (gpuRunner.weightBytes * g.decode) / 1e9;
      rows.push({ ...common, phase: "decode", tokens: decodeSteps, tok_s: g.decode, cpu_tok_s: c.decode, over_cpu: g.decode / c.decode, record_ms: recordMs, wait_ms: waitMs, dispatches: steps, weight_bytes: gpuRunner.weightBytes, gbps, roofline: gbps / ceil.copy_gbps });
      if (gpu.features.has("timestamp-query")) rows.push(...(await profileRows(gpuRunner, ids, prompt, decodeSteps, common, log)));
    } finally {
      gpuRunner?.dispose();
      cpu.dispose();
    }
  }
  return rows;
}

/** The decode steps of one request again, profiled: per kernel, dispatches and GPU ms a step (means) and its share of the kernels' time. */
async function profileRows(runner: GpuModelRunner, ids: number[], prompt: number, decodeSteps: number, common: Row, log: (line: string) => void): Promise<Row[]> {
  const total = new Map<string, { dispatches: number; ms: number }>();
  let steps = 0;
  runner.profile = true;
  try {
    await runRequest(runner, ids, {
      maxTokens: 1 + decodeSteps,
      maxNumBatchedTokens: prompt,
      pick: (logits) => ({ token: argmax(logits), stop: null }),
      onStep: (s) => {
        if (s.tokens === prompt) return;
        steps++;
        for (const k of runner.lastStep.kernels ?? []) {
          const t = total.get(k.kernel) ?? { dispatches: 0, ms: 0 };
          t.dispatches += k.dispatches;
          t.ms += k.ms;
          total.set(k.kernel, t);
        }
      },
    });
  } finally {
    runner.profile = false;
  }
  const sum = [...total.values()].reduce((a, t) => a + t.ms, 0);
  const rows = [...total].sort((a, b) => b[1].ms - a[1].ms).map(([kernel, t]): Row => ({ ...common, phase: "decode profile", kernel, dispatches: t.dispatches / steps, gpu_ms: t.ms / steps, share: sum > 0 ? t.ms / sum : 0 }));
  log(`model ${String(common["weights"])} decode, profiled (GPU ms a step over ${steps} steps, a pass per dispatch): ${rows.map((r) => `${String(r["kernel"])} ×${Number(r["dispatches"]).toFixed(0)} ${Number(r["gpu_ms"]).toFixed(3)} ms`).join("; ")}`);
  return rows;
}

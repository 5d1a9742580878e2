/**
 * A model source → a running WebGPU ModelRunner: the CPU loader's first half
 * (model/loader.ts loadModelWeights: the checks, the memory plan, the
 * weights streamed from the safetensors or GGUF file and converted as for the
 * CPU), then the weights go up to the GPU once (gpu-weights.ts) and the wasm
 * copy is freed. The KV cache takes the plan's blocks, block size and dtype
 * (f32 | f16 | bf16 | int8 | fp8e4m3 | fp8e5m2 on the GPU).
 *
 *   const gpu = await GpuDevice.open({ device: "webgpu" });
 *   const model = await loadGpuModel(rt, gpu, source, { weights: "q8" });
 *   await model.runner.forward(batch);
 */
import { ArgumentError, show } from "../errors.js";
import { type LoadModelOptions, type LoadedModelInfo, loadModelWeights } from "../model/loader.js";
import type { ModelSource } from "../sources/source.js";
import type { Runtime } from "../runtime/runtime.js";
import type { GpuDevice } from "./device.js";
import { GpuModelRunner } from "./model-runner.js";
import { GPU_CACHE_DTYPES, type GpuCacheDtype } from "./wgsl/kv-load.js";

export interface LoadedGpuModel extends LoadedModelInfo {
  runner: GpuModelRunner;
}

/** `gpu.ownDevice`: the runner destroys the device when disposed (the loader opened it for the runner alone). */
export async function loadGpuModel(rt: Runtime, gpu: GpuDevice, model: ModelSource | string, options: LoadModelOptions = {}, own: { ownDevice?: boolean } = {}): Promise<LoadedGpuModel> {
  const { weights, loaded } = loadModelWeights(rt, model, options);
  try {
    const { plan } = loaded;
    if (!(GPU_CACHE_DTYPES as readonly string[]).includes(plan.kvDtype)) {
      throw new ArgumentError("kvDtype", `must be one of ${GPU_CACHE_DTYPES.join(" | ")} (or "auto") on the webgpu device, got ${show(options.kvDtype ?? plan.kvDtype)}`);
    }
    const runner = await GpuModelRunner.create(gpu, rt, {
      config: loaded.config,
      weights,
      numBlocks: plan.numBlocks,
      blockSize: plan.blockSize,
      kvDtype: plan.kvDtype as GpuCacheDtype,
      maxModelLen: plan.maxModelLen,
      ...(own.ownDevice === undefined ? {} : { ownDevice: own.ownDevice }),
    });
    return { runner, ...loaded };
  } finally {
    weights.free();
  }
}

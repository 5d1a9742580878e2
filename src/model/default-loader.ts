/**
 * The server's default model loader (engine/loader-module.ts): the model
 * source (a Hugging Face directory or a GGUF file) through loadModel, with the
 * load settings resolved at the edge passed whole — weights converted to `weights` as they
 * stream from disk, a paged KV cache of `numBlocks` or `kvCacheBytes` (never
 * more than the engine's max_num_seqs sequences of max_model_len need), step
 * buffers sized for the engine's most tokens and sequences a step. With
 * `device` "webgpu" (or "auto" on a machine with a real GPU) the same weights
 * go up to a WebGPU device and the WebGPU ModelRunner runs them
 * (gpu/load-model.ts). The engine worker imports it by URL
 * (server/start-server.ts DEFAULT_LOADER).
 */
import type { EngineModel, LoadProgressInfo, ModelLoadOptions } from "../engine/loader-module.js";
import { formatBytes } from "../runtime/allocator.js";
import type { Runtime } from "../runtime/runtime.js";
import { type LoadModelOptions, loadModel } from "./loader.js";
import { describePlacement } from "./placement.js";

/**
 * loadModel's options for the engine's load options: the load settings whole
 * (model/load-settings.ts), the step buffers sized for the engine's most
 * tokens and sequences a step, progress to the worker.
 */
export function loadModelOptionsFor(options: ModelLoadOptions, onProgress?: (p: LoadProgressInfo) => void): LoadModelOptions {
  const { source: _source, loaderExtra: _extra, maxNumSeqs, maxNumBatchedTokens, ...settings } = options;
  return {
    ...settings,
    ...(maxNumBatchedTokens === undefined ? {} : { maxBatchTokens: maxNumBatchedTokens }),
    ...(maxNumSeqs === undefined ? {} : { maxLogitRows: maxNumSeqs, maxNumSeqs }),
    progress: false,
    ...(onProgress === undefined ? {} : { onProgress: (done: number, total: number) => onProgress({ done, total }) }),
  };
}

/** On the CPU (device "cpu") the model is loaded synchronously; on a GPU, asynchronously. */
export function loadEngineModel(rt: Runtime, options: ModelLoadOptions & { device: "cpu" }, onProgress: (p: LoadProgressInfo) => void): EngineModel;
export function loadEngineModel(rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): EngineModel | Promise<EngineModel>;
export function loadEngineModel(rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): EngineModel | Promise<EngineModel> {
  const load = loadModelOptionsFor(options, onProgress);
  if (options.device !== "cpu") return loadOnGpu(rt, options, load);
  const model = loadModel(rt, options.source, load);
  return { runner: model.runner, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds, placement: describePlacement(model.plan.placement) };
}

/** The WebGPU runner on the adapter `device` picks; "auto" without a real GPU falls back to the CPU decoder. */
async function loadOnGpu(rt: Runtime, options: ModelLoadOptions, load: LoadModelOptions): Promise<EngineModel> {
  const { GpuDevice } = await import("../gpu/device.js");
  const { loadGpuModel } = await import("../gpu/load-model.js");
  const gpu = await GpuDevice.open({ device: options.device === "auto" ? "auto" : "webgpu" });
  if (gpu === null) {
    const model = loadModel(rt, options.source, load);
    return { runner: model.runner, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds, placement: `--device auto: no hardware WebGPU adapter, on the CPU; ${describePlacement(model.plan.placement)}` };
  }
  try {
    const model = await loadGpuModel(rt, gpu, options.source, load, { ownDevice: true });
    const r = model.runner;
    return { runner: r, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds, placement: `${gpu.describe()}; weights ${r.weightFormat} (${formatBytes(r.weightBytes)} on the GPU), KV ${r.kvDtype}` };
  } catch (e) {
    gpu.destroy();
    throw e;
  }
}

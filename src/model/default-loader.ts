/**
 * The server's default model loader (engine/loader-module.ts): the model
 * source (a Hugging Face directory or a GGUF file) through loadModel — weights converted to `weights` as they
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
import { type LoadModelOptions, type RunnerOptions, loadModel } from "./loader.js";
import { describePlacement } from "./placement.js";

/** The decoder's KV cache and step-buffer options for the engine's load options (undefined fields left to the decoder's defaults). */
export function runnerOptionsFor(options: ModelLoadOptions): RunnerOptions {
  return {
    ...(options.kvDtype === undefined ? {} : { kvDtype: options.kvDtype }),
    ...(options.numBlocks !== undefined ? { numBlocks: options.numBlocks } : options.kvCacheBytes !== undefined ? { kvCacheBytes: options.kvCacheBytes } : {}),
    ...(options.blockSize === undefined ? {} : { blockSize: options.blockSize }),
    ...(options.maxModelLen === undefined ? {} : { maxModelLen: options.maxModelLen }),
    ...(options.maxNumBatchedTokens === undefined ? {} : { maxBatchTokens: options.maxNumBatchedTokens }),
    ...(options.maxNumSeqs === undefined ? {} : { maxLogitRows: options.maxNumSeqs, maxNumSeqs: options.maxNumSeqs }),
  };
}

/** On the CPU (no `device`, or "cpu") the model is loaded synchronously; on a GPU, asynchronously. */
export function loadEngineModel(rt: Runtime, options: ModelLoadOptions & { device?: "cpu" }, onProgress: (p: LoadProgressInfo) => void): EngineModel;
export function loadEngineModel(rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): EngineModel | Promise<EngineModel>;
export function loadEngineModel(rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): EngineModel | Promise<EngineModel> {
  const load: LoadModelOptions = {
    ...(options.weights === undefined ? {} : { weights: options.weights }),
    ...runnerOptionsFor(options),
    progress: false,
    onProgress: (done, total) => onProgress({ done, total }),
  };
  if (options.device !== undefined && options.device !== "cpu") return loadOnGpu(rt, options, load);
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

/**
 * The server's default model loader (engine/loader-module.ts): the model
 * source (a Hugging Face directory or a GGUF file) through loadModel — weights converted to `weights` as they
 * stream from disk, a paged KV cache of `numBlocks` or `kvCacheBytes` (never
 * more than the engine's max_num_seqs sequences of max_model_len need), step
 * buffers sized for the engine's most tokens and sequences a step. The
 * engine worker imports it by URL (server/start-server.ts DEFAULT_LOADER).
 */
import type { EngineModel, LoadProgressInfo, ModelLoadOptions } from "../engine/loader-module.js";
import type { Runtime } from "../runtime/runtime.js";
import { type RunnerOptions, loadModel } from "./loader.js";
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

export function loadEngineModel(rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): EngineModel {
  const model = loadModel(rt, options.source, {
    ...(options.weights === undefined ? {} : { weights: options.weights }),
    ...runnerOptionsFor(options),
    progress: false,
    onProgress: (done, total) => onProgress({ done, total }),
  });
  return { runner: model.runner, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds, placement: describePlacement(model.plan.placement) };
}

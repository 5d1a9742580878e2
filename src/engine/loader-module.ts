/**
 * How the engine worker gets a model: a loader module exporting
 * `loadEngineModel: ModelLoader`, imported by URL inside the worker (the
 * worker owns the runtime, so the model must be built there). The server's
 * default loader builds the decoder from the model source (a Hugging Face
 * directory or a GGUF file); tests and
 * embedders may name another module (a different runner, fault injection).
 */
import type { LoadConfig } from "../model/load-settings.js";
import type { ModelRunner } from "../model/model-runner.js";
import type { ModelSource } from "../sources/source.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";

/**
 * Plain data (it crosses the worker boundary): the load settings as the edge
 * resolved them (model/load-settings.ts, passed whole), the model source, the
 * engine's step sizes and a custom loader's extras.
 */
export interface ModelLoadOptions extends LoadConfig {
  /** The model, resolved at the edge (sources/source.ts): a Hugging Face directory or a GGUF file. */
  source: ModelSource;
  /** The engine's settings, so the runner can size its step buffers: most sequences (logit rows) a step. */
  maxNumSeqs?: number;
  /** The engine's token budget: most tokens a step. */
  maxNumBatchedTokens?: number;
  /** Loader-specific options (serve()'s loaderExtra, `--loader-options`; test loaders use them). */
  loaderExtra?: Record<string, unknown>;
}

/** Bytes read so far of a load that reads `total`. */
export interface LoadProgressInfo {
  done: number;
  total: number;
}

export interface EngineModel {
  runner: ModelRunner;
  tokenizer: Tokenizer;
  /** Token ids that end a sequence (ModelDir.eosTokenIds). */
  eosTokenIds: number[];
  /** Where the model lives, one line for the startup log (describePlacement, or the WebGPU adapter). */
  placement?: string;
}

export type ModelLoader = (rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void) => EngineModel | Promise<EngineModel>;

/** The module shape the worker imports. */
export interface ModelLoaderModule {
  loadEngineModel: ModelLoader;
}

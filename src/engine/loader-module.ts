/**
 * How the engine worker gets a model: a loader module exporting
 * `loadEngineModel: ModelLoader`, imported by URL inside the worker (the
 * worker owns the runtime, so the model must be built there). The server's
 * default loader builds the decoder from the model source (a Hugging Face
 * directory or a GGUF file); tests and
 * embedders may name another module (a different runner, fault injection).
 */
import type { DeviceKind } from "../gpu/device-kind.js";
import type { KvDtypeSetting } from "../kv/kv-quant.js";
import type { ModelRunner } from "../model/model-runner.js";
import type { ModelSource } from "../model/source.js";
import type { WeightsSetting } from "../ops/weight.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";

/** Plain data (it crosses the worker boundary). */
export interface ModelLoadOptions {
  /** The model, resolved at the edge (model/source.ts): a Hugging Face directory or a GGUF file. */
  source: ModelSource;
  /** Compute format of the weights ("f32" | "bf16" | "q8" | "q4" | "auto"); the loader's default if omitted. */
  weights?: WeightsSetting;
  /** Where the model runs: "cpu" | "webgpu" | "auto" (gpu/adapter.ts); the default loader's default is "cpu". */
  device?: DeviceKind;
  /** Storage dtype of the KV cache ("f32" | "f16" | "bf16" | "int8" | "fp8_e4m3" …); the loader's default if omitted. */
  kvDtype?: KvDtypeSetting;
  /** Bytes for the paged KV cache (all layers, K and V). */
  kvCacheBytes?: number;
  /** Blocks in the paged KV cache (vLLM's --num-gpu-blocks-override); wins over kvCacheBytes. */
  numBlocks?: number;
  /** Tokens per KV block. */
  blockSize?: number;
  /** Cap on the context length (prompt + output), below the model's own. */
  maxModelLen?: number;
  /** The engine's settings, so the runner can size its step buffers: most sequences (logit rows) a step. */
  maxNumSeqs?: number;
  /** The engine's token budget: most tokens a step. */
  maxNumBatchedTokens?: number;
  /** Loader-specific extras (test loaders use them). */
  extra?: Record<string, unknown>;
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

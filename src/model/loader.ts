/**
 * A Hugging Face model directory → a running decoder:
 *
 *   const rt = await createRuntime();
 *   const model = loadModel(rt, dir, { weights: "q8", kvDtype: "bf16", kvCacheBytes: 512 << 20 });
 *   model.runner.forward(batch);        // ModelRunner: logits of batch.logitIndices
 *   model.tokenizer, model.generation, model.eosTokenIds, model.config
 *   model.runner.dispose();
 *
 * The weights stream from disk one layer at a time and are converted to the
 * chosen format as they arrive (decoder-weights.ts); the paged KV cache then
 * takes what was asked for (numBlocks, or kvCacheBytes, or by default up to
 * 1 GiB of what the 4 GiB wasm32 memory has left).
 */
import { ArgumentError, OutOfMemoryError, show } from "../errors.js";
import { KV_CACHE_DTYPES, type KvCacheDType } from "../kv/kv-quant.js";
import { PagedKvCache } from "../kv/paged-kv-cache.js";
import { WEIGHT_FORMATS, type WeightFormat } from "../ops/weight.js";
import { formatBytes } from "../runtime/allocator.js";
import { MAX_MEMORY_BYTES } from "../runtime/module.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt } from "../tensor/check.js";
import { DTYPE_BYTES } from "../tensor/dtype.js";
import type { Tensor } from "../tensor/tensor.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import type { ModelConfig } from "./config.js";
import { type DecoderWeights, type TensorSource, buildDecoderWeights } from "./decoder-weights.js";
import { Decoder } from "./decoder.js";
import type { GenerationConfig } from "./generation-config.js";
import { ggufTensorSource, isGgufPath, openGgufModel, resolveGgufWeightFormat } from "./gguf/gguf-model.js";
import { openModelDir } from "./model-dir.js";
import { LoadProgress, type ProgressOptions } from "./progress.js";
import { freeTensors, loadSafetensors } from "./safetensors.js";

/** KV cache options shared by loadModel and the synthetic model. */
export interface RunnerOptions {
  /**
   * Storage of the paged KV cache: f32 | f16 | bf16 | int8 (per-token scales) | fp8e4m3 | fp8e5m2,
   * or vLLM's spellings "auto" (the checkpoint's dtype: bf16 for bf16/f16 checkpoints, else f32),
   * "fp8" / "fp8_e4m3", "fp8_e5m2". Default "auto".
   */
  kvDtype?: string;
  /** Tokens per KV block, 1..256. Default 16 (vLLM's). */
  blockSize?: number;
  /** Blocks in the KV cache. Default: from kvCacheBytes. */
  numBlocks?: number;
  /** Bytes for the KV cache (all layers, K and V). Default: min(1 GiB, what the 4 GiB memory has left after the weights and 256 MiB of headroom). */
  kvCacheBytes?: number;
  /** Longest sequence (prompt + output). Default: min(max_position_embeddings, the cache's capacity). */
  maxModelLen?: number;
  /** Activations allocated up front for this many tokens per step (see DecoderOptions). Default 512. */
  maxBatchTokens?: number;
  /** Logit rows allocated up front per step. Default 16. */
  maxLogitRows?: number;
}

export interface LoadModelOptions extends RunnerOptions {
  /** Compute format of the weights: f32 | bf16 | q8 | q4, or "auto" (the checkpoint's: bf16 stays bf16, f32 and f16 become f32). Default "auto". */
  weights?: string;
  /** Progress bar on stderr: true / false, or options. Default: only when stderr is a TTY. */
  progress?: boolean | ProgressOptions;
  /** Called as the weights load: bytes read so far and in all. */
  onProgress?: (done: number, total: number) => void;
}

export interface LoadedModel {
  runner: Decoder;
  tokenizer: Tokenizer;
  generation: GenerationConfig;
  /** Token ids that end a sequence (generation_config ∪ config.json ∪ the tokenizer's EOS). */
  eosTokenIds: number[];
  config: ModelConfig;
  dir: string;
}

const KV_ALIASES: Readonly<Record<string, KvCacheDType>> = { fp8: "fp8e4m3", fp8_e4m3: "fp8e4m3", fp8_e5m2: "fp8e5m2" };
const MIB = 1 << 20;

/** The checkpoint's float width as a compute dtype: bf16 for bf16/f16 checkpoints, f32 otherwise. */
function checkpointIsHalf(config: ModelConfig): boolean {
  return config.torchDtype === "bfloat16" || config.torchDtype === "float16";
}

/** Resolves --weights (f32 | bf16 | q8 | q4 | auto). */
export function resolveWeightFormat(value: string | undefined, config: ModelConfig): WeightFormat {
  const v = value ?? "auto";
  if (v === "auto") return config.torchDtype === "bfloat16" ? "bf16" : "f32";
  if (!(WEIGHT_FORMATS as readonly string[]).includes(v)) {
    throw new ArgumentError("weights", `must be one of ${[...WEIGHT_FORMATS, "auto"].map((f) => JSON.stringify(f)).join(" | ")}, got ${show(value)}`);
  }
  return v as WeightFormat;
}

/** Resolves --kv-dtype (the cache dtypes, "auto", and vLLM's fp8 spellings). */
export function resolveKvDtype(value: string | undefined, config: ModelConfig): KvCacheDType {
  const v = value ?? "auto";
  if (v === "auto") return checkpointIsHalf(config) ? "bf16" : "f32";
  const dtype = KV_ALIASES[v] ?? v;
  if (!(KV_CACHE_DTYPES as readonly string[]).includes(dtype)) {
    const names = [...KV_CACHE_DTYPES, "auto", ...Object.keys(KV_ALIASES)];
    throw new ArgumentError("kvDtype", `must be one of ${names.map((n) => JSON.stringify(n)).join(" | ")}, got ${show(value)}`);
  }
  return dtype as KvCacheDType;
}

/** Bytes one KV block takes over all layers (K and V, plus int8's per-token scales). */
export function kvBytesPerBlock(config: ModelConfig, blockSize: number, dtype: KvCacheDType): number {
  const rows = blockSize * config.numKvHeads;
  const perLayer = 2 * (rows * config.headDim * DTYPE_BYTES[dtype] + (dtype === "int8" ? rows * 4 : 0));
  return perLayer * config.numLayers;
}

/**
 * Builds the paged KV cache the options ask for and the Decoder over `weights`
 * (which it then owns; on failure they are freed here).
 */
export function createDecoder(rt: Runtime, config: ModelConfig, weights: DecoderWeights, options: RunnerOptions = {}): Decoder {
  let cache: PagedKvCache | undefined;
  try {
    const dtype = resolveKvDtype(options.kvDtype, config);
    const blockSize = checkInt("blockSize", options.blockSize ?? 16, { min: 1, max: 256 });
    const perBlock = kvBytesPerBlock(config, blockSize, dtype);
    let numBlocks: number;
    if (options.numBlocks !== undefined) {
      if (options.kvCacheBytes !== undefined) throw new ArgumentError("kvCacheBytes", `and numBlocks both size the KV cache: give one, got ${show(options.kvCacheBytes)} and ${show(options.numBlocks)}`);
      numBlocks = checkInt("numBlocks", options.numBlocks, { min: 1 });
    } else {
      let bytes: number;
      if (options.kvCacheBytes !== undefined) {
        bytes = checkInt("kvCacheBytes", options.kvCacheBytes, { min: 1 });
      } else {
        const left = MAX_MEMORY_BYTES - rt.heap.inUse - 256 * MIB;
        bytes = Math.min(1024 * MIB, left);
      }
      numBlocks = Math.floor(bytes / perBlock);
      if (numBlocks < 1) {
        throw new ArgumentError("kvCacheBytes", `must hold at least one KV block of ${formatBytes(perBlock)} (${blockSize} tokens × ${config.numLayers} layers, ${dtype}), got ${formatBytes(Math.max(0, bytes))}`);
      }
    }
    const slots = numBlocks * blockSize;
    if (options.maxModelLen !== undefined) {
      const want = checkInt("maxModelLen", options.maxModelLen, { min: 2, max: config.maxPositionEmbeddings });
      if (want > slots) {
        throw new ArgumentError("maxModelLen", `must fit in the KV cache (${numBlocks} blocks × ${blockSize} = ${slots} tokens at ${formatBytes(perBlock / blockSize)} a token): got ${want}; give the cache more memory or lower maxModelLen`);
      }
    }
    try {
      cache = new PagedKvCache(rt, { numLayers: config.numLayers, numBlocks, blockSize, numKvHeads: config.numKvHeads, headDim: config.headDim, dtype });
    } catch (e) {
      if (e instanceof OutOfMemoryError) {
        throw new OutOfMemoryError(`${e.message} — the KV cache (${formatBytes(numBlocks * perBlock)}) does not fit beside the ${weights.format} weights (${formatBytes(weights.bytes)}); lower kvCacheBytes/numBlocks or pick a smaller weight format`);
      }
      throw e;
    }
    return new Decoder(rt, {
      config,
      weights,
      cache,
      ...(options.maxModelLen === undefined ? {} : { maxModelLen: options.maxModelLen }),
      ...(options.maxBatchTokens === undefined ? {} : { maxBatchTokens: options.maxBatchTokens }),
      ...(options.maxLogitRows === undefined ? {} : { maxLogitRows: options.maxLogitRows }),
    });
  } catch (e) {
    cache?.dispose();
    weights.free();
    throw e;
  }
}

/**
 * Loads a Hugging Face model directory (config, tokenizer, generation config,
 * safetensors weights converted to `weights`), or a .gguf file (gguf/gguf-model.ts),
 * and builds its Decoder with a paged KV cache. Everything is checked (config keys, every tensor's name and
 * shape, the options) before the first weight byte is read.
 */
export function loadModel(rt: Runtime, dir: string, options: LoadModelOptions = {}): LoadedModel {
  const gguf = isGgufPath(dir) ? openGgufModel(dir) : null; // a .gguf file instead of a directory (gguf/gguf-model.ts)
  const info = gguf ?? openModelDir(dir);
  const { config } = info;
  const format = gguf ? resolveGgufWeightFormat(options.weights, gguf) : resolveWeightFormat(options.weights, config);
  resolveKvDtype(options.kvDtype, config); // fail before loading anything
  const located = new Map("weights" in info ? info.weights.map((w) => [w.name, w]) : []);
  const p = options.progress;
  const progress = new LoadProgress(info.weightBytes, typeof p === "object" ? p : p === undefined ? {} : { enabled: p });

  // The checkpoint's tensors for one group of names, read from whichever shards hold them.
  const source: TensorSource = gguf ? ggufTensorSource(rt, gguf, progress, options.onProgress) : (names: readonly string[]): Map<string, Tensor> => {
    const out = new Map<string, Tensor>();
    try {
      const files = [...new Set(names.map((n) => located.get(n)!.file))];
      for (const file of files) {
        const inFile = names.filter((n) => located.get(n)!.file === file);
        for (const [name, t] of loadSafetensors(rt, file, { names: inFile, progress })) out.set(name, t);
      }
    } catch (e) {
      freeTensors(rt, out);
      throw e;
    }
    options.onProgress?.(progress.done, progress.total);
    return out;
  };
  let weights: DecoderWeights;
  try {
    weights = buildDecoderWeights(rt, { config, format, source });
  } finally {
    progress.finish();
  }
  const runner = createDecoder(rt, config, weights, options);
  return { runner, tokenizer: info.tokenizer, generation: info.generation, eosTokenIds: info.eosTokenIds, config, dir };
}

/**
 * A model source (a Hugging Face directory or a GGUF file, sources/source.ts) → a running decoder:
 *
 *   const rt = await createRuntime();
 *   const model = loadModel(rt, source, { weights: "q8", kvDtype: "bf16", kvCacheBytes: 512 << 20 });
 *   model.runner.forward(batch);        // ModelRunner: logits of batch.logitIndices
 *   model.tokenizer, model.generation, model.eosTokenIds, model.config
 *   model.runner.dispose();
 *
 * First the memory plan (memory-plan.ts), from the config alone: the
 * converted weights, the KV cache (numBlocks, or the kvCacheBytes budget capped
 * at what maxNumSeqs × maxModelLen need), the activations, the placement of
 * each layer in a wasm32 memory (placement.ts), and the check that it all fits
 * the machine — a model that cannot fit is refused before a byte is read. Then
 * the weights stream from disk one layer at a time, into the memory placed
 * for them, converted to the chosen format as they arrive (decoder-weights.ts);
 * each memory's KV pool holds its own layers' blocks.
 */
import { ArgumentError, OutOfMemoryError, show } from "../errors.js";
import { KV_CACHE_DTYPES, type KvCacheDType, type KvDtypeSetting } from "../kv/kv-quant.js";
import { PagedKvCache } from "../kv/paged-kv-cache.js";
import { type StorageFormat, WEIGHT_FORMATS, type WeightFormat, type WeightsSetting } from "../ops/weight.js";
import { formatBytes } from "../runtime/allocator.js";
import type { Runtime } from "../runtime/runtime.js";
import { freemem, totalmem } from "node:os";
import { checkInt } from "../tensor/check.js";
import type { Tensor } from "../tensor/tensor.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import type { ModelConfig } from "./config.js";
import { type DecoderWeights, type TensorSource, buildDecoderWeights } from "./decoder-weights.js";
import { Decoder } from "./decoder.js";
import type { GenerationConfig } from "./generation-config.js";
import { ggufTensorSource, ggufWeightSizes, openGgufModel, resolveGgufWeights } from "./gguf/gguf-model.js";
import { type MachineMemory, type MemoryPlan, type WeightSizes, kvBytesPerLayerBlock, planModelMemory } from "./memory-plan.js";
import { openModelDir } from "./model-dir.js";
import { type ModelSource, localModelSourceOf } from "../sources/source.js";
import { LoadProgress, type ProgressOptions } from "../sources/progress.js";
import { type LoadSettings, resolveLoadConfig } from "./load-settings.js";
import { checkMaxModelLen, modelLengthLimit } from "./max-model-len.js";
import { freeTensors, loadSafetensors } from "../sources/safetensors.js";
import { expectedWeights } from "./weight-names.js";

/**
 * The KV cache and step options of a runner, shared by loadModel and the
 * synthetic model: the load settings that shape the cache (load-settings.ts,
 * their one declaration and defaults), and the engine's step sizes.
 */
export interface RunnerOptions extends Pick<LoadSettings, "kvDtype" | "blockSize" | "numBlocks" | "kvCacheBytes" | "maxModelLen"> {
  /** Sequences at once (the engine's max_num_seqs): the KV cache never holds more than they need. Default 1. */
  maxNumSeqs?: number;
  /** For tests: bytes one wasm memory may hold (default 4 GiB), to force a model across memories. */
  memoryBytes?: number;
  /** For tests: the machine's memory the fit check compares with (default os.totalmem() / os.freemem()). */
  machine?: MachineMemory;
  /** Activations allocated up front for this many tokens per step (see DecoderOptions). Default 512. */
  maxBatchTokens?: number;
  /** Logit rows allocated up front per step. Default 16. */
  maxLogitRows?: number;
}

/**
 * loadModel's options: the load settings (a LoadConfig passes whole; `device`,
 * `threads` and `kernels` are the caller's to act on: the runtime `rt` and, for
 * WebGPU, gpu/load-model.ts), the runner's step sizes, and progress.
 */
export interface LoadModelOptions extends RunnerOptions, LoadSettings {
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
  /** Where the model was read from. */
  source: ModelSource;
  /** source.path: the model directory or the .gguf file. */
  dir: string;
  /** Sizes, KV blocks and placement (which layers in which memory, bytes each): describePlacement(plan.placement). */
  plan: MemoryPlan;
}

const KV_ALIASES: Readonly<Record<string, KvCacheDType>> = { fp8: "fp8e4m3", fp8_e4m3: "fp8e4m3", fp8_e5m2: "fp8e5m2" };

/** The checkpoint's float width as a compute dtype: bf16 for bf16/f16 checkpoints, f32 otherwise. */
function checkpointIsHalf(config: ModelConfig): boolean {
  return config.torchDtype === "bfloat16" || config.torchDtype === "float16";
}

/** Resolves --weights (f32 | bf16 | q8 | q4 | auto). */
export function resolveWeightFormat(value: WeightsSetting | undefined, config: ModelConfig): WeightFormat {
  const v = value ?? "auto";
  if (v === "auto") return config.torchDtype === "bfloat16" ? "bf16" : "f32";
  if (!(WEIGHT_FORMATS as readonly string[]).includes(v)) {
    throw new ArgumentError("weights", `must be one of ${[...WEIGHT_FORMATS, "auto"].map((f) => JSON.stringify(f)).join(" | ")}, got ${show(value)}`);
  }
  return v as WeightFormat;
}

/** Resolves --kv-dtype (the cache dtypes, "auto", and vLLM's fp8 spellings). */
export function resolveKvDtype(value: KvDtypeSetting | undefined, config: ModelConfig): KvCacheDType {
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
  return kvBytesPerLayerBlock(config, blockSize, dtype) * config.numLayers;
}

/**
 * Resolves the KV cache and step options and makes the memory plan (sizes,
 * KV blocks, placement, the fit check) for `format` weights, before anything
 * is allocated or read.
 */
export function planRunner(config: ModelConfig, format: StorageFormat, options: RunnerOptions = {}, sourceElementBytes = 2, weightSizes?: WeightSizes, gguf = false): MemoryPlan {
  // The settings resolved (idempotent for a LoadConfig from the edge), then maxModelLen against the model: before the plan, so a bad value fails before any weight is read.
  const load = resolveLoadConfig(options);
  const lengthLimit = modelLengthLimit(config, gguf);
  const maxModelLen = checkMaxModelLen(load.maxModelLen, lengthLimit);
  return planModelMemory(config, {
    format,
    kvDtype: resolveKvDtype(load.kvDtype, config),
    blockSize: load.blockSize,
    lengthLimit,
    ...(load.numBlocks === undefined ? {} : { numBlocks: load.numBlocks }),
    ...(load.kvCacheBytes === undefined ? {} : { kvCacheBytes: load.kvCacheBytes }),
    ...(maxModelLen === undefined ? {} : { maxModelLen }),
    ...(options.maxNumSeqs === undefined ? {} : { maxNumSeqs: checkInt("maxNumSeqs", options.maxNumSeqs, { min: 1 }) }),
    maxBatchTokens: checkInt("maxBatchTokens", options.maxBatchTokens ?? 512, { min: 1 }),
    maxLogitRows: checkInt("maxLogitRows", options.maxLogitRows ?? 16, { min: 1 }),
    sourceElementBytes,
    ...(weightSizes === undefined ? {} : { weightSizes }),
    ...(options.memoryBytes === undefined ? {} : { memoryBytes: options.memoryBytes }),
    ...(options.machine === undefined ? {} : { machine: options.machine }),
  });
}

/**
 * Builds the paged KV cache the plan asks for — one pool per memory that
 * holds layers, each with its own layers' blocks — and the Decoder over
 * `weights` (which it then owns; on failure they are freed here). Without a
 * plan, one is made for the weights' format and the layers stay where the
 * weights are.
 */
export function createDecoder(rt: Runtime, config: ModelConfig, weights: DecoderWeights, options: RunnerOptions = {}, plan?: MemoryPlan): Decoder {
  const caches: PagedKvCache[] = [];
  try {
    const p = plan ?? planRunner(config, weights.format, options);
    // Runs of consecutive layers whose weights share a memory: one KV pool each.
    const runs: { memory: WebAssembly.Memory; layers: number }[] = [];
    for (const w of weights.layers) {
      const last = runs[runs.length - 1];
      if (last && last.memory === w.qkv.memory) last.layers++;
      else runs.push({ memory: w.qkv.memory, layers: 1 });
    }
    for (const run of runs) {
      try {
        caches.push(new PagedKvCache(rt.of(run.memory), { numLayers: run.layers, numBlocks: p.numBlocks, blockSize: p.blockSize, numKvHeads: config.numKvHeads, headDim: config.headDim, dtype: p.kvDtype }));
      } catch (e) {
        if (e instanceof OutOfMemoryError) {
          throw new OutOfMemoryError(`${e.message} — the KV cache (${formatBytes(p.kvBytes)}) does not fit beside the ${weights.format} weights (${formatBytes(weights.bytes)}); lower kvCacheBytes/numBlocks or pick a smaller weight format`);
        }
        throw e;
      }
    }
    return new Decoder(rt, {
      config,
      weights,
      cache: caches,
      maxModelLen: p.maxModelLen,
      ...(options.maxBatchTokens === undefined ? {} : { maxBatchTokens: options.maxBatchTokens }),
      ...(options.maxLogitRows === undefined ? {} : { maxLogitRows: options.maxLogitRows }),
    });
  } catch (e) {
    for (const c of caches) c.dispose();
    weights.free();
    throw e;
  }
}

/**
 * The memory a model loaded into `rt` can have: the machine's free memory,
 * plus what `rt`'s memories hold but no live allocation uses. A wasm memory
 * never shrinks, so after a model is disposed its pages stay with the process
 * (not free to the OS) yet the next model in the same runtime reuses them.
 */
export function runtimeMachineMemory(rt: Runtime): MachineMemory {
  const reusable = rt.memoryUsage().reduce((n, u) => n + Math.max(0, u.capacity - u.inUse), 0);
  return { total: totalmem(), available: freemem() + reusable };
}

/** `options` with the fit check's machine memory taken from `rt` (runtimeMachineMemory) unless given. */
export function withRuntimeMachine<T extends RunnerOptions>(rt: Runtime, options: T): T {
  return options.machine === undefined ? { ...options, machine: runtimeMachineMemory(rt) } : options;
}

/**
 * Loads a model source (sources/source.ts): a Hugging Face model directory (config, tokenizer, generation config,
 * safetensors weights converted to `weights`), or a GGUF file (gguf/gguf-model.ts),
 * and builds its Decoder with a paged KV cache. A local path instead of a source is
 * resolved here as `--model` would be (localModelSourceOf). Everything is checked (config keys, every tensor's name and
 * shape, the options) before the first weight byte is read.
 */
export function loadModel(rt: Runtime, model: ModelSource | string, options: LoadModelOptions = {}): LoadedModel {
  const { weights, loaded } = loadModelWeights(rt, model, options);
  const runner = createDecoder(rt, loaded.config, weights, options, loaded.plan);
  return { runner, ...loaded };
}

/** What loadModelWeights read besides the weights: everything of a LoadedModel but the runner. */
export type LoadedModelInfo = Omit<LoadedModel, "runner">;

/**
 * The first half of loadModel, shared with the WebGPU runner (gpu/load-model.ts):
 * the checks, the memory plan and the weights converted into `rt`'s memories
 * (the caller owns them), without a runner or a KV cache.
 */
export function loadModelWeights(rt: Runtime, model: ModelSource | string, options: LoadModelOptions = {}): { weights: DecoderWeights; loaded: LoadedModelInfo } {
  const from = typeof model === "string" ? localModelSourceOf(model, "model") : model;
  const gguf = from.kind === "gguf" ? openGgufModel(from.path) : null;
  const info = gguf ?? openModelDir(from.path);
  const { config } = info;
  // A GGUF under "auto" keeps its Q8_0 / Q5_0 / Q4_K / Q5_K / Q6_K matrices as they are (gguf/gguf-model.ts); `format` is for the rest.
  const ggufWeights = gguf ? resolveGgufWeights(options.weights, gguf) : null;
  const format = ggufWeights ? ggufWeights.format : resolveWeightFormat(options.weights, config);
  // Sizes, KV blocks, placement and the fit check: fail before loading anything.
  const params = expectedWeights(config).reduce((n, w) => n + w.shape.reduce((a, b) => a * b, 1), 0);
  // A GGUF source hands out f32 tensors (decoded at load), or raw blocks (fewer bytes): at most 4 bytes a checkpoint element.
  const sizes = gguf && ggufWeights ? ggufWeightSizes(gguf, ggufWeights) : undefined;
  const plan = planRunner(config, format, withRuntimeMachine(rt, options), gguf ? 4 : Math.min(4, Math.max(1, Math.round(info.weightBytes / params))), sizes, gguf !== null);
  const located = new Map("weights" in info ? info.weights.map((w) => [w.name, w]) : []);
  const p = options.progress;
  const progress = new LoadProgress(info.weightBytes, typeof p === "object" ? p : p === undefined ? {} : { enabled: p });

  // The checkpoint's tensors for one group of names, read from whichever shards hold them.
  const source: TensorSource = gguf ? ggufTensorSource(gguf, progress, options.onProgress, ggufWeights ?? undefined) : (names: readonly string[], into: Runtime): Map<string, Tensor> => {
    const out = new Map<string, Tensor>();
    try {
      const files = [...new Set(names.map((n) => located.get(n)!.file))];
      for (const file of files) {
        const inFile = names.filter((n) => located.get(n)!.file === file);
        for (const [name, t] of loadSafetensors(into, file, { names: inFile, progress })) out.set(name, t);
      }
    } catch (e) {
      freeTensors(into, out);
      throw e;
    }
    options.onProgress?.(progress.done, progress.total);
    return out;
  };
  let weights: DecoderWeights;
  try {
    weights = buildDecoderWeights(rt, { config, format, source, placement: plan.placement });
  } finally {
    progress.finish();
  }
  return { weights, loaded: { tokenizer: info.tokenizer, generation: info.generation, eosTokenIds: info.eosTokenIds, config, source: from, dir: from.path, plan } };
}

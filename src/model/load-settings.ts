/**
 * Load settings: how a model is loaded and run — its weights' format, the KV
 * cache (dtype, block size, size), the context length, the device, the
 * threads and the kernel flavor. One type, one defaults table, resolved once
 * at the edge (vLLM's LoadConfig / CacheConfig / DeviceConfig folded into one,
 * in the pattern of engine/engine-config.ts): the CLI's flags
 * (cli/load-flags.ts), serve()'s options and LLM.load's options all become a
 * LoadConfig through resolveLoadConfig, and that value is passed whole to the
 * engine worker, the model loader and the runtime. Nothing below re-declares,
 * renames or re-defaults a field. maxModelLen needs the model's config as
 * well: max-model-len.ts resolves it against the model, once, when the
 * loader has read the config.
 */
import { ArgumentError, show } from "../errors.js";
import { type DeviceKind, parseDeviceKind } from "../gpu/device-kind.js";
import { KV_DTYPE_SETTINGS, type KvDtypeSetting } from "../kv/kv-quant.js";
import { DEFAULT_BLOCK_SIZE, MAX_BLOCK_SIZE } from "../kv/paged-kv-cache.js";
import { WEIGHTS_SETTINGS, type WeightsSetting } from "../ops/weight.js";
import { KERNEL_FLAVORS, type KernelFlavor } from "../runtime/module.js";
import { MAX_THREADS } from "../runtime/runtime.js";
import { checkInt, checkOneOf } from "../tensor/check.js";

/** The load settings a caller gives (serve(), LLM.load, the CLI's flags); every field optional. */
export interface LoadSettings {
  /** Compute format of the weights: f32 | bf16 | q8 | q4 | auto (the checkpoint's; a GGUF keeps its ggml types). Default "auto". */
  weights?: WeightsSetting;
  /** Storage of the paged KV cache: f32 | f16 | bf16 | int8 | fp8 (= fp8_e4m3) | fp8_e5m2 | auto (the checkpoint's width). Default "auto". */
  kvDtype?: KvDtypeSetting;
  /** Tokens per KV block, 1..256. Default 16 (vLLM's). */
  blockSize?: number;
  /**
   * Bytes of the paged KV cache (all layers, K and V). Default 4 GiB (vLLM CPU's
   * KV cache space), at most half the memory left after the weights, and never
   * more than the engine's sequences of maxModelLen tokens need.
   */
  kvCacheBytes?: number;
  /** Exactly this many KV blocks (vLLM's --num-gpu-blocks-override), instead of kvCacheBytes. */
  numBlocks?: number;
  /**
   * Cap on prompt + output tokens. Default: what the model allows (max_position_embeddings,
   * × a linear RoPE factor, or a GGUF's context_length), as far as the KV cache holds it.
   * More than the model allows is an error.
   */
  maxModelLen?: number;
  /** Where the model runs: "cpu" (the wasm kernels), "webgpu" (any WebGPU adapter) or "auto" (a real GPU when there is one, else the CPU). Default "cpu". */
  device?: DeviceKind;
  /** Runtime threads (the engine's own included; with dataParallelSize > 1, of each engine). Default: $KVFLASH_THREADS, else all cores. */
  threads?: number;
  /** Kernel flavor: "baseline" (SIMD128) or "relaxed" (relaxed SIMD). Default: $KVFLASH_KERNELS, else relaxed where this engine runs it right. */
  kernels?: KernelFlavor;
}

/** LoadSettings with the defaults table applied and every value checked. Fields left undefined are decided with the model or the machine (see LoadSettings). */
export interface LoadConfig extends LoadSettings {
  weights: WeightsSetting;
  kvDtype: KvDtypeSetting;
  blockSize: number;
  device: DeviceKind;
}

/** The defaults table: the one place a load setting's default is written (the usage texts print it from here). */
export const LOAD_DEFAULTS = {
  weights: "auto",
  kvDtype: "auto",
  blockSize: DEFAULT_BLOCK_SIZE,
  device: "cpu",
} as const satisfies Partial<LoadConfig>;

/** The names of the load settings, in the order resolveLoadConfig checks them. */
export const LOAD_SETTING_NAMES = ["weights", "kvDtype", "blockSize", "kvCacheBytes", "numBlocks", "maxModelLen", "device", "threads", "kernels"] as const satisfies readonly (keyof LoadSettings)[];

/**
 * Applies LOAD_DEFAULTS to `settings` and checks each value, naming the
 * setting and the value (`blockSize must be ≤ 256, got 512`). Idempotent: a
 * LoadConfig resolves to an equal LoadConfig. Other fields of `settings` (a
 * serve() options object) are left out.
 */
export function resolveLoadConfig(settings: LoadSettings): LoadConfig {
  if (settings.numBlocks !== undefined && settings.kvCacheBytes !== undefined) {
    throw new ArgumentError("kvCacheBytes", `and numBlocks both size the KV cache: give one, got ${show(settings.kvCacheBytes)} and ${show(settings.numBlocks)}`);
  }
  const config: LoadConfig = {
    weights: checkOneOf("weights", settings.weights ?? LOAD_DEFAULTS.weights, WEIGHTS_SETTINGS),
    kvDtype: checkOneOf("kvDtype", settings.kvDtype ?? LOAD_DEFAULTS.kvDtype, KV_DTYPE_SETTINGS),
    blockSize: checkInt("blockSize", settings.blockSize ?? LOAD_DEFAULTS.blockSize, { min: 1, max: MAX_BLOCK_SIZE }),
    device: parseDeviceKind(settings.device ?? LOAD_DEFAULTS.device, "device"),
  };
  if (settings.kvCacheBytes !== undefined) config.kvCacheBytes = checkInt("kvCacheBytes", settings.kvCacheBytes, { min: 1 });
  if (settings.numBlocks !== undefined) config.numBlocks = checkInt("numBlocks", settings.numBlocks, { min: 1 });
  if (settings.maxModelLen !== undefined) config.maxModelLen = checkInt("maxModelLen", settings.maxModelLen, { min: 2 });
  if (settings.threads !== undefined) config.threads = checkInt("threads", settings.threads, { min: 1, max: MAX_THREADS });
  if (settings.kernels !== undefined) config.kernels = checkOneOf("kernels", settings.kernels, KERNEL_FLAVORS);
  return config;
}

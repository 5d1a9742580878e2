/**
 * The model and load flags `kvflash serve`, `generate` and `logits` share
 * (--model, --revision, --weights, --kv-dtype, --max-model-len, --kv-cache-gib,
 * --num-gpu-blocks-override, --block-size, --threads, --device, --kernels, --speculative-config),
 * read by this one parser into the library's LoadSettings (model/load-settings.ts)
 * and the speculative config, so each is spelled, checked and named
 * in its errors the same way in every command (vLLM's shared EngineArgs, in
 * small). Parsing only; the commands resolve the model and load it.
 */
import { type FlagReader } from "./flags.js";
import { ArgumentError } from "../errors.js";
import { KV_DTYPE_SETTINGS } from "../kv/kv-quant.js";
import { MAX_BLOCK_SIZE } from "../kv/paged-kv-cache.js";
import { WEIGHTS_SETTINGS } from "../ops/weight.js";
import { KERNEL_FLAVORS } from "../runtime/module.js";
import { checkOneOf } from "../tensor/check.js";
import { parseDeviceKind } from "../gpu/device-kind.js";
import { type SpeculativeConfig, resolveSpeculativeConfig } from "../engine/speculative-config.js";
import type { LoadSettings } from "../model/load-settings.js";

/** The shared flags as given: the model, and the load settings (model/load-settings.ts; resolved by serve() or the generate command, with the same resolver as the library's). */
export interface LoadFlags extends LoadSettings {
  /** --model as given: a path or a hub spec (resolved to a ModelSource by the command). */
  model?: string;
  /** --revision of a hub --model. */
  revision?: string;
  /** --speculative-config: vLLM's JSON (prompt lookup, or a draft model the command loads beside the target); an engine setting, not a load setting. */
  speculativeConfig?: SpeculativeConfig;
}

/** The flag of each load setting, so an error from the resolver or the loader names what the user typed. */
export const LOAD_SETTING_FLAGS: Readonly<Record<keyof LoadSettings, string>> = {
  weights: "--weights",
  kvDtype: "--kv-dtype",
  blockSize: "--block-size",
  kvCacheBytes: "--kv-cache-gib",
  numBlocks: "--num-gpu-blocks-override",
  maxModelLen: "--max-model-len",
  device: "--device",
  threads: "--threads",
  kernels: "--kernels",
};

/** `e` with a load setting's name replaced by its flag (`maxModelLen must be ≤ 32768…` → `--max-model-len must be ≤ 32768…`); anything else as it is. */
export function asFlagError(e: unknown): unknown {
  if (!(e instanceof ArgumentError) || !Object.hasOwn(LOAD_SETTING_FLAGS, e.argument)) return e;
  return new ArgumentError(LOAD_SETTING_FLAGS[e.argument as keyof LoadSettings], e.message.slice(e.argument.length + 1));
}

/** Reads `flag` into `args` if it is one of the shared load flags; false for any other flag. */
export function readLoadFlag(args: LoadFlags, flag: string, read: FlagReader): boolean {
  switch (flag) {
    case "--model":
      args.model = read.string();
      return true;
    case "--revision":
      args.revision = read.string();
      return true;
    case "--weights":
      args.weights = checkOneOf(flag, read.string(), WEIGHTS_SETTINGS);
      return true;
    case "--kv-dtype":
      args.kvDtype = checkOneOf(flag, read.string(), KV_DTYPE_SETTINGS);
      return true;
    case "--max-model-len":
      args.maxModelLen = read.integer(2);
      return true;
    case "--num-gpu-blocks-override":
      args.numBlocks = read.integer(1);
      return true;
    case "--block-size":
      args.blockSize = read.integer(1);
      if (args.blockSize > MAX_BLOCK_SIZE) throw new ArgumentError(flag, `must be ≤ ${MAX_BLOCK_SIZE}, got ${args.blockSize}`);
      return true;
    case "--kv-cache-gib":
      args.kvCacheBytes = Math.floor(read.positive() * 2 ** 30);
      return true;
    case "--threads":
      args.threads = read.integer(1);
      return true;
    case "--device":
      args.device = parseDeviceKind(read.string(), flag);
      return true;
    case "--speculative-config":
      args.speculativeConfig = resolveSpeculativeConfig(read.string(), flag);
      return true;
    case "--kernels":
      args.kernels = checkOneOf(flag, read.string(), KERNEL_FLAVORS);
      return true;
    default:
      return false;
  }
}

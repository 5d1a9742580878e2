/**
 * The model and load flags `kvflash serve`, `generate` and `logits` share
 * (--model, --revision, --weights, --kv-dtype, --max-model-len, --kv-cache-gib,
 * --threads, --device, --speculative-config), read by this one parser, so each is spelled, checked and named
 * in its errors the same way in every command (vLLM's shared EngineArgs, in
 * small). Parsing only; the commands resolve the model and load it.
 */
import { type FlagReader } from "./flags.js";
import { KV_DTYPE_SETTINGS, type KvDtypeSetting } from "../kv/kv-quant.js";
import { WEIGHTS_SETTINGS, type WeightsSetting } from "../ops/weight.js";
import { checkOneOf } from "../tensor/check.js";
import { type DeviceKind, parseDeviceKind } from "../gpu/device-kind.js";
import { type SpeculativeConfig, resolveSpeculativeConfig } from "../engine/speculative-config.js";

export interface LoadFlags {
  /** --model as given: a path or a hub spec (resolved to a ModelSource by the command). */
  model?: string;
  /** --revision of a hub --model. */
  revision?: string;
  weights?: WeightsSetting;
  kvDtype?: KvDtypeSetting;
  maxModelLen?: number;
  /** --kv-cache-gib in bytes. */
  kvCacheBytes?: number;
  threads?: number;
  /** --device: where the model runs (default cpu). */
  device?: DeviceKind;
  /** --speculative-config: vLLM's JSON (prompt lookup, or a draft model the command loads beside the target). */
  speculativeConfig?: SpeculativeConfig;
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
    default:
      return false;
  }
}

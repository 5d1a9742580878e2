/**
 * The model a cached snapshot already holds, complete, for a hub spec: the
 * cache hit of `--model org/name[:quant]` that needs no network. Complete
 * means every file the loader reads is there with its blob: config.json,
 * tokenizer.json and all weights (the index's every shard) for safetensors;
 * every part of the chosen file for GGUF. Otherwise null: fetch from the hub.
 */
import { join } from "node:path";
import { readJsonFile } from "../../json-file.js";
import type { ModelSource } from "../model-source.js";
import type { HubCache } from "./hub-cache.js";
import type { HubModelSpec } from "./model-spec.js";
import { SINGLE_WEIGHTS, WEIGHTS_INDEX, chooseGguf, hasSafetensorsModel, isGguf, shardsOfIndex } from "./repo-files.js";

export function modelInSnapshot(cache: HubCache, spec: HubModelSpec, commit: string): ModelSource | null {
  const dir = cache.snapshotDir(spec.repo, commit);
  const files = cache.files(spec.repo, commit);
  const gguf = (quant: string | null): ModelSource | null => {
    try {
      return { kind: "gguf", path: join(dir, chooseGguf(spec.repo, files, quant)[0]!) };
    } catch {
      return null;
    }
  };
  if (spec.file !== undefined) return files.includes(spec.file) ? { kind: "gguf", path: join(dir, spec.file) } : null;
  if (spec.quant !== undefined) return gguf(spec.quant);
  if (hasSafetensorsModel(files) && files.includes("tokenizer.json")) {
    if (!files.includes(WEIGHTS_INDEX)) return files.includes(SINGLE_WEIGHTS) ? { kind: "dir", path: dir } : null;
    try {
      const shards = shardsOfIndex(readJsonFile(join(dir, WEIGHTS_INDEX)), join(dir, WEIGHTS_INDEX));
      return shards.every((s) => files.includes(s)) ? { kind: "dir", path: dir } : null;
    } catch {
      return null;
    }
  }
  return files.some(isGguf) ? gguf(null) : null;
}

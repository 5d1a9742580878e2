/**
 * A model loader (engine/loader-module.ts) for the serve benchmark: the
 * synthetic Qwen2.5-0.5B (createSyntheticModel: its exact shapes, random
 * weights built in memory in the served format), with the KV cache and step
 * buffers the default loader would give it. Its model directory holds only
 * what the HTTP thread reads — config.json and a tokenizer — written by
 * writeSyntheticServeDir.
 */
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { EngineModel, LoadProgressInfo, ModelLoadOptions } from "../src/engine/loader-module.js";
import { runnerOptionsFor } from "../src/model/default-loader.js";
import { QWEN25_05B_CONFIG_JSON, type Runtime, Tokenizer, createSyntheticModel, defaultModelDir } from "../src/index.js";

export function loadEngineModel(rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): EngineModel {
  const runner = createSyntheticModel(rt, { weights: options.weights ?? "bf16", ...runnerOptionsFor(options) });
  onProgress({ done: 1, total: 1 });
  const tokenizer = Tokenizer.fromDir(options.modelDir);
  return { runner, tokenizer, eosTokenIds: tokenizer.eosTokenId === null ? [] : [tokenizer.eosTokenId] };
}

/**
 * Writes `dir`: Qwen2.5-0.5B's config.json and the default model's tokenizer
 * (32 000 ids inside the 151 936-row vocabulary; the server decodes the
 * padding ids as empty text, as it does for real Qwen2.5 checkpoints, whose
 * tokenizer is also smaller than vocab_size).
 */
export function writeSyntheticServeDir(dir: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "config.json"), JSON.stringify(QWEN25_05B_CONFIG_JSON, null, 2));
  for (const file of ["tokenizer.json", "tokenizer_config.json"]) copyFileSync(join(defaultModelDir(), file), join(dir, file));
}

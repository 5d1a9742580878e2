/**
 * A model loader (engine/loader-module.ts) for the serve benchmark: the
 * synthetic Qwen2.5-0.5B (createSyntheticModel: its exact shapes, random
 * weights built in memory in the served format), with the KV cache and step
 * buffers the default loader would give it. Its model directory holds only
 * what the HTTP thread reads — config.json and a tokenizer — written by
 * writeSyntheticServeDir.
 */
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { EngineModel, LoadProgressInfo, ModelLoadOptions } from "../src/engine/loader-module.js";
import { loadModelOptionsFor } from "../src/model/default-loader.js";
import { QWEN25_05B_CONFIG_JSON, createSyntheticModel, LLAMA2_CHAT_TEMPLATE, llama2TokenizerDir } from "../src/testing/index.js";
import { type Runtime, Tokenizer } from "../src/ops-entry.js";

export function loadEngineModel(rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): EngineModel {
  const runner = createSyntheticModel(rt, { ...loadModelOptionsFor(options), weights: options.weights === "auto" ? "bf16" : options.weights });
  onProgress({ done: 1, total: 1 });
  const tokenizer = Tokenizer.fromDir(options.source.path);
  return { runner, tokenizer, eosTokenIds: tokenizer.eosTokenId === null ? [] : [tokenizer.eosTokenId] };
}

/**
 * Writes `dir`: Qwen2.5-0.5B's config.json and a real 32k SentencePiece-style
 * tokenizer with Llama 2 Chat's template (kvflash/testing's llama2Tokenizer; 32 000 ids inside the 151 936-row vocabulary; the server decodes the
 * padding ids as empty text, as it does for real Qwen2.5 checkpoints, whose
 * tokenizer is also smaller than vocab_size).
 */
export function writeSyntheticServeDir(dir: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "config.json"), JSON.stringify(QWEN25_05B_CONFIG_JSON, null, 2));
  copyFileSync(join(llama2TokenizerDir(), "tokenizer.json"), join(dir, "tokenizer.json"));
  const config = JSON.parse(readFileSync(join(llama2TokenizerDir(), "tokenizer_config.json"), "utf8")) as Record<string, unknown>;
  writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ ...config, chat_template: LLAMA2_CHAT_TEMPLATE }, null, 2));
}

/**
 * What a model source (sources/source.ts) holds besides its weights, read by its
 * kind — never guessed from a path — for the threads that never touch the
 * weights: the HTTP thread (config, generation defaults, the tokenizer with
 * its chat template, own or fallback); the tokenizer workers read the
 * tokenizer alone (source-tokenizer.ts). The loader (loader.ts) reads the same through
 * openModelDir / openGgufModel, which check the weights too.
 *
 *   HF directory   config.json, generation_config.json, tokenizer.json (+ tokenizer_config.json, chat_template.jinja)
 *   GGUF file      its metadata: architecture and shapes, tokenizer.ggml.*, tokenizer.chat_template
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ArgumentError, show } from "../errors.js";
import { readJsonFile } from "../json-file.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { fallbackFor } from "./chat-template-fallback.js";
import { type ModelConfig, parseModelConfig } from "./config.js";
import { EMPTY_GENERATION_CONFIG, type GenerationConfig, parseGenerationConfig } from "./generation-config.js";
import { openGgufModel } from "./gguf/gguf-model.js";
import type { ModelSource } from "../sources/source.js";
import { checkSource } from "./source-tokenizer.js";

export interface ModelMetadata {
  source: ModelSource;
  config: ModelConfig;
  /** Request defaults and stop ids (a GGUF has no generation_config: its stop and BOS ids only). */
  generation: GenerationConfig;
  /** With the model's chat template, or the fallback chosen for it (tokenizer.chatTemplateOrigin says which). */
  tokenizer: Tokenizer;
}

/** config, generation defaults and tokenizer of a model source; reads no weights (a GGUF's tensor index is checked against its config). */
export function readModelMetadata(source: ModelSource): ModelMetadata {
  checkSource(source);
  if (source.kind === "gguf") {
    const { config, generation, tokenizer } = openGgufModel(source.path);
    return { source, config, generation, tokenizer };
  }
  const dir = source.path;
  const configPath = join(dir, "config.json");
  if (!existsSync(configPath)) throw new ArgumentError("model", `${show(dir)} has no config.json (is it a Hugging Face model directory?)`);
  const config = parseModelConfig(readJsonFile(configPath), { source: configPath });
  const genPath = join(dir, "generation_config.json");
  const generation = existsSync(genPath) ? parseGenerationConfig(readJsonFile(genPath), genPath) : { ...EMPTY_GENERATION_CONFIG, eosTokenIds: [] };
  return { source, config, generation, tokenizer: Tokenizer.fromDir(dir, fallbackFor(config.architecture)) };
}

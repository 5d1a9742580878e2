/**
 * A Hugging Face model directory, as users download it:
 *
 *   config.json                        architecture and shapes      → ModelConfig
 *   model.safetensors                  weights, or sharded:
 *   model.safetensors.index.json       { weight_map: name → shard file }
 *   model-00001-of-00002.safetensors   …
 *   tokenizer.json                     the fast tokenizer            → Tokenizer
 *   tokenizer_config.json              special tokens, chat template
 *   chat_template.jinja                (newer repos) the chat template
 *   generation_config.json             sampling defaults, eos ids    → GenerationConfig
 *
 * Every weight is checked by name and shape against the config before any is
 * read, then streamed into the runtime's memory in its file dtype (f32, f16 or
 * bf16). Converting to compute formats (f32 | bf16 | q8 | q4) is the decoder's job.
 */
import { existsSync, readdirSync } from "node:fs";
import { basename, join } from "node:path";
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tensor } from "../tensor/tensor.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { fallbackFor } from "./chat-template-fallback.js";
import { type ModelConfig, parseModelConfig } from "./config.js";
import { EMPTY_GENERATION_CONFIG, type GenerationConfig, parseGenerationConfig } from "./generation-config.js";
import { LoadProgress, type ProgressOptions } from "../sources/progress.js";
import { type SafetensorsEntry, freeTensors, loadSafetensors, readSafetensorsHeader } from "../sources/safetensors.js";
import { checkWeights } from "./weight-names.js";
import { readJsonFile } from "../json-file.js";

export const SINGLE_WEIGHTS_FILE = "model.safetensors";
export const WEIGHTS_INDEX_FILE = "model.safetensors.index.json";

/** Where each tensor of a checkpoint lives. */
export interface WeightLocation extends SafetensorsEntry {
  file: string;
}

/** A model directory's metadata, read without loading any weight. */
export interface ModelDirInfo {
  dir: string;
  config: ModelConfig;
  generation: GenerationConfig;
  /** The weight files in load order (absolute paths). */
  weightFiles: string[];
  /** Every tensor of the checkpoint that the decoder reads, checked against the config. */
  weights: WeightLocation[];
  /** Bytes of those tensors. */
  weightBytes: number;
}

export interface ModelDir extends ModelDirInfo {
  tokenizer: Tokenizer;
  /** Stop ids: generation_config's eos_token_id list ∪ config.json's ∪ the tokenizer's eos token. */
  eosTokenIds: number[];
  /** name → tensor in the runtime's memory, in the checkpoint's dtype. */
  tensors: Map<string, Tensor>;
  /** Frees every tensor. */
  free(): void;
}

export interface LoadModelDirOptions {
  /** Progress bar on stderr: true / false, or options. Default: only when stderr is a TTY. */
  progress?: boolean | ProgressOptions;
}

/** Shard files listed by the index, checked to be plain file names inside the directory. */
function readIndex(dir: string): Map<string, string> {
  const path = join(dir, WEIGHTS_INDEX_FILE);
  const json = readJsonFile(path);
  const map = typeof json === "object" && json !== null ? (json as Record<string, unknown>)["weight_map"] : undefined;
  if (typeof map !== "object" || map === null || Array.isArray(map)) throw new ArgumentError(`${path} weight_map`, `must be an object of tensor name → file, got ${show(map)}`);
  const out = new Map<string, string>();
  for (const [name, file] of Object.entries(map)) {
    if (typeof file !== "string" || file === "" || file !== basename(file) || file === "." || file === "..") {
      throw new ArgumentError(`${path} weight_map[${JSON.stringify(name)}]`, `must be a file name in the model directory, got ${show(file)}`);
    }
    out.set(name, file);
  }
  return out;
}

/** Finds the weights: the index (sharded) or model.safetensors; names what is there otherwise. */
function locateWeights(dir: string): { files: string[]; locations: Map<string, WeightLocation> } {
  const locations = new Map<string, WeightLocation>();
  if (existsSync(join(dir, WEIGHTS_INDEX_FILE))) {
    // Tensor names grouped by shard once: linear in shards + tensors (issue 32: 8000 shards matched pairwise took minutes).
    const byShard = new Map<string, string[]>();
    for (const [name, shard] of readIndex(dir)) {
      const names = byShard.get(shard);
      if (names === undefined) byShard.set(shard, [name]);
      else names.push(name);
    }
    const files = [...byShard.keys()].sort().map((f) => join(dir, f));
    for (const file of files) {
      if (!existsSync(file)) throw new ArgumentError(join(dir, WEIGHTS_INDEX_FILE), `lists shard ${basename(file)}, which is not in ${dir}`);
      const header = readSafetensorsHeader(file);
      const inShard = new Map(header.tensors.map((t) => [t.name, t]));
      for (const name of byShard.get(basename(file))!) {
        const entry = inShard.get(name);
        if (!entry) throw new ArgumentError(file, `has no tensor ${show(name)}, which ${WEIGHTS_INDEX_FILE} places in it`);
        locations.set(name, { ...entry, file });
      }
    }
    return { files, locations };
  }
  const single = join(dir, SINGLE_WEIGHTS_FILE);
  if (existsSync(single)) {
    for (const entry of readSafetensorsHeader(single).tensors) locations.set(entry.name, { ...entry, file: single });
    return { files: [single], locations };
  }
  const present = readdirSync(dir);
  const hint = present.some((f) => f.endsWith(".bin") || f.endsWith(".pt") || f.endsWith(".pth"))
    ? "; PyTorch pickle checkpoints (.bin/.pt) are not supported: use the repository's safetensors files"
    : present.some((f) => f.endsWith(".gguf"))
      ? "; for a GGUF model, give the .gguf file itself as the model"
      : "";
  throw new ArgumentError(dir, `has neither ${SINGLE_WEIGHTS_FILE} nor ${WEIGHTS_INDEX_FILE} (found: ${present.join(", ") || "nothing"})${hint}`);
}

/** Reads config.json, generation_config.json and the weight headers, and checks every tensor's name and shape. Loads nothing. */
export function readModelDirInfo(dir: string): ModelDirInfo {
  if (!existsSync(dir)) throw new ArgumentError("dir", `does not exist: ${show(dir)}`);
  const configPath = join(dir, "config.json");
  if (!existsSync(configPath)) throw new ArgumentError(dir, "has no config.json (is it a Hugging Face model directory?)");
  const config = parseModelConfig(readJsonFile(configPath), { source: configPath });
  const genPath = join(dir, "generation_config.json");
  const generation = existsSync(genPath) ? parseGenerationConfig(readJsonFile(genPath), genPath) : { ...EMPTY_GENERATION_CONFIG, eosTokenIds: [] };
  const { files, locations } = locateWeights(dir);
  const shapes = new Map([...locations].map(([name, loc]) => [name, loc.shape]));
  const specs = checkWeights(config, shapes, files.length === 1 ? files[0]! : `${dir} (${files.length} shards)`);
  const weights = specs.map((s) => locations.get(s.name)!);
  return { dir, config, generation, weightFiles: files, weights, weightBytes: weights.reduce((s, w) => s + (w.end - w.begin), 0) };
}

/** A model directory with its tokenizer and stop ids: everything but the weights (which stay on disk). */
export interface OpenModelDir extends ModelDirInfo {
  tokenizer: Tokenizer;
  /** generation_config's eos_token_id list ∪ config.json's ∪ the tokenizer's eos token. */
  eosTokenIds: number[];
}

/** Reads everything of a model directory but the weights (readModelDirInfo, the tokenizer, the stop ids). */
export function openModelDir(dir: string): OpenModelDir {
  const info = readModelDirInfo(dir);
  const tokenizer = Tokenizer.fromDir(dir, fallbackFor(info.config.architecture));
  if (tokenizer.vocabSize > info.config.vocabSize) {
    throw new ArgumentError(
      join(dir, "config.json"),
      `vocab_size ${info.config.vocabSize} is smaller than the tokenizer's ${tokenizer.vocabSize} tokens: ids ≥ ${info.config.vocabSize} would have no embedding row`,
    );
  }
  const eosTokenIds = [...new Set([...info.generation.eosTokenIds, ...info.config.eosTokenIds, ...(tokenizer.eosTokenId !== null ? [tokenizer.eosTokenId] : [])])];
  return { ...info, tokenizer, eosTokenIds };
}

/**
 * Loads a model directory: config, tokenizer, generation defaults and every
 * weight the decoder reads (streamed into `rt`'s memory, progress on stderr).
 */
export function loadModelDir(rt: Runtime, dir: string, options: LoadModelDirOptions = {}): ModelDir {
  const { tokenizer, eosTokenIds, ...info } = openModelDir(dir);
  const p = options.progress;
  const progress = new LoadProgress(info.weightBytes, typeof p === "object" ? p : p === undefined ? {} : { enabled: p });
  const tensors = new Map<string, Tensor>();
  try {
    const byFile = new Map<string, string[]>(info.weightFiles.map((f) => [f, []]));
    for (const w of info.weights) byFile.get(w.file)!.push(w.name);
    for (const [file, names] of byFile) {
      if (names.length === 0) continue;
      for (const [name, t] of loadSafetensors(rt, file, { names, progress })) tensors.set(name, t);
    }
  } catch (e) {
    freeTensors(rt, tensors);
    throw e;
  } finally {
    progress.finish();
  }
  return { ...info, tokenizer, eosTokenIds, tensors, free: () => freeTensors(rt, tensors) };
}

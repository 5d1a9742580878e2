/**
 * What the HTTP thread reads of an embedding model (an encoder directory or
 * a BERT GGUF file, model/encoder/encoder-source.ts): the tokenizer, and the few config fields the server's
 * options take from a decoder's metadata (architecture, vocabulary), so
 * serve() starts either kind the same way. Null for any other source (a
 * decoder served with --task embed reads the decoder's metadata).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { EMPTY_GENERATION_CONFIG, type GenerationConfig } from "../model/generation-config.js";
import { encoderSourceTokenizer, isEncoderModelSource, readEncoderSourceInfo } from "../model/encoder/encoder-source.js";
import type { ModelSource } from "../sources/source.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";

export interface EmbeddingMetadata {
  config: { architecture: string; vocabSize: number };
  crossEncoder: boolean;
  generation: GenerationConfig;
  tokenizer: Tokenizer;
}

/** A model directory that sentence-transformers would load (modules.json): an embedding model, whatever its network. */
export function isSentenceTransformersDir(source: ModelSource): boolean {
  return source.kind === "dir" && existsSync(join(source.path, "modules.json"));
}

export function embeddingMetadata(source: ModelSource): EmbeddingMetadata | null {
  if (!isEncoderModelSource(source)) return null;
  const info = readEncoderSourceInfo(source); // refuses a directory the engine could not serve, before any worker starts
  return {
    config: { architecture: info.config.architecture, vocabSize: info.config.vocabSize },
    crossEncoder: info.crossEncoder,
    generation: { ...EMPTY_GENERATION_CONFIG, eosTokenIds: [] },
    tokenizer: encoderSourceTokenizer(source),
  };
}

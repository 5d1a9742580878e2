/**
 * What the HTTP thread reads of an embedding model (an encoder directory,
 * model/encoder): the tokenizer, and the few config fields the server's
 * options take from a decoder's metadata (architecture, vocabulary), so
 * serve() starts either kind the same way. Null for any other source.
 */
import { EMPTY_GENERATION_CONFIG, type GenerationConfig } from "../model/generation-config.js";
import { encoderTokenizer, isEncoderSource, readEncoderInfo } from "../model/encoder/encoder-model.js";
import type { ModelSource } from "../model/source.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";

export interface EmbeddingMetadata {
  config: { architecture: string; vocabSize: number };
  generation: GenerationConfig;
  tokenizer: Tokenizer;
}

export function embeddingMetadata(source: ModelSource): EmbeddingMetadata | null {
  if (!isEncoderSource(source)) return null;
  const info = readEncoderInfo(source.path); // refuses a directory the engine could not serve, before any worker starts
  return {
    config: { architecture: info.config.architecture, vocabSize: info.config.vocabSize },
    generation: { ...EMPTY_GENERATION_CONFIG, eosTokenIds: [] },
    tokenizer: encoderTokenizer(source.path),
  };
}

/**
 * The tokenizer of a model source (sources/source.ts), read by its kind: a
 * directory's tokenizer.json (+ tokenizer_config.json), or a GGUF file's
 * tokenizer.ggml.* metadata (gguf/tokenizer.ts; a BERT-family file's
 * WordPiece or Unigram vocabulary, encoder/gguf-encoder-tokenizer.ts). What a tokenizer worker
 * (tokenizer/tokenizer-worker.ts) builds, so it imports nothing of the
 * weights' side. Workers render chat prompts too, so given the config's
 * architecture it picks the same fallback chat template as model-metadata.ts.
 */
import { ArgumentError, show } from "../errors.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { fallbackFor } from "./chat-template-fallback.js";
import { GgufMetadata } from "../sources/gguf/metadata.js";
import { readGgufHeader } from "../sources/gguf/reader.js";
import { ggufTokenizer } from "../sources/gguf/tokenizer.js";
import { ggufEncoderTokenizerOf, isGgufEncoderTokenizer } from "./encoder/gguf-encoder-tokenizer.js";
import type { ModelSource } from "../sources/source.js";

/** Throws unless `source` is a ModelSource (it may have crossed a worker boundary or come from JavaScript). */
export function checkSource(source: ModelSource): void {
  if (typeof source !== "object" || source === null || (source.kind !== "dir" && source.kind !== "gguf") || typeof source.path !== "string") {
    throw new ArgumentError("source", `must be { kind: "dir" | "gguf", path } (resolveModelSource's), got ${show(source)}`);
  }
}

/** With `architecture`, a model with no chat template gets the fallback chosen for it (chat-template-fallback.ts), as readModelMetadata's tokenizer does. */
export function readSourceTokenizer(source: ModelSource, architecture?: string): Tokenizer {
  checkSource(source);
  const options = architecture === undefined ? {} : fallbackFor(architecture);
  if (source.kind === "gguf") {
    const meta = new GgufMetadata(readGgufHeader(source.path).metadata, source.path);
    // A BERT-family GGUF's vocabulary (tokenizer.ggml.model "bert": WordPiece, "t5": XLM-R's Unigram): the encoder's tokenizer.
    if (isGgufEncoderTokenizer(meta)) return ggufEncoderTokenizerOf(meta, options);
    return ggufTokenizer(meta, options);
  }
  return Tokenizer.fromDir(source.path, options);
}

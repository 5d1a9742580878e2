/**
 * The tokenizer of a BERT-family GGUF file, by tokenizer.ggml.model: "bert"
 * (WordPiece: BERT, nomic-embed-text; gguf-wordpiece.ts) or "t5" (SentencePiece
 * Unigram: XLM-RoBERTa models; gguf-unigram.ts). What the tokenizer workers
 * (model/source-tokenizer.ts) and the encoder loader read; no weights' code.
 */
import type { TokenizerOptions, Tokenizer } from "../../tokenizer/tokenizer.js";
import type { GgufMetadata } from "../../sources/gguf/metadata.js";
import { ggufUnigramTokenizer } from "./gguf-unigram.js";
import { ggufWordPieceTokenizer } from "./gguf-wordpiece.js";

/** tokenizer.ggml.model values of encoder vocabularies. */
export const GGUF_ENCODER_TOKENIZERS = ["bert", "t5"] as const;

export function isGgufEncoderTokenizer(meta: GgufMetadata): boolean {
  return (GGUF_ENCODER_TOKENIZERS as readonly (string | null)[]).includes(meta.string("tokenizer.ggml.model"));
}

/** WordPiece for "bert", Unigram for "t5"; anything else: the WordPiece reader's error naming the key. */
export function ggufEncoderTokenizerOf(meta: GgufMetadata, options: TokenizerOptions = {}): Tokenizer {
  return meta.string("tokenizer.ggml.model") === "t5" ? ggufUnigramTokenizer(meta, options) : ggufWordPieceTokenizer(meta, options);
}

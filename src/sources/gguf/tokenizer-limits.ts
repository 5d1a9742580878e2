/**
 * Size limits on a GGUF file's tokenizer metadata, checked before any work
 * is done on it (issue 32: a 4M-token vocabulary ran past 180 s and 2 GiB
 * before any check; one 20k-character token took 23–41 s). The reader
 * (reader.ts) applies the array limits when it reads an array's length,
 * before its first element; tokenizer.ts checks token lengths and the merges
 * before building anything. Each is far above what real vocabularies hold:
 *
 *   tokens           Gemma 3: 262,144; Llama 3: 128,256; Qwen 3: 151,669
 *   token length     Llama 3, Qwen 3: 128 characters; Llama 2: 16
 *   merges           Llama 3: 280,147 (gpt2 arrays); SentencePiece vocabularies
 *                    derive about 2 per token (Llama 2: 32k tokens)
 *   merge characters Llama 3: about 2.5M (the merges' pieces, summed)
 */
import type { GgufMetadata } from "./metadata.js";
import { MergeLimitError, type MergeLimits } from "./spm-merges.js";

export const GGUF_TOKENIZER_LIMITS = {
  /** tokenizer.ggml.tokens (and scores, token_type) entries. */
  maxTokens: 1 << 20,
  /** UTF-16 code units of one token. */
  maxTokenChars: 2048,
  /** tokenizer.ggml.merges entries, or the merges derived from a SentencePiece vocabulary. */
  maxMerges: 1 << 22,
  /** Σ characters of the merges' two pieces. */
  maxMergeChars: 1 << 26,
} as const;

/** The reader's array-length caps for these keys (GGUF_LIMITS.maxArrayLength for the others). */
export const GGUF_TOKENIZER_ARRAY_LIMITS: ReadonlyMap<string, number> = new Map([
  ["tokenizer.ggml.tokens", GGUF_TOKENIZER_LIMITS.maxTokens],
  ["tokenizer.ggml.scores", GGUF_TOKENIZER_LIMITS.maxTokens],
  ["tokenizer.ggml.token_type", GGUF_TOKENIZER_LIMITS.maxTokens],
  ["tokenizer.ggml.merges", GGUF_TOKENIZER_LIMITS.maxMerges],
]);

export const MERGE_LIMITS: MergeLimits = { maxMerges: GGUF_TOKENIZER_LIMITS.maxMerges, maxMergeChars: GGUF_TOKENIZER_LIMITS.maxMergeChars };

/** Throws naming the file, the key and the index of the first token or merge string longer than the limit, or merges of too many characters in all. */
export function checkTokenizerSizes(meta: GgufMetadata, tokens: readonly string[], merges: readonly string[] | null): void {
  const { maxTokens, maxTokenChars, maxMergeChars } = GGUF_TOKENIZER_LIMITS;
  if (tokens.length > maxTokens) throw meta.error("tokenizer.ggml.tokens", `has ${tokens.length} tokens, above the limit of ${maxTokens}`);
  for (let i = 0; i < tokens.length; i++) {
    const n = tokens[i]!.length;
    if (n > maxTokenChars) throw meta.error(`tokenizer.ggml.tokens[${i}]`, `has ${n} characters, above the limit of ${maxTokenChars} for one token`);
  }
  if (merges === null) return;
  let chars = 0;
  for (let i = 0; i < merges.length; i++) {
    const n = merges[i]!.length;
    // "a b": two tokens and a space.
    if (n > 2 * maxTokenChars + 1) throw meta.error(`tokenizer.ggml.merges[${i}]`, `has ${n} characters, above the limit of ${2 * maxTokenChars + 1} for one merge`);
    chars += n;
  }
  if (chars > maxMergeChars) throw meta.error("tokenizer.ggml.merges", `has ${chars} characters in all, above the limit of ${maxMergeChars}`);
}

/** A MergeLimitError from mergesFromScores as an error naming the file and the key the merges come from. */
export function mergeLimitError(meta: GgufMetadata, e: MergeLimitError): Error {
  return meta.error("tokenizer.ggml.tokens", `with tokenizer.ggml.scores ${e.message} (the limit of ${e.limit}): no real SentencePiece vocabulary does`);
}

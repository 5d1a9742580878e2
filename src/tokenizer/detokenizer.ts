/**
 * Incremental detokenization: turns a stream of generated token ids into a
 * stream of text deltas whose concatenation equals decoding all the ids at once,
 * without ever emitting half a UTF-8 character.
 *
 * The method is vLLM's detokenize_incrementally (and HF TextStreamer's): keep
 * two offsets into the ids, decode the window [prefixOffset, readOffset) and
 * the window [prefixOffset, end), and emit the difference once the longer text
 * is longer and does not end in U+FFFD (a byte-level or byte-fallback token
 * that completes only part of a character decodes to U+FFFD). Decoding a window
 * that starts a few tokens back gives SentencePiece's "▁" its space: alone,
 * "▁world" decodes to "world" (the decoder strips a leading space), but after
 * "Hello" the window decodes to "Hello world". A window costs O(its length),
 * not O(sequence length), per token.
 */
import type { Tokenizer } from "./tokenizer.js";

/** Prompt tokens kept as left context for the first generated token (vLLM's INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET). */
const PROMPT_CONTEXT = 5;
const REPLACEMENT = "\uFFFD";

export interface DetokenizerOptions {
  /** The prompt's ids; its last few tokens give the first generated token its leading space. */
  promptIds?: readonly number[];
  /** Drop special tokens from the text. Default true (what vLLM and OpenAI servers return). */
  skipSpecialTokens?: boolean;
}

export class IncrementalDetokenizer {
  readonly #tokenizer: Tokenizer;
  readonly #skip: boolean;
  /** Context ids from the prompt, then every generated id. */
  readonly #ids: number[];
  readonly #promptContext: number;
  #prefixOffset: number;
  #readOffset: number;
  #text = "";

  constructor(tokenizer: Tokenizer, options: DetokenizerOptions = {}) {
    this.#tokenizer = tokenizer;
    this.#skip = options.skipSpecialTokens ?? true;
    const prompt = options.promptIds ?? [];
    this.#ids = prompt.slice(Math.max(0, prompt.length - PROMPT_CONTEXT));
    this.#promptContext = this.#ids.length;
    this.#prefixOffset = 0;
    this.#readOffset = this.#ids.length;
  }

  /** All text emitted so far. */
  get text(): string {
    return this.#text;
  }

  /** The generated ids pushed so far. */
  get ids(): number[] {
    return this.#ids.slice(this.#promptContext);
  }

  /** Adds one generated id; returns the text it completes ("" while a character is incomplete). */
  push(id: number): string {
    this.#ids.push(id);
    const prefixText = this.#decode(this.#prefixOffset, this.#readOffset);
    const newText = this.#decode(this.#prefixOffset, this.#ids.length);
    if (newText.length > prefixText.length && !newText.endsWith(REPLACEMENT)) {
      const delta = newText.slice(prefixText.length);
      this.#prefixOffset = this.#readOffset;
      this.#readOffset = this.#ids.length;
      this.#text += delta;
      return delta;
    }
    return "";
  }

  /**
   * Ends the sequence: returns the text still held back (an incomplete
   * character decodes to U+FFFD, as a full decode would) and emits it.
   */
  flush(): string {
    if (this.#readOffset === this.#ids.length) return "";
    const prefixText = this.#decode(this.#prefixOffset, this.#readOffset);
    const newText = this.#decode(this.#prefixOffset, this.#ids.length);
    const delta = newText.length > prefixText.length ? newText.slice(prefixText.length) : "";
    this.#prefixOffset = this.#readOffset;
    this.#readOffset = this.#ids.length;
    this.#text += delta;
    return delta;
  }

  /**
   * Ids at or past the tokenizer's size — the padding rows of a model's
   * vocabulary (Qwen2.5: vocab_size 151 936, tokenizer 151 665), which an
   * untrained or sampled model can emit — have no text and decode to "".
   */
  #decode(from: number, to: number): string {
    const size = this.#tokenizer.vocabSize;
    return this.#tokenizer.decode(this.#ids.slice(from, to).filter((id) => id < size), { skipSpecialTokens: this.#skip });
  }
}

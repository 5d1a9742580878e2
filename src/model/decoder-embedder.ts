/**
 * A decoder served as an embedding model — vLLM's pooling runner for a
 * *ForCausalLM checkpoint (`--task embed`; Qwen3-Embedding, e5-mistral,
 * gte-Qwen2): each sequence is one causal prefill through the Decoder, and
 * the final-normed hidden state of its last token (or its first), or the
 * mean of the final-normed hidden states of all its tokens (vLLM's MEAN
 * pooler: the model's output hidden states, final norm applied, summed in
 * f64), is the vector, L2-normalized when the model says so
 * (sentence-transformers' Pooling lasttoken / mean_tokens + Normalize; vLLM's
 * default for a decoder: last, normalized).
 *
 * No KV is kept: every step lays its sequences out from block 0 of the
 * Decoder's paged cache, back to back, so the cache only needs one step's
 * tokens (the engine's token budget, plus a partial block per sequence;
 * decoderEmbedBlocks sizes it).
 *
 *   const embedder = new DecoderEmbedder(decoder, info);
 *   embedder.embedBatch({ tokens, cuSeqlens });   // → one f32 [h] vector per sequence
 */
import { ArgumentError, show } from "../errors.js";
import type { EncoderBatch } from "./encoder/bert-encoder.js";
import { l2Normalize, poolSequences } from "./encoder/pooling.js";
import type { Decoder } from "./decoder.js";
import type { ForwardBatch } from "./forward-batch.js";
import type { PoolingModel, PoolingModelInfo } from "./pooling-model.js";

/** Blocks a step of at most `tokens` tokens in at most `seqs` sequences can take. */
export function decoderEmbedBlocks(tokens: number, seqs: number, blockSize: number): number {
  return Math.ceil(tokens / blockSize) + seqs;
}

/**
 * One step of whole sequences (an EncoderBatch) as the Decoder's ForwardBatch:
 * positions from 0, each sequence's blocks back to back from block 0, and the
 * rows of each sequence's last (or first) token asked for.
 */
export function wholeSequenceStep(decoder: Decoder, batch: EncoderBatch, maxModelLen: number, row: "last" | "first"): { forward: ForwardBatch; cu: Int32Array } {
  const cu = Int32Array.from(batch.cuSeqlens);
  const B = cu.length - 1;
  const T = batch.tokens.length;
  if (B < 1 || cu[0] !== 0 || cu[B] !== T) throw new ArgumentError("cuSeqlens", `must run from 0 to the ${T} tokens, got ${show(Array.from(cu))}`);
  const { blockSize, numBlocks } = decoder.kvCache;
  const lens = Array.from({ length: B }, (_, b) => cu[b + 1]! - cu[b]!);
  for (const [b, n] of lens.entries()) {
    if (n > maxModelLen) throw new ArgumentError(`sequence ${b}`, `must have at most ${maxModelLen} tokens, got ${n}`);
  }
  const blocks = lens.map((n) => Math.ceil(n / blockSize));
  const total = blocks.reduce((a, n) => a + n, 0);
  if (total > numBlocks) throw new ArgumentError("batch", `needs ${total} KV blocks of ${blockSize} tokens, more than the embedder's ${numBlocks} (a step's token budget)`);
  const M = Math.max(...blocks);
  const positions = new Int32Array(T);
  const slots = new Int32Array(T);
  const table = new Int32Array(B * M);
  let nextBlock = 0; // sequences laid out back to back from block 0: nothing is kept between steps
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < blocks[b]!; i++) table[b * M + i] = nextBlock + i;
    for (let t = 0; t < lens[b]!; t++) {
      positions[cu[b]! + t] = t;
      slots[cu[b]! + t] = (nextBlock + Math.floor(t / blockSize)) * blockSize + (t % blockSize);
    }
    nextBlock += blocks[b]!;
  }
  const rows = Int32Array.from({ length: B }, (_, b) => (row === "last" ? cu[b + 1]! - 1 : cu[b]!));
  return { forward: { tokens: Int32Array.from(batch.tokens), positions, cuSeqlensQ: cu, seqLens: Int32Array.from(lens), blockTable: table, maxBlocksPerSeq: M, slotMapping: slots, logitIndices: rows }, cu };
}

export class DecoderEmbedder implements PoolingModel {
  readonly info: PoolingModelInfo;
  readonly decoder: Decoder;

  /** The embedder owns `decoder` from now on (dispose frees it). */
  constructor(decoder: Decoder, info: PoolingModelInfo) {
    const mode = info.pooling.mode;
    if (mode !== "last" && mode !== "cls" && mode !== "mean") throw new ArgumentError("pooling", `of a decoder must be last-token, first-token (cls) or mean pooling (vLLM's pooling runner), got ${show(mode)}`);
    if (info.maxModelLen > decoder.maxModelLen) throw new ArgumentError("info.maxModelLen", `must be ≤ the decoder's ${decoder.maxModelLen}, got ${info.maxModelLen}`);
    this.decoder = decoder;
    this.info = info;
  }

  embedBatch(batch: EncoderBatch): Float32Array[] {
    const { mode, normalize } = this.info.pooling;
    const { forward, cu } = wholeSequenceStep(this.decoder, batch, this.info.maxModelLen, mode === "last" ? "last" : "first");
    const h = this.decoder.config.hiddenSize;
    if (mode === "mean") return poolSequences(this.decoder.allHiddenStates(forward), h, cu, "mean", normalize); // [T, h] → B means
    const hidden = this.decoder.hiddenStates(forward);
    return Array.from({ length: cu.length - 1 }, (_, b) => {
      const v = hidden.slice(b * h, b * h + h);
      return normalize ? l2Normalize(v) : v;
    });
  }

  dispose(): void {
    this.decoder.dispose();
  }
}

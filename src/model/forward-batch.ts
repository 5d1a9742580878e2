/**
 * One engine step's input to the decoder forward: a ragged batch in which every
 * scheduled sequence contributes its new tokens — a whole prompt, a prefill
 * chunk, or one (or a few) decode tokens — attending to its KV in the paged
 * cache. This is vLLM's attention metadata; the engine builds it from the
 * scheduler's output, the decoder reads it, and every layer reuses it.
 *
 * T = total new tokens, B = sequences, S = rows whose logits are wanted.
 *
 * Ordering contract: in every layer the decoder writes the K/V of all T new
 * tokens into the cache (appendKv over slotMapping) before that layer's
 * attention reads it. The prefix cache may hand a block that one row of this
 * batch is still filling to a later row of the same batch (vLLM does the same),
 * which is only correct in that order.
 */
export interface ForwardBatch {
  /** Token ids of the new tokens, sequences concatenated: int32 [T]. */
  tokens: Int32Array;
  /** Absolute position of each new token within its sequence: int32 [T]. */
  positions: Int32Array;
  /** Sequence boundaries in `tokens`: int32 [B + 1], cuSeqlensQ[0] = 0, cuSeqlensQ[B] = T. */
  cuSeqlensQ: Int32Array;
  /** KV length of each sequence after this step (cached prefix + its new tokens): int32 [B]. */
  seqLens: Int32Array;
  /** Block ids of each sequence's KV, rows padded to maxBlocksPerSeq: int32 [B, maxBlocksPerSeq]. */
  blockTable: Int32Array;
  maxBlocksPerSeq: number;
  /** Cache slot (blockId · blockSize + offset in block) each new token's K/V is written to: int32 [T]. */
  slotMapping: Int32Array;
  /** Indices into `tokens` whose logits are wanted (typically each sampling sequence's last token): int32 [S]. */
  logitIndices: Int32Array;
}

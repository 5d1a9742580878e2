/**
 * Validation of a ForwardBatch against the model and its KV cache, done once
 * per step before any kernel runs: a bad batch must not leave half-written
 * K/V behind. O(T + B·maxBlocksPerSeq) in JavaScript.
 */
import { ArgumentError, show } from "../errors.js";
import type { ForwardBatch } from "./forward-batch.js";

export interface BatchLimits {
  vocabSize: number;
  maxModelLen: number;
  numBlocks: number;
  blockSize: number;
}

function int32Array(name: string, v: unknown, length?: number): Int32Array {
  if (!(v instanceof Int32Array)) throw new ArgumentError(`batch.${name}`, `must be an Int32Array, got ${show(v)}`);
  if (length !== undefined && v.length !== length) throw new ArgumentError(`batch.${name}`, `must have ${length} entries, got ${v.length}`);
  return v;
}

/**
 * Checks every field and their agreement: sequence b's new tokens are the
 * last n_b of its seqLens[b] positions, in order; each token's slot is where
 * its sequence's block table puts its position; block ids, token ids and
 * logit indices are in range.
 */
export function checkForwardBatch(batch: ForwardBatch, limits: BatchLimits): void {
  if (typeof batch !== "object" || batch === null) throw new ArgumentError("batch", `must be a ForwardBatch, got ${show(batch)}`);
  const tokens = int32Array("tokens", batch.tokens);
  const T = tokens.length;
  if (T === 0) throw new ArgumentError("batch.tokens", "must hold at least one token, got 0");
  const positions = int32Array("positions", batch.positions, T);
  const slots = int32Array("slotMapping", batch.slotMapping, T);
  const seqLens = int32Array("seqLens", batch.seqLens);
  const B = seqLens.length;
  const cu = int32Array("cuSeqlensQ", batch.cuSeqlensQ, B + 1);
  const M = batch.maxBlocksPerSeq;
  if (!Number.isInteger(M) || M < 1) throw new ArgumentError("batch.maxBlocksPerSeq", `must be an integer ≥ 1, got ${show(M)}`);
  const table = int32Array("blockTable", batch.blockTable, B * M);
  const logitIndices = int32Array("logitIndices", batch.logitIndices);
  const { vocabSize, maxModelLen, numBlocks, blockSize } = limits;

  if (cu[0] !== 0) throw new ArgumentError("batch.cuSeqlensQ[0]", `must be 0, got ${cu[0]}`);
  if (cu[B] !== T) throw new ArgumentError(`batch.cuSeqlensQ[${B}]`, `must be the ${T} tokens, got ${cu[B]}`);
  for (let b = 0; b < B; b++) {
    const n = cu[b + 1]! - cu[b]!;
    const len = seqLens[b]!;
    if (n < 1) throw new ArgumentError(`batch.cuSeqlensQ[${b + 1}]`, `must exceed cuSeqlensQ[${b}] = ${cu[b]} (every sequence brings ≥ 1 token), got ${cu[b + 1]}`);
    if (len < n || len > maxModelLen) {
      throw new ArgumentError(`batch.seqLens[${b}]`, `must be in [${n}, ${maxModelLen}] (its ${n} new tokens … maxModelLen), got ${len}`);
    }
    const used = Math.ceil(len / blockSize);
    if (used > M) throw new ArgumentError("batch.maxBlocksPerSeq", `must be ≥ ${used} (sequence ${b} holds ${len} tokens), got ${M}`);
    for (let i = 0; i < used; i++) {
      const id = table[b * M + i]!;
      if (id < 0 || id >= numBlocks) throw new ArgumentError(`batch.blockTable[${b * M + i}]`, `must be a block id in [0, ${numBlocks}), got ${id}`);
    }
    for (let j = 0, t = cu[b]!; t < cu[b + 1]!; j++, t++) {
      const p = len - n + j;
      if (positions[t] !== p) throw new ArgumentError(`batch.positions[${t}]`, `must be ${p} (sequence ${b}'s new tokens end at seqLens[${b}] = ${len}), got ${positions[t]}`);
      const slot = table[b * M + Math.floor(p / blockSize)]! * blockSize + (p % blockSize);
      if (slots[t] !== slot) throw new ArgumentError(`batch.slotMapping[${t}]`, `must be ${slot} (position ${p} through sequence ${b}'s block table), got ${slots[t]}`);
      const id = tokens[t]!;
      if (id < 0 || id >= vocabSize) throw new ArgumentError(`batch.tokens[${t}]`, `must be a token id in [0, ${vocabSize}), got ${id}`);
    }
  }
  for (let i = 0; i < logitIndices.length; i++) {
    const r = logitIndices[i]!;
    if (r < 0 || r >= T) throw new ArgumentError(`batch.logitIndices[${i}]`, `must index a token in [0, ${T}), got ${r}`);
  }
}

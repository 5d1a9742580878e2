/**
 * Turns a scheduler step into the decoder's input (vLLM's attention metadata):
 * the ragged batch of every scheduled request's new tokens, where their K/V
 * go in the paged cache, and which rows are sampled.
 *
 * For request b with c = numComputedTokens and n = numNewTokens:
 *   tokens[cuSeqlensQ[b] + j]      = allTokenIds[c + j]            j < n
 *   positions[cuSeqlensQ[b] + j]   = c + j
 *   slotMapping[cuSeqlensQ[b] + j] = blockIds[⌊p / bs⌋] · bs + p mod bs,   p = c + j
 *   seqLens[b] = c + n;  blockTable row b = blockIds[0, ⌈(c + n) / bs⌉), padded with 0
 * A request samples (one logit row, its last new token) only when the step
 * computes its last known token; a partial prefill chunk samples nothing.
 * Speculative decoding: a request's draft tokens (specTokenIds) follow its
 * known ones, tokens[…] = specTokenIds[p − numTokens] for p ≥ numTokens, and
 * a sampling request with k drafts has k + 1 logit rows, its last k + 1 new
 * tokens (the distribution after the known token and after each draft).
 */
import { ArgumentError } from "../errors.js";
import type { ForwardBatch } from "../model/forward-batch.js";
import { checkInt } from "../tensor/check.js";
import type { SchedulerOutput } from "./scheduler.js";

/** Builds the step's ForwardBatch. `blockSize` is the KV cache's (KvCacheManager.blockSize). */
export function buildForwardBatch(output: SchedulerOutput<unknown>, blockSize: number): ForwardBatch {
  checkInt("blockSize", blockSize, { min: 1 });
  const seqs = output.scheduled;
  const B = seqs.length;
  const T = seqs.reduce((sum, s) => sum + s.numNewTokens, 0);
  const numSampling = seqs.reduce((sum, s) => sum + (s.sampling ? 1 + s.specTokenIds.length : 0), 0);
  const maxBlocksPerSeq = seqs.reduce((m, s) => Math.max(m, Math.ceil((s.numComputedTokens + s.numNewTokens) / blockSize)), 0);

  const tokens = new Int32Array(T);
  const positions = new Int32Array(T);
  const slotMapping = new Int32Array(T);
  const cuSeqlensQ = new Int32Array(B + 1);
  const seqLens = new Int32Array(B);
  const blockTable = new Int32Array(B * maxBlocksPerSeq); // [B, maxBlocksPerSeq]
  const logitIndices = new Int32Array(numSampling);

  let t = 0;
  let row = 0;
  seqs.forEach((s, b) => {
    const all = s.request.allTokenIds;
    const spec = s.specTokenIds;
    const seqLen = s.numComputedTokens + s.numNewTokens;
    if (spec.length > 0 && seqLen !== all.length + spec.length) {
      throw new ArgumentError(`output.scheduled[${b}].specTokenIds`, `must follow all ${all.length} known tokens, but the step ends at ${seqLen} with ${spec.length} drafts`);
    }
    const numBlocks = Math.ceil(seqLen / blockSize);
    if (s.blockIds.length < numBlocks) {
      throw new ArgumentError(`output.scheduled[${b}].blockIds`, `has ${s.blockIds.length} blocks, too few for ${seqLen} tokens at block size ${blockSize}`);
    }
    for (let p = s.numComputedTokens; p < seqLen; p++, t++) {
      tokens[t] = p < all.length ? all[p]! : spec[p - all.length]!;
      positions[t] = p;
      slotMapping[t] = s.blockIds[Math.floor(p / blockSize)]! * blockSize + (p % blockSize);
    }
    cuSeqlensQ[b + 1] = t;
    seqLens[b] = seqLen;
    for (let i = 0; i < numBlocks; i++) blockTable[b * maxBlocksPerSeq + i] = s.blockIds[i]!;
    if (s.sampling) for (let j = spec.length; j >= 0; j--) logitIndices[row++] = t - 1 - j;
  });
  return { tokens, positions, cuSeqlensQ, seqLens, blockTable, maxBlocksPerSeq, slotMapping, logitIndices };
}

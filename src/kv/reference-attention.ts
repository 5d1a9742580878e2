/**
 * Float64 reference of pagedAttention (and of cascadeAttention, which must
 * equal it): each sequence's keys and values are gathered out of the paged
 * cache through its block table and dequantized (referenceGatherKv, the
 * oracle's view of paged KV), then attention follows ARCHITECTURE.md's
 * semantics line by line. Written to be read, not to be fast; it trusts its
 * input (run pagedAttention's validation first if in doubt).
 */
import { type ReferenceResult, type ReferenceSequence, referenceAttention } from "../attention/reference/attention.js";
import type { PagedAttentionOptions } from "./paged-attention.js";
import { referenceGatherKv } from "./reference.js";

/** Float64 pagedAttention (same options; out/lse/returnLse/int8Path/splitKv are ignored). */
export function referencePagedAttention(options: PagedAttentionOptions): ReferenceResult {
  const { q } = options;
  const layout = options.layout ?? "TND";
  const plan = options.plan;
  const seqLens = plan ? plan.lengths : options.seqLens!;
  const B = seqLens.length;
  const table = plan ? plan.paged!.table : options.blockTable!;
  const cols = plan ? plan.paged!.maxBlocksPerSeq : (options.maxBlocksPerSeq ?? table.length / B);
  const cu = plan ? plan.cuSeqlensQ : (options.cuSeqlensQ ?? null);
  const Sq = layout === "BNSD" ? q.shape[2]! : q.shape[1]!;
  const seqs: ReferenceSequence[] = Array.from({ length: B }, (_, b) => ({
    q0: cu ? cu[b]! : 0,
    sq: cu ? cu[b + 1]! - cu[b]! : Sq,
    k0: plan ? plan.keyOffsets[b]! : 0,
    sk: seqLens[b]!,
  }));
  const blockRows = Array.from({ length: B }, (_, b) => Array.from({ length: cols }, (_, i) => table[b * cols + i]!));
  return referencePagedCore(options, layout, seqs, blockRows);
}

/** The attention of `seqs` (query extents along q, key extents along each block-table row). */
export function referencePagedCore(options: PagedAttentionOptions, layout: "TND" | "BNSD" | "BSND", seqs: readonly ReferenceSequence[], blockRows: readonly number[][]): ReferenceResult {
  const { q, cache } = options;
  const D = cache.headDim;
  const Hkv = cache.numKvHeads;
  const H = layout === "BSND" ? q.shape[2]! : q.shape[1]!;
  return referenceAttention(options, layout, seqs, { H, Hkv, D }, (b) => {
    // [k0 + sk, Hkv, D] decoded; key j of the semantics is row k0 + j.
    const { k0, sk } = seqs[b]!;
    const K = referenceGatherKv(cache, options.layer, "k", blockRows[b]!, k0 + sk);
    const V = referenceGatherKv(cache, options.layer, "v", blockRows[b]!, k0 + sk);
    const row = (x: Float64Array, n: number, j: number) => x.subarray(((k0 + j) * Hkv + n) * D, ((k0 + j) * Hkv + n + 1) * D);
    return { key: (n, j) => row(K, n, j), value: (n, j) => row(V, n, j) };
  });
}

/**
 * Float64 reference of pagedAttention (and of cascadeAttention, which must
 * equal it): each sequence's keys and values are gathered out of the paged
 * cache through its block table and dequantized (referenceGatherKv, the
 * oracle's view of paged KV), then attention follows ARCHITECTURE.md's
 * semantics line by line. Written to be read, not to be fast; it trusts its
 * input (run pagedAttention's validation first if in doubt).
 */
import { type ReferenceResult, attendRow, broadcastReader, layoutIndex, values } from "../attention/reference/attention.js";
import type { PagedAttentionOptions } from "./paged-attention.js";
import { referenceGatherKv } from "./reference.js";

interface RefSequence {
  q0: number;
  sq: number;
  /** Keys [k0, k0 + sk) of the sequence's cache rows take part (k0 = 0 but for cascade suffixes). */
  k0: number;
  sk: number;
}

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
  const seqs: RefSequence[] = Array.from({ length: B }, (_, b) => ({
    q0: cu ? cu[b]! : 0,
    sq: cu ? cu[b + 1]! - cu[b]! : Sq,
    k0: plan ? plan.keyOffsets[b]! : 0,
    sk: seqLens[b]!,
  }));
  const blockRows = Array.from({ length: B }, (_, b) => Array.from({ length: cols }, (_, i) => table[b * cols + i]!));
  return referencePagedCore(options, layout, seqs, blockRows);
}

/** The attention of `seqs` (query extents along q, key extents along each block-table row). */
export function referencePagedCore(options: PagedAttentionOptions, layout: "TND" | "BNSD" | "BSND", seqs: readonly RefSequence[], blockRows: readonly number[][]): ReferenceResult {
  const { q, cache } = options;
  const D = cache.headDim;
  const Hkv = cache.numKvHeads;
  const H = layout === "BNSD" ? q.shape[1]! : layout === "BSND" ? q.shape[2]! : q.shape[1]!;
  const G = H / Hkv;
  const qv = values(q);
  const scale = options.scale ?? 1 / Math.sqrt(D);
  const softcap = options.softcap ?? 0;
  const [left, right] = options.window ?? [-1, -1];
  const bias = options.bias ? broadcastReader(options.bias) : undefined;
  const mask = options.mask ? broadcastReader(options.mask) : undefined;
  const slopes = options.alibiSlopes ? values(options.alibiSlopes) : undefined;
  const slope = (b: number, h: number): number => (options.alibiSlopes!.rank === 1 ? slopes![h]! : slopes![b * H + h]!);

  const out = new Float64Array(q.numel);
  const rows = layout === "TND" ? q.shape[0]! : q.shape[0]! * (layout === "BNSD" ? q.shape[2]! : q.shape[1]!);
  const lse = new Float64Array(rows * H);
  seqs.forEach(({ q0, sq, k0, sk }, b) => {
    // [k0 + sk, Hkv, D] decoded; key j of the semantics is row k0 + j.
    const K = referenceGatherKv(cache, options.layer, "k", blockRows[b]!, k0 + sk);
    const V = referenceGatherKv(cache, options.layer, "v", blockRows[b]!, k0 + sk);
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / G);
      for (let i = 0; i < sq; i++) {
        const diag = i + sk - sq; // the key aligned with query i (bottom-right)
        const qRow = layoutIndex(layout, q.shape, b, h, i, 0, q0);
        const score = (j: number): number | null => {
          if (mask && mask(b, h, i, j) !== 0) return null;
          if (options.causal && j > diag) return null;
          if (left >= 0 && j < diag - left) return null;
          if (right >= 0 && j > diag + right) return null;
          const kRow = ((k0 + j) * Hkv + kvh) * D;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += qv[qRow + d]! * K[kRow + d]!;
          let s = scale * dot;
          if (softcap > 0) s = softcap * Math.tanh(s / softcap);
          if (bias) s += bias(b, h, i, j);
          if (slopes) s -= slope(b, h) * Math.abs(diag - j);
          return s;
        };
        const row = attendRow(D, sk, score, (j) => V.subarray(((k0 + j) * Hkv + kvh) * D, ((k0 + j) * Hkv + kvh + 1) * D));
        out.set(row.o, qRow);
        const li = layout === "BNSD" ? (b * H + h) * sq + i : layout === "BSND" ? (b * sq + i) * H + h : (q0 + i) * H + h;
        lse[li] = row.lse;
      }
    }
  });
  return { out, lse };
}

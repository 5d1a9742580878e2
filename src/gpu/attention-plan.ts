/**
 * The CPU half of FlashInfer's plan/run for the WebGPU kernels: one int32
 * table per call (or per step, shared by every layer), uploaded once:
 *
 *   seqs    [B, 5]  (q0, sq, k0, sk, t0): q0/k0 the first query/key along
 *                   q's and the cache's S/T axis, t0 the sequence's first row
 *                   of the compact output [T, H, D]
 *   items   [n, 6]  (b, kvHead, r0, kv0, kv1, slot): one workgroup each (see
 *                   wgsl/flash-attention.ts); slot ≥ 0 for a FlashDecoding chunk
 *   chunks  [B, 2]  (first slot or −1, count): what the merge reads
 *   table   [B, maxBlocksPerSeq] block ids (paged only)
 *
 * The split-KV decision is the AttentionPlan's (src/attention/plan.ts): its
 * chunkBounds per sequence; prefill calls pass one chunk per sequence.
 */
import type { SeqExtent } from "../attention/problem.js";

export interface GpuPlanTables {
  /** All tables in one int32 array; the offsets below index it. */
  data: Int32Array;
  seqsOff: number;
  itemsOff: number;
  chunksOff: number;
  tableOff: number;
  nItems: number;
  /** Partial-state slots and rows per (slot, head) of the split sequences. */
  slots: number;
  partSq: number;
  /** Rows of the compact output: Σ sq. */
  T: number;
}

/**
 * @param seqs     the checked problem's sequences
 * @param bounds   per sequence, chunk boundaries [0, …, sk] (one chunk: [0, sk])
 * @param G        query heads per KV head
 * @param BR       rows of a workgroup's query tile
 * @param table    paged block table, row-major [B, maxBlocksPerSeq], or null
 */
export function buildGpuPlan(seqs: readonly SeqExtent[], bounds: readonly ArrayLike<number>[], Hkv: number, G: number, BR: number, table: Int32Array | null): GpuPlanTables {
  const B = seqs.length;
  const seqRows: number[] = [];
  const items: number[] = [];
  const chunks: number[] = [];
  let T = 0;
  let slots = 0;
  let partSq = 0;
  seqs.forEach((s, b) => {
    seqRows.push(s.q0, s.sq, s.k0, s.sk, T);
    T += s.sq;
    const bd = bounds[b]!;
    const n = bd.length - 1;
    const split = n > 1;
    chunks.push(split ? slots : -1, n);
    for (let c = 0; c < n; c++) {
      for (let kvh = 0; kvh < Hkv; kvh++) {
        for (let r0 = 0; r0 < s.sq * G; r0 += BR) items.push(b, kvh, r0, bd[c]!, bd[c + 1]!, split ? slots + c : -1);
      }
    }
    if (split) {
      slots += n;
      partSq = Math.max(partSq, s.sq);
    }
  });
  const seqsOff = 0;
  const itemsOff = seqsOff + B * 5;
  const chunksOff = itemsOff + items.length;
  const tableOff = chunksOff + chunks.length;
  const data = new Int32Array(tableOff + (table?.length ?? 0) + 1);
  data.set(seqRows, seqsOff);
  data.set(items, itemsOff);
  data.set(chunks, chunksOff);
  if (table) data.set(table, tableOff);
  return { data, seqsOff, itemsOff, chunksOff, tableOff, nItems: items.length / 6, slots, partSq, T };
}

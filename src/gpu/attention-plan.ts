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
 * chunkBounds per sequence; prefill calls pass one chunk per sequence. For
 * the decode kernel the GPU plan then cuts those chunks shorter where the
 * step has too few work items to fill a GPU (FlashDecoding's rule: split
 * until the KV heads × chunks cover the compute units several times): a
 * decode item reads only Hkv·D·len keys and values, so B·Hkv items leave
 * most of a 100-SM GPU idle. The chunk length is the smallest power of two
 * ≥ DECODE_MIN_CHUNK keys that keeps the items ≥ DECODE_TARGET_ITEMS, each
 * plan chunk cut into equal pieces of at most that length; the cuts only add
 * FlashDecoding partials, which the LSE merge combines exactly.
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

/** Work items (workgroups) a decode step aims for: about 8 per compute unit of a 132-SM GPU. */
export const DECODE_TARGET_ITEMS = 1024;
/** Shortest chunk the GPU plan cuts, in keys (4 iterations of the decode kernel's 16 keys). */
export const DECODE_MIN_CHUNK = 64;

/**
 * The decode chunk length for a step: the smallest power of two ≥
 * DECODE_MIN_CHUNK with Σ_b (sk_b / len) · Hkv · rowTiles_b ≤
 * DECODE_TARGET_ITEMS; Infinity (no cut) when the uncut items reach it.
 */
export function decodeChunkLength(seqs: readonly SeqExtent[], Hkv: number, G: number, BR: number): number {
  const units = seqs.reduce((n, s) => n + Hkv * Math.ceil((s.sq * G) / BR), 0);
  if (units >= DECODE_TARGET_ITEMS) return Infinity;
  const work = seqs.reduce((n, s) => n + s.sk * Hkv * Math.ceil((s.sq * G) / BR), 0);
  return Math.max(DECODE_MIN_CHUNK, 2 ** Math.ceil(Math.log2(Math.max(1, work / DECODE_TARGET_ITEMS))));
}

/** Each chunk [a, c) of `bd` longer than `len` cut into ceil((c − a) / len) near-equal pieces. */
export function refineBounds(bd: ArrayLike<number>, len: number): number[] {
  const out = [bd[0]!];
  for (let i = 0; i + 1 < bd.length; i++) {
    const a = bd[i]!;
    const c = bd[i + 1]!;
    const n = Math.max(1, Math.ceil((c - a) / len));
    for (let k = 1; k <= n; k++) out.push(a + Math.round(((c - a) * k) / n));
  }
  return out;
}

/**
 * @param seqs     the checked problem's sequences
 * @param bounds   per sequence, chunk boundaries [0, …, sk] (one chunk: [0, sk])
 * @param G        query heads per KV head
 * @param BR       rows of a workgroup's query tile
 * @param table    paged block table, row-major [B, maxBlocksPerSeq], or null
 * @param decode   the decode kernel runs: cut chunks to decodeChunkLength
 */
export function buildGpuPlan(seqs: readonly SeqExtent[], bounds: readonly ArrayLike<number>[], Hkv: number, G: number, BR: number, table: Int32Array | null, decode = false): GpuPlanTables {
  const B = seqs.length;
  const seqRows: number[] = [];
  const items: number[] = [];
  const chunks: number[] = [];
  let T = 0;
  let slots = 0;
  let partSq = 0;
  const len = decode ? decodeChunkLength(seqs, Hkv, G, BR) : Infinity;
  seqs.forEach((s, b) => {
    seqRows.push(s.q0, s.sq, s.k0, s.sk, T);
    T += s.sq;
    const bd = len === Infinity ? bounds[b]! : refineBounds(bounds[b]!, len);
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

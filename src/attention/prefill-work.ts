/**
 * The work list of flashAttention (prefill): one item per (sequence, KV head,
 * block of query positions). A block holds P = ⌊RMAX / G⌋ positions × the G
 * query heads of the KV head (at least one position), so each K/V tile the
 * kernel loads serves P·G rows. Items are ordered by estimated cost, largest
 * first: threads claim items in order, which makes the dynamic schedule the
 * longest-processing-time-first heuristic (causal blocks near the end of a
 * sequence cost the most).
 */
import { RMAX, type WorkItem } from "./kernel-args.js";
import type { ScoreOptions, SeqExtent } from "./problem.js";

/** Fixed per-row cost (loading q, writing o) expressed in keys, for ordering only. */
const BLOCK_OVERHEAD_KEYS = 8;

/** Keys [lo, hi] a query at index i keeps by range (before the mask), or lo > hi. */
export function keptRange(i: number, sq: number, sk: number, score: ScoreOptions): [number, number] {
  const diag = i + sk - sq;
  let lo = 0;
  let hi = sk - 1;
  if (score.causal) hi = Math.min(hi, diag);
  if (score.winRight >= 0) hi = Math.min(hi, diag + score.winRight);
  if (score.winLeft >= 0) lo = Math.max(lo, diag - score.winLeft);
  return [lo, hi];
}

export function prefillItems(seqs: readonly SeqExtent[], Hkv: number, G: number, score: ScoreOptions): WorkItem[] {
  const P = Math.max(1, Math.floor(RMAX / G));
  const items: { item: WorkItem; cost: number }[] = [];
  seqs.forEach((s, b) => {
    for (let p0 = 0; p0 < s.sq; p0 += P) {
      const p1 = Math.min(s.sq, p0 + P);
      // The kept ranges move monotonically with i, so the block's union is [lo(p0), hi(p1 − 1)].
      const lo = keptRange(p0, s.sq, s.sk, score)[0];
      const hi = keptRange(p1 - 1, s.sq, s.sk, score)[1];
      const cost = (p1 - p0) * G * (Math.max(0, hi - lo + 1) + BLOCK_OVERHEAD_KEYS);
      for (let kvh = 0; kvh < Hkv; kvh++) {
        items.push({ item: { b, kvh, row0: p0 * G, rows: (p1 - p0) * G, kv0: 0, kv1: s.sk, slot: -1 }, cost });
      }
    }
  });
  items.sort((x, y) => y.cost - x.cost);
  return items.map((x) => x.item);
}

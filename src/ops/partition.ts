/**
 * How the linear kernels split a weight's rows into work items (linear.ts:
 * row groups of 8, kquant-linear.ts: quads of 4), claimed dynamically by the
 * threads (runtime/pool.ts).
 *
 * About 4 items per thread: enough for dynamic claiming to balance, few enough
 * that each item is a long sequential read (every new stream pays the
 * prefetcher's ramp-up: 8 items per thread made the 1 MB projections 10%
 * slower). And no item over MAX_ITEM_BYTES of weights: on a big matrix (the
 * LM head of a 150k vocabulary: 145 MB at q8, 18 MB an item at 4 per thread
 * on 2 threads) a thread that wakes late or runs slower (another process on
 * its core) leaves the others waiting up to one item's read; 2 MiB items cap
 * that near 0.1 ms.
 */

export const MAX_ITEM_BYTES = 2 << 20;

/** Row units (groups or quads) per work item, for `units` units of `bytes` weight bytes in all, on `threads` threads. */
export function unitsPerItem(units: number, bytes: number, threads: number): number {
  const even = Math.ceil(units / (threads * 4));
  const capped = Math.floor((MAX_ITEM_BYTES * units) / Math.max(bytes, 1));
  return Math.max(1, Math.min(even, capped));
}

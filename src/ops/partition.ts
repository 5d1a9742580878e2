/**
 * How the linear kernels split a weight's rows into work items (linear.ts:
 * row groups of 8, kquant-linear.ts: quads of 4), claimed dynamically by the
 * threads (runtime/pool.ts). The kernels read item i as units
 * [starts[i], starts[i + 1]) from a table in the argument buffer.
 *
 * Guided self-scheduling (Polychronopoulos & Kuck, 1987): each item is
 * 1 / (2 · threads) of the units still unassigned, so the items shrink along
 * the table. The first ones are long sequential reads (every new stream pays
 * the prefetcher's ramp-up: 8 equal items per thread made the 1 MB
 * projections 10% slower than 4), and the last ones are small, so the
 * threads finish within a small item of each other: with equal items a
 * thread waited at the join for up to one whole item (an eighth of the
 * matrix on 2 threads), on every one of a decode step's ~100 linears.
 *
 * Bounds on an item: at most MAX_ITEM_BYTES of weights: on a big matrix (the
 * LM head of a 150k vocabulary: 145 MB at q8) a thread that wakes late or
 * runs slower (another process on its core) leaves the others waiting up to
 * one item's read, and 2 MiB caps that near 0.1 ms. At least MIN_ITEM_BYTES
 * (where the matrix has that much): below it a claim's atomic and the
 * stream's ramp-up cost more than the balance gains. At most MAX_ITEMS items
 * (the table shares the kernel's 4 KiB argument buffer): a bigger matrix gets
 * bigger items.
 */

export const MAX_ITEM_BYTES = 2 << 20;
export const MIN_ITEM_BYTES = 64 << 10;
export const MAX_ITEMS = 512;

/**
 * Work items for `units` row units of `bytes` weight bytes in all on
 * `threads` threads: Int32Array [items + 1] of each item's first unit, then
 * `units`; strictly increasing, item sizes non-increasing. One thread: one item.
 */
export function workItems(units: number, bytes: number, threads: number): Int32Array {
  // A model asks for the same few tables every step (one per weight shape): build each once.
  const key = `${units},${bytes},${threads}`;
  let table = tables.get(key);
  if (table === undefined) {
    if (tables.size >= MAX_TABLES) tables.clear();
    tables.set(key, (table = buildItems(units, bytes, threads)));
  }
  return table;
}

/** workItems' tables by (units, bytes, threads); read-only once built (the callers copy them into argument buffers). */
const tables = new Map<string, Int32Array>();
/** Distinct tables kept at most (a model has a handful of weight shapes; many models in one process start over). */
const MAX_TABLES = 256;

function buildItems(units: number, bytes: number, threads: number): Int32Array {
  if (threads <= 1 || units <= 1) return Int32Array.of(0, units);
  const unitBytes = bytes / units;
  let hi = Math.max(1, Math.floor(MAX_ITEM_BYTES / unitBytes));
  let lo = Math.min(hi, Math.max(1, Math.floor(MIN_ITEM_BYTES / unitBytes)));
  for (;;) {
    const starts = [0];
    for (let at = 0; at < units; ) {
      const left = units - at;
      at += Math.min(left, Math.max(lo, Math.min(hi, Math.ceil(left / (2 * threads)))));
      starts.push(at);
    }
    if (starts.length - 1 <= MAX_ITEMS) return Int32Array.from(starts);
    [lo, hi] = [lo * 2, hi * 2];
  }
}

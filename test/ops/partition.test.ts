// partition.ts: how a linear's rows are split into work items — guided
// self-scheduling: each item a quarter (on 2 threads) of the rows left, so the
// items shrink along the table; none over MAX_ITEM_BYTES, none under
// MIN_ITEM_BYTES where the matrix has that much, at most MAX_ITEMS; every unit
// in exactly one item, never an empty item.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MAX_ITEMS, MAX_ITEM_BYTES, MIN_ITEM_BYTES, workItems } from "../../src/ops/partition.js";

/** Item sizes of a table, checking that it covers [0, units) in increasing starts. */
function sizes(starts: Int32Array, units: number): number[] {
  assert.equal(starts[0], 0);
  assert.equal(starts[starts.length - 1], units);
  const out: number[] = [];
  for (let i = 0; i + 1 < starts.length; i++) {
    const n = starts[i + 1]! - starts[i]!;
    assert.ok(n >= 1, `item ${i} is empty: ${starts.join(",")}`);
    out.push(n);
  }
  return out;
}

/** Bytes of a q8 row group (8 rows) of `cols` columns: 36 bytes a block of 32. */
const q8Group = (cols: number): number => 8 * (cols / 32) * 36;

describe("workItems", () => {
  test("Qwen2.5-0.5B's q8 qkv_proj (144 groups of 8 064 bytes) on 2 threads: a quarter of what is left, down to 64 KiB items", () => {
    const g = q8Group(896);
    assert.deepEqual([...workItems(144, 144 * g, 2)], [0, 36, 63, 84, 99, 111, 120, 128, 136, 144]);
    assert.equal(Math.floor(MIN_ITEM_BYTES / g), 8); // the last items' 8 groups
  });

  test("sizes never grow along the table; the last item is small however the rows divide", () => {
    for (const [units, cols, threads] of [[1216, 896, 2], [112, 4864, 2], [113, 4864, 3], [18992, 896, 2], [300, 1000, 8], [97, 896, 4]] as const) {
      const bytes = units * q8Group(cols);
      const s = sizes(workItems(units, bytes, threads), units);
      for (let i = 1; i < s.length; i++) assert.ok(s[i]! <= s[i - 1]!, `units ${units}, threads ${threads}: ${s.join(",")}`);
      const lo = Math.max(1, Math.floor(MIN_ITEM_BYTES / q8Group(cols)));
      assert.ok(s.at(-1)! <= lo, `last item ${s.at(-1)} of ${s.join(",")} (at least ${lo} units make MIN_ITEM_BYTES)`);
      if (units >= 4 * threads * lo) assert.ok(s.length >= 2 * threads, `${s.length} items for ${threads} threads`);
    }
  });

  test("the Qwen2.5-0.5B LM head at q8 (18 992 groups, 145 MB) on 2 threads: no item over MAX_ITEM_BYTES, and small ones at the end", () => {
    const g = q8Group(896);
    const s = sizes(workItems(18992, 18992 * g, 2), 18992);
    assert.ok(s.every((n) => n * g <= MAX_ITEM_BYTES), s.join(","));
    assert.ok(s.length >= 70 && s.length <= MAX_ITEMS, `${s.length} items`);
    assert.ok(s.at(-1)! * g <= MIN_ITEM_BYTES, `last item ${s.at(-1)! * g} bytes`);
  });

  test("a matrix too big for MAX_ITEMS items of MAX_ITEM_BYTES gets bigger items, never more than MAX_ITEMS", () => {
    const units = 200_000;
    const bytes = units * (64 << 10); // 13 GB: 6 250 items of 2 MiB
    const s = sizes(workItems(units, bytes, 2), units);
    assert.ok(s.length <= MAX_ITEMS, `${s.length} items`);
    assert.ok(s[0]! * (64 << 10) > MAX_ITEM_BYTES);
  });

  test("one thread, one unit, or a tiny matrix: one item; a unit bigger than MAX_ITEM_BYTES is an item of its own", () => {
    assert.deepEqual([...workItems(1216, 1216 * q8Group(896), 1)], [0, 1216]);
    assert.deepEqual([...workItems(1, 1 << 30, 16)], [0, 1]);
    assert.deepEqual([...workItems(5, 0, 2)], [0, 5]);
    assert.deepEqual([...workItems(40, 40 * 1000, 2)], [0, 40]); // 40 KB: under one MIN_ITEM_BYTES item
    assert.deepEqual(sizes(workItems(10, 10 * (MAX_ITEM_BYTES + 1), 4), 10), [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
  });

  test("a shape's table is built once: the same table for the same units, bytes and threads, another for other threads", () => {
    const t = workItems(4864, 4864 * q8Group(896), 2);
    assert.equal(workItems(4864, 4864 * q8Group(896), 2), t);
    assert.notEqual(workItems(4864, 4864 * q8Group(896), 3), t);
    assert.deepEqual([...workItems(4864, 4864 * q8Group(896), 3)], [...workItems(4864, 4864 * q8Group(896), 3)]);
  });

  test("more threads never make the first item bigger", () => {
    for (const [units, bytes] of [[300, 3e6], [5000, 9e7], [40, 1e6]] as const) {
      let last = Infinity;
      for (const threads of [2, 3, 8, 64]) {
        const first = workItems(units, bytes, threads)[1]!;
        assert.ok(first <= last, `units ${units}, threads ${threads}: ${first} (was ${last})`);
        last = first;
      }
    }
  });
});

// partition.ts: how a linear's rows are split into work items — about 4 items
// per thread for small and mid-size matrices, items of at most MAX_ITEM_BYTES
// for big ones (an LM head), never an empty or zero-sized item.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MAX_ITEM_BYTES, unitsPerItem } from "../../src/ops/partition.js";

/** Items a split makes. */
const items = (units: number, perItem: number): number => Math.ceil(units / perItem);

describe("unitsPerItem", () => {
  test("a 1 MB matrix on 2 threads: 8 items (4 a thread), however the rows divide", () => {
    for (const units of [112, 113, 127]) {
      const per = unitsPerItem(units, 1 << 20, 2);
      assert.equal(items(units, per), 8, `units ${units}: ${per} per item`);
    }
  });

  test("the Qwen2.5-0.5B LM head at q8 (18 992 groups, 145 MB) on 2 threads: items of at most MAX_ITEM_BYTES", () => {
    const [units, bytes] = [18992, 18992 * 7616];
    const per = unitsPerItem(units, bytes, 2);
    assert.ok(per * (bytes / units) <= MAX_ITEM_BYTES, `${per} groups an item = ${per * (bytes / units)} bytes`);
    assert.ok(items(units, per) >= 64, `${items(units, per)} items`);
  });

  test("a unit bigger than MAX_ITEM_BYTES is one item; one unit, or zero bytes, is one item of one unit", () => {
    assert.equal(unitsPerItem(10, 10 * (MAX_ITEM_BYTES + 1), 4), 1);
    assert.equal(unitsPerItem(1, 1 << 30, 16), 1);
    assert.equal(unitsPerItem(5, 0, 2), 1);
  });

  test("more threads never make items bigger", () => {
    for (const [units, bytes] of [[300, 3e6], [5000, 9e7], [40, 1e5]] as const) {
      let last = Infinity;
      for (const threads of [1, 2, 3, 8, 64]) {
        const per = unitsPerItem(units, bytes, threads);
        assert.ok(per >= 1 && per <= last, `units ${units}, threads ${threads}: ${per} (was ${last})`);
        last = per;
      }
    }
  });
});

// BlockPool: allocation order, reference counts, the LRU free queue, prefix
// cache registration and eviction, null on exhaustion with the pool unchanged,
// and errors naming the block id for broken invariants. Exact ids throughout.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ArgumentError, BlockPool } from "../../src/ops-entry.js";

/** Everything observable about a pool, to compare before and after a failed call. */
function snapshot(pool: BlockPool) {
  const ids = [...Array(pool.numBlocks).keys()];
  return {
    stats: pool.stats(),
    freeQueue: pool.freeQueue(),
    refCounts: ids.map((b) => pool.refCount(b)),
    hashes: ids.map((b) => pool.blockHash(b)),
  };
}

test("a fresh pool hands out blocks in id order, each with one reference", () => {
  const pool = new BlockPool({ numBlocks: 6 });
  assert.deepEqual(pool.freeQueue(), [0, 1, 2, 3, 4, 5]);
  assert.deepEqual(pool.allocate(3), [0, 1, 2]);
  assert.deepEqual(pool.allocate(2), [3, 4]);
  assert.deepEqual(pool.allocate(0), []);
  assert.deepEqual(pool.freeQueue(), [5]);
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((b) => pool.refCount(b)), [1, 1, 1, 1, 1, 0]);
  assert.deepEqual(pool.stats(), { numBlocks: 6, numFreeBlocks: 1, numUsedBlocks: 5, numCachedBlocks: 0, usage: 5 / 6 });
});

test("allocate returns null when too few blocks are free, leaving the pool exactly as it was", () => {
  const pool = new BlockPool({ numBlocks: 4 });
  const held = pool.allocate(3)!;
  pool.cacheBlock(held[0]!, "h0");
  pool.free([held[0]!]); // free but cached: allocatable, still findable
  const before = snapshot(pool);
  assert.equal(pool.allocate(3), null);
  assert.deepEqual(snapshot(pool), before);
  assert.equal(pool.getCachedBlock("h0"), 0, "a failed allocation evicts nothing");
  assert.deepEqual(pool.allocate(2), [3, 0]);
});

test("freed blocks join the back of the queue: least recently freed is reused first", () => {
  const pool = new BlockPool({ numBlocks: 5 });
  pool.allocate(5);
  pool.free([2]);
  pool.free([4, 0]); // a request's blocks, given tail first
  pool.free([1]);
  assert.deepEqual(pool.freeQueue(), [2, 4, 0, 1]);
  assert.deepEqual(pool.allocate(3), [2, 4, 0]);
  assert.deepEqual(pool.freeQueue(), [1]);
});

test("reference counts: a shared block is free only when its last holder frees it", () => {
  const pool = new BlockPool({ numBlocks: 3 });
  const [a] = pool.allocate(1)!;
  pool.touch([a!, a!]);
  assert.equal(pool.refCount(a!), 3);
  pool.free([a!]);
  pool.free([a!]);
  assert.equal(pool.refCount(a!), 1);
  assert.equal(pool.numUsedBlocks, 1);
  pool.free([a!]);
  assert.equal(pool.refCount(a!), 0);
  assert.deepEqual(pool.freeQueue(), [1, 2, 0]);
});

test("double free, a foreign id, and a count going below zero throw naming the block, changing nothing", () => {
  const pool = new BlockPool({ numBlocks: 4 });
  pool.allocate(2); // 0, 1 held
  const before = snapshot(pool);
  assert.throws(() => pool.free([1, 3]), (e: unknown) => {
    assert.ok(e instanceof ArgumentError);
    assert.equal(e.argument, "blockIds[1]");
    assert.match(e.message, /blockIds\[1\] is block 3, which is already free: double free/);
    return true;
  });
  assert.throws(() => pool.free([0, 0]), /blockIds\[1\] is block 0, freed 2 times but it has 1 reference: reference count would go below zero/);
  assert.throws(() => pool.free([4]), /blockIds\[0\] must be a block id in \[0, 4\), got 4/);
  assert.throws(() => pool.free([-1]), /blockIds\[0\] must be a block id in \[0, 4\), got -1/);
  assert.throws(() => pool.free([1.5]), /got 1\.5/);
  assert.throws(() => pool.touch([2]), /blockIds\[0\] is block 2, which is free and holds no cached content/);
  assert.throws(() => pool.refCount(9), /blockId must be a block id in \[0, 4\), got 9/);
  assert.deepEqual(snapshot(pool), before, "failed calls leave the pool unchanged");
  pool.free([1, 0]);
  assert.throws(() => pool.free([0]), /block 0, which is already free: double free/);
});

test("a cached block stays findable after free, until its allocation evicts it", () => {
  const pool = new BlockPool({ numBlocks: 4 });
  const [a, b] = pool.allocate(2)!;
  pool.cacheBlock(a!, "hA");
  pool.cacheBlock(b!, "hB");
  assert.equal(pool.numCachedBlocks, 2);
  pool.free([b!, a!]);
  assert.deepEqual(pool.freeQueue(), [2, 3, 1, 0]);
  assert.equal(pool.getCachedBlock("hA"), 0);
  assert.equal(pool.getCachedBlock("hB"), 1);
  // Uncached blocks 2, 3 go first; then block 1 (freed before 0) is evicted.
  assert.deepEqual(pool.allocate(3), [2, 3, 1]);
  assert.equal(pool.getCachedBlock("hB"), null);
  assert.equal(pool.blockHash(1), null);
  assert.equal(pool.getCachedBlock("hA"), 0);
  assert.deepEqual(pool.stats(), { numBlocks: 4, numFreeBlocks: 1, numUsedBlocks: 3, numCachedBlocks: 1, usage: 0.75 });
});

test("touch on a cache hit takes a free cached block out of the free queue", () => {
  const pool = new BlockPool({ numBlocks: 4 });
  const [a] = pool.allocate(1)!;
  pool.cacheBlock(a!, "h");
  pool.free([a!]);
  assert.deepEqual(pool.freeQueue(), [1, 2, 3, 0]);
  pool.touch([pool.getCachedBlock("h")!]);
  assert.deepEqual(pool.freeQueue(), [1, 2, 3]);
  assert.equal(pool.refCount(0), 1);
  assert.equal(pool.numFreeBlocks, 3);
  assert.deepEqual(pool.allocate(3), [1, 2, 3], "the touched block is not handed out");
  assert.equal(pool.getCachedBlock("h"), 0, "and keeps its hash");
});

test("two blocks may carry the same hash; lookups return the oldest and survive its eviction", () => {
  const pool = new BlockPool({ numBlocks: 3 });
  pool.allocate(2);
  pool.cacheBlock(1, "same");
  pool.cacheBlock(0, "same");
  assert.equal(pool.getCachedBlock("same"), 1);
  pool.free([1]);
  assert.deepEqual(pool.allocate(2), [2, 1]); // evicts block 1
  assert.equal(pool.getCachedBlock("same"), 0);
});

test("cacheBlock refuses free and already cached blocks", () => {
  const pool = new BlockPool({ numBlocks: 2 });
  pool.allocate(1);
  pool.cacheBlock(0, "x");
  assert.throws(() => pool.cacheBlock(0, "y"), /blockId is block 0, which is already cached under x/);
  assert.throws(() => pool.cacheBlock(1, "y"), /blockId is block 1, which is free: only a held block can be cached/);
  assert.throws(() => pool.cacheBlock(0, ""), /hash must be a non-empty string/);
});

test("resetPrefixCache drops every hash, but only when no block is held", () => {
  const pool = new BlockPool({ numBlocks: 2 });
  pool.allocate(1);
  pool.cacheBlock(0, "x");
  assert.equal(pool.resetPrefixCache(), false);
  assert.equal(pool.getCachedBlock("x"), 0);
  pool.free([0]);
  assert.equal(pool.resetPrefixCache(), true);
  assert.equal(pool.getCachedBlock("x"), null);
  assert.equal(pool.numCachedBlocks, 0);
});

test("constructor and allocate validate their arguments", () => {
  assert.throws(() => new BlockPool({ numBlocks: 0 }), /numBlocks must be ≥ 1, got 0/);
  const pool = new BlockPool({ numBlocks: 2 });
  assert.throws(() => pool.allocate(-1), /count must be ≥ 0, got -1/);
  assert.throws(() => pool.allocate(0.5), /count must be an integer, got 0\.5/);
});

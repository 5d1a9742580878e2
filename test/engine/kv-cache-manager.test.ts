// KvCacheManager: block tables that grow across block boundaries, prefix-cache
// hits by hash chain (shared prompts, partial last block never cached, a hit
// never covers the whole prompt), eviction order after free (LRU, tail first),
// null on shortage with nothing changed, and the prefix-cache counters.
// Block size 4 throughout; exact block ids.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ArgumentError, KvCacheManager, Request } from "../../src/ops-entry.js";

const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);
const req = (id: string, prompt: number[], cacheSalt?: string) =>
  new Request(cacheSalt === undefined ? { requestId: id, promptTokenIds: prompt } : { requestId: id, promptTokenIds: prompt, cacheSalt });

/** Schedules the rest of a fresh request's known tokens, as the Scheduler would: lookup, allocate, advance. */
function admit(kv: KvCacheManager, r: Request): number[] | null {
  const computed = kv.getComputedBlocks(r);
  const fresh = kv.allocateSlots(r, r.numTokens - computed.numTokens, { computed });
  if (fresh !== null) r.numComputedTokens = r.numTokens;
  return fresh;
}

/** Appends one sampled token and allocates its slot (a decode step). */
function decode(kv: KvCacheManager, r: Request, token: number): number[] | null {
  r.appendOutputToken(token);
  const fresh = kv.allocateSlots(r, 1);
  if (fresh !== null) r.numComputedTokens += 1;
  return fresh;
}

test("a request's table grows one block at each block boundary", () => {
  const kv = new KvCacheManager({ numBlocks: 8, blockSize: 4 });
  const a = req("a", range(100, 6));
  assert.deepEqual(admit(kv, a), [0, 1]);
  assert.deepEqual(decode(kv, a, 7), []); // 7 tokens: still 2 blocks
  assert.deepEqual(decode(kv, a, 8), []); // 8
  assert.deepEqual(decode(kv, a, 9), [2]); // token 9 starts block 2
  const b = req("b", range(200, 3));
  assert.deepEqual(admit(kv, b), [3]);
  assert.deepEqual(decode(kv, a, 10), []);
  assert.deepEqual(decode(kv, a, 11), []);
  assert.deepEqual(decode(kv, a, 12), []);
  assert.deepEqual(decode(kv, a, 13), [4]);
  assert.deepEqual(kv.blockIds("a"), [0, 1, 2, 4]);
  assert.deepEqual(kv.blockIds("b"), [3]);
  assert.deepEqual(kv.blockIds("nobody"), []);
  // Full blocks were registered as they filled; the partial tail block was not.
  assert.deepEqual([0, 1, 2, 4].map((blk) => kv.pool.blockHash(blk) !== null), [true, true, true, false]);
  assert.deepEqual([0, 1, 2].map((blk) => kv.pool.blockHash(blk)), a.blockHashes.slice(0, 3));
});

test("a shared prompt hits the cached full blocks; the partial last block is not shared", () => {
  const kv = new KvCacheManager({ numBlocks: 8, blockSize: 4 });
  const prompt = range(1, 10); // blocks [1..4] [5..8] full, [9, 10] partial
  const a = req("a", prompt);
  assert.deepEqual(admit(kv, a), [0, 1, 2]);
  const b = req("b", prompt);
  assert.deepEqual(kv.getComputedBlocks(b), { blockIds: [0, 1], numTokens: 8 });
  assert.deepEqual(admit(kv, b), [3], "only the partial block is new");
  assert.deepEqual(kv.blockIds("b"), [0, 1, 3]);
  assert.deepEqual([0, 1, 2, 3].map((blk) => kv.pool.refCount(blk)), [2, 2, 1, 1]);
  assert.deepEqual(kv.prefixCacheStats(), { requests: 2, queries: 20, hits: 8, preemptedRequests: 0, preemptedQueries: 0, preemptedHits: 0 });
  // A prompt that diverges inside block 1 shares block 0 only.
  const c = req("c", [...range(1, 6), 99, 98, 97]);
  assert.deepEqual(kv.getComputedBlocks(c).blockIds, [0]);
});

test("a hit never covers the whole prompt: at least one token is left to compute", () => {
  const kv = new KvCacheManager({ numBlocks: 8, blockSize: 4 });
  const a = req("a", range(1, 8)); // exactly two full blocks
  assert.deepEqual(admit(kv, a), [0, 1]);
  assert.notEqual(kv.pool.blockHash(1), null);
  assert.deepEqual(kv.getComputedBlocks(req("same", range(1, 8))), { blockIds: [0], numTokens: 4 });
  assert.deepEqual(kv.getComputedBlocks(req("longer", range(1, 9))), { blockIds: [0, 1], numTokens: 8 });
  assert.deepEqual(kv.getComputedBlocks(req("short", range(1, 4))), { blockIds: [], numTokens: 0 });
});

test("hashes chain the whole prefix; a cache salt separates otherwise equal prompts", () => {
  const kv = new KvCacheManager({ numBlocks: 8, blockSize: 4 });
  const a = req("a", range(1, 9));
  admit(kv, a);
  const b = req("b", [0, ...range(2, 8)]); // block 1 equals a's block 1, block 0 differs
  kv.getComputedBlocks(b);
  assert.notEqual(b.blockHashes[1], a.blockHashes[1], "same tokens behind a different prefix hash differently");
  assert.deepEqual(kv.getComputedBlocks(req("salted", range(1, 9), "tenant-1")).blockIds, []);
  const s1 = req("s1", range(1, 9), "tenant-1");
  assert.deepEqual(admit(kv, s1), [3, 4, 5]);
  assert.deepEqual(kv.getComputedBlocks(req("s2", range(1, 9), "tenant-1")).blockIds, [3, 4]);
  assert.deepEqual(kv.getComputedBlocks(req("s3", range(1, 9), "tenant-2")).blockIds, []);
});

test("free releases tail first: after a request ends its tail blocks are evicted first, LRU across requests", () => {
  const kv = new KvCacheManager({ numBlocks: 8, blockSize: 4 });
  const a = req("a", range(1, 13)); // 3 full blocks + 1 partial
  assert.deepEqual(admit(kv, a), [0, 1, 2, 3]);
  const b = req("b", range(50, 9));
  assert.deepEqual(admit(kv, b), [4, 5, 6]);
  kv.free(a);
  assert.deepEqual(kv.pool.freeQueue(), [7, 3, 2, 1, 0]);
  kv.free(b);
  assert.deepEqual(kv.pool.freeQueue(), [7, 3, 2, 1, 0, 6, 5, 4]);
  assert.deepEqual(kv.blockIds("a"), []);
  // A newcomer takes 7, then a's uncached tail 3, then evicts a's block 2.
  const c = req("c", range(500, 12));
  assert.deepEqual(admit(kv, c), [7, 3, 2]);
  assert.equal(kv.pool.getCachedBlock(a.blockHashes[2]!), null, "a's tail block was evicted");
  assert.equal(kv.pool.getCachedBlock(a.blockHashes[1]!), 1);
  // a's prompt again: blocks 0 and 1 are still cached and are reused; touch takes them off the free queue.
  const a2 = req("a2", range(1, 13));
  assert.deepEqual(kv.getComputedBlocks(a2), { blockIds: [0, 1], numTokens: 8 });
  assert.deepEqual(admit(kv, a2), [6, 5]);
  assert.deepEqual(kv.blockIds("a2"), [0, 1, 6, 5]);
  assert.deepEqual(kv.pool.freeQueue(), [4]);
  assert.equal(kv.pool.getCachedBlock(b.blockHashes[1]!), null, "b's block 5 was evicted (b's tail went first)");
  assert.equal(kv.pool.getCachedBlock(b.blockHashes[0]!), 4);
});

test("allocateSlots returns null on shortage and changes nothing, even with evictable hits", () => {
  const kv = new KvCacheManager({ numBlocks: 5, blockSize: 4 });
  const a = req("a", range(1, 9));
  admit(kv, a); // [0, 1, 2]
  kv.free(a); // queue [3, 4, 2, 1, 0]; 0 and 1 cached
  const hog = req("hog", range(300, 8));
  assert.deepEqual(admit(kv, hog), [3, 4]);
  // Wants a's 2 cached blocks (both free) + 2 new blocks: 4 > the 3 free blocks.
  const b = req("b", [...range(1, 8), ...range(80, 5)]);
  const before = { queue: kv.pool.freeQueue(), stats: kv.pool.stats(), prefix: kv.prefixCacheStats() };
  const computed = kv.getComputedBlocks(b);
  assert.deepEqual(computed.blockIds, [0, 1]);
  assert.equal(kv.allocateSlots(b, b.numTokens - computed.numTokens, { computed }), null);
  assert.deepEqual({ queue: kv.pool.freeQueue(), stats: kv.pool.stats(), prefix: kv.prefixCacheStats() }, before);
  assert.deepEqual(kv.blockIds("b"), []);
  assert.deepEqual(kv.blockIds("hog"), [3, 4]);
  kv.free(hog);
  assert.deepEqual(admit(kv, b), [2, 4]);
  assert.deepEqual(kv.blockIds("b"), [0, 1, 2, 4]);
});

test("lookahead slots allocate blocks but are never cached", () => {
  const kv = new KvCacheManager({ numBlocks: 4, blockSize: 4 });
  const a = req("a", range(1, 3));
  assert.deepEqual(kv.allocateSlots(a, 3, { numLookaheadTokens: 2 }), [0, 1]);
  assert.equal(kv.pool.blockHash(0), null);
});

test("numCommonPrefixBlocks counts leading blocks every running request holds", () => {
  const kv = new KvCacheManager({ numBlocks: 10, blockSize: 4 });
  const shared = range(1, 8);
  const a = req("a", [...shared, 11, 12]);
  const b = req("b", [...shared, 21, 22, 23, 24, 25]);
  admit(kv, a);
  admit(kv, b);
  assert.equal(kv.numCommonPrefixBlocks("a", 2), 2);
  assert.equal(kv.numCommonPrefixBlocks("b", 2), 2);
  assert.equal(kv.numCommonPrefixBlocks("a", 3), 0);
});

test("with prefix caching off nothing is registered and nothing hits", () => {
  const kv = new KvCacheManager({ numBlocks: 8, blockSize: 4, enablePrefixCaching: false });
  const a = req("a", range(1, 9));
  admit(kv, a);
  assert.equal(kv.pool.numCachedBlocks, 0);
  assert.deepEqual(kv.getComputedBlocks(req("b", range(1, 9))).blockIds, []);
  assert.equal(kv.prefixCacheStats().queries, 0);
});

test("bad arguments throw naming the value", () => {
  const kv = new KvCacheManager({ numBlocks: 4, blockSize: 4 });
  const a = req("a", range(1, 5));
  assert.throws(() => kv.allocateSlots(a, 6), (e: unknown) => {
    assert.ok(e instanceof ArgumentError);
    assert.match(e.message, /numNewTokens is 6, but request "a" has only 5 known tokens left to compute/);
    return true;
  });
  assert.throws(() => kv.allocateSlots(a, -1), /numNewTokens must be ≥ 0, got -1/);
  assert.throws(() => kv.allocateSlots(a, 1, { computed: { blockIds: [0], numTokens: 3 } }), /computed\.numTokens must be 1 blocks × 4, got 3/);
  assert.throws(() => new KvCacheManager({ numBlocks: 4, blockSize: 0 }), /blockSize must be ≥ 1, got 0/);
  assert.throws(() => new KvCacheManager({ numBlocks: 4, blockSize: 1.5 }), /blockSize must be an integer/); // its upper range is the KV storage's (PagedKvCache)
});

/**
 * The pool of KV cache block ids, as vLLM v1's `BlockPool`: it allocates,
 * frees, caches and evicts blocks, and knows nothing about requests.
 *
 * Blocks are ids 0..numBlocks−1; the storage they name (`[numBlocks,
 * blockSize, Hkv, D]` per layer) lives in the paged KV cache. Every block has a
 * reference count (how many requests hold it) and, once full and registered,
 * a block hash naming its content (`cacheBlock`), which lets another request
 * reuse it (prefix caching).
 *
 * Free blocks (reference count 0) sit in one queue ordered by eviction
 * priority: `allocate` takes from the front, `free` appends to the back, so
 * the least recently freed block goes first (LRU). A free block may still
 * carry a hash: it stays findable by `getCachedBlock` until it is allocated,
 * which evicts it (drops its hash). A cache hit `touch`es a free cached block,
 * which takes it out of the queue. The queue is a doubly linked list over
 * Int32Arrays, so removal from the middle is O(1).
 *
 * Expected shortage returns null (`allocate` with too few free blocks, and the
 * pool is left exactly as it was); broken invariants — a double free, an id
 * outside the pool, a hit on an uncached free block — throw an ArgumentError
 * naming the id, before anything changes.
 */
import { ArgumentError, show } from "../errors.js";
import { checkInt } from "../tensor/check.js";

/** The name of a full block's content (a hex digest, see engine/block-hash.ts). Opaque to the pool. */
export type BlockHash = string;

export interface BlockPoolOptions {
  /** Number of blocks in the KV cache, ≥ 1. */
  numBlocks: number;
}

/** A snapshot of the pool's occupancy. */
export interface BlockPoolStats {
  numBlocks: number;
  /** Blocks no request holds (reference count 0), cached or not: allocatable. */
  numFreeBlocks: number;
  /** Blocks some request holds (reference count ≥ 1). numFreeBlocks + numUsedBlocks = numBlocks. */
  numUsedBlocks: number;
  /** Blocks that carry a hash (held or free-but-reusable). */
  numCachedBlocks: number;
  /** numUsedBlocks / numBlocks, in [0, 1]: vLLM's `vllm:kv_cache_usage_perc` (a fraction despite the name). */
  usage: number;
}

export class BlockPool {
  readonly numBlocks: number;
  readonly #refCounts: Int32Array; // [numBlocks]
  readonly #hashes: (BlockHash | null)[]; // [numBlocks]
  /** hash → the blocks registered under it, oldest first (two requests may compute the same block). */
  readonly #cached = new Map<BlockHash, number[]>();
  // Free queue: a circular doubly linked list; index numBlocks is the sentinel.
  readonly #next: Int32Array; // [numBlocks + 1]
  readonly #prev: Int32Array; // [numBlocks + 1]
  #numFree: number;
  #numCached = 0;

  constructor(options: BlockPoolOptions) {
    const numBlocks = checkInt("numBlocks", options.numBlocks, { min: 1, max: 2 ** 31 - 2 });
    this.numBlocks = numBlocks;
    this.#refCounts = new Int32Array(numBlocks);
    this.#hashes = new Array<BlockHash | null>(numBlocks).fill(null);
    this.#next = new Int32Array(numBlocks + 1);
    this.#prev = new Int32Array(numBlocks + 1);
    // Initially every block is free, in id order: 0 is allocated first.
    for (let i = 0; i <= numBlocks; i++) {
      this.#next[i] = i === numBlocks ? 0 : i + 1;
      this.#prev[i] = i === 0 ? numBlocks : i - 1;
    }
    this.#numFree = numBlocks;
  }

  get numFreeBlocks(): number {
    return this.#numFree;
  }

  get numUsedBlocks(): number {
    return this.numBlocks - this.#numFree;
  }

  get numCachedBlocks(): number {
    return this.#numCached;
  }

  /** numUsedBlocks / numBlocks. */
  get usage(): number {
    return this.numUsedBlocks / this.numBlocks;
  }

  stats(): BlockPoolStats {
    return {
      numBlocks: this.numBlocks,
      numFreeBlocks: this.#numFree,
      numUsedBlocks: this.numUsedBlocks,
      numCachedBlocks: this.#numCached,
      usage: this.usage,
    };
  }

  refCount(blockId: number): number {
    return this.#refCounts[this.#checkId("blockId", blockId)]!;
  }

  /** The hash `blockId` is registered under, or null if it holds no cached content. */
  blockHash(blockId: number): BlockHash | null {
    return this.#hashes[this.#checkId("blockId", blockId)]!;
  }

  /** The free blocks in eviction order: `allocate(n)` would return the first n. */
  freeQueue(): number[] {
    const out: number[] = [];
    for (let b = this.#next[this.numBlocks]!; b !== this.numBlocks; b = this.#next[b]!) out.push(b);
    return out;
  }

  /** A block registered under `hash` (the oldest such), or null. Changes nothing. */
  getCachedBlock(hash: BlockHash): number | null {
    return this.#cached.get(hash)?.[0] ?? null;
  }

  /**
   * Takes `count` blocks from the front of the free queue, each with reference
   * count 1; a block that carried a hash is evicted from the cache. Returns
   * null, changing nothing, when fewer than `count` blocks are free.
   */
  allocate(count: number): number[] | null {
    checkInt("count", count, { min: 0 });
    if (count > this.#numFree) return null;
    const out = new Array<number>(count);
    for (let i = 0; i < count; i++) {
      const b = this.#next[this.numBlocks]!;
      this.#unlink(b);
      this.#evict(b);
      this.#refCounts[b] = 1;
      out[i] = b;
    }
    this.#numFree -= count;
    return out;
  }

  /**
   * Adds a reference to each block, as on a prefix-cache hit. A free block must
   * be cached; touching it takes it out of the free queue (it is no longer
   * evictable). A block listed twice gets two references.
   */
  touch(blockIds: readonly number[]): void {
    blockIds.forEach((b, i) => {
      this.#checkId(`blockIds[${i}]`, b);
      if (this.#refCounts[b] === 0 && this.#hashes[b] === null) {
        throw new ArgumentError(`blockIds[${i}]`, `is block ${b}, which is free and holds no cached content: nothing to share`);
      }
    });
    for (const b of blockIds) {
      if (this.#refCounts[b] === 0) {
        this.#unlink(b);
        this.#numFree--;
      }
      this.#refCounts[b]!++;
    }
  }

  /**
   * Drops one reference from each block, in order; a block whose count reaches
   * 0 joins the back of the free queue (keeping its hash: it stays reusable
   * until evicted). Pass a request's blocks tail first so its tail is evicted
   * first (vLLM frees in reverse). Throws, changing nothing, if any block would
   * go below zero references (a double free) or is not a block of this pool.
   */
  free(blockIds: readonly number[]): void {
    const drops = new Map<number, number>();
    blockIds.forEach((b, i) => {
      this.#checkId(`blockIds[${i}]`, b);
      const n = (drops.get(b) ?? 0) + 1;
      if (n > this.#refCounts[b]!) {
        const held = this.#refCounts[b]!;
        throw new ArgumentError(
          `blockIds[${i}]`,
          held === 0
            ? `is block ${b}, which is already free: double free`
            : `is block ${b}, freed ${n} times but it has ${held} reference${held === 1 ? "" : "s"}: reference count would go below zero`,
        );
      }
      drops.set(b, n);
    });
    for (const b of blockIds) {
      if (--this.#refCounts[b]! === 0) {
        this.#append(b);
        this.#numFree++;
      }
    }
  }

  /**
   * Registers a held, full block under the hash of its content so that later
   * requests can find it. Throws if the block is free or already cached.
   */
  cacheBlock(blockId: number, hash: BlockHash): void {
    this.#checkId("blockId", blockId);
    if (typeof hash !== "string" || hash.length === 0) throw new ArgumentError("hash", `must be a non-empty string, got ${show(hash)}`);
    if (this.#refCounts[blockId] === 0) throw new ArgumentError("blockId", `is block ${blockId}, which is free: only a held block can be cached`);
    const current = this.#hashes[blockId];
    if (current !== null) throw new ArgumentError("blockId", `is block ${blockId}, which is already cached under ${current}`);
    this.#hashes[blockId] = hash;
    const list = this.#cached.get(hash);
    if (list === undefined) this.#cached.set(hash, [blockId]);
    else list.push(blockId);
    this.#numCached++;
  }

  /**
   * Drops every hash (vLLM's reset_prefix_cache), e.g. after the weights
   * change. Only when no block is held: returns false, changing nothing, otherwise.
   */
  resetPrefixCache(): boolean {
    if (this.#numFree !== this.numBlocks) return false;
    this.#hashes.fill(null);
    this.#cached.clear();
    this.#numCached = 0;
    return true;
  }

  #evict(b: number): void {
    const hash = this.#hashes[b];
    if (hash === null || hash === undefined) return;
    const list = this.#cached.get(hash)!;
    list.splice(list.indexOf(b), 1);
    if (list.length === 0) this.#cached.delete(hash);
    this.#hashes[b] = null;
    this.#numCached--;
  }

  #unlink(b: number): void {
    const p = this.#prev[b]!;
    const n = this.#next[b]!;
    this.#next[p] = n;
    this.#prev[n] = p;
  }

  #append(b: number): void {
    const s = this.numBlocks;
    const last = this.#prev[s]!;
    this.#next[last] = b;
    this.#prev[b] = last;
    this.#next[b] = s;
    this.#prev[s] = b;
  }

  #checkId(argument: string, b: number): number {
    if (!Number.isInteger(b) || b < 0 || b >= this.numBlocks) {
      throw new ArgumentError(argument, `must be a block id in [0, ${this.numBlocks}), got ${show(b)}`);
    }
    return b;
  }
}

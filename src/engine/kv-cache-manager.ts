/**
 * Per-request KV block bookkeeping over a BlockPool (vLLM v1's
 * `KVCacheManager`): each request's block table, prefix-cache lookups by block
 * hash, slot allocation for a step's new tokens, registration of blocks that
 * became full, and freeing.
 *
 * A request's block i holds the KV of its tokens [i·blockSize, (i+1)·blockSize).
 * With prefix caching, every full block is registered in the pool under the
 * chained hash of its tokens (engine/block-hash.ts) as soon as the step that
 * computes it is scheduled — the forward of that step runs before any later
 * schedule can hand the block to someone else, as in vLLM. A partial last
 * block is never cached.
 */
import { ArgumentError, show } from "../errors.js";
import { BlockPool } from "../kv/block-pool.js";
import { checkInt } from "../tensor/check.js";
import { ROOT_BLOCK_HASH, hashBlockTokens } from "./block-hash.js";
import type { Request } from "./request.js";

export interface KvCacheManagerOptions {
  /** Blocks in the KV cache, ≥ 1. */
  numBlocks: number;
  /** Tokens per block, ≥ 1 (the paged cache's blockSize, whose range PagedKvCache checks). */
  blockSize: number;
  /** Automatic prefix caching (default true). */
  enablePrefixCaching?: boolean;
}

/** Cached blocks that hold a prefix of a request: the first numTokens = blockIds.length · blockSize tokens. */
export interface ComputedBlocks {
  readonly blockIds: readonly number[];
  readonly numTokens: number;
}

/** Cumulative prefix-cache counters, in tokens (vLLM's `vllm:prefix_cache_queries` / `_hits`). */
export interface PrefixCacheStats {
  /** Lookups made for requests scheduled for the first time. */
  requests: number;
  /** Their known tokens, summed. */
  queries: number;
  /** Of those, tokens found in the cache. */
  hits: number;
  /** The same for requests resumed after preemption (counted apart, as vLLM does). */
  preemptedRequests: number;
  preemptedQueries: number;
  preemptedHits: number;
}

export interface AllocateSlotsOptions {
  /** Prefix-cache hit from getComputedBlocks, for a request that holds no blocks yet. */
  computed?: ComputedBlocks;
  /** Extra slots beyond the new tokens (speculative tokens); never cached. Default 0. */
  numLookaheadTokens?: number;
}

const NO_HIT: ComputedBlocks = Object.freeze({ blockIds: Object.freeze([]) as readonly number[], numTokens: 0 });

export class KvCacheManager {
  readonly pool: BlockPool;
  readonly blockSize: number;
  readonly enablePrefixCaching: boolean;
  /** requestId → block table (block i holds tokens [i·bs, (i+1)·bs)). */
  readonly #tables = new Map<string, number[]>();
  /** requestId → how many leading blocks of its table are registered in the cache. */
  readonly #numCachedBlocks = new Map<string, number>();
  readonly #stats: PrefixCacheStats = {
    requests: 0,
    queries: 0,
    hits: 0,
    preemptedRequests: 0,
    preemptedQueries: 0,
    preemptedHits: 0,
  };

  constructor(options: KvCacheManagerOptions) {
    this.blockSize = checkInt("blockSize", options.blockSize, { min: 1 }); // its range is the KV storage's (PagedKvCache); block accounting needs ≥ 1
    this.pool = new BlockPool({ numBlocks: options.numBlocks });
    const caching = options.enablePrefixCaching ?? true;
    if (typeof caching !== "boolean") throw new ArgumentError("enablePrefixCaching", `must be a boolean, got ${show(caching)}`);
    this.enablePrefixCaching = caching;
  }

  /** Fraction of blocks held by requests, in [0, 1]. */
  get usage(): number {
    return this.pool.usage;
  }

  prefixCacheStats(): PrefixCacheStats {
    return { ...this.#stats };
  }

  /** The request's block table (empty if it holds none). Do not mutate. */
  blockIds(requestId: string): readonly number[] {
    return this.#tables.get(requestId) ?? NO_HIT.blockIds;
  }

  /** Ids of the requests that hold blocks. */
  requestIds(): IterableIterator<string> {
    return this.#tables.keys();
  }

  /**
   * The longest run of cached full blocks that matches the start of the
   * request's tokens, never covering all of them: at least one token is left
   * to compute, since its logits are needed. Changes nothing; pass the result
   * to allocateSlots before any other allocation.
   */
  getComputedBlocks(request: Request<unknown>): ComputedBlocks {
    if (!this.enablePrefixCaching) return NO_HIT;
    const maxBlocks = Math.floor((request.numTokens - 1) / this.blockSize);
    this.#updateBlockHashes(request);
    const blockIds: number[] = [];
    for (let i = 0; i < maxBlocks; i++) {
      const b = this.pool.getCachedBlock(request.blockHashes[i]!);
      if (b === null) break;
      blockIds.push(b);
    }
    return { blockIds, numTokens: blockIds.length * this.blockSize };
  }

  /**
   * Makes room for `numNewTokens` more tokens of the request, after its
   * `numComputedTokens` plus any prefix-cache hit (`options.computed`, which
   * the request then shares). Returns the newly allocated block ids (possibly
   * none), or null — changing nothing — if the pool has too few free blocks.
   * Blocks that the new tokens fill are registered in the prefix cache.
   */
  allocateSlots(request: Request<unknown>, numNewTokens: number, options: AllocateSlotsOptions = {}): number[] | null {
    const id = request.requestId;
    const table = this.#tables.get(id) ?? [];
    const computed = options.computed ?? NO_HIT;
    const lookahead = checkInt("numLookaheadTokens", options.numLookaheadTokens ?? 0, { min: 0 });
    checkInt("numNewTokens", numNewTokens, { min: 0 });
    if (computed.numTokens !== computed.blockIds.length * this.blockSize) {
      throw new ArgumentError("computed.numTokens", `must be ${computed.blockIds.length} blocks × ${this.blockSize}, got ${show(computed.numTokens)}`);
    }
    if (computed.blockIds.length > 0 && (table.length > 0 || request.numComputedTokens > 0)) {
      throw new ArgumentError("computed", `is a prefix-cache hit for request ${show(id)}, which already has ${request.numComputedTokens} computed tokens`);
    }
    const numComputed = request.numComputedTokens + computed.numTokens;
    if (numComputed + numNewTokens > request.numTokens) {
      throw new ArgumentError(
        "numNewTokens",
        `is ${numNewTokens}, but request ${show(id)} has only ${request.numTokens - numComputed} known tokens left to compute`,
      );
    }

    const numRequired = Math.ceil((numComputed + numNewTokens + lookahead) / this.blockSize);
    const numNew = Math.max(0, numRequired - table.length - computed.blockIds.length);
    // A hit on a free cached block takes it out of the free queue too.
    let numEvictableHits = 0;
    for (const b of computed.blockIds) if (this.pool.refCount(b) === 0) numEvictableHits++;
    if (numNew + numEvictableHits > this.pool.numFreeBlocks) return null;

    if (computed.blockIds.length > 0) {
      this.pool.touch(computed.blockIds);
      table.push(...computed.blockIds);
      this.#numCachedBlocks.set(id, computed.blockIds.length);
    }
    if (options.computed !== undefined && this.enablePrefixCaching) this.#recordLookup(request, computed.numTokens);
    const newBlocks = this.pool.allocate(numNew)!;
    table.push(...newBlocks);
    this.#tables.set(id, table);
    if (this.enablePrefixCaching) this.#cacheFullBlocks(request, table, numComputed + numNewTokens);
    return newBlocks;
  }

  /** Releases the request's blocks, tail first (so its tail is evicted first); cached ones stay reusable. */
  free(request: Request<unknown>): void {
    const table = this.#tables.get(request.requestId);
    if (table === undefined) return;
    this.#tables.delete(request.requestId);
    this.#numCachedBlocks.delete(request.requestId);
    this.pool.free([...table].reverse());
  }

  /**
   * Frees the request's blocks past those that tokens [0, numTokens) use:
   * the lookahead blocks of rejected draft tokens (speculative decoding).
   * They were never cached (allocateSlots caches no lookahead slot), so they
   * go back to the free queue as plain free blocks.
   */
  trim(request: Request<unknown>, numTokens: number): void {
    const table = this.#tables.get(request.requestId);
    if (table === undefined) return;
    const keep = Math.ceil(checkInt("numTokens", numTokens, { min: 0 }) / this.blockSize);
    if (keep < (this.#numCachedBlocks.get(request.requestId) ?? 0)) {
      throw new ArgumentError("numTokens", `is ${numTokens}, but request ${show(request.requestId)} has cached blocks past it`);
    }
    if (table.length <= keep) return;
    this.pool.free(table.splice(keep).reverse());
  }

  /**
   * Leading blocks of this request's table held by every one of the
   * `numRunningRequests` running requests (vLLM's get_num_common_prefix_blocks):
   * the shared prefix for cascade attention.
   */
  numCommonPrefixBlocks(requestId: string, numRunningRequests: number): number {
    const table = this.#tables.get(requestId) ?? [];
    let n = 0;
    while (n < table.length && this.pool.refCount(table[n]!) === numRunningRequests) n++;
    return n;
  }

  /** Forgets every cached block, if no request holds blocks (vLLM's reset_prefix_cache). */
  resetPrefixCache(): boolean {
    return this.pool.resetPrefixCache();
  }

  #recordLookup(request: Request<unknown>, hits: number): void {
    const s = this.#stats;
    if (request.numPreemptions > 0) {
      s.preemptedRequests++;
      s.preemptedQueries += request.numTokens;
      s.preemptedHits += hits;
    } else {
      s.requests++;
      s.queries += request.numTokens;
      s.hits += hits;
    }
  }

  /** Registers the blocks of `table` that tokens [0, numTokens) fill and that are not yet cached. */
  #cacheFullBlocks(request: Request<unknown>, table: number[], numTokens: number): void {
    const id = request.requestId;
    const numFull = Math.floor(numTokens / this.blockSize);
    const done = this.#numCachedBlocks.get(id) ?? 0;
    if (numFull <= done) return;
    this.#updateBlockHashes(request);
    for (let i = done; i < numFull; i++) this.pool.cacheBlock(table[i]!, request.blockHashes[i]!);
    this.#numCachedBlocks.set(id, numFull);
  }

  /** Extends request.blockHashes to cover every full block of its known tokens. */
  #updateBlockHashes(request: Request<unknown>): void {
    const bs = this.blockSize;
    const hashes = request.blockHashes;
    const numFull = Math.floor(request.numTokens / bs);
    for (let i = hashes.length; i < numFull; i++) {
      const parent = i === 0 ? ROOT_BLOCK_HASH : hashes[i - 1]!;
      const extra = i === 0 && request.cacheSalt !== undefined ? [request.cacheSalt] : undefined;
      hashes.push(hashBlockTokens(parent, request.allTokenIds, i * bs, (i + 1) * bs, extra));
    }
  }
}

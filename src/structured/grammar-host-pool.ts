/**
 * The grammar hosts (grammar-host.ts) of one GrammarBackend: a small pool, so
 * that compiling a new grammar never makes another request's mask wait.
 *
 * vLLM's StructuredOutputManager compiles on a thread pool whose threads share
 * every compiled grammar, and fills the masks apart from the compiles.
 * XGrammar's web build cannot move a compiled grammar between instances (no
 * serialize call in 0.1.27), so here a grammar lives in the host that compiled
 * it, and every matcher of that grammar lives there too. A host runs one thing
 * at a time: while it compiles, a mask asked of it waits. So a compile goes
 * where no request's matcher lives:
 *
 *   1. an idle host with no live matchers;
 *   2. else a fresh host, while fewer than maxHosts run;
 *   3. else a host with no live matchers, behind the compile it runs;
 *   4. else the host with the fewest live matchers: those requests, alone,
 *      wait for it (the engine holds them back: ConstraintMatcher.ready).
 *
 * A host started on demand loads the vocabulary first (a worker start and
 * XGrammar's TokenizerInfo), and a compile placed on it would wait for that.
 * So the pool keeps one warm spare: whenever a compile or a matcher takes the
 * last host that is idle with no live matchers, another is started in the
 * background, within maxHosts (not a host beyond it: each costs a worker and
 * a TokenizerInfo, and at maxHosts a compile already shares a host, rule 3
 * or 4). Retiring keeps that one spare as well.
 *
 * A grammar already compiled (a cache hit) opens its matcher in the host that
 * holds it. The cache maps a grammar's key to its host, least recently used
 * first, bounded across the pool by CACHE_ENTRIES and CACHE_KEY_BYTES; an
 * evicted grammar is dropped in its host (live matchers keep their own
 * reference). A host with no live matchers and no compile for retireIdleMs is
 * closed at the next check (one every retireIdleMs while several run), its
 * grammars leave the cache, as long as another host remains. A host
 * that traps, crashes or does not answer (grammar-host.ts) is dropped the same
 * way; its matchers fail their own requests; a fresh host starts at once if
 * it was the last one or the spare.
 */
import { GrammarHost, GrammarHostDeadError, type GrammarHostOptions } from "./grammar-host.js";
import type { GrammarSpec } from "./grammar-spec.js";

/** Compiled grammars kept across the pool (least recently used dropped first). */
export const CACHE_ENTRIES = 64;
/** Canonical grammar text the cache keeps, in all (UTF-16 code units × 2). */
export const CACHE_KEY_BYTES = 16 * 2 ** 20;
/** Grammar hosts at most (each a worker with its own XGrammar instance and the model's TokenizerInfo). */
export const MAX_GRAMMAR_HOSTS = 3;
/** A host with no live matchers and no compile this long is closed at the next check, 0–1 such spans later (while another remains), ms. */
export const HOST_RETIRE_IDLE_MS = 60_000;

/** The pools open in this thread, for terminateGrammarHostHolding only. */
const openPools = new Set<GrammarHostPool>();

/**
 * Kills (GrammarHost.kill: the worker is terminated, as by a crash or an OOM
 * kill) every host of this thread's pools that holds a compiled grammar whose
 * cache key (grammarKey) contains `needle`; how many it killed. The pools then
 * handle the loss as they would a real one. A fault-injection hook for tests:
 * reachable only by code running in the pool's own thread (a --loader module
 * in the engine worker), never from a request.
 */
export function terminateGrammarHostHolding(needle: string): number {
  const doomed = new Set<GrammarHost>();
  for (const pool of openPools) for (const host of pool.hostsHolding(needle)) doomed.add(host);
  for (const host of doomed) host.kill();
  return doomed.size;
}

export interface GrammarHostPoolOptions {
  host: GrammarHostOptions;
  /** Hosts at most (≥ 1); 1 is the single host: every compile holds every constrained request. */
  maxHosts: number;
  retireIdleMs: number;
}

/** A host's bookkeeping: its live matchers, when it last took a compile or a matcher (performance.now()), and its load. */
interface HostState {
  live: number;
  /** Compiles placed on it and not yet settled. */
  compiles: number;
  lastUsed: number;
  /** Resolves once the host loaded the vocabulary. */
  ready: Promise<void>;
  loaded: boolean;
}

export class GrammarHostPool {
  readonly #options: GrammarHostPoolOptions;
  readonly #hosts = new Map<GrammarHost, HostState>();
  /** Grammar key → the host holding it; least recently used first. */
  readonly #cache = new Map<string, GrammarHost>();
  #cacheKeyBytes = 0;
  #retireTimer: NodeJS.Timeout | null = null;
  #closed = false;
  /** Hosts started, the first included. */
  hostsStarted = 0;
  /** Hosts lost to a trap, crash or timeout. */
  hostsLost = 0;

  constructor(options: GrammarHostPoolOptions) {
    this.#options = options;
    openPools.add(this);
  }

  /** The live hosts holding a compiled grammar whose key contains `needle`. */
  hostsHolding(needle: string): GrammarHost[] {
    return [...new Set([...this.#cache].filter(([key, h]) => key.includes(needle) && h.dead === null).map(([, h]) => h))];
  }

  /** Starts the first host; rejects if it cannot load the vocabulary. */
  async start(): Promise<void> {
    await this.#hosts.get(this.#spawn())!.ready;
  }

  get size(): number {
    return this.#hosts.size;
  }

  get cacheSize(): number {
    return this.#cache.size;
  }

  get cacheKeyBytes(): number {
    return this.#cacheKeyBytes;
  }

  /** No host compiles: a mask asked of any host comes at once. */
  get idle(): boolean {
    return [...this.#hosts.keys()].every((h) => h.idle);
  }

  /** Whether `key` is compiled in some host (a hit counts as its most recent use). */
  has(key: string): boolean {
    const host = this.#cache.get(key);
    if (host === undefined) return false;
    this.#cache.delete(key);
    this.#cache.set(key, host);
    return true;
  }

  /** Compiles `spec` under `key` in a host chosen as the header says; rejects with XGrammar's message or GrammarHostDeadError. */
  async compile(key: string, spec: GrammarSpec): Promise<void> {
    const host = this.#placeCompile();
    const placed = this.#touch(host);
    placed.compiles++;
    const compiled = host.compile(key, spec);
    this.#keepSpare();
    try {
      await compiled;
    } finally {
      placed.compiles--;
    }
    if (host.dead !== null) throw new GrammarHostDeadError(host.dead);
    this.#touch(host);
    const before = this.#cache.get(key);
    if (before !== undefined) this.#drop(key, before);
    this.#cache.set(key, host);
    this.#cacheKeyBytes += 2 * key.length;
    while (this.#cache.size > CACHE_ENTRIES || (this.#cacheKeyBytes > CACHE_KEY_BYTES && this.#cache.size > 1)) {
      const [oldest, holder] = this.#cache.entries().next().value!;
      this.#drop(oldest, holder);
    }
  }

  /** Opens a matcher of the compiled grammar `key` in its host; undefined when no host holds it. `close` ends it (once). */
  open(key: string): { host: GrammarHost; mid: number; close: () => void } | undefined {
    const host = this.#cache.get(key);
    if (host === undefined) return undefined;
    const mid = host.openMatcher(key);
    const state = this.#touch(host);
    state.live++;
    this.#keepSpare();
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      host.closeMatcher(mid);
      state.live--;
      state.lastUsed = performance.now();
      this.#armRetire();
    };
    return { host, mid, close };
  }

  async close(): Promise<void> {
    this.#closed = true;
    openPools.delete(this);
    if (this.#retireTimer !== null) clearTimeout(this.#retireTimer);
    const hosts = [...this.#hosts.keys()];
    this.#hosts.clear();
    this.#cache.clear();
    this.#cacheKeyBytes = 0;
    await Promise.all(hosts.map((h) => h.close()));
  }

  #placeCompile(): GrammarHost {
    const hosts = [...this.#hosts].filter(([h]) => h.dead === null);
    const empty = hosts.filter(([, s]) => s.live === 0).map(([h]) => h);
    const free = empty.find((h) => h.idle) ?? empty.find((h) => !this.#hosts.get(h)!.loaded && this.#hosts.get(h)!.compiles === 0); // a spare still loading is further along than a fresh start
    if (free !== undefined) return free;
    if (hosts.length < this.#options.maxHosts) return this.#spawn();
    if (empty.length > 0) return empty[0]!;
    return hosts.reduce((a, b) => (b[1].live < a[1].live ? b : a))[0];
  }

  /** Hosts free for the next compile now or once loaded: alive, with no live matchers and no compile placed. */
  #spares(): number {
    return [...this.#hosts].filter(([h, s]) => h.dead === null && s.live === 0 && s.compiles === 0).length;
  }

  /** Starts a spare host in the background when none is left, within maxHosts. */
  #keepSpare(): void {
    if (!this.#closed && this.#spares() === 0 && this.#hosts.size < this.#options.maxHosts) this.#spawn();
  }

  #spawn(): GrammarHost {
    const host = new GrammarHost(this.#options.host);
    this.hostsStarted++;
    const state: HostState = { live: 0, compiles: 0, lastUsed: performance.now(), ready: host.ready(), loaded: false };
    state.ready.then(
      () => (state.loaded = true),
      () => {
        this.#lose(host, false); // it could not load: its compiles have failed, and it takes no more
        void host.close();
      },
    );
    this.#hosts.set(host, state);
    host.onDead = () => this.#lose(host, state.loaded);
    this.#armRetire();
    return host;
  }

  /** A host died: its grammars leave the cache; the last host is replaced at once (unless it never loaded: then the vocabulary cannot load, and the next compile tries again). */
  #lose(host: GrammarHost, loaded: boolean): void {
    if (this.#closed || !this.#hosts.delete(host)) return;
    this.hostsLost++;
    this.#forget(host);
    if (this.#hosts.size === 0 && loaded) this.#spawn();
    else if (loaded) this.#keepSpare();
  }

  #touch(host: GrammarHost): HostState {
    const state = this.#hosts.get(host) ?? { live: 0, compiles: 0, lastUsed: 0, ready: Promise.resolve(), loaded: true }; // a host lost meanwhile: its count no longer matters
    state.lastUsed = performance.now();
    return state;
  }

  #drop(key: string, host: GrammarHost): void {
    this.#cache.delete(key);
    this.#cacheKeyBytes -= 2 * key.length;
    host.evict(key);
  }

  /** Drops every cache entry of `host` (lost or retired). */
  #forget(host: GrammarHost): void {
    for (const [key, h] of this.#cache) {
      if (h !== host) continue;
      this.#cache.delete(key);
      this.#cacheKeyBytes -= 2 * key.length;
    }
  }

  /** While more than one host runs, checks every retireIdleMs for hosts to close. */
  #armRetire(): void {
    if (this.#retireTimer !== null || this.#closed || this.#hosts.size <= 1) return;
    this.#retireTimer = setTimeout(() => this.#retire(), this.#options.retireIdleMs);
    this.#retireTimer.unref();
  }

  /** Closes hosts unused for retireIdleMs (no live matcher, no compile), least recently used first, keeping one and the spare. */
  #retire(): void {
    this.#retireTimer = null;
    const now = performance.now();
    const idle = [...this.#hosts]
      .filter(([h, s]) => s.live === 0 && h.idle && now - s.lastUsed >= this.#options.retireIdleMs)
      .sort((a, b) => a[1].lastUsed - b[1].lastUsed);
    for (const [host] of idle) {
      if (this.#hosts.size <= 1 || this.#spares() <= 1) break;
      this.#hosts.delete(host);
      this.#forget(host);
      void host.close();
    }
    this.#armRetire();
  }
}

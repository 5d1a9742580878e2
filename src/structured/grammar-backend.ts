/**
 * The engine's grammar machinery (vLLM's StructuredOutputManager with its
 * xgrammar backend): the model's vocabulary prepared once, compiled grammars
 * cached by their canonical text, one matcher per constrained request — none
 * of it on the engine thread.
 *
 * Compiling is prepare(): the worker awaits it when a request arrives,
 * between engine steps, never inside one; a grammar seen before costs a map
 * lookup. A new grammar is checked against the size limits
 * (grammar-limits.ts), then compiled in the sandbox (grammar-sandbox.ts: its
 * own worker, a time budget, a memory cap); only what compiled there within
 * the budget is compiled again in a grammar host (grammar-host.ts), a worker
 * that owns matchers (XGrammar's web build cannot move a compiled grammar
 * between instances: its CompiledGrammar has no serialize call in 0.1.27, the
 * latest published). The hosts are a small pool (grammar-host-pool.ts): a new
 * grammar compiles in a host where no other request's matcher lives, so no
 * structured stream waits for it; a matcher whose host does compile is not
 * `ready`, and the engine holds that request back while the others step on.
 *
 * Matchers live in the host. A step asks for its constrained requests' masks
 * before the forward (masksFor) and reads them after it; accept() checks the
 * token against the mask it was sampled under and queues it for the host;
 * a matcher is terminated once it accepted one of the grammar's stop tokens
 * (XGrammar's GrammarMatcher accepts a stop token only when the grammar is
 * complete, and then terminates). A host that traps or dies is dropped from
 * the pool; the matchers it held fail their requests alone.
 *
 * The cache (in the pool) holds at most CACHE_ENTRIES grammars and
 * CACHE_KEY_BYTES of their canonical text (a long schema pins its text and,
 * inside XGrammar, rules in proportion to it); each host's XGrammar heap is
 * capped at ENGINE_HEAP_BYTES.
 */
import { ArgumentError } from "../errors.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import { checkGrammarLimits } from "./grammar-limits.js";
import { GrammarRejectedError, GrammarSandbox } from "./grammar-sandbox.js";
import { type GrammarHost, GrammarHostDeadError, type MaskBatch } from "./grammar-host.js";
import { GrammarHostPool, HOST_RETIRE_IDLE_MS, MAX_GRAMMAR_HOSTS } from "./grammar-host-pool.js";
import { type GrammarSpec, grammarKey } from "./grammar-spec.js";
import { type GrammarVocabulary, grammarVocabulary } from "./grammar-vocabulary.js";

export { GrammarRejectedError } from "./grammar-sandbox.js";
export { CACHE_ENTRIES, CACHE_KEY_BYTES } from "./grammar-host-pool.js";

/** Each grammar host's XGrammar wasm heap, at most. */
export const ENGINE_HEAP_BYTES = 1024 * 2 ** 20;
/** The sandbox's XGrammar wasm heap and V8 heap. */
export const SANDBOX_HEAP_BYTES = 512 * 2 ** 20;
export const SANDBOX_JS_HEAP_MB = 256;
/**
 * Default compile budget, ms. A 200-property object compiles in ~2 s against
 * a 4k vocabulary on this machine; typical schemas in 50–200 ms.
 */
export const COMPILE_BUDGET_MS = 5000;

export interface GrammarBackendOptions {
  tokenizer: Tokenizer;
  /** Logits per row (≥ tokenizer.vocabSize). */
  vocabSize: number;
  stopTokenIds: readonly number[];
  /** Wall time one grammar may take to compile in the sandbox, ms (default COMPILE_BUDGET_MS). */
  compileBudgetMs?: number;
  /** Grammar hosts at most (default MAX_GRAMMAR_HOSTS; 1: every compile holds every constrained request). */
  maxHosts?: number;
  /** A host unused this long is closed while another remains, ms (default HOST_RETIRE_IDLE_MS). */
  hostRetireIdleMs?: number;
}

/** One request's position in its grammar. */
export interface ConstraintMatcher {
  /**
   * Writes the next token's mask into `mask` (Int32Array [ceil(V / 32)]): bit
   * t % 32 of word t >> 5 set ⇔ token t allowed. A round trip to the grammar
   * host; an engine step asks for all its masks at once (masksFor).
   */
  fillNextMask(mask: Int32Array): void;
  /** Advances by one token; false (and no change) when the grammar forbids it. */
  accept(token: number): boolean;
  /** The grammar is complete and a stop token was accepted. */
  readonly isTerminated: boolean;
  /** Undoes the last `numTokens` accepted tokens. */
  rollback(numTokens: number): void;
  /** Its next mask comes at once: nothing compiles where it lives (false: the engine holds its request back). */
  readonly ready: boolean;
  /** Resolves once ready. */
  whenReady(): Promise<void>;
  dispose(): void;
}

/** One step's masks, in the order asked. */
export interface StepMasks {
  /** Row i: Int32Array [ceil(V / 32)], valid until the next masksFor. Waits for the host on first use; throws for a matcher that failed. */
  mask(i: number): Int32Array;
}

export interface GrammarBackendLike {
  /** Logit rows the masks cover (the runner's vocabulary, padding included). */
  readonly vocabSize: number;
  /** Compiles `spec` (or finds it cached). Rejects with GrammarRejectedError (or ArgumentError naming the limit). */
  prepare(spec: GrammarSpec): Promise<void>;
  /** A fresh matcher for a prepared spec. */
  matcher(spec: GrammarSpec): ConstraintMatcher;
  /** Asks for the next masks of `matchers` (this backend's), filled while the caller runs its forward. */
  masksFor(matchers: readonly ConstraintMatcher[]): StepMasks;
}

export class GrammarBackend implements GrammarBackendLike {
  readonly vocabSize: number;
  readonly #stops: ReadonlySet<number>;
  readonly #pool: GrammarHostPool;
  readonly #sandbox: GrammarSandbox;
  /** Compilations under way, so concurrent requests for one grammar compile it once. */
  readonly #compiling = new Map<string, Promise<void>>();

  private constructor(options: GrammarBackendOptions, vocab: GrammarVocabulary) {
    this.vocabSize = options.vocabSize;
    this.#stops = new Set(options.stopTokenIds);
    this.#pool = new GrammarHostPool({
      host: { ...vocab, vocabSize: options.vocabSize, stopTokenIds: [...options.stopTokenIds], heapMaxBytes: ENGINE_HEAP_BYTES },
      maxHosts: options.maxHosts ?? MAX_GRAMMAR_HOSTS,
      retireIdleMs: options.hostRetireIdleMs ?? HOST_RETIRE_IDLE_MS,
    });
    this.#sandbox = new GrammarSandbox({
      ...vocab,
      vocabSize: options.vocabSize,
      stopTokenIds: [...options.stopTokenIds],
      budgetMs: options.compileBudgetMs ?? COMPILE_BUDGET_MS,
      heapMaxBytes: SANDBOX_HEAP_BYTES,
      jsHeapMb: SANDBOX_JS_HEAP_MB,
    });
  }

  /** Reads the vocabulary, starts the first grammar host (its TokenizerInfo: ~150 ms for 32k tokens) and the sandbox's worker. */
  static async create(options: GrammarBackendOptions): Promise<GrammarBackend> {
    const b = options.compileBudgetMs;
    if (b !== undefined && !(Number.isFinite(b) && b > 0)) throw new ArgumentError("compileBudgetMs", `must be a positive number of milliseconds, got ${b}`);
    const h = options.maxHosts;
    if (h !== undefined && !(Number.isInteger(h) && h >= 1)) throw new ArgumentError("maxHosts", `must be an integer ≥ 1, got ${h}`);
    const r = options.hostRetireIdleMs;
    if (r !== undefined && !(Number.isFinite(r) && r > 0)) throw new ArgumentError("hostRetireIdleMs", `must be a positive number of milliseconds, got ${r}`);
    const backend = new GrammarBackend(options, grammarVocabulary(options.tokenizer));
    try {
      await backend.#pool.start();
    } catch (e) {
      await backend.dispose();
      throw e;
    }
    return backend;
  }

  /** Compiled grammars in the cache. */
  get cacheSize(): number {
    return this.#pool.cacheSize;
  }

  /** Canonical text the cache holds, bytes. */
  get cacheKeyBytes(): number {
    return this.#pool.cacheKeyBytes;
  }

  /** Sandbox workers started (one more per trap, timeout or crash there). */
  get sandboxWorkersStarted(): number {
    return this.#sandbox.workersStarted;
  }

  /** Grammar hosts running now, started so far, and lost to a trap, crash or timeout. */
  get hosts(): { running: number; started: number; lost: number } {
    return { running: this.#pool.size, started: this.#pool.hostsStarted, lost: this.#pool.hostsLost };
  }

  /** No host compiles (the sandbox aside). */
  get idle(): boolean {
    return this.#pool.idle;
  }

  prepare(spec: GrammarSpec): Promise<void> {
    const over = checkGrammarLimits(spec);
    if (over !== null) return Promise.reject(new ArgumentError(`grammar${over.path}`, over.message));
    const key = grammarKey(spec);
    if (this.#pool.has(key)) return Promise.resolve();
    let p = this.#compiling.get(key);
    if (p === undefined) {
      p = this.#sandbox
        .compile(spec)
        .then(() => this.#compileInHost(key, spec))
        .finally(() => this.#compiling.delete(key));
      this.#compiling.set(key, p);
    }
    return p;
  }

  /** A host's own compile of a grammar the sandbox compiled within its budget. */
  async #compileInHost(key: string, spec: GrammarSpec): Promise<void> {
    try {
      await this.#pool.compile(key, spec);
    } catch (e) {
      const trapped = e instanceof GrammarHostDeadError;
      throw new GrammarRejectedError(trapped ? "too_complex" : "invalid", trapped ? `the grammar is too complex: ${(e as Error).message}` : (e as Error).message);
    }
  }

  matcher(spec: GrammarSpec): ConstraintMatcher {
    const opened = this.#pool.open(grammarKey(spec));
    if (opened === undefined) throw new ArgumentError("grammar", `was not prepared (compiled) before the request was added: ${JSON.stringify(spec).slice(0, 200)}`);
    return new HostMatcher(opened.host, opened.mid, opened.close, this.#stops);
  }

  masksFor(matchers: readonly ConstraintMatcher[]): StepMasks {
    // One batch per host; a dead host's matchers ask it (and fail alone).
    const byHost = new Map<GrammarHost, HostMatcher[]>();
    const where: { batch: GrammarHost; row: number }[] = [];
    for (const m of matchers) {
      if (!(m instanceof HostMatcher)) throw new ArgumentError("matchers", "must come from this backend's matcher()");
      const list = byHost.get(m.host) ?? [];
      byHost.set(m.host, list);
      where.push({ batch: m.host, row: list.length });
      list.push(m);
    }
    const batches = new Map<GrammarHost, MaskBatch>();
    for (const [host, list] of byHost) batches.set(host, host.requestMasks(list.map((m) => m.mid)));
    return {
      mask: (i) => {
        const { batch, row } = where[i]!;
        const b = batches.get(batch)!;
        b.wait();
        const mask = b.mask(row);
        (matchers[i] as HostMatcher).given(mask);
        return mask;
      },
    };
  }

  /** Stops the sandbox's worker and the grammar hosts. */
  async dispose(): Promise<void> {
    await Promise.all([this.#sandbox.close(), this.#pool.close()]);
  }
}

/** A matcher that lives in the grammar host: this side keeps its id, the mask it was last given, and whether it terminated. */
class HostMatcher implements ConstraintMatcher {
  readonly host: GrammarHost;
  readonly mid: number;
  readonly #close: () => void;
  readonly #stops: ReadonlySet<number>;
  #mask: Int32Array | null = null;
  #terminated = false;

  constructor(host: GrammarHost, mid: number, close: () => void, stops: ReadonlySet<number>) {
    this.host = host;
    this.mid = mid;
    this.#close = close;
    this.#stops = stops;
  }

  get ready(): boolean {
    return this.host.idle;
  }

  whenReady(): Promise<void> {
    return this.host.whenIdle();
  }

  /** The mask the next token is sampled under (accept checks against it). */
  given(mask: Int32Array): void {
    this.#mask = mask;
  }

  fillNextMask(mask: Int32Array): void {
    const batch = this.host.requestMasks([this.mid]);
    batch.wait();
    mask.set(batch.mask(0));
    this.#mask = mask;
  }

  /**
   * Under a mask it was given (an engine step), the mask decides and the
   * token goes to the host with the next fill; with none, the host is asked
   * at once.
   */
  accept(token: number): boolean {
    const m = this.#mask;
    if (this.#terminated) return false;
    if (m !== null) {
      if (((m[token >> 5] ?? 0) >>> (token & 31)) % 2 === 0) return false;
      this.host.accept(this.mid, token);
    } else if (!this.host.acceptNow(this.mid, token)) return false;
    this.#mask = null;
    this.#terminated = this.#stops.has(token); // taken only when the grammar is complete, and then it is
    return true;
  }

  get isTerminated(): boolean {
    return this.#terminated;
  }

  rollback(numTokens: number): void {
    this.host.rollback(this.mid, numTokens);
    this.#mask = null;
    if (numTokens > 0) this.#terminated = false;
  }

  dispose(): void {
    this.#close();
  }
}

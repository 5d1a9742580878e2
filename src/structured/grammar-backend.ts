/**
 * The engine worker's grammar machinery (vLLM's StructuredOutputManager with
 * its xgrammar backend): one TokenizerInfo and GrammarCompiler per model, built
 * at load; compiled grammars cached by their canonical text; one matcher per
 * constrained request.
 *
 * Compiling is prepare(): the worker awaits it when a request arrives, between
 * engine steps, never inside one; a grammar seen before costs a map lookup.
 * A new grammar is checked against the size limits (grammar-limits.ts), then
 * compiled in the sandbox (grammar-sandbox.ts: its own worker, a time budget,
 * a memory cap); only what compiled there within the budget is compiled again
 * here, for the matchers (XGrammar's web build cannot move a compiled grammar
 * between instances). If this instance traps anyway, it is replaced by a fresh
 * one; the matchers it held fail their requests alone.
 *
 * matcher() is synchronous, as is everything a matcher does in a step:
 * the next-token bitmask (~5 µs for 32k tokens), accepting a token, rollback.
 *
 * The cache holds at most CACHE_ENTRIES grammars and CACHE_KEY_BYTES of their
 * canonical text (a long schema pins its text and, inside XGrammar, rules in
 * proportion to it); XGrammar's heap is capped at ENGINE_HEAP_BYTES.
 */
import { ArgumentError } from "../errors.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import { checkGrammarLimits } from "./grammar-limits.js";
import { GrammarRejectedError, GrammarSandbox } from "./grammar-sandbox.js";
import { type GrammarSpec, compileGrammar, grammarKey } from "./grammar-spec.js";
import { grammarVocabulary } from "./grammar-vocabulary.js";
import { type MatcherHandle, type XGrammar, type XGrammarCompiledGrammar, type XGrammarCompiler, type XGrammarTokenizerInfo, isTrap, loadXGrammar } from "./xgrammar.js";

export { GrammarRejectedError } from "./grammar-sandbox.js";

/** Compiled grammars kept (least recently used dropped first). */
export const CACHE_ENTRIES = 64;
/** Canonical grammar text the cache keeps, in all (UTF-16 code units × 2). */
export const CACHE_KEY_BYTES = 16 * 2 ** 20;
/** The engine's XGrammar wasm heap, at most. */
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
}

/** One XGrammar instance with the model's vocabulary: the engine's, replaced whole if it traps. */
interface Instance {
  xg: XGrammar;
  info: XGrammarTokenizerInfo;
  compiler: XGrammarCompiler;
}

/** One request's position in its grammar. */
export interface ConstraintMatcher {
  /** Writes the next token's mask into `mask` (Int32Array [ceil(V / 32)]): bit t % 32 of word t >> 5 set ⇔ token t allowed. */
  fillNextMask(mask: Int32Array): void;
  /** Advances by one token; false (and no change) when the grammar forbids it. */
  accept(token: number): boolean;
  /** The grammar is complete and a stop token was accepted. */
  readonly isTerminated: boolean;
  /** Undoes the last `numTokens` accepted tokens. */
  rollback(numTokens: number): void;
  dispose(): void;
}

export interface GrammarBackendLike {
  /** Logit rows the masks cover (the runner's vocabulary, padding included). */
  readonly vocabSize: number;
  /** Compiles `spec` (or finds it cached). Rejects with GrammarRejectedError (or ArgumentError naming the limit). */
  prepare(spec: GrammarSpec): Promise<void>;
  /** A fresh matcher for a prepared spec. */
  matcher(spec: GrammarSpec): ConstraintMatcher;
}

export class GrammarBackend implements GrammarBackendLike {
  readonly vocabSize: number;
  readonly #options: GrammarBackendOptions;
  readonly #vocab: ReturnType<typeof grammarVocabulary>;
  #instance: Promise<Instance>;
  readonly #sandbox: GrammarSandbox;
  /** Compiled grammars by key, with the instance that compiled them; least recently used first. */
  readonly #cache = new Map<string, { compiled: XGrammarCompiledGrammar; instance: Instance }>();
  #cacheKeyBytes = 0;
  /** Compilations under way, so concurrent requests for one grammar compile it once. */
  readonly #compiling = new Map<string, Promise<void>>();
  /** Engine instances replaced after a trap. */
  instancesReplaced = 0;

  private constructor(options: GrammarBackendOptions, vocab: ReturnType<typeof grammarVocabulary>, instance: Instance) {
    this.#options = options;
    this.vocabSize = options.vocabSize;
    this.#vocab = vocab;
    this.#instance = Promise.resolve(instance);
    this.#sandbox = new GrammarSandbox({
      ...vocab,
      vocabSize: options.vocabSize,
      stopTokenIds: [...options.stopTokenIds],
      budgetMs: options.compileBudgetMs ?? COMPILE_BUDGET_MS,
      heapMaxBytes: SANDBOX_HEAP_BYTES,
      jsHeapMb: SANDBOX_JS_HEAP_MB,
    });
  }

  /** Builds the TokenizerInfo (~150 ms for 32k tokens), the compiler and the sandbox's worker. */
  static async create(options: GrammarBackendOptions): Promise<GrammarBackend> {
    const b = options.compileBudgetMs;
    if (b !== undefined && !(Number.isFinite(b) && b > 0)) throw new ArgumentError("compileBudgetMs", `must be a positive number of milliseconds, got ${b}`);
    const vocab = grammarVocabulary(options.tokenizer);
    return new GrammarBackend(options, vocab, await GrammarBackend.#load(options, vocab));
  }

  static async #load(options: GrammarBackendOptions, v: ReturnType<typeof grammarVocabulary>): Promise<Instance> {
    const xg = await loadXGrammar({ heapMaxBytes: ENGINE_HEAP_BYTES });
    const info = await xg.TokenizerInfo.createTokenizerInfo(v.encodedVocab, v.vocabType, v.prependSpace, options.vocabSize, [...options.stopTokenIds]);
    return { xg, info, compiler: await xg.GrammarCompiler.createGrammarCompiler(info, false) };
  }

  /** Compiled grammars in the cache. */
  get cacheSize(): number {
    return this.#cache.size;
  }

  /** Canonical text the cache holds, bytes. */
  get cacheKeyBytes(): number {
    return this.#cacheKeyBytes;
  }

  /** Sandbox workers started (one more per trap, timeout or crash there). */
  get sandboxWorkersStarted(): number {
    return this.#sandbox.workersStarted;
  }

  prepare(spec: GrammarSpec): Promise<void> {
    const over = checkGrammarLimits(spec);
    if (over !== null) return Promise.reject(new ArgumentError(`grammar${over.path}`, over.message));
    const key = grammarKey(spec);
    const hit = this.#cache.get(key);
    if (hit !== undefined) {
      this.#cache.delete(key);
      this.#cache.set(key, hit); // most recently used last
      return Promise.resolve();
    }
    let p = this.#compiling.get(key);
    if (p === undefined) {
      p = this.#sandbox
        .compile(spec)
        .then(() => this.#compileHere(key, spec))
        .finally(() => this.#compiling.delete(key));
      this.#compiling.set(key, p);
    }
    return p;
  }

  /** The engine's own compile of a grammar the sandbox compiled within its budget. */
  async #compileHere(key: string, spec: GrammarSpec): Promise<void> {
    const instance = await this.#instance;
    let compiled: XGrammarCompiledGrammar;
    try {
      compiled = await instance.xg.explain(() => compileGrammar(instance.xg, instance.compiler, spec));
    } catch (e) {
      if (isTrap(e)) this.#replaceInstance(instance);
      throw new GrammarRejectedError(isTrap(e) ? "too_complex" : "invalid", (e as Error).message);
    }
    this.#cache.set(key, { compiled, instance });
    this.#cacheKeyBytes += 2 * key.length;
    while (this.#cache.size > CACHE_ENTRIES || (this.#cacheKeyBytes > CACHE_KEY_BYTES && this.#cache.size > 1)) this.#evictOldest();
  }

  #evictOldest(): void {
    const [oldest, entry] = this.#cache.entries().next().value!;
    this.#cache.delete(oldest);
    this.#cacheKeyBytes -= 2 * oldest.length;
    try {
      entry.compiled.dispose(); // matchers hold their own reference to the compiled grammar
    } catch {
      // a trapped instance's handles cannot be freed; the instance goes with them
    }
  }

  /** A trapped instance is dead: drop its grammars and load a fresh one for the next requests. */
  #replaceInstance(dead: Instance): void {
    this.instancesReplaced++;
    for (const [key, entry] of [...this.#cache]) {
      if (entry.instance !== dead) continue;
      this.#cache.delete(key);
      this.#cacheKeyBytes -= 2 * key.length;
    }
    this.#instance = GrammarBackend.#load(this.#options, this.#vocab);
  }

  matcher(spec: GrammarSpec): ConstraintMatcher {
    const entry = this.#cache.get(grammarKey(spec));
    if (entry === undefined) throw new ArgumentError("grammar", `was not prepared (compiled) before the request was added: ${JSON.stringify(spec).slice(0, 200)}`);
    const { xg } = entry.instance;
    try {
      return new XGrammarMatcher(new (xg.binding().GrammarMatcher)(entry.compiled.handle, undefined, false, -1), xg, this.vocabSize);
    } catch (e) {
      if (isTrap(e)) this.#replaceInstance(entry.instance);
      throw new ArgumentError("grammar", `could not start its matcher: ${(e as Error).message}`);
    }
  }

  /** Stops the sandbox's worker. */
  async dispose(): Promise<void> {
    await this.#sandbox.close();
  }
}

class XGrammarMatcher implements ConstraintMatcher {
  readonly #handle: MatcherHandle;
  readonly #xg: XGrammar;
  readonly #vocabSize: number;

  constructor(handle: MatcherHandle, xg: XGrammar, vocabSize: number) {
    this.#handle = handle;
    this.#xg = xg;
    this.#vocabSize = vocabSize;
  }

  fillNextMask(mask: Int32Array): void {
    const v = this.#handle.GetNextTokenBitmask(this.#vocabSize);
    try {
      mask.set(this.#xg.binding().vecIntToView(v)); // a view of the wasm heap: copy before the next call
    } finally {
      v.delete();
    }
  }

  accept(token: number): boolean {
    return this.#handle.AcceptToken(token, false);
  }

  get isTerminated(): boolean {
    return this.#handle.IsTerminated();
  }

  rollback(numTokens: number): void {
    this.#handle.Rollback(numTokens);
  }

  dispose(): void {
    this.#handle.delete();
  }
}

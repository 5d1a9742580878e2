/**
 * The engine worker's grammar machinery (vLLM's StructuredOutputManager with
 * its xgrammar backend): one TokenizerInfo and GrammarCompiler per model, built
 * at load; compiled grammars cached by their canonical text; one matcher per
 * constrained request.
 *
 * Compiling is prepare(): the worker awaits it when a request arrives, between
 * engine steps, never inside one; a grammar seen before costs a map lookup.
 * matcher() is then synchronous, as is everything a matcher does in a step:
 * the next-token bitmask (~5 µs for 32k tokens), accepting a token, rollback.
 */
import { ArgumentError } from "../errors.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import { type GrammarSpec, compileGrammar, grammarKey } from "./grammar-spec.js";
import { grammarVocabulary } from "./grammar-vocabulary.js";
import { type MatcherHandle, type XGrammar, type XGrammarCompiledGrammar, type XGrammarCompiler, loadXGrammar } from "./xgrammar.js";

/** Compiled grammars kept (least recently used dropped first). */
const CACHE_SIZE = 256;

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
  /** Compiles `spec` (or finds it cached). Rejects with the compiler's message. */
  prepare(spec: GrammarSpec): Promise<void>;
  /** A fresh matcher for a prepared spec. */
  matcher(spec: GrammarSpec): ConstraintMatcher;
}

export class GrammarBackend implements GrammarBackendLike {
  readonly vocabSize: number;
  readonly #xg: XGrammar;
  readonly #compiler: XGrammarCompiler;
  readonly #cache = new Map<string, XGrammarCompiledGrammar>();
  /** Compilations under way, so concurrent requests for one grammar compile it once. */
  readonly #compiling = new Map<string, Promise<void>>();

  private constructor(xg: XGrammar, compiler: XGrammarCompiler, vocabSize: number) {
    this.#xg = xg;
    this.#compiler = compiler;
    this.vocabSize = vocabSize;
  }

  /** Builds the TokenizerInfo (~150 ms for 32k tokens) and the compiler. vocabSize: logits per row (≥ tokenizer.vocabSize). */
  static async create(options: { tokenizer: Tokenizer; vocabSize: number; stopTokenIds: readonly number[] }): Promise<GrammarBackend> {
    const xg = await loadXGrammar();
    const v = grammarVocabulary(options.tokenizer);
    const info = await xg.TokenizerInfo.createTokenizerInfo(v.encodedVocab, v.vocabType, v.prependSpace, options.vocabSize, [...options.stopTokenIds]);
    const compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
    return new GrammarBackend(xg, compiler, options.vocabSize);
  }

  /** Compiled grammars in the cache. */
  get cacheSize(): number {
    return this.#cache.size;
  }

  prepare(spec: GrammarSpec): Promise<void> {
    let key: string;
    try {
      key = grammarKey(spec);
    } catch (e) {
      return Promise.reject(new Error(`the grammar's JSON does not parse: ${(e as Error).message}`));
    }
    const hit = this.#cache.get(key);
    if (hit !== undefined) {
      this.#cache.delete(key);
      this.#cache.set(key, hit); // most recently used last
      return Promise.resolve();
    }
    let p = this.#compiling.get(key);
    if (p === undefined) {
      p = this.#xg
        .explain(() => compileGrammar(this.#xg, this.#compiler, spec))
        .then((compiled) => {
          this.#cache.set(key, compiled);
          if (this.#cache.size > CACHE_SIZE) {
            const [oldest, g] = this.#cache.entries().next().value!;
            this.#cache.delete(oldest);
            g.dispose(); // matchers hold their own reference to the compiled grammar
          }
        })
        .finally(() => this.#compiling.delete(key));
      this.#compiling.set(key, p);
    }
    return p;
  }

  matcher(spec: GrammarSpec): ConstraintMatcher {
    const compiled = this.#cache.get(grammarKey(spec));
    if (compiled === undefined) throw new ArgumentError("grammar", `was not prepared (compiled) before the request was added: ${JSON.stringify(spec).slice(0, 200)}`);
    const binding = this.#xg.binding();
    return new XGrammarMatcher(new binding.GrammarMatcher(compiled.handle, undefined, false, -1), this.#xg, this.vocabSize);
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

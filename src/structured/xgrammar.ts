/**
 * Loads XGrammar's WebAssembly build (@mlc-ai/web-xgrammar, the structured-output
 * backend vLLM uses by default) as one private instance.
 *
 * Its lib/index.js is a UMD bundle in a package marked "type": "module", so a
 * plain import gives an empty module: we read the file and evaluate it as
 * CommonJS with module / exports / require from createRequire. Two small,
 * checked edits to its text make it usable from a synchronous engine step:
 *
 *   `let binding = null;`         also exposes the embind module, so a matcher's
 *                                 next-token bitmask is read synchronously
 *                                 (the published getNextTokenBitmask is async only
 *                                 to await the module's first load)
 *   `binding = await Module();`   passes print / printErr, so the compiler's
 *                                 "[FATAL] … message" lines (it aborts on a bad
 *                                 schema, regex or grammar) are captured for the
 *                                 error instead of going to stderr
 *   `var getHeapMax=()=>2147483648;`  caps the wasm heap at `heapMaxBytes`
 *                                 (emscripten's memory growth asks it): past the
 *                                 cap an allocation fails and the instance aborts,
 *                                 instead of growing to 2 GiB
 *
 * An instance that aborted or trapped (out-of-bounds access, stack overflow,
 * failed allocation) is dead: emscripten answers every later call with
 * "Aborted()". isTrap() tells such errors apart; the owner drops the instance.
 *
 * Each call of loadXGrammar() evaluates a fresh instance with its own wasm heap.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { ArgumentError, show } from "../errors.js";

const require = createRequire(import.meta.url);

/** The subset of the embind handles we call. */
export interface EmbindHandle {
  delete(): void;
}
export interface MatcherHandle extends EmbindHandle {
  AcceptToken(token: number, verbose: boolean): boolean;
  GetNextTokenBitmask(vocabSize: number): EmbindHandle;
  IsTerminated(): boolean;
  Rollback(numTokens: number): void;
  Reset(): void;
}
export interface XGrammarBinding {
  GrammarMatcher: new (compiled: unknown, overrideStopTokens: unknown, terminateWithoutStopToken: boolean, maxRollbackTokens: number) => MatcherHandle;
  vecIntToView(v: EmbindHandle): Int32Array;
}

export interface XGrammarGrammar {
  handle: unknown;
  toString(): string;
  dispose(): void;
}
export interface XGrammarTokenizerInfo {
  handle: unknown;
  getVocabSize(): number;
  dispose(): void;
}
export interface XGrammarCompiledGrammar {
  handle: unknown;
  dispose(): void;
}
export interface XGrammarCompiler {
  compileJSONSchema(schema: string, anyWhitespace?: boolean, indent?: number, separators?: [string, string], strictMode?: boolean, maxWhitespaceCnt?: number): Promise<XGrammarCompiledGrammar>;
  compileBuiltinJSONGrammar(): Promise<XGrammarCompiledGrammar>;
  compileGrammar(grammar: string, rootRule?: string): Promise<XGrammarCompiledGrammar>;
  compileStructuralTag(structuralTag: string): Promise<XGrammarCompiledGrammar>;
  dispose(): void;
}

/** One XGrammar instance: its classes, its embind binding, and the last compiler message. */
export interface XGrammar {
  Grammar: {
    fromEBNF(ebnf: string, rootRule?: string): Promise<XGrammarGrammar>;
    builtinJSONGrammar(): Promise<XGrammarGrammar>;
    fromJSONSchema(schema: string, anyWhitespace?: boolean, indent?: number, separators?: [string, string], strictMode?: boolean, maxWhitespaceCnt?: number): Promise<XGrammarGrammar>;
    fromStructuralTag(structuralTag: string): Promise<XGrammarGrammar>;
  };
  TokenizerInfo: {
    createTokenizerInfo(encodedVocab: string[], vocabType: string, prependSpaceInTokenization: boolean, vocabSize: number, stopTokenIds: number[]): Promise<XGrammarTokenizerInfo>;
  };
  GrammarCompiler: {
    createGrammarCompiler(info: XGrammarTokenizerInfo, cacheEnabled?: boolean): Promise<XGrammarCompiler>;
  };
  Testings: {
    _jsonSchemaToEBNF(schema: string, anyWhitespace?: boolean, indent?: number, separators?: [string, string], strictMode?: boolean, maxWhitespaceCnt?: number): Promise<string>;
  };
  /** The embind module (after the first call that loads it). */
  binding(): XGrammarBinding;
  /**
   * Runs `f`; when XGrammar aborts ("RuntimeError: Aborted()"), rethrows an
   * Error whose message is the compiler's own "[FATAL] file:line: …" text,
   * without the source location.
   */
  explain<T>(f: () => Promise<T>): Promise<T>;
}

const PATCHES: readonly [string, string][] = [
  ["let binding = null;", "let binding = null; exports.__binding = () => binding;"],
  ["binding = await Module();", "binding = await Module(exports.__moduleArg);"],
  ["var getHeapMax=()=>2147483648;", "var getHeapMax=()=>exports.__moduleArg.heapMax;"],
];

/** The wasm heap of an instance, at most (emscripten's own maximum: 2 GiB). */
export const XGRAMMAR_MAX_HEAP_BYTES = 2 ** 31;

/** Whether `e` is a trap or abort of the wasm instance (which is then unusable), not a compiler's error message. */
export function isTrap(e: unknown): boolean {
  if (e instanceof WebAssembly.RuntimeError) return true;
  const m = e instanceof Error ? e.message : String(e);
  return /Aborted\(|memory access out of bounds|call stack|unreachable|out of memory|bad_alloc/i.test(m);
}

let source: { text: string; path: string } | null = null;

function patchedSource(): { text: string; path: string } {
  if (source !== null) return source;
  const path = require.resolve("@mlc-ai/web-xgrammar");
  let text = readFileSync(path, "utf8");
  for (const [from, to] of PATCHES) {
    if (text.split(from).length !== 2) throw new Error(`@mlc-ai/web-xgrammar at ${path} is not the version kvflash adapts (expected exactly one ${JSON.stringify(from)})`);
    text = text.replace(from, to);
  }
  source = { text, path };
  return source;
}

/** A fresh XGrammar instance; its wasm heap grows to `heapMaxBytes` at most (a multiple of 64 KiB, ≤ 2 GiB). */
export async function loadXGrammar(options: { heapMaxBytes?: number } = {}): Promise<XGrammar> {
  const heapMax = options.heapMaxBytes ?? XGRAMMAR_MAX_HEAP_BYTES;
  if (!Number.isInteger(heapMax) || heapMax % 65536 !== 0 || heapMax < 2 ** 24 || heapMax > XGRAMMAR_MAX_HEAP_BYTES) {
    throw new ArgumentError("heapMaxBytes", `must be a multiple of 64 KiB from 16 MiB to 2 GiB, got ${show(heapMax)}`);
  }
  const { text, path } = patchedSource();
  const messages: string[] = [];
  const exports: Record<string, unknown> = { __moduleArg: { heapMax, print: (s: string) => messages.push(s), printErr: (s: string) => messages.push(s) } };
  const module = { exports };
  new Function("module", "exports", "require", "__filename", "__dirname", text)(module, exports, createRequire(path), path, dirname(path));
  const xg = module.exports as unknown as Omit<XGrammar, "binding" | "explain"> & { __binding(): XGrammarBinding | null };
  await xg.Grammar.builtinJSONGrammar().then((g) => g.dispose()); // loads the wasm module
  const binding = xg.__binding();
  if (binding === null) throw new Error("@mlc-ai/web-xgrammar did not initialize its wasm module");
  return {
    Grammar: xg.Grammar,
    TokenizerInfo: xg.TokenizerInfo,
    GrammarCompiler: xg.GrammarCompiler,
    Testings: xg.Testings,
    binding: () => binding,
    async explain<T>(f: () => Promise<T>): Promise<T> {
      messages.length = 0;
      try {
        return await f();
      } catch (e) {
        const fatal = messages.find((m) => m.startsWith("[FATAL]"));
        if (fatal === undefined) throw e;
        throw new Error(fatal.replace(/^\[FATAL\]\s*\S+:\d+:\s*/, ""));
      } finally {
        messages.length = 0;
      }
    },
  };
}

/**
 * The grammar sandbox's worker (grammar-sandbox.ts starts it): one private
 * XGrammar instance with the model's TokenizerInfo, its wasm heap capped,
 * that compiles each grammar once against the real vocabulary — the same
 * work the engine's own compile does — and says how it went:
 *
 *   → { id, spec }
 *   ← { type: "ready" }                               after load
 *   ← { id, ok: true, ms }                            compiled, and its first mask admits some token
 *   ← { id, ok: false, message, trapped }             XGrammar's message; trapped: this instance is dead
 *
 * The owner enforces the time budget (terminate) and the JS heap cap
 * (resourceLimits); a trapped instance is never used again: the worker
 * reports and the owner replaces it.
 */
import { parentPort, workerData } from "node:worker_threads";
import { type GrammarSpec, compileGrammar } from "./grammar-spec.js";
import type { VocabType } from "./grammar-vocabulary.js";
import { type XGrammar, type XGrammarCompiler, isTrap, loadXGrammar } from "./xgrammar.js";

export interface CompileWorkerData {
  encodedVocab: string[];
  vocabType: VocabType;
  prependSpace: boolean;
  vocabSize: number;
  stopTokenIds: number[];
  heapMaxBytes: number;
}

export type CompileReply = { type: "ready" } | { id: number; ok: true; ms: number } | { id: number; ok: false; message: string; trapped: boolean };

const port = parentPort;
if (port === null) throw new Error("grammar-compile-worker.js must run in a worker thread (GrammarSandbox starts it)");
const data = workerData as CompileWorkerData;

async function load(): Promise<{ xg: XGrammar; compiler: XGrammarCompiler }> {
  const xg = await loadXGrammar({ heapMaxBytes: data.heapMaxBytes });
  const info = await xg.TokenizerInfo.createTokenizerInfo(data.encodedVocab, data.vocabType, data.prependSpace, data.vocabSize, data.stopTokenIds);
  return { xg, compiler: await xg.GrammarCompiler.createGrammarCompiler(info, false) };
}

/** Whether the instance still answers: an abort leaves it throwing "Aborted()" at every call. */
async function alive(xg: XGrammar): Promise<boolean> {
  try {
    (await xg.Grammar.builtinJSONGrammar()).dispose();
    return true;
  } catch {
    return false;
  }
}

/** Compiles `spec` and reads its first mask: a grammar whose first mask is empty admits no output at all. */
async function compile(xg: XGrammar, compiler: XGrammarCompiler, spec: GrammarSpec): Promise<void> {
  const compiled = await xg.explain(() => compileGrammar(xg, compiler, spec));
  try {
    const matcher = new (xg.binding().GrammarMatcher)(compiled.handle, undefined, false, -1);
    try {
      const v = matcher.GetNextTokenBitmask(data.vocabSize);
      try {
        if (xg.binding().vecIntToView(v).every((w) => w === 0)) throw new Error("it admits no output at all (no token can start it)");
      } finally {
        v.delete();
      }
    } finally {
      matcher.delete();
    }
  } finally {
    compiled.dispose();
  }
}

const loaded = load();
loaded.then(
  () => port.postMessage({ type: "ready" } satisfies CompileReply),
  (e: unknown) => {
    throw e; // the owner sees the worker's error event
  },
);

port.on("message", (m: { id: number; spec: GrammarSpec }) => {
  void loaded.then(async ({ xg, compiler }) => {
    const t0 = performance.now();
    try {
      await compile(xg, compiler, m.spec);
      port.postMessage({ id: m.id, ok: true, ms: performance.now() - t0 } satisfies CompileReply);
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      const trapped = isTrap(e) || !(await alive(xg));
      port.postMessage({ id: m.id, ok: false, message, trapped } satisfies CompileReply);
    }
  });
});

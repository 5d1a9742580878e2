/**
 * The grammar host's worker (grammar-host.ts starts it): the XGrammar
 * instance that owns the compiled grammars and every live request's matcher,
 * off the engine thread (vLLM's StructuredOutputManager keeps its grammars
 * beside the engine core and fills the batch's bitmask while the forward
 * runs; here that is another thread). Each step the engine sends the
 * structured requests' tokens accepted since the last step and asks for
 * their next masks; the masks are written into shared memory while the
 * engine's forward runs, and the engine waits for them only to sample.
 *
 * The messages and the shared words are in grammar-host-protocol.ts.
 *
 * Row status: STATUS_OK, or why the row holds no mask (its matcher could not
 * start, rejected a token, or the instance trapped); the owner fails that
 * request alone, or all of this instance's requests after a trap.
 */
import { parentPort, workerData } from "node:worker_threads";
import { ACCEPTED, COMPILES_DONE, FILL_SEQ, type HostMessage, type HostReply, type HostWorkerData, STATUS_NO_MATCHER, STATUS_OK, STATUS_REJECTED, STATUS_TRAPPED } from "./grammar-host-protocol.js";
import { compileGrammar } from "./grammar-spec.js";
import { type MatcherHandle, type XGrammar, type XGrammarCompiledGrammar, type XGrammarCompiler, isTrap, loadXGrammar } from "./xgrammar.js";

const port = parentPort;
if (port === null) throw new Error("grammar-host-worker.js must run in a worker thread (GrammarHost starts it)");
const data = workerData as HostWorkerData;
const ctrl = new Int32Array(data.ctrl);
const W = Math.ceil(data.vocabSize / 32);

let xg: XGrammar | null = null;
let compiler: XGrammarCompiler | null = null;
/** Set once the instance trapped: nothing is called on it again. */
let dead = false;
const compiled = new Map<string, XGrammarCompiledGrammar>();
/** Live matchers by id; an id that failed to start or rejected a token maps to its status. */
const matchers = new Map<number, MatcherHandle | number>();
let status: Int32Array = new Int32Array(0);
let masks: Int32Array = new Int32Array(0);

function compileDone(reply: HostReply): void {
  Atomics.add(ctrl, COMPILES_DONE, 1);
  port!.postMessage(reply);
}

/** The instance trapped: drop it, tell the owner (which starts a fresh host). */
function die(e: unknown): void {
  if (dead) return;
  dead = true;
  port!.postMessage({ t: "trapped", message: (e as Error).message ?? String(e) } satisfies HostReply);
}

async function load(): Promise<void> {
  xg = await loadXGrammar({ heapMaxBytes: data.heapMaxBytes });
  const info = await xg.TokenizerInfo.createTokenizerInfo(data.encodedVocab, data.vocabType, data.prependSpace, data.vocabSize, data.stopTokenIds);
  compiler = await xg.GrammarCompiler.createGrammarCompiler(info, false);
}

async function compile(m: Extract<HostMessage, { t: "compile" }>): Promise<void> {
  if (dead) return compileDone({ t: "compiled", id: m.id, ok: false, message: "the grammar host trapped", trapped: true });
  try {
    const g = await xg!.explain(() => compileGrammar(xg!, compiler!, m.spec));
    compiled.get(m.key)?.dispose();
    compiled.set(m.key, g);
    compileDone({ t: "compiled", id: m.id, ok: true, message: "", trapped: false });
  } catch (e) {
    const trapped = isTrap(e);
    compileDone({ t: "compiled", id: m.id, ok: false, message: (e as Error).message, trapped });
    if (trapped) die(e);
  }
}

function startMatcher(mid: number, key: string): void {
  const g = compiled.get(key);
  if (dead || g === undefined) return void matchers.set(mid, dead ? STATUS_TRAPPED : STATUS_NO_MATCHER);
  try {
    matchers.set(mid, new (xg!.binding().GrammarMatcher)(g.handle, undefined, false, -1));
  } catch (e) {
    matchers.set(mid, STATUS_NO_MATCHER);
    if (isTrap(e)) die(e);
  }
}

/** Accepts the tokens sampled since the last fill, then writes each asked matcher's next mask into its row. */
function fill(m: Extract<HostMessage, { t: "fill" }>): void {
  try {
    for (let i = 0; i + 1 < m.accept.length && !dead; i += 2) {
      const h = matchers.get(m.accept[i]!);
      if (typeof h !== "object" || h.AcceptToken(m.accept[i + 1]!, false)) continue;
      matchers.set(m.accept[i]!, STATUS_REJECTED);
      h.delete();
    }
    for (let row = 0; row < m.mids.length; row++) {
      const h = dead ? STATUS_TRAPPED : (matchers.get(m.mids[row]!) ?? STATUS_NO_MATCHER);
      if (typeof h === "number") {
        status[row] = h;
        continue;
      }
      const v = h.GetNextTokenBitmask(data.vocabSize);
      try {
        masks.set(xg!.binding().vecIntToView(v), row * W); // a view of the wasm heap: copied before the next call
      } finally {
        v.delete();
      }
      status[row] = STATUS_OK;
    }
  } catch (e) {
    if (!isTrap(e)) throw e;
    die(e);
    status.fill(STATUS_TRAPPED, 0, m.mids.length);
  } finally {
    Atomics.store(ctrl, FILL_SEQ, m.seq);
    Atomics.notify(ctrl, FILL_SEQ);
  }
}

/** One token for one matcher, answered at once: a refused token leaves the matcher as it was (XGrammar's AcceptToken). */
function acceptNow(m: Extract<HostMessage, { t: "accept" }>): void {
  try {
    const h = matchers.get(m.mid);
    Atomics.store(ctrl, ACCEPTED, !dead && typeof h === "object" && h.AcceptToken(m.token, false) ? 1 : 0);
  } catch (e) {
    Atomics.store(ctrl, ACCEPTED, 0);
    if (!isTrap(e)) throw e;
    die(e);
  } finally {
    Atomics.store(ctrl, FILL_SEQ, m.seq);
    Atomics.notify(ctrl, FILL_SEQ);
  }
}

function handle(m: HostMessage): Promise<void> | void {
  switch (m.t) {
    case "rows":
      status = new Int32Array(m.buf, 0, m.rows);
      masks = new Int32Array(m.buf, 4 * m.rows, m.rows * W);
      return;
    case "compile":
      return compile(m);
    case "evict": {
      const g = compiled.get(m.key);
      compiled.delete(m.key);
      if (g !== undefined && !dead) g.dispose();
      return;
    }
    case "matcher":
      return startMatcher(m.mid, m.key);
    case "rollback": {
      const h = matchers.get(m.mid);
      if (typeof h === "object" && !dead) h.Rollback(m.n);
      return;
    }
    case "dispose": {
      const h = matchers.get(m.mid);
      matchers.delete(m.mid);
      if (typeof h === "object" && !dead) h.delete();
      return;
    }
    case "fill":
      return fill(m);
    case "accept":
      return acceptNow(m);
  }
}

// Messages wait for the load, then run strictly in order (a compile's await included).
let chain: Promise<void> = load().then(
  () => compileDone({ t: "compiled", id: 0, ok: true, message: "", trapped: false }),
  (e: unknown) => {
    dead = true;
    compileDone({ t: "compiled", id: 0, ok: false, message: (e as Error).message, trapped: false });
  },
);
port.on("message", (m: HostMessage) => {
  chain = chain
    .then(() => handle(m))
    .catch((e: unknown) => {
      if (isTrap(e)) die(e);
      else console.error(`kvflash grammar host: ${m.t} failed: ${(e as Error).message}`); // a rollback past the history, say; the chain goes on
    });
});

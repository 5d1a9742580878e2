// The grammar compile sandbox (structured/grammar-sandbox.ts) against the
// default model's real vocabulary: a grammar that traps XGrammar (out-of-bounds
// on its stack), one past the time budget, and one past the wasm heap cap each
// get "too complex" and cost a fresh worker, and the next compile in the queue
// succeeds; an invalid or empty grammar is "invalid" and keeps the worker; the
// backend's cache stays within its entries.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Tokenizer } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { CACHE_ENTRIES, GrammarBackend } from "../../src/structured/grammar-backend.js";
import { GrammarRejectedError, GrammarSandbox, type GrammarSandboxOptions } from "../../src/structured/grammar-sandbox.js";
import type { GrammarSpec } from "../../src/structured/grammar-spec.js";
import { grammarVocabulary } from "../../src/structured/grammar-vocabulary.js";

const tokenizer = Tokenizer.fromDir(defaultModelDir());
const base: GrammarSandboxOptions = {
  ...grammarVocabulary(tokenizer),
  vocabSize: tokenizer.vocabSize,
  stopTokenIds: [2],
  budgetMs: 20_000,
  heapMaxBytes: 512 * 2 ** 20,
  jsHeapMb: 256,
};
const sandboxes: GrammarSandbox[] = [];
const sandbox = (o: Partial<GrammarSandboxOptions> = {}) => {
  const s = new GrammarSandbox({ ...base, ...o });
  sandboxes.push(s);
  return s;
};
after(() => Promise.all(sandboxes.map((s) => s.close())));

const json = (schema: unknown): GrammarSpec => ({ type: "json", schema: JSON.stringify(schema) });
const SMALL = json({ type: "object", properties: { a: { type: "integer" } }, required: ["a"] });
/** Objects chained through $refs, 120 deep: within the size limits, yet it overflows XGrammar's stack. */
const chain = json({
  $ref: "#/$defs/d0",
  $defs: Object.fromEntries(Array.from({ length: 120 }, (_, i) => [`d${i}`, i < 119 ? { type: "object", properties: { a: { $ref: `#/$defs/d${i + 1}` } } } : { type: "string" }])),
});
const props = (n: number) => json({ type: "object", properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: "integer" }])) });

async function rejection(p: Promise<unknown>): Promise<GrammarRejectedError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof GrammarRejectedError, String(e));
    return e;
  }
  assert.fail("expected a rejection");
}

test("a trap (out-of-bounds access) is too complex and costs the worker; the compiles queued behind it succeed on a fresh one", async () => {
  const s = sandbox();
  const [before, trapped, afterwards] = await Promise.allSettled([s.compile(SMALL), s.compile(chain), s.compile(json({ type: "array", items: { type: "boolean" } }))]);
  assert.equal(before.status, "fulfilled");
  assert.equal(trapped.status, "rejected");
  const e = (trapped as PromiseRejectedResult).reason as GrammarRejectedError;
  assert.equal(e.reason, "too_complex");
  assert.match(e.message, /the grammar is too complex: compiling it failed \(memory access out of bounds\)/);
  assert.equal(afterwards.status, "fulfilled", String((afterwards as PromiseRejectedResult).reason));
  assert.equal(s.workersStarted, 2);
});

test("past the time budget: too complex, the worker is terminated, and the next compile runs on a fresh one", async () => {
  const s = sandbox({ budgetMs: 1000 });
  const e = await rejection(s.compile(props(400)));
  assert.equal(e.reason, "too_complex");
  assert.match(e.message, /compiling it took longer than 1000 ms/);
  assert.ok((await s.compile(SMALL)) >= 0);
  assert.equal(s.workersStarted, 2);
});

test("past the wasm heap cap: too complex, then a fresh worker", async () => {
  const s = sandbox({ heapMaxBytes: 259 * 65536 }); // XGrammar's initial heap (16.2 MiB): the vocabulary and a small grammar fit, this enum must grow it
  assert.ok((await s.compile(SMALL)) >= 0, "a small grammar fits the cap");
  const e = await rejection(s.compile(json({ enum: Array.from({ length: 1000 }, (_, i) => `${i}`.padStart(100, "x")) })));
  assert.equal(e.reason, "too_complex", e.message);
  assert.ok((await s.compile(SMALL)) >= 0);
  assert.equal(s.workersStarted, 2);
});

test("invalid and empty grammars: XGrammar's message, reason invalid, the worker kept", async () => {
  const s = sandbox();
  for (const [spec, message] of [
    [json(false), /cannot accept any value/],
    [json({ type: "nope" }), /Unsupported type "nope"/],
    [{ type: "ebnf", grammar: 'root ::= "a" b' }, /Rule "b" is not defined/],
    [{ type: "regex", pattern: "[0-9" }, /Regex parsing error/],
  ] as [GrammarSpec, RegExp][]) {
    const e = await rejection(s.compile(spec));
    assert.equal(e.reason, "invalid", e.message);
    assert.match(e.message, message);
  }
  assert.equal(s.workersStarted, 1);
});

test("GrammarBackend: limits before the sandbox, its cache bounded in entries, and matchers work after a sandbox trap", async () => {
  const backend = await GrammarBackend.create({ tokenizer, vocabSize: tokenizer.vocabSize, stopTokenIds: [2] });
  try {
    await assert.rejects(backend.prepare(json({ enum: Array.from({ length: 5000 }, String) })), /grammar\.enum has more than 1000 enum/);
    await assert.rejects(backend.prepare(chain), /too complex/);
    assert.equal(backend.sandboxWorkersStarted, 2);
    for (let i = 0; i < CACHE_ENTRIES + 6; i++) await backend.prepare({ type: "choice", choices: [`c${i}`] });
    assert.equal(backend.cacheSize, CACHE_ENTRIES);
    await backend.prepare(SMALL);
    const m = backend.matcher(SMALL);
    const mask = new Int32Array(Math.ceil(tokenizer.vocabSize / 32));
    m.fillNextMask(mask);
    const allowed = [...mask].flatMap((w, i) => Array.from({ length: 32 }, (_, b) => ((w >>> b) & 1 ? [i * 32 + b] : [])).flat());
    assert.ok(allowed.length > 0 && allowed.every((t) => tokenizer.decode([t]).trim().startsWith("{") || tokenizer.decode([t]).trim() === ""), `first tokens open an object: ${allowed.slice(0, 10).map((t) => JSON.stringify(tokenizer.decode([t])))}`);
    m.dispose();
  } finally {
    await backend.dispose();
  }
});

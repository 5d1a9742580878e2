// The grammar hosts (structured/grammar-host.ts, grammar-host-pool.ts):
// compiled grammars and the matchers live in workers, not on the engine
// thread. While a new grammar compiles the engine keeps stepping, and a
// structured stream keeps its masks (the compile goes to a host where no
// matcher lives); only where it cannot (one host, or a full pool) are the
// constrained requests of the compiling host held back, and then equal their
// run-alone output. Masks asked for before the forward come back row by row,
// with the stop tokens allowed only where the grammar is complete.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Engine, type EngineOutput, type EngineRequest } from "../../src/engine/engine.js";
import { Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { GrammarBackend } from "../../src/structured/grammar-backend.js";
import type { GrammarHost } from "../../src/structured/grammar-host.js";
import type { GrammarSpec } from "../../src/structured/grammar-spec.js";
import { ToyRunner } from "../engine/toy-runner.js";

const dir = defaultModelDir();
const config = parseModelConfig(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")));
const tokenizer = Tokenizer.fromDir(dir);
const V = config.vocabSize;
let backend: GrammarBackend;

before(async () => {
  backend = await GrammarBackend.create({ tokenizer, vocabSize: V, stopTokenIds: [2], compileBudgetMs: 120_000 }); // a loaded CI machine must not turn the big schema away
});
after(() => backend.dispose());

const REGEX: GrammarSpec = { type: "regex", pattern: "[a-z]{3,6}-[0-9]{2}" };
/** Compiles for a while in the host (~200 ms on a quiet machine): 40 integer properties, named `${prefix}${i}` (a new prefix, a new grammar). */
const big = (prefix: string): GrammarSpec => ({ type: "json", schema: JSON.stringify({ type: "object", properties: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`${prefix}${i}`, { type: "integer" }])) }) });
const prompt = (seed: number, n: number) => Array.from({ length: n }, (_, i) => 3 + ((seed * 7919 + i * 104729) % (V - 3)));
const request = (id: string, seed: number, maxTokens: number, grammar?: GrammarSpec): EngineRequest => ({
  requestId: id,
  promptTokenIds: prompt(seed, 6),
  params: resolveSamplingParams({ temperature: 1, seed, maxTokens, ignoreEos: grammar === undefined }, V),
  ...(grammar ? { grammar } : {}),
});
const engineWith = () => new Engine({ runner: new ToyRunner({ config, numBlocks: 128, blockSize: 4 }), tokenizer, eosTokenIds: [2], grammar: backend });
const tokens = (outs: EngineOutput[]) => outs.flatMap((o) => o.tokenIds);
const tick = () => new Promise<void>((r) => setImmediate(r));

/** Prepares `spec` and resolves once its compile in a host has begun (the sandbox's is done), with a flag that turns true when prepare settles. */
async function hostCompiling(spec: GrammarSpec, backend: GrammarBackend): Promise<{ prepared: Promise<void>; done: () => boolean }> {
  let settled = false;
  const prepared = backend.prepare(spec);
  prepared.then(() => (settled = true), () => (settled = true));
  while (backend.idle && !settled) await tick();
  assert.ok(!settled, "the compile reached the host");
  return { prepared, done: () => settled };
}

test("while a new grammar compiles, a structured stream keeps its masks: the constrained request and a free one both produce tokens, and the constrained output equals its run-alone output", async () => {
  await backend.prepare(REGEX);
  const alone = engineWith();
  alone.addRequest(request("re", 1, 40, REGEX));
  const aloneOut: EngineOutput[] = [];
  while (alone.hasUnfinishedRequests) aloneOut.push(...alone.step());

  const engine = engineWith();
  engine.addRequest(request("re", 1, 40, REGEX));
  const by = new Map<string, EngineOutput[]>();
  const record = (outs: EngineOutput[]) => outs.forEach((o) => by.set(o.requestId, [...(by.get(o.requestId) ?? []), o]));
  record(engine.step()); // the constrained request's prefill and first token
  const { prepared, done } = await hostCompiling(big("p"), backend);
  engine.addRequest(request("free", 2, 300)); // fits beside the other: never preempted
  let freeTokensWhileCompiling = 0;
  let constrainedTokensWhileCompiling = 0;
  let constrainedLive = true;
  let heldSteps = 0;
  while (!done()) {
    const compiling = !backend.idle;
    const outs = engine.step();
    record(outs);
    if (compiling) {
      if (engine.heldForGrammar) heldSteps++;
      for (const o of outs) {
        if (o.requestId === "free") freeTokensWhileCompiling += o.tokenIds.length;
        else if (constrainedLive) constrainedTokensWhileCompiling += o.tokenIds.length;
        if (o.requestId === "re" && o.finishReason !== null) constrainedLive = false;
      }
    }
    await tick(); // the host's reply comes through the event loop
  }
  await prepared;
  assert.ok(freeTokensWhileCompiling > 0, "the free request produced tokens while the grammar compiled");
  assert.ok(constrainedTokensWhileCompiling > 0, "the constrained request produced tokens while another grammar compiled (its mask was filled)");
  assert.equal(heldSteps, 0, "no step was held for the compile");
  engine.abort("free");
  while (engine.hasUnfinishedRequests) record(engine.step());
  assert.deepEqual(tokens(by.get("re")!), tokens(aloneOut));
  assert.match(by.get("re")!.map((o) => o.text).join(""), /^[a-z]{3,6}-[0-9]{2}$/);
  assert.equal(by.get("re")!.at(-1)!.finishReason, "stop");
});

test("with one grammar host (maxHosts 1), an engine whose only requests are constrained is held (heldForGrammar) while it compiles, and resumes after", async () => {
  const single = await GrammarBackend.create({ tokenizer, vocabSize: V, stopTokenIds: [2], compileBudgetMs: 120_000, maxHosts: 1 });
  try {
    await single.prepare(REGEX);
    const engine = new Engine({ runner: new ToyRunner({ config, numBlocks: 128, blockSize: 4 }), tokenizer, eosTokenIds: [2], grammar: single });
    engine.addRequest(request("re", 3, 40, REGEX));
    const outs: EngineOutput[] = [...engine.step()];
    const { prepared, done } = await hostCompiling(big("q"), single);
    assert.deepEqual(engine.step(), [], "no output while held");
    assert.equal(engine.heldForGrammar, true);
    await engine.whenGrammarReady();
    assert.equal(single.idle, true, "whenGrammarReady resolves once the host's compile ended");
    await prepared;
    assert.ok(done());
    assert.equal(single.hosts.started, 1);
    while (engine.hasUnfinishedRequests) outs.push(...engine.step());
    assert.match(outs.map((o) => o.text).join(""), /^[a-z]{3,6}-[0-9]{2}$/);
  } finally {
    await single.dispose();
  }
});

test("the pool: a new grammar compiles in a host without live matchers (a fresh one below maxHosts); at maxHosts in the one with the fewest, whose matchers alone wait; a hit opens where its grammar lives; unused hosts retire down to one", async () => {
  const pool = await GrammarBackend.create({ tokenizer, vocabSize: V, stopTokenIds: [2], compileBudgetMs: 120_000, maxHosts: 2, hostRetireIdleMs: 200 });
  const choice: GrammarSpec = { type: "choice", choices: ["yes", "no"] };
  try {
    assert.deepEqual(pool.hosts, { running: 1, started: 1, lost: 0 });
    await pool.prepare(REGEX); // the first host: idle, no matcher
    const a = pool.matcher(REGEX);
    await pool.prepare(choice); // the first host has a live matcher: a second host
    assert.deepEqual(pool.hosts, { running: 2, started: 2, lost: 0 });
    const b = pool.matcher(choice);
    const a2 = pool.matcher(REGEX); // a hit: beside a, in the first host
    // Both hosts hold live matchers and the pool is full: the compile goes to the second (1 live matcher against 2).
    const { prepared } = await hostCompiling(big("r"), pool);
    assert.equal(pool.hosts.started, 2, "no third host");
    assert.equal(b.ready, false, "b's host compiles");
    assert.equal(a.ready && a2.ready, true, "the first host's matchers do not wait");
    const mask = new Int32Array(Math.ceil(V / 32));
    a.fillNextMask(mask);
    assert.ok(mask.some((w) => w !== 0), "a's mask came while the other host compiled");
    await prepared;
    await b.whenReady();
    assert.equal(b.ready, true);
    for (const m of [a, a2, b]) m.dispose();
    const t0 = Date.now();
    while (pool.hosts.running > 1 && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 50));
    assert.deepEqual(pool.hosts, { running: 1, started: 2, lost: 0 }, "the unused host retired");
    await pool.prepare(choice); // compiled again wherever it is missing
    const c = pool.matcher(choice);
    c.fillNextMask(mask);
    assert.ok(mask.some((w) => w !== 0));
    c.dispose();
  } finally {
    await pool.dispose();
  }
});

test("masksFor: one row per matcher in the order asked; a stop token is allowed only where the grammar is complete, and accepting it terminates", async () => {
  const choice: GrammarSpec = { type: "choice", choices: ["yes", "no"] };
  await backend.prepare(choice);
  await backend.prepare(REGEX);
  const a = backend.matcher(choice);
  const b = backend.matcher(REGEX);
  const allowed = (m: Int32Array) => [...m].flatMap((w, i) => Array.from({ length: 32 }, (_, bit) => ((w >>> bit) & 1 ? [i * 32 + bit] : [])).flat());
  const masks = backend.masksFor([a, b]);
  const first = allowed(masks.mask(0)).map((t) => tokenizer.decode([t]));
  assert.ok(first.length > 0 && first.every((s) => "yes".startsWith(s) || "no".startsWith(s)), `choice starts: ${first.slice(0, 8)}`);
  assert.ok(allowed(masks.mask(1)).every((t) => /^[a-z]+$/.test(tokenizer.decode([t]))), "regex starts with letters");
  assert.ok(!allowed(masks.mask(0)).includes(2), "no stop before the choice is complete");
  // Walk "no" token by token, each time a token the mask allows whose text continues it.
  let left = "no";
  while (left !== "") {
    const m = backend.masksFor([a]);
    const t = allowed(m.mask(0)).find((t) => { const s = tokenizer.decode([t]); return s !== "" && left.startsWith(s); });
    assert.ok(t !== undefined, `a token continues ${JSON.stringify(left)}`);
    assert.equal(a.accept(t), true);
    left = left.slice(tokenizer.decode([t]).length);
  }
  const last = backend.masksFor([a]);
  assert.deepEqual(allowed(last.mask(0)), [2], "only the stop token once complete");
  assert.equal(a.accept(5), false, "a token the mask forbids is refused");
  assert.equal(a.isTerminated, false);
  assert.equal(a.accept(2), true);
  assert.equal(a.isTerminated, true);
  a.dispose();
  b.dispose();
});

test("a host whose worker stops (killed, as by a crash or an OOM kill) while a step waits for its masks: that step's rows on it fail within a second, not after FILL_TIMEOUT_MS; the other host's rows come; a new compile afterwards works", async () => {
  const pool = await GrammarBackend.create({ tokenizer, vocabSize: V, stopTokenIds: [2], compileBudgetMs: 120_000, maxHosts: 2 });
  const choice: GrammarSpec = { type: "choice", choices: ["yes", "no"] };
  try {
    await pool.prepare(REGEX);
    const a = pool.matcher(REGEX);
    await pool.prepare(choice); // a second host: the first has a live matcher
    const b = pool.matcher(choice);
    const victim = (b as unknown as { host: GrammarHost }).host;
    assert.notEqual((a as unknown as { host: GrammarHost }).host, victim, "the two matchers live on two hosts");
    victim.kill(); // the worker stops; its exit event cannot arrive while this thread waits for masks below
    const t0 = Date.now();
    const masks = pool.masksFor([a, b]);
    assert.ok(masks.mask(0).some((w) => w !== 0), "the other host's row came");
    assert.throws(() => masks.mask(1), /the grammar host exited/);
    assert.ok(Date.now() - t0 < 1000, `the dead host was noticed in ${Date.now() - t0} ms`);
    await new Promise((r) => setTimeout(r, 50)); // its exit event: the pool drops it
    assert.deepEqual(pool.hosts, { running: 2, started: 3, lost: 1 }, "it is gone, and a spare replaces it");
    b.dispose();
    await pool.prepare(choice); // it left the cache with its host: compiled again
    const c = pool.matcher(choice);
    const mask = new Int32Array(Math.ceil(V / 32));
    c.fillNextMask(mask);
    assert.ok(mask.some((w) => w !== 0));
    assert.notEqual((c as unknown as { host: GrammarHost }).host, (a as unknown as { host: GrammarHost }).host, "in the spare (the first host has a live matcher)");
    a.dispose();
    c.dispose();
  } finally {
    await pool.dispose();
  }
});

test("a warm spare: when a matcher or a compile takes the last free host, another starts in the background (within maxHosts), so the next new grammar compiles without waiting for a host to start", async () => {
  const pool = await GrammarBackend.create({ tokenizer, vocabSize: V, stopTokenIds: [2], compileBudgetMs: 120_000, maxHosts: 3 });
  const choice: GrammarSpec = { type: "choice", choices: ["yes", "no"] };
  const third: GrammarSpec = { type: "regex", pattern: "[0-9]{4}" };
  const loaded = async () => {
    while (!pool.idle) await tick(); // every host loaded (a load counts as a compile)
  };
  try {
    assert.deepEqual(pool.hosts, { running: 1, started: 1, lost: 0 });
    await pool.prepare(REGEX);
    assert.deepEqual(pool.hosts, { running: 2, started: 2, lost: 0 }, "the compile took the only free host: a spare started");
    const a = pool.matcher(REGEX);
    assert.deepEqual(pool.hosts, { running: 2, started: 2, lost: 0 }, "the spare is still free");
    await loaded();
    const spare = pool.hosts.started;
    await pool.prepare(choice);
    const b = pool.matcher(choice);
    assert.notEqual((b as unknown as { host: GrammarHost }).host, (a as unknown as { host: GrammarHost }).host);
    assert.deepEqual(pool.hosts, { running: 3, started: spare + 1, lost: 0 }, "the new grammar compiled in the warm spare, and the next spare started");
    await loaded();
    await pool.prepare(third);
    const c = pool.matcher(third);
    assert.deepEqual(pool.hosts, { running: 3, started: 3, lost: 0 }, "never beyond maxHosts");
    for (const m of [a, b, c]) m.dispose();
  } finally {
    await pool.dispose();
  }
});

// The grammar host (structured/grammar-host.ts): compiled grammars and the
// matchers live in a worker, not on the engine thread. While the host compiles
// a new grammar the engine keeps stepping: unconstrained requests produce
// tokens, constrained ones are held back (and then equal their run-alone
// output); masks asked for before the forward come back row by row, with the
// stop tokens allowed only where the grammar is complete.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Engine, type EngineOutput, type EngineRequest } from "../../src/engine/engine.js";
import { Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { GrammarBackend } from "../../src/structured/grammar-backend.js";
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

/** Prepares `spec` and resolves once its compile in the host has begun (the sandbox's is done), with a flag that turns true when prepare settles. */
async function hostCompiling(spec: GrammarSpec): Promise<{ prepared: Promise<void>; done: () => boolean }> {
  let settled = false;
  const prepared = backend.prepare(spec);
  prepared.then(() => (settled = true), () => (settled = true));
  while (backend.idle && !settled) await tick();
  assert.ok(!settled, "the compile reached the host");
  return { prepared, done: () => settled };
}

test("while the host compiles a new grammar the engine steps on: free requests produce tokens, constrained ones wait, then equal their run-alone output", async () => {
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
  const { prepared, done } = await hostCompiling(big("p"));
  engine.addRequest(request("free", 2, 300)); // fits beside the other: never preempted
  let freeTokensWhileCompiling = 0;
  let constrainedTokensWhileCompiling = 0;
  let heldSteps = 0;
  let freeLive = true;
  while (!done()) {
    const compiling = !backend.idle;
    const outs = engine.step();
    record(outs);
    if (compiling) {
      if (engine.heldForGrammar && freeLive) heldSteps++;
      for (const o of outs) {
        if (o.requestId === "free") freeTokensWhileCompiling += o.tokenIds.length;
        else constrainedTokensWhileCompiling += o.tokenIds.length;
        if (o.requestId === "free" && o.finishReason !== null) freeLive = false;
      }
    }
    await tick(); // the host's reply comes through the event loop
  }
  await prepared;
  assert.ok(freeTokensWhileCompiling > 0, "the free request produced tokens while the host compiled");
  assert.equal(constrainedTokensWhileCompiling, 0, "the constrained request waited for the host");
  assert.equal(heldSteps, 0, "a step with a free request to run is never held");
  if (freeLive) engine.abort("free");
  while (engine.hasUnfinishedRequests) record(engine.step());
  assert.deepEqual(tokens(by.get("re")!), tokens(aloneOut));
  assert.match(by.get("re")!.map((o) => o.text).join(""), /^[a-z]{3,6}-[0-9]{2}$/);
  assert.equal(by.get("re")!.at(-1)!.finishReason, "stop");
});

test("an engine whose only requests are constrained is held (heldForGrammar) while the host compiles, and resumes after", async () => {
  await backend.prepare(REGEX);
  const engine = engineWith();
  engine.addRequest(request("re", 3, 40, REGEX));
  const outs: EngineOutput[] = [...engine.step()];
  const { prepared, done } = await hostCompiling(big("q"));
  let held = 0;
  while (!done()) {
    const compiling = !backend.idle;
    const step = engine.step();
    if (compiling) {
      assert.deepEqual(step, [], "no output while held");
      if (engine.heldForGrammar) held++;
    }
    outs.push(...step);
    await tick();
  }
  await prepared;
  assert.ok(held > 0, "steps were held while the host compiled");
  while (engine.hasUnfinishedRequests) outs.push(...engine.step());
  assert.match(outs.map((o) => o.text).join(""), /^[a-z]{3,6}-[0-9]{2}$/);
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

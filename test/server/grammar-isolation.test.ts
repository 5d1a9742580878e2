// Grammars cannot poison or stall the server (issue #32 items 1, 5): each
// hostile schema, grammar or tool list gets a clear 400 naming its field, and a
// normal json_schema request succeeds afterwards (the XGrammar instance that
// trapped is gone, not reused); while a grammar compiles past its budget in
// the sandbox worker, an unrelated stream keeps producing tokens and /health
// answers within 1 s; and a bounded-time fuzz of schemas and grammars (random
// nesting, sizes, unicode, $ref cycles) never gets a 500 or breaks a later request.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type ErrorBody, MODEL, type ServerProcess, metric, modelArgs, post, startServer, waitMetrics } from "./harness.js";

let server: ServerProcess;
before(async () => {
  server = await startServer([...modelArgs(), "--tool-call-parser", "hermes"]);
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
});

const chatUrl = () => `${server.url}/v1/chat/completions`;
const compUrl = () => `${server.url}/v1/completions`;
const messages = [{ role: "user" as const, content: "Give me JSON." }];

const nest = (depth: number): object => {
  let s: object = { type: "string", maxLength: 3 };
  for (let i = 0; i < depth; i++) s = { type: "object", properties: { a: s }, required: ["a"] };
  return s;
};
const props = (n: number): object => ({ type: "object", properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: "integer" }])) });
const refChain = (n: number): object => ({
  $ref: "#/$defs/d0",
  $defs: Object.fromEntries(Array.from({ length: n }, (_, i) => [`d${i}`, i + 1 < n ? { $ref: `#/$defs/d${i + 1}` } : { type: "string" }])),
});
/** Objects nested through $refs: each def an object whose one property refers to the next. */
const objectChain = (n: number): object => ({
  $ref: "#/$defs/d0",
  $defs: Object.fromEntries(Array.from({ length: n }, (_, i) => [`d${i}`, i + 1 < n ? { type: "object", properties: { a: { $ref: `#/$defs/d${i + 1}` } }, required: ["a"] } : { type: "string" }])),
});
const schemaBody = (schema: unknown) => ({ model: MODEL, messages, max_tokens: 8, response_format: { type: "json_schema", json_schema: { name: "x", schema } } });

/** A small schema the model must fill: the request that must keep working. */
async function normalJsonSchemaWorks(after: string): Promise<void> {
  const r = await server.openai.chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: "A number." }],
    max_tokens: 40,
    seed: 1,
    response_format: { type: "json_schema", json_schema: { name: "n", schema: { type: "object", properties: { n: { type: "integer", minimum: 0, maximum: 9 } }, required: ["n"], additionalProperties: false } } },
  });
  const text = r.choices[0]!.message.content!;
  assert.equal(r.choices[0]!.finish_reason, "stop", `after ${after}: ${text}`);
  assert.match(JSON.parse(text).n.toString(), /^[0-9]$/, `after ${after}: ${text}`);
  const obj = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 4, seed: 2, response_format: { type: "json_object" } });
  assert.ok(obj.choices[0]!.message.content!.length > 0, `after ${after}: json_object still answers`);
}

test("each poison grammar gets a 400 naming its field, and json_schema / json_object work afterwards", async () => {
  const tools = Array.from({ length: 1000 }, (_, i) => ({ type: "function", function: { name: `f${i}`, parameters: { type: "object", properties: { x: { type: "integer" } } } } }));
  const cases: [string, string, unknown, string, RegExp][] = [
    ["60-deep nesting", chatUrl(), schemaBody(nest(60)), "response_format.json_schema.schema", /^response_format\.json_schema\.schema\.properties\.a\.properties\.a.*… nests deeper than 64 levels/],
    ["2000-long $ref chain", chatUrl(), schemaBody(refChain(2000)), "response_format.json_schema.schema", /^response_format\.json_schema\.schema\.\$defs\.d\d+\.\$ref has more than 128 \$refs/],
    ["120 objects chained by $ref (within the limits: XGrammar traps in the sandbox)", chatUrl(), schemaBody(objectChain(120)), "response_format.json_schema.schema", /too complex: compiling it failed \(memory access out of bounds\)/],
    ["5000 properties", compUrl(), { model: MODEL, prompt: "x", max_tokens: 4, guided_json: props(5000) }, "guided_json", /^guided_json\.properties has more than 1000 properties/],
    ["100k-string enum", compUrl(), { model: MODEL, prompt: "x", max_tokens: 4, guided_json: { enum: Array.from({ length: 100_000 }, (_, i) => `v${i}`) } }, "guided_json", /^guided_json\.enum has more than 1000 enum/],
    ["deeply nested EBNF", compUrl(), { model: MODEL, prompt: "x", max_tokens: 4, guided_grammar: `root ::= ${"(".repeat(5000)}"a"${")".repeat(5000)}` }, "guided_grammar", /nests groups 5000 deep; at most 64/],
    ["long regex", compUrl(), { model: MODEL, prompt: "x", max_tokens: 4, guided_regex: "a".repeat(5000) }, "guided_regex", /5000 characters long; at most 1000/],
    ["1000 tools, tool_choice required", chatUrl(), { model: MODEL, messages, max_tokens: 4, tools, tool_choice: "required" }, "tools", /^tools has 1000 tools, more than the 128 one request may have$/],
    ["1000 tools, tool_choice auto", chatUrl(), { model: MODEL, messages, max_tokens: 4, tools }, "tools", /^tools has 1000 tools, more than the 128 one request may have$/],
    ["a schema that admits nothing (false)", chatUrl(), schemaBody(false), "response_format.json_schema.schema", /cannot accept any value/],
    ["a schema that admits nothing (empty enum)", chatUrl(), schemaBody({ enum: [] }), "response_format.json_schema.schema", /is invalid/],
    ["minLength > maxLength", chatUrl(), schemaBody({ type: "string", minLength: 5, maxLength: 2 }), "response_format.json_schema.schema", /minLength 5 is greater than maxLength 2/],
  ];
  for (const [name, url, body, param, message] of cases) {
    const t0 = Date.now();
    const r = await post<ErrorBody>(url, body);
    assert.equal(r.status, 400, `${name}: ${JSON.stringify(r.body).slice(0, 300)}`);
    assert.equal(r.body.error.param, param, `${name}: ${r.body.error.message}`);
    assert.match(r.body.error.message, message, name);
    assert.ok(Date.now() - t0 < 30_000, `${name}: answered in ${Date.now() - t0} ms`);
    await normalJsonSchemaWorks(name);
  }
  assert.doesNotMatch(server.stderr(), /Aborted\(\)/);
});

/** Reads an SSE stream, recording when each data chunk arrived. */
async function streamTimes(body: object): Promise<number[]> {
  const res = await fetch(compUrl(), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...body, stream: true }) });
  assert.equal(res.status, 200);
  const times: number[] = [];
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    const n = decoder.decode(chunk).split("data: ").length - 1;
    for (let i = 0; i < n; i++) times.push(Date.now());
  }
  return times;
}

test("a grammar compiling past its budget: a 400 'too complex', while another stream keeps producing tokens and /health answers within 1 s", async () => {
  // 900 optional properties: under the property limit, far past the 5 s budget against a 32k vocabulary.
  let compiling = true;
  const slow = post<ErrorBody>(compUrl(), { model: MODEL, prompt: "x", max_tokens: 4, guided_json: props(900) }).finally(() => (compiling = false));
  const healthMs: number[] = [];
  const health = (async () => {
    while (compiling) {
      const t0 = Date.now();
      const r = await fetch(`${server.url}/health`);
      healthMs.push(Date.now() - t0);
      assert.equal(r.status, 200);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const gaps: number[] = [];
  let chunks = 0;
  const stream = (async () => {
    for (let seed = 0; compiling; seed++) {
      const times = await streamTimes({ model: MODEL, prompt: "Once upon a time", max_tokens: 400, temperature: 1, seed });
      chunks += times.length;
      for (let i = 1; i < times.length; i++) if (compiling) gaps.push(times[i]! - times[i - 1]!);
    }
  })();
  const r = await slow;
  await Promise.all([health, stream]);
  assert.equal(r.status, 400, JSON.stringify(r.body));
  assert.equal(r.body.error.param, "guided_json");
  assert.match(r.body.error.message, /the grammar is too complex: compiling it took longer than 5000 ms/);
  assert.ok(healthMs.length >= 10, `/health was polled ${healthMs.length} times`);
  assert.ok(Math.max(...healthMs) < 1000, `/health answered in at most ${Math.max(...healthMs)} ms`);
  assert.ok(chunks >= 20, `the stream produced ${chunks} chunks while the grammar compiled`);
  assert.ok(Math.max(...gaps) < 1000, `longest gap between stream chunks ${Math.max(...gaps)} ms`);
  await normalJsonSchemaWorks("a compile past its budget");
});

test("a client that leaves while its grammar compiles: the request is dropped, never run", async () => {
  // A grammar new to the server (its property names), slow enough to compile that the client leaves meanwhile.
  const schema = { type: "object", properties: Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`left${i}`, { type: "integer" }])) };
  const generated = async () => metric(await server.metrics(), "vllm:generation_tokens_total");
  const before = await generated();
  const t0 = Date.now();
  const leaving = new AbortController();
  const left = fetch(compUrl(), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt: "x", max_tokens: 50, guided_json: schema }), signal: leaving.signal }).catch(() => null);
  setTimeout(() => leaving.abort(), 200);
  // The same grammar again: it waits for the same compile, then runs.
  const stays = await server.openai.completions.create({ model: MODEL, prompt: "y", max_tokens: 5, seed: 3, guided_json: schema } as never);
  const compileMs = Date.now() - t0;
  assert.ok(compileMs > 300, `the compile outlasted the client (${compileMs} ms)`);
  await left;
  await waitMetrics(server, (m) => metric(m, "vllm:num_requests_running") === 0 && metric(m, "vllm:num_requests_waiting") === 0);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await generated()) - before, stays.usage!.completion_tokens, "only the request that stayed generated tokens");
});

/** A seeded PRNG (mulberry32). */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ["a", "name", "ключ", "名前", "😀x", "\u0000z", "\\\"", "\ud800", "é", " "];

/** A random schema of at most `budget.left` nodes (without the bound, 60 properties a level over 80 levels ran the test process out of memory). */
function randomSchema(r: () => number, depth: number, budget = { left: 4000 }): unknown {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const k = r();
  budget.left--;
  if (depth <= 0 || k < 0.2 || budget.left <= 0) return pick([{ type: "string", maxLength: 1 + Math.floor(r() * 4) }, { type: "integer" }, { type: "boolean" }, { const: pick(WORDS) }, { enum: WORDS.slice(0, 1 + Math.floor(r() * WORDS.length)) }, { type: "string", pattern: pick(["[a-z]+", "(a|b", "\\d{2,", "ü+", "((((a))))"]) }, true, false, {}]);
  if (k < 0.45) {
    const n = Math.floor(r() * (r() < 0.1 ? 60 : 5));
    const properties = Object.fromEntries(Array.from({ length: n }, (_, i) => [`${pick(WORDS)}${i}`, randomSchema(r, depth - 1, budget)]));
    return { type: "object", properties, required: Object.keys(properties).filter(() => r() < 0.5), additionalProperties: r() < 0.5 };
  }
  if (k < 0.6) return { type: "array", items: randomSchema(r, depth - 1, budget), minItems: Math.floor(r() * 3), maxItems: Math.floor(r() * 4) };
  if (k < 0.75) return { anyOf: Array.from({ length: 1 + Math.floor(r() * 4) }, () => randomSchema(r, depth - 1, budget)) };
  if (k < 0.9) {
    // $ref cycles and chains, sometimes dangling
    const n = 1 + Math.floor(r() * 12);
    const defs = Object.fromEntries(Array.from({ length: n }, (_, i) => [`d${i}`, r() < 0.5 ? { $ref: `#/$defs/d${Math.floor(r() * (n + 1))}` } : { type: "object", properties: { next: { $ref: `#/$defs/d${(i + 1) % n}` } } }]));
    return { $ref: "#/$defs/d0", $defs: defs };
  }
  return { type: pick(["object", "string", "nope", 3, ["string", "null"]]), minLength: Math.floor(r() * 5) - 1, maxLength: Math.floor(r() * 5) - 1, minimum: r() * 10, maximum: r() * 10 };
}

function randomEbnf(r: () => number): string {
  const depth = Math.floor(r() * (r() < 0.2 ? 200 : 10));
  const atom = ['"a"', '"ü"', "[0-9]", '"\\n"', "rule2", '""', "[^\\x00]"][Math.floor(r() * 7)]!;
  const ops = ["", "*", "+", "?", "{1,3}"];
  let body = atom;
  for (let i = 0; i < depth; i++) body = `(${body}${ops[Math.floor(r() * ops.length)]} | "x")`;
  return `root ::= ${body}${r() < 0.7 ? '\nrule2 ::= "b" rule2 | "c"' : ""}`;
}

test("fuzz (bounded in time): random schemas and grammars are a 200 or a 400, never a 500, and nothing breaks afterwards", async () => {
  const r = rng(32);
  const deadline = Date.now() + 8000;
  const statuses = new Map<number, number>();
  let n = 0;
  while (Date.now() < deadline) {
    const kind = r();
    const body =
      kind < 0.6 ? { model: MODEL, prompt: "x", max_tokens: 6, seed: n, guided_json: randomSchema(r, 1 + Math.floor(r() * (r() < 0.1 ? 80 : 5))) }
      : kind < 0.85 ? { model: MODEL, prompt: "x", max_tokens: 6, seed: n, guided_grammar: randomEbnf(r) }
      : { model: MODEL, prompt: "x", max_tokens: 6, seed: n, guided_regex: Array.from({ length: 1 + Math.floor(r() * 30) }, () => "ab(|)[]*+?{}\\.ü😀"[Math.floor(r() * 17)]).join("") };
    const res = await post<ErrorBody>(compUrl(), body);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    assert.ok(res.status === 200 || res.status === 400, `case ${n}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)} for ${JSON.stringify(body).slice(0, 300)}`);
    if (res.status === 400) assert.ok(res.body.error.param !== null, `case ${n}: a 400 names its field: ${res.body.error.message}`);
    n++;
  }
  assert.ok(n >= 10, `fuzzed ${n} requests`);
  assert.ok((statuses.get(200) ?? 0) > 0 && (statuses.get(400) ?? 0) > 0, `both outcomes seen: ${JSON.stringify([...statuses])}`);
  await normalJsonSchemaWorks("the fuzz");
});

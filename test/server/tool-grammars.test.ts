// The grammars of tool-calling replies and of json_object, compiled by XGrammar
// over the default model's tokenizer and driven byte by byte (its <0xXX>
// byte-fallback tokens): each parser's own format is accepted and parses back
// into the expected call; a named tool_choice allows exactly one call and then
// only end-of-sequence; json_object refuses a top-level array.
import assert from "node:assert/strict";
import { before, test } from "node:test";
import { Tokenizer } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { Fields } from "../../src/server/fields.js";
import { parseGrammarFields } from "../../src/server/structured-request.js";
import type { ToolDefinition, ToolPlan } from "../../src/server/tool-calls.js";
import { toolGrammar } from "../../src/server/tool-grammars.js";
import { type ToolParserName, parseToolOutput } from "../../src/server/tool-parsers.js";
import { GrammarBackend } from "../../src/structured/grammar-backend.js";
import type { GrammarSpec } from "../../src/structured/grammar-spec.js";

const tokenizer = Tokenizer.fromDir(defaultModelDir());
const EOS = 2;
let backend: GrammarBackend;
const byteToken = Array.from({ length: 256 }, (_, b) => tokenizer.tokenToId(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`)!);

before(async () => {
  backend = await GrammarBackend.create({ tokenizer, vocabSize: tokenizer.vocabSize, stopTokenIds: [EOS] });
});

/** Feeds `text` byte by byte: how many bytes the grammar took, and whether it then takes end-of-sequence. */
async function feed(spec: GrammarSpec | null, text: string): Promise<{ bytes: number; total: number; ends: boolean }> {
  assert.ok(spec !== null, "a grammar");
  await backend.prepare(spec);
  const m = backend.matcher(spec);
  try {
    const bytes = Buffer.from(text, "utf8");
    let n = 0;
    while (n < bytes.length && m.accept(byteToken[bytes[n]!]!)) n++;
    return { bytes: n, total: bytes.length, ends: n === bytes.length && m.accept(EOS) };
  } finally {
    m.dispose();
  }
}

const TIME: ToolDefinition = { name: "get_time", parameters: { type: "object", properties: { zone: { enum: ["UTC", "CET"] } }, required: ["zone"], additionalProperties: false } };
const WEATHER: ToolDefinition = {
  name: "get_weather",
  parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } }, required: ["city"], additionalProperties: false },
};
const PING: ToolDefinition = { name: "ping", parameters: { type: "object" } };
const TOOLS = [TIME, WEATHER, PING];

const plan = (parser: ToolParserName, choice: ToolPlan["choice"], parallel = true): ToolPlan => ({ parser, tools: TOOLS, choice, parallel });

/** Each parser's format: one call of get_time, two calls, and what the first parses to. */
const FORMATS: Record<ToolParserName, { one: string; two: string; args: string }> = {
  hermes: {
    one: '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>',
    two: '<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>\n<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>',
    args: '{"zone": "UTC"}',
  },
  llama3_json: { one: '{"name": "get_time", "parameters": {"zone": "UTC"}}', two: "", args: '{"zone": "UTC"}' },
  mistral: {
    one: '[TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "UTC"}}]',
    two: '[TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "UTC"}}, {"name": "ping", "arguments": {}}]',
    args: '{"zone": "UTC"}',
  },
  qwen3_coder: {
    one: "<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>",
    two: "<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=ping>\n</function>\n</tool_call>",
    args: '{"zone":"UTC"}',
  },
  generic: {
    one: '{"tool_call": {"name": "get_time", "arguments": {"zone": "UTC"}}}',
    two: '{"tool_calls": [{"name": "get_time", "arguments": {"zone": "UTC"}}, {"name": "ping", "arguments": {}}]}',
    args: '{"zone": "UTC"}',
  },
};

test("a named tool_choice allows exactly one call of that function, then only end-of-sequence (parallel_tool_calls left at its default)", async () => {
  for (const parser of ["hermes", "mistral", "qwen3_coder"] as const) {
    const spec = toolGrammar(plan(parser, { name: "get_time" }));
    const f = FORMATS[parser];
    assert.deepEqual(await feed(spec, f.one), { bytes: Buffer.byteLength(f.one), total: Buffer.byteLength(f.one), ends: true }, `${parser}: one call`);
    const two = await feed(spec, f.two);
    assert.ok(two.bytes < two.total && !two.ends, `${parser}: a second call is refused (took ${two.bytes} of ${two.total} bytes)`);
    const parsed = parseToolOutput(parser, f.one, true, TOOLS);
    assert.deepEqual(parsed.calls, [{ name: "get_time", arguments: f.args, done: true }], `${parser}: the call parses back`);
  }
  const generic = toolGrammar(plan("generic", { name: "get_time" }));
  assert.equal((await feed(generic, FORMATS.generic.one)).ends, true);
  assert.equal((await feed(generic, FORMATS.generic.two)).ends, false, "generic, named: no tool_calls array");
  assert.equal((await feed(generic, '{"tool_call": {"name": "ping", "arguments": {}}}')).ends, false, "generic, named: only that function");
  assert.equal((await feed(generic, '{"response": "hi"}')).ends, false, "generic, named: no plain reply");
});

test('"required" with parallel calls takes one or several calls, and no plain text', async () => {
  for (const parser of ["hermes", "mistral", "qwen3_coder"] as const) {
    const spec = toolGrammar(plan(parser, "required"));
    assert.equal((await feed(spec, FORMATS[parser].one)).ends, true, `${parser}: one call`);
    assert.equal((await feed(spec, FORMATS[parser].two)).ends, true, `${parser}: two calls`);
    assert.equal((await feed(spec, "Hello")).bytes, 0, `${parser}: no text`);
    const parsed = parseToolOutput(parser, FORMATS[parser].two, true, TOOLS);
    assert.deepEqual(parsed.calls.map((c) => c.name), ["get_time", "ping"], `${parser}: both calls parse back`);
  }
  const single = toolGrammar(plan("qwen3_coder", "required", false));
  assert.equal((await feed(single, FORMATS.qwen3_coder.two)).ends, false, "parallel_tool_calls false: one call");
  const generic = toolGrammar(plan("generic", "required"));
  assert.equal((await feed(generic, FORMATS.generic.two)).ends, true);
  assert.equal((await feed(generic, '{"response": "hi"}')).ends, false);
  assert.equal((await feed(toolGrammar(plan("generic", "required", false)), FORMATS.generic.one)).ends, true);
});

test('"auto": text or a call (qwen3_coder opens calls by its marker; generic is a call or {"response"}; mistral is free text)', async () => {
  assert.equal(toolGrammar(plan("mistral", "auto")), null, "mistral opens calls with a special token, which no grammar allows");
  for (const parser of ["qwen3_coder"] as const) {
    const spec = toolGrammar(plan(parser, "auto"));
    assert.equal((await feed(spec, "Plain words.")).ends, true, `${parser}: text`);
    assert.equal((await feed(spec, `Let me look.${FORMATS[parser].one}`)).ends, true, `${parser}: text, then a call`);
    const bad = FORMATS[parser].one.replace("get_time", "get_date");
    assert.equal((await feed(spec, bad)).ends, false, `${parser}: an unknown function is refused`);
  }
  const generic = toolGrammar(plan("generic", "auto"));
  assert.equal((await feed(generic, '{"response": "It is noon."}')).ends, true);
  assert.equal((await feed(generic, FORMATS.generic.two)).ends, true);
  assert.equal((await feed(generic, "It is noon.")).bytes, 0, "generic: the reply is JSON");
  assert.deepEqual(parseToolOutput("generic", '{"response": "It is noon."}', true), { content: "It is noon.", calls: [] });
});

test("json_object: the top level is an object; an array, even as the first character or token, is refused", async () => {
  const g = parseGrammarFields(new Fields({ response_format: { type: "json_object" } }))!;
  assert.equal((await feed(g.spec, '{"a": [1, 2]}')).ends, true);
  assert.deepEqual(await feed(g.spec, "[1, 2]"), { bytes: 0, total: 6, ends: false });
  assert.equal((await feed(g.spec, '"text"')).bytes, 0);
  const so = parseGrammarFields(new Fields({ structured_outputs: { json_object: true } }))!;
  assert.equal((await feed(so.spec, "[]")).bytes, 0, "structured_outputs.json_object too");

  // The first token's mask: no token whose text starts with "[" (after the pieces' spaces), and "{" allowed.
  await backend.prepare(g.spec);
  const m = backend.matcher(g.spec);
  const mask = new Int32Array(Math.ceil(tokenizer.vocabSize / 32));
  m.fillNextMask(mask);
  m.dispose();
  const allowed = (t: number) => ((mask[t >> 5]! >>> (t & 31)) & 1) === 1;
  assert.ok(allowed(byteToken[0x7b]!), "{ is allowed");
  const brackets: string[] = [];
  for (let t = 0; t < tokenizer.vocabSize; t++) {
    const piece = tokenizer.idToToken(t) ?? "";
    if (allowed(t) && (piece === "<0x5B>" || piece.replaceAll("\u2581", " ").trimStart().startsWith("["))) brackets.push(piece);
  }
  assert.deepEqual(brackets, [], "tokens opening an array are masked");
});

test("qwen3_coder parameters: text up to the closing tag, optional ones left out, the template's newlines and no other whitespace", async () => {
  const spec = toolGrammar(plan("qwen3_coder", "required", false));
  const call = (params: string) => `<tool_call>\n<function=get_weather>\n${params}</function>\n</tool_call>`;
  const text = call("<parameter=city>\nif a < b:\n  go()\n</parameter>\n");
  assert.equal((await feed(spec, text)).ends, true, "a string holds any text, markup and newlines included");
  assert.deepEqual(parseToolOutput("qwen3_coder", text, true, TOOLS).calls, [{ name: "get_weather", arguments: '{"city":"if a < b:\\n  go()"}', done: true }]);
  assert.equal((await feed(spec, call("<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n3\n</parameter>\n"))).ends, true, "an optional parameter given");
  assert.equal((await feed(spec, call("<parameter=days>\n3\n</parameter>\n"))).ends, false, "a required parameter left out");
  assert.equal((await feed(spec, call("  <parameter=city>\nOslo\n</parameter>\n"))).ends, false, "whitespace before a parameter");
  assert.equal((await feed(spec, call("<parameter=city>\nOslo\n</parameter>\n<parameter=days>\nthree\n</parameter>\n"))).ends, false, "an integer is JSON");
  const short = toolGrammar({ parser: "qwen3_coder", tools: [{ name: "f", parameters: { type: "object", properties: { w: { type: "string", maxLength: 4 } }, required: ["w"] } }], choice: "required", parallel: false });
  const word = (w: string) => `<tool_call>\n<function=f>\n<parameter=w>\n${w}\n</parameter>\n</function>\n</tool_call>`;
  assert.equal((await feed(short, word("ab\nc"))).ends, true, "maxLength 4: four characters");
  assert.equal((await feed(short, word("abcde"))).ends, false, "maxLength 4: not five");
});

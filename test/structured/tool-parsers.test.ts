// Tool-call parsers on whole replies and on every prefix of them: what a
// prefix yields must be a prefix of what the whole reply yields (so streamed
// deltas concatenate to the non-streamed result), and markup never leaks into
// content or arguments.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type ToolParserName, type ToolSchema, parseToolOutput, parserForTemplate } from "../../src/server/tool-parsers.js";

function checkPrefixes(parser: ToolParserName, text: string, tools: ToolSchema[] = []): void {
  const whole = parseToolOutput(parser, text, true, tools);
  for (let n = 0; n <= text.length; n++) {
    const part = parseToolOutput(parser, text.slice(0, n), false, tools);
    assert.ok(whole.content.startsWith(part.content), `content of prefix ${n} ${JSON.stringify(part.content)} leads ${JSON.stringify(whole.content)}`);
    assert.ok(part.calls.length <= whole.calls.length, `prefix ${n}: ${part.calls.length} calls`);
    part.calls.forEach((c, i) => {
      assert.equal(c.name, whole.calls[i]!.name);
      assert.ok(whole.calls[i]!.arguments.startsWith(c.arguments), `prefix ${n}: arguments ${JSON.stringify(c.arguments)} lead ${JSON.stringify(whole.calls[i]!.arguments)}`);
    });
  }
}

test("hermes: text and several <tool_call> blocks; raw argument text; every prefix leads the whole", () => {
  const text = 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "n": {"a": "}"}}}\n</tool_call>\n<tool_call>\n{"name": "t", "arguments": {}}\n</tool_call>';
  const r = parseToolOutput("hermes", text, true);
  assert.equal(r.content, "Let me check.\n\n");
  assert.deepEqual(r.calls, [
    { name: "get_weather", arguments: '{"city": "Paris", "n": {"a": "}"}}', done: true },
    { name: "t", arguments: "{}", done: true },
  ]);
  checkPrefixes("hermes", text);
  checkPrefixes("hermes", "no calls here, just <tool text");
  assert.deepEqual(parseToolOutput("hermes", "a <tool_call>{broken</tool_call>", true), { content: "a <tool_call>{broken</tool_call>", calls: [] }, "a call that does not parse stays text");
});

test("llama3_json: one bare call, <|python_tag|> optional, parameters or arguments; plain text otherwise", () => {
  const text = '<|python_tag|>{"name": "get_time", "parameters": {"zone": "UTC"}}';
  assert.deepEqual(parseToolOutput("llama3_json", text, true), { content: "", calls: [{ name: "get_time", arguments: '{"zone": "UTC"}', done: true }] });
  checkPrefixes("llama3_json", text);
  assert.deepEqual(parseToolOutput("llama3_json", "Hello there", true), { content: "Hello there", calls: [] });
});

test("mistral: text, then [TOOL_CALLS] and a JSON array; ids dropped; quoted arguments unquoted; every prefix leads the whole", () => {
  const text = 'Sure.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}, "id": "abcDEF123"}, {"name": "get_time", "arguments": "{\\"zone\\": \\"UTC\\"}"}]';
  assert.deepEqual(parseToolOutput("mistral", text, true), {
    content: "Sure.",
    calls: [
      { name: "get_weather", arguments: '{"city": "Paris", "days": [1, 2]}', done: true },
      { name: "get_time", arguments: '{"zone": "UTC"}', done: true },
    ],
  });
  checkPrefixes("mistral", text);
  assert.deepEqual(parseToolOutput("mistral", 'Sure.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Pa', false), {
    content: "Sure.",
    calls: [{ name: "get_weather", arguments: '{"city": "Pa', done: false }],
  });
  assert.deepEqual(parseToolOutput("mistral", "Hello [TOOL_CA", false), { content: "Hello ", calls: [] }, "a partial marker is held back");
  assert.deepEqual(parseToolOutput("mistral", "Hello [TOOL_CA", true), { content: "Hello [TOOL_CA", calls: [] });
  assert.deepEqual(parseToolOutput("mistral", "a [TOOL_CALLS] not json", true), { content: "a [TOOL_CALLS] not json", calls: [] }, "no JSON after the marker: all text");
});

const WEATHER_SCHEMA: ToolSchema = {
  name: "get_weather",
  parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" }, detail: { type: "object" }, note: { type: "string" } } },
};

test("qwen3_coder: XML calls with text around them; values typed by the tool's schema; every prefix leads the whole", () => {
  const text =
    "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n</parameter>\n" +
    '<parameter=detail>\n{"hourly": true}\n</parameter>\n<parameter=note>\n42\n</parameter>\n<parameter=extra>\n7\n</parameter>\n</function>\n</tool_call>\n' +
    "<tool_call>\n<function=get_time>\n</function>\n</tool_call>";
  assert.deepEqual(parseToolOutput("qwen3_coder", text, true, [WEATHER_SCHEMA]), {
    content: "Checking.\n\n",
    calls: [
      { name: "get_weather", arguments: '{"city":"New York","days":3,"detail":{"hourly":true},"note":"42","extra":"7"}', done: true },
      { name: "get_time", arguments: "{}", done: true },
    ],
  });
  checkPrefixes("qwen3_coder", text, [WEATHER_SCHEMA]);
  assert.deepEqual(parseToolOutput("qwen3_coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nPar", false, [WEATHER_SCHEMA]), {
    content: "",
    calls: [{ name: "get_weather", arguments: "{", done: false }],
  }, "a parameter counts once it is closed");
  assert.deepEqual(parseToolOutput("qwen3_coder", "a <tool_call>\nno function</tool_call>", true), { content: "a <tool_call>\nno function</tool_call>", calls: [] }, "a call without <function=…> stays text");
});

test("generic: {tool_call}, {tool_calls} or {response}; the response streams as decoded text; every prefix leads the whole", () => {
  const one = '{"tool_call": {"name": "get_time", "arguments": {"zone": "UTC"}}}';
  assert.deepEqual(parseToolOutput("generic", one, true), { content: "", calls: [{ name: "get_time", arguments: '{"zone": "UTC"}', done: true }] });
  checkPrefixes("generic", one);
  const many = '{ "tool_calls" : [ {"name": "a", "arguments": {}} , {"name": "b", "arguments": {"x": [1, {"y": "}"}]}} ] }';
  assert.deepEqual(parseToolOutput("generic", many, true), {
    content: "",
    calls: [
      { name: "a", arguments: "{}", done: true },
      { name: "b", arguments: '{"x": [1, {"y": "}"}]}', done: true },
    ],
  });
  checkPrefixes("generic", many);
  const reply = '{"response": "Caf\\u00e9 \\"ol\\u00e9\\"\\n"}';
  assert.deepEqual(parseToolOutput("generic", reply, true), { content: 'Café "olé"\n', calls: [] });
  checkPrefixes("generic", reply);
  assert.deepEqual(parseToolOutput("generic", '{"response": "Caf\\u00', false), { content: "Caf", calls: [] }, "a cut escape is held back");
  assert.deepEqual(parseToolOutput("generic", '{"response": "cut by max_tokens', true), { content: "cut by max_tokens", calls: [] }, "a reply cut short keeps its text");
  assert.deepEqual(parseToolOutput("generic", "plain words", true), { content: "plain words", calls: [] });
});

test("the parser is picked from the chat template; a template with no tool format gets generic", () => {
  assert.equal(parserForTemplate("{{ '<tool_call>' }}"), "hermes");
  assert.equal(parserForTemplate("{{ '<|python_tag|>' }}"), "llama3_json");
  assert.equal(parserForTemplate("{{ '[TOOL_CALLS][' }}"), "mistral");
  assert.equal(parserForTemplate("{{ '<tool_call>\\n<function=' + name + '>\\n<parameter=' }}"), "qwen3_coder");
  assert.equal(parserForTemplate("{{ messages }}"), "generic");
  assert.equal(parserForTemplate(null), null);
});

// Tool-call parsers on whole replies and on every prefix of them: what a
// prefix yields must be a prefix of what the whole reply yields (so streamed
// deltas concatenate to the non-streamed result), and markup never leaks into
// content or arguments.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type ToolParserName, parseToolOutput, parserForTemplate } from "../../src/server/tool-parsers.js";

function checkPrefixes(parser: ToolParserName, text: string): void {
  const whole = parseToolOutput(parser, text, true);
  for (let n = 0; n <= text.length; n++) {
    const part = parseToolOutput(parser, text.slice(0, n), false);
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

test("the parser is picked from the chat template", () => {
  assert.equal(parserForTemplate("{{ '<tool_call>' }}"), "hermes");
  assert.equal(parserForTemplate("{{ '<|python_tag|>' }}"), "llama3_json");
  assert.equal(parserForTemplate("{{ messages }}"), null);
  assert.equal(parserForTemplate(null), null);
});

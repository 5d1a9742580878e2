// A tool-calling reply → OpenAI's message and finish_reason, whole and
// streamed, without a model: exact messages for each parser, a call cut short
// by max_tokens (a call with the arguments it has, never markup in content),
// finish_reason "stop" for a named choice, and a stream fed one character at a
// time whose deltas add up to the whole message.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type ChatDelta, ToolCallStream, toolCallMessage } from "../../src/server/tool-call-output.js";
import type { ToolPlan } from "../../src/server/tool-calls.js";
import type { ToolParserName } from "../../src/server/tool-parsers.js";

const TOOLS = [
  { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" } } } },
  { name: "get_time", parameters: { type: "object", properties: { zone: { enum: ["UTC", "CET"] } } } },
];
const plan = (parser: ToolParserName, choice: ToolPlan["choice"] = "auto"): ToolPlan => ({ parser, tools: TOOLS, choice, parallel: true });

/** The message without its random ids. */
function message(p: ToolPlan, text: string, finish: string) {
  const m = toolCallMessage(p, text, finish);
  return { content: m.message.content, calls: (m.message.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments]), finish: m.finishReason };
}

test("a call cut short by max_tokens is a call with the arguments it has; no markup is left in content", () => {
  assert.deepEqual(message(plan("hermes"), 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par', "length"), {
    content: "Let me check.\n",
    calls: [["get_weather", '{"city": "Par']],
    finish: "length",
  });
  assert.deepEqual(message(plan("qwen3_coder"), "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=da", "length"), {
    content: null,
    calls: [["get_weather", '{"city":"Oslo"']],
    finish: "length",
  });
  assert.deepEqual(message(plan("generic"), '{"tool_calls": [{"name": "get_time", "arguments": {"zone": "UTC"}}, {"name": "get_weather", "arguments": {"ci', "length"), {
    content: null,
    calls: [["get_time", '{"zone": "UTC"}'], ["get_weather", '{"ci']],
    finish: "length",
  });
});

test('finish_reason: "tool_calls" for auto and required, "stop" for a named function (as OpenAI answers), unchanged without calls', () => {
  const call = '[TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "CET"}}]';
  assert.equal(message(plan("mistral"), call, "stop").finish, "tool_calls");
  assert.equal(message(plan("mistral", "required"), call, "stop").finish, "tool_calls");
  assert.equal(message(plan("mistral", { name: "get_time" }), call, "stop").finish, "stop");
  assert.deepEqual(message(plan("generic"), '{"response": "Noon."}', "stop"), { content: "Noon.", calls: [], finish: "stop" });
  const ids = toolCallMessage(plan("mistral"), call, "stop").message.tool_calls!.map((c) => c.id);
  assert.match(ids[0]!, /^[A-Za-z0-9]{9}$/, "mistral: the 9-character ids its templates require");
  assert.match(toolCallMessage(plan("generic"), '{"tool_call": {"name": "get_time", "arguments": {}}}', "stop").message.tool_calls![0]!.id, /^call_[0-9a-f]{24}$/);
});

test("streamed one character at a time, the deltas add up to the whole message, for every parser", () => {
  const replies: [ToolParserName, string][] = [
    ["hermes", 'Sure.\n<tool_call>\n{"name": "get_time", "arguments": {"zone": "UTC"}}\n</tool_call>\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>'],
    ["mistral", 'Sure.[TOOL_CALLS][{"name": "get_time", "arguments": {"zone": "UTC"}}, {"name": "get_weather", "arguments": {"city": "Lima", "days": 2}}]'],
    ["qwen3_coder", "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>"],
    ["generic", '{"tool_calls": [{"name": "get_time", "arguments": {"zone": "UTC"}}, {"name": "get_weather", "arguments": {"city": "Li\\"ma"}}]}'],
    ["generic", '{"response": "It is \\u00e9t\\u00e9 in Lima.\\n"}'],
  ];
  for (const [parser, text] of replies) {
    const p = plan(parser);
    const stream = new ToolCallStream(p);
    const deltas: ChatDelta[] = [];
    for (let n = 1; n <= text.length; n++) deltas.push(...stream.push(text.slice(0, n), n === text.length));
    let content = "";
    const calls: [string, string][] = [];
    for (const d of deltas) {
      if ("content" in d) content += d.content;
      else for (const c of d.tool_calls) {
        if (c.function.name !== undefined) calls.push([c.function.name, c.function.arguments]);
        else calls[c.index]![1] += c.function.arguments;
      }
    }
    const whole = message(p, text, "stop");
    assert.deepEqual({ content: content === "" && whole.calls.length > 0 ? null : content, calls, finish: stream.finishReason("stop") }, whole, `${parser}: ${text}`);
  }
});

// The generic tool format's prompt side, exactly: the tool section for each
// tool_choice, where it goes (the system prompt, appended to the request's own,
// or the first user turn), and earlier calls and tool results as text.
import assert from "node:assert/strict";
import { test } from "node:test";
import { genericToolMessages, genericToolPrompt } from "../../src/server/generic-tool-prompt.js";
import type { ToolPlan } from "../../src/server/tool-calls.js";

const plan: ToolPlan = {
  parser: "generic",
  tools: [
    { name: "define", description: "Look a word up", parameters: { type: "object", properties: { word: { type: "string" } } } },
    { name: "ping", parameters: { type: "object" } },
  ],
  choice: "auto",
  parallel: false,
};
const TOOLS = 'You can call these tools (their arguments follow the JSON schema given):\n{"name":"define","description":"Look a word up","parameters":{"type":"object","properties":{"word":{"type":"string"}}}}\n{"name":"ping","parameters":{"type":"object"}}\n';

test("the tool section names the reply shapes the grammar allows, per tool_choice", () => {
  assert.equal(genericToolPrompt(plan), `${TOOLS}\nReply with one JSON object: {"tool_call": {"name": "<tool name>", "arguments": {<its arguments>}}} to call a tool, or {"response": "<your reply>"} to answer the user.`);
  assert.equal(
    genericToolPrompt({ ...plan, choice: "required", parallel: true }),
    `${TOOLS}\nReply with one JSON object that calls tools: {"tool_calls": [{"name": "<tool name>", "arguments": {<its arguments>}}, …]}.`,
  );
  assert.equal(
    genericToolPrompt({ ...plan, choice: { name: "ping" }, parallel: true }),
    'You can call these tools (their arguments follow the JSON schema given):\n{"name":"ping","parameters":{"type":"object"}}\n\nReply with one JSON object that calls the tool ping: {"tool_call": {"name": "<tool name>", "arguments": {<its arguments>}}}.',
  );
});

test("messages: the section joins the system prompt (or leads the first user turn); calls and results become text", () => {
  const prompt = genericToolPrompt(plan);
  const history = [
    { role: "system", content: "Be brief." },
    { role: "user", content: "Define river." },
    { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "define", arguments: { word: "river" } } }] },
    { role: "tool", tool_call_id: "call_1", content: "a large stream" },
  ];
  assert.deepEqual(genericToolMessages(history, plan), [
    { role: "system", content: `Be brief.\n\n${prompt}` },
    { role: "user", content: "Define river." },
    { role: "assistant", content: '{"tool_call":{"name":"define","arguments":{"word":"river"}}}' },
    { role: "user", content: '{"tool_response":{"tool_call_id":"call_1","name":"define","content":"a large stream"}}' },
  ]);
  assert.deepEqual(genericToolMessages([{ role: "user", content: "Hi" }], plan), [{ role: "system", content: prompt }, { role: "user", content: "Hi" }]);
  assert.deepEqual(genericToolMessages([{ role: "user", content: "Hi" }], plan, "user"), [{ role: "user", content: `${prompt}\n\nHi` }]);
  const two = genericToolMessages([{ role: "assistant", tool_calls: [{ function: { name: "ping", arguments: {} } }, { function: { name: "define", arguments: { word: "a" } } }] }], plan);
  assert.equal((two[1] as { content: string }).content, '{"tool_calls":[{"name":"ping","arguments":{}},{"name":"define","arguments":{"word":"a"}}]}');
});

// The Responses API's pieces without a model: the bounded store (entries and
// bytes, least recently used out), input items → chat messages, the chat
// parser's field names → the Responses fields, the output builder's events
// (the order a stream sends and the items a non-streamed answer holds), and
// the body bounds a tokenizer worker checks on an input item list.
import assert from "node:assert/strict";
import { test } from "node:test";
import { HttpError } from "../../src/server/errors.js";
import { inputConversation } from "../../src/server/responses/input-items.js";
import { OutputBuilder, assistantMessage } from "../../src/server/responses/output.js";
import { responsesParam } from "../../src/server/responses/request.js";
import { ResponseStore } from "../../src/server/responses/store.js";
import { findLongPromptText } from "../../src/prompt-text.js";
import { SHAPE_LIMITS, findShapeViolation } from "../../src/request-shape.js";

const entry = (text: string) => ({ response: { id: text }, history: [{ role: "user", content: text }] });

test("the store keeps at most maxEntries, evicting the least recently used (a get refreshes)", () => {
  const store = new ResponseStore({ maxEntries: 3, maxBytes: 1 << 20 });
  for (const id of ["a", "b", "c"]) store.set(id, entry(id));
  assert.ok(store.get("a") !== undefined); // a is now the most recent: b goes first
  store.set("d", entry("d"));
  assert.equal(store.size, 3);
  assert.equal(store.get("b"), undefined);
  assert.deepEqual(["a", "c", "d"].map((id) => store.get(id)?.response["id"]), ["a", "c", "d"]);
  store.set("e", entry("e")); // a, the oldest use now, goes
  assert.equal(store.get("a"), undefined);
});

test("the store keeps at most maxBytes of JSON, evicting oldest first; an entry larger than the bound alone is not kept", () => {
  const one = Buffer.byteLength(JSON.stringify(entry("x".repeat(100))));
  const store = new ResponseStore({ maxEntries: 100, maxBytes: 3 * one });
  for (let i = 0; i < 5; i++) store.set(`r${i}`, entry(String(i).repeat(100)));
  assert.equal(store.size, 3);
  assert.ok(store.bytes <= 3 * one, `${store.bytes} bytes held`);
  assert.equal(store.get("r0"), undefined);
  assert.equal(store.get("r1"), undefined);
  assert.ok(store.get("r4") !== undefined);
  assert.equal(store.set("huge", entry("y".repeat(4 * one))), false);
  assert.equal(store.get("huge"), undefined);
  assert.equal(store.size, 3, "a refused entry evicts nothing");
  assert.ok(store.delete("r4"));
  assert.equal(store.delete("r4"), false);
  assert.equal(store.bytes, 2 * one);
  assert.throws(() => new ResponseStore({ maxEntries: 0, maxBytes: 10 }), /maxEntries must be a positive integer, got 0/);
});

test("input items: function_call items join the assistant message before them; outputs become tool messages named after their call", () => {
  const c = inputConversation(
    [
      { role: "user", content: "weather?" },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Checking." }] },
      { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { type: "function_call", call_id: "call_2", name: "get_time", arguments: "{}" },
      { type: "function_call_output", call_id: "call_2", output: [{ type: "input_text", text: "noon" }] },
      { type: "function_call_output", call_id: "call_1", output: "sunny" },
    ],
    [],
  );
  assert.deepEqual(c.messages, [
    { role: "user", content: "weather?" },
    {
      role: "assistant",
      content: "Checking.",
      tool_calls: [
        { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
        { id: "call_2", type: "function", function: { name: "get_time", arguments: "{}" } },
      ],
    },
    { role: "tool", tool_call_id: "call_2", name: "get_time", content: "noon" },
    { role: "tool", tool_call_id: "call_1", name: "get_weather", content: "sunny" },
  ]);
  assert.deepEqual(c.sources, ["input[0]", "input[1]", "input[4]", "input[5]"]);
  // An output may answer a call of the stored conversation (previous_response_id).
  const later = inputConversation([{ type: "function_call_output", call_id: "call_1", output: "rain" }], c.messages);
  assert.deepEqual(later.messages, [{ role: "tool", tool_call_id: "call_1", name: "get_weather", content: "rain" }]);
  const bad = (input: unknown, param: string) => assert.throws(() => inputConversation(input, []), (e: unknown) => e instanceof HttpError && e.status === 400 && e.param === param);
  bad([{ type: "function_call", call_id: "c", name: "f", arguments: "{nope" }], "input[0].arguments");
  bad([{ role: "user", content: [{ type: "input_file", file_id: "f" }] }], "input[0].content[0].type");
  bad([{ type: "item_reference", id: "msg_1" }], "input[0].type");
  bad(["text"], "input[0]");
  bad(42, "input");
});

test("the chat parser's fields are named as the Responses request has them", () => {
  const sources = ["instructions", "previous_response_id", "input[0]", "input[2]"];
  assert.equal(responsesParam("messages", sources), "input");
  assert.equal(responsesParam("messages[0]", sources), "instructions");
  assert.equal(responsesParam("messages[3].content", sources), "input[2]");
  assert.equal(responsesParam("max_tokens", sources), "max_output_tokens");
  assert.equal(responsesParam("response_format", sources), "text.format");
  assert.equal(responsesParam("response_format.json_schema", sources), "text.format");
  assert.equal(responsesParam("response_format.json_schema.schema.properties.a", sources), "text.format.schema.properties.a");
  assert.equal(responsesParam("tools[1].function.parameters", sources), "tools[1].parameters");
  assert.equal(responsesParam("temperature", sources), "temperature");
});

test("the output builder: a message, then calls, events in OpenAI's order; whitespace before a call makes no message", () => {
  const events: string[] = [];
  const b = new OutputBuilder(true, (type, f) => events.push(`${type}@${String(f["output_index"])}`));
  b.delta({ content: "\n " });
  b.delta({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "f", arguments: "" } }] });
  b.delta({ tool_calls: [{ index: 0, function: { arguments: '{"x":' } }] });
  b.delta({ tool_calls: [{ index: 0, function: { arguments: "1}" } }] });
  b.delta({ content: "done" });
  b.finish(true);
  assert.deepEqual(events, [
    "response.output_item.added@0",
    "response.function_call_arguments.delta@0",
    "response.function_call_arguments.delta@0",
    "response.function_call_arguments.done@0",
    "response.output_item.done@0",
    "response.output_item.added@1",
    "response.content_part.added@1",
    "response.output_text.delta@1",
    "response.output_text.done@1",
    "response.content_part.done@1",
    "response.output_item.done@1",
  ]);
  assert.deepEqual(b.items.map((i) => [i.type, i.status]), [["function_call", "completed"], ["message", "incomplete"]]);
  assert.deepEqual(assistantMessage(b.items), { role: "assistant", content: "done", tool_calls: [{ id: "call_a", type: "function", function: { name: "f", arguments: '{"x":1}' } }] });
  // Without tools, whitespace is text like any other, and an empty reply is an empty message.
  const plain = new OutputBuilder(false);
  plain.text("\n");
  plain.finish(false);
  assert.deepEqual(plain.items.map((i) => (i.type === "message" ? i.content[0]!.text : "")), ["\n"]);
  const empty = new OutputBuilder(false);
  empty.finish(false);
  assert.deepEqual(empty.items.map((i) => (i.type === "message" ? [i.content[0]!.text, i.status] : [])), [["", "completed"]]);
});

test("an input item list is bounded as chat messages are, and its text (with the instructions) counted; a list of strings is not an item list", () => {
  const items = (n: number, content: unknown = "x") => Array.from({ length: n }, () => ({ role: "user", content }));
  assert.equal(findShapeViolation({ input: items(SHAPE_LIMITS.messages) }, { maxTokenIds: null }), null);
  assert.deepEqual(findShapeViolation({ input: items(SHAPE_LIMITS.messages + 1) }, { maxTokenIds: null })?.param, "input");
  const parts = items(2, Array.from({ length: SHAPE_LIMITS.contentParts }, () => ({ type: "input_text", text: "x" })));
  assert.equal(findShapeViolation({ input: parts }, { maxTokenIds: null })?.param, "input[1].content");
  assert.equal(findShapeViolation({ input: Array.from({ length: 5000 }, () => "text") }, { maxTokenIds: null }), null, "an embeddings input list is not counted as items");
  const long = [{ role: "user", content: "a".repeat(60) }, { type: "function_call_output", call_id: "c", output: "b".repeat(30) }];
  assert.equal(findLongPromptText({ input: long, instructions: "c".repeat(10) }, 100), null);
  assert.deepEqual(findLongPromptText({ input: long, instructions: "c".repeat(11) }, 100), { param: "input", chars: 101 });
  assert.equal(findLongPromptText({ input: "d".repeat(1000) }, 100), null, "a string input is the route's to count (embeddings may truncate it)");
});

// POST /v1/responses end to end: a tiny random-weight Qwen3 with the real
// Qwen3 tokenizer and chat template (Hermes tool format), served by `kvflash
// serve` and driven by the official openai client's responses.create and
// responses.stream. Each reply is checked against the chat route answering the
// same conversation (greedy: the same text and prompt tokens), so a wrong
// translation of input items, instructions, tool calls, tool outputs or a
// previous response shows as a different prompt. Streamed events are checked
// in OpenAI's documented order with consecutive sequence numbers.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Ajv } from "ajv";
import OpenAI from "openai";
import { writeTinyModel } from "../../src/testing/index.js";
import { realTokenizerDir } from "../tokenizer/real-tokenizers.js";
import { type ServerProcess, metric, post, startServer } from "./harness.js";

const MODEL = "tiny-qwen3";
let server: ServerProcess;
let dir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvflash-responses-model-"));
  writeTinyModel(dir, {
    arch: "qwen3",
    seed: 5,
    hiddenSize: 64,
    intermediateSize: 128,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    maxPositionEmbeddings: 4096,
    tieWordEmbeddings: true,
    dtype: "bf16",
    tokenizer: { kind: "copy", dir: realTokenizerDir("qwen3") },
  });
  server = await startServer(["--model", dir, "--served-model-name", MODEL, "--num-gpu-blocks-override", "512", "--block-size", "16"]);
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
  rmSync(dir, { recursive: true, force: true });
});

const WEATHER: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "Weather in a city",
  strict: true,
  parameters: {
    type: "object",
    properties: { city: { enum: ["Paris", "Oslo", "Lima"] }, days: { type: "integer", minimum: 1, maximum: 7 } },
    required: ["city", "days"],
    additionalProperties: false,
  },
};
const validateWeather = new Ajv({ strict: false }).compile(WEATHER.parameters!);

/** The chat route's greedy answer to `messages`: its text, prompt tokens and finish reason. */
async function chat(messages: OpenAI.ChatCompletionMessageParam[], maxTokens: number) {
  const r = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: maxTokens, temperature: 0 });
  return { text: r.choices[0]!.message.content ?? "", promptTokens: r.usage!.prompt_tokens, finish: r.choices[0]!.finish_reason };
}

/** A create body with vLLM's seed (not in the openai types: passed through as the body's extra field). */
function withSeed<T extends OpenAI.Responses.ResponseCreateParamsNonStreaming>(body: T, seed: number): T {
  return { ...body, seed };
}

test("responses.create: text input and instructions give the chat route's greedy reply, usage and status", async () => {
  const r = await server.openai.responses.create({ model: MODEL, instructions: "Answer briefly.", input: "What is the capital of France?", max_output_tokens: 12, temperature: 0 });
  const want = await chat([{ role: "system", content: "Answer briefly." }, { role: "user", content: "What is the capital of France?" }], 12);
  assert.match(r.id, /^resp_[0-9a-f]{32}$/);
  assert.equal(r.object, "response");
  assert.equal(r.model, MODEL);
  assert.equal(r.instructions, "Answer briefly.");
  assert.equal(r.max_output_tokens, 12);
  assert.equal(r.output.length, 1);
  const item = r.output[0]!;
  assert.ok(item.type === "message" && item.role === "assistant" && item.content[0]!.type === "output_text");
  assert.equal(r.output_text, want.text);
  assert.equal(r.usage!.input_tokens, want.promptTokens, "the instructions are a system message, the input a user message");
  assert.equal(r.usage!.total_tokens, r.usage!.input_tokens + r.usage!.output_tokens);
  if (want.finish === "length") {
    assert.equal(r.status, "incomplete");
    assert.deepEqual(r.incomplete_details, { reason: "max_output_tokens" });
    assert.equal(item.status, "incomplete");
    assert.equal(r.usage!.output_tokens, 12);
  } else {
    assert.equal(r.status, "completed");
    assert.equal(r.incomplete_details, null);
  }
});

test("message items: roles, input_text parts and developer messages render as the chat messages they mean", async () => {
  const input: OpenAI.Responses.ResponseInput = [
    { role: "developer", content: "Be terse." },
    { role: "user", content: [{ type: "input_text", text: "Hello" }, { type: "input_text", text: "there" }] },
    { type: "message", role: "assistant", content: "Hi." },
    { role: "user", content: "Name a color." },
  ];
  const r = await server.openai.responses.create({ model: MODEL, input, max_output_tokens: 6, temperature: 0 });
  const want = await chat([{ role: "system", content: "Be terse." }, { role: "user", content: "Hello\nthere" }, { role: "assistant", content: "Hi." }, { role: "user", content: "Name a color." }], 6);
  assert.equal(r.usage!.input_tokens, want.promptTokens);
  assert.equal(r.output_text, want.text);
});

test("responses.stream: the documented events in order, consecutive sequence numbers, deltas that rebuild the non-streamed text", async () => {
  const body = withSeed({ model: MODEL, input: "Tell me a story about a fox.", max_output_tokens: 16 }, 7);
  const whole = await server.openai.responses.create(body);
  const stream = server.openai.responses.stream(body);
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const e of stream) events.push(e);
  const final = await stream.finalResponse();
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  const types = events.map((e) => e.type);
  const deltas = events.filter((e): e is OpenAI.Responses.ResponseTextDeltaEvent => e.type === "response.output_text.delta");
  const last = whole.status === "incomplete" ? "response.incomplete" : "response.completed";
  assert.deepEqual(types, [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    ...deltas.map(() => "response.output_text.delta"),
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    last,
  ]);
  assert.ok(deltas.length >= 2, `a delta per token or so, got ${deltas.length}`);
  const created = events[0] as OpenAI.Responses.ResponseCreatedEvent;
  assert.equal(created.response.status, "in_progress");
  assert.deepEqual(created.response.output, []);
  assert.equal(deltas.map((d) => d.delta).join(""), whole.output_text);
  const done = events.find((e) => e.type === "response.output_text.done") as OpenAI.Responses.ResponseTextDoneEvent;
  assert.equal(done.text, whole.output_text);
  assert.equal(final.output_text, whole.output_text);
  assert.equal(final.id, created.response.id);
  assert.deepEqual(final.usage, whole.usage);
  assert.equal(final.status, whole.status);
});

test("function tools: a required call is a function_call item whose arguments validate; its output goes back as a tool message", async () => {
  const question = "Weather in Paris for three days?";
  const first = await server.openai.responses.create(withSeed({ model: MODEL, input: question, tools: [WEATHER], tool_choice: "required", max_output_tokens: 200 }, 4));
  const calls = first.output.filter((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === "function_call");
  assert.ok(calls.length >= 1, JSON.stringify(first.output));
  assert.equal(first.status, "completed");
  for (const c of calls) {
    assert.equal(c.name, "get_weather");
    assert.match(c.call_id, /^call_[0-9a-f]{24}$/);
    assert.match(c.id!, /^fc_/);
    assert.ok(validateWeather(JSON.parse(c.arguments)), `${c.arguments}: ${JSON.stringify(validateWeather.errors)}`);
  }
  assert.deepEqual(first.tools, [{ ...WEATHER }]);
  // The round trip: the calls as the client got them, then their outputs.
  const input: OpenAI.Responses.ResponseInput = [
    { role: "user", content: question },
    ...calls,
    ...calls.map((c) => ({ type: "function_call_output" as const, call_id: c.call_id, output: "sunny, 21 C" })),
  ];
  const second = await server.openai.responses.create({ model: MODEL, input, tools: [WEATHER], tool_choice: "none", max_output_tokens: 8, temperature: 0 });
  const want = await chat(
    [
      { role: "user", content: question },
      { role: "assistant", content: "", tool_calls: calls.map((c) => ({ id: c.call_id, type: "function" as const, function: { name: c.name, arguments: c.arguments } })) },
      ...calls.map((c) => ({ role: "tool" as const, tool_call_id: c.call_id, content: "sunny, 21 C" })),
    ],
    8,
  );
  // tool_choice "none" still renders the tools; the chat reference has none, so compare prompts without them.
  const noTools = await server.openai.responses.create({ model: MODEL, input, max_output_tokens: 8, temperature: 0 });
  assert.equal(noTools.usage!.input_tokens, want.promptTokens, "the calls and their outputs are in the prompt as chat tool_calls and tool messages");
  assert.equal(noTools.output_text, want.text);
  assert.ok(second.usage!.input_tokens > noTools.usage!.input_tokens, "the tools are rendered too");
  assert.ok(second.output.every((o) => o.type === "message"), "tool_choice none: text");
  // The same round trip through previous_response_id: only the outputs are sent, the stored calls answer them.
  const outputs = calls.map((c) => ({ type: "function_call_output" as const, call_id: c.call_id, output: "sunny, 21 C" }));
  const chained = await server.openai.responses.create({ model: MODEL, previous_response_id: first.id, input: outputs, tools: [WEATHER], tool_choice: "none", max_output_tokens: 8, temperature: 0 });
  assert.equal(chained.usage!.input_tokens, second.usage!.input_tokens);
  assert.equal(chained.output_text, second.output_text);
});

test("a streamed named function call: output_item.added, argument deltas, arguments.done, output_item.done, in order; deltas rebuild the call", async () => {
  const body = withSeed({ model: MODEL, input: "Weather in Oslo?", tools: [WEATHER], tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: 100 }, 2);
  const whole = await server.openai.responses.create(body);
  const stream = server.openai.responses.stream(body);
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const e of stream) events.push(e);
  const types = events.map((e) => e.type);
  const argDeltas = events.filter((e): e is OpenAI.Responses.ResponseFunctionCallArgumentsDeltaEvent => e.type === "response.function_call_arguments.delta");
  assert.deepEqual(types, [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    ...argDeltas.map(() => "response.function_call_arguments.delta"),
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
  ]);
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  const added = events[2] as OpenAI.Responses.ResponseOutputItemAddedEvent;
  assert.ok(added.item.type === "function_call" && added.item.name === "get_weather" && added.item.arguments === "");
  const args = argDeltas.map((d) => d.delta).join("");
  const done = events.find((e) => e.type === "response.function_call_arguments.done") as OpenAI.Responses.ResponseFunctionCallArgumentsDoneEvent;
  assert.equal(done.arguments, args);
  assert.ok(validateWeather(JSON.parse(args)), args);
  const call = whole.output[0] as OpenAI.Responses.ResponseFunctionToolCall;
  assert.equal(whole.output.length, 1);
  assert.equal(args, call.arguments, "seeded: the stream makes the same call");
  const final = await stream.finalResponse();
  assert.equal((final.output[0] as OpenAI.Responses.ResponseFunctionToolCall).arguments, args);
});

test("text.format json_schema: every seeded reply parses and validates against the schema", async () => {
  const schema = { type: "object", properties: { name: { type: "string", maxLength: 12 }, age: { type: "integer", minimum: 0, maximum: 120 } }, required: ["name", "age"], additionalProperties: false };
  const validate = new Ajv({ strict: false }).compile(schema);
  const replies = await Promise.all(
    [1, 2, 3].map((seed) => server.openai.responses.create(withSeed({ model: MODEL, input: "A person as JSON.", text: { format: { type: "json_schema", name: "person", schema, strict: true } }, max_output_tokens: 80 }, seed))),
  );
  for (const r of replies) {
    assert.equal(r.status, "completed", r.output_text);
    assert.ok(validate(JSON.parse(r.output_text)), `${r.output_text}: ${JSON.stringify(validate.errors)}`);
    assert.deepEqual(r.text?.format, { type: "json_schema", name: "person", schema, strict: true });
  }
  const obj = await server.openai.responses.create(withSeed({ model: MODEL, input: "JSON please", text: { format: { type: "json_object" } }, max_output_tokens: 200 }, 3));
  assert.equal(obj.status, "completed", obj.output_text);
  const parsed: unknown = JSON.parse(obj.output_text);
  assert.ok(typeof parsed === "object" && parsed !== null && !Array.isArray(parsed), obj.output_text);
});

test("previous_response_id continues the stored conversation (its instructions are not carried over); retrieve, delete, store: false", async () => {
  const r1 = await server.openai.responses.create({ model: MODEL, instructions: "Be kind.", input: "My name is Ada.", max_output_tokens: 6, temperature: 0, metadata: { run: "1" } });
  const r2 = await server.openai.responses.create({ model: MODEL, previous_response_id: r1.id, input: "What is my name?", max_output_tokens: 6, temperature: 0 });
  assert.equal(r2.previous_response_id, r1.id);
  const want = await chat([{ role: "user", content: "My name is Ada." }, { role: "assistant", content: r1.output_text }, { role: "user", content: "What is my name?" }], 6);
  assert.equal(r2.usage!.input_tokens, want.promptTokens);
  assert.equal(r2.output_text, want.text);
  // A third turn chains through both.
  const r3 = await server.openai.responses.create({ model: MODEL, previous_response_id: r2.id, input: "Thanks.", max_output_tokens: 4, temperature: 0 });
  const want3 = await chat([{ role: "user", content: "My name is Ada." }, { role: "assistant", content: r1.output_text }, { role: "user", content: "What is my name?" }, { role: "assistant", content: r2.output_text }, { role: "user", content: "Thanks." }], 4);
  assert.equal(r3.usage!.input_tokens, want3.promptTokens);

  const got = await server.openai.responses.retrieve(r1.id);
  assert.equal(got.id, r1.id);
  assert.equal(got.output_text, r1.output_text);
  assert.deepEqual(got.metadata, { run: "1" });
  await server.openai.responses.delete(r1.id);
  await assert.rejects(server.openai.responses.retrieve(r1.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(server.openai.responses.create({ model: MODEL, previous_response_id: r1.id, input: "again" }), (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === "previous_response_id");

  const unstored = await server.openai.responses.create({ model: MODEL, input: "secret", max_output_tokens: 2, store: false });
  assert.equal((unstored as unknown as { store: boolean }).store, false);
  await assert.rejects(server.openai.responses.retrieve(unstored.id), (e: unknown) => e instanceof OpenAI.NotFoundError);
  await assert.rejects(server.openai.responses.create({ model: MODEL, previous_response_id: unstored.id, input: "x" }), (e: unknown) => e instanceof OpenAI.BadRequestError && e.param === "previous_response_id");
});

test("what kvflash does not do is a 400 naming the field; the server goes on", async () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ input: "x", reasoning: { effort: "low" } }, "reasoning"],
    [{ input: "x", background: true }, "background"],
    [{ input: "x", tools: [WEATHER, { type: "web_search" }] }, "tools[1].type"],
    [{ input: [{ role: "user", content: [{ type: "input_image", image_url: "http://x/y.png" }] }] }, "input[0].content[0].type"],
    [{ input: [{ type: "reasoning", summary: [] }] }, "input[0].type"],
    [{ input: [{ type: "function_call_output", call_id: "call_nope", output: "1" }] }, "input[0].call_id"],
    [{ input: [{ role: "robot", content: "x" }] }, "input[0].role"],
    [{ input: "x", text: { format: { type: "yaml" } } }, "text.format.type"],
    [{ input: "x", text: { format: { type: "json_schema", name: "s", schema: "nope" } } }, "text.format.schema"],
    [{ input: "x", max_output_tokens: 100_000 }, "max_output_tokens"],
    [{ input: "x", temperature: "hot" }, "temperature"],
    [{ input: "x", tool_choice: { type: "function", name: "nope" }, tools: [WEATHER] }, "tool_choice"],
    [{ input: "x", metadata: { k: 5 } }, "metadata.k"],
    [{ input: "x", truncation: "auto" }, "truncation"],
    [{ input: "x", include: ["message.output_text.logprobs"] }, "include"],
    [{ input: "x", conversation: "conv_1" }, "conversation"],
    [{ instructions: "no input" }, "input"],
    [{ input: [] }, "input"],
  ];
  for (const [body, param] of cases) {
    const r = await post(`${server.url}/v1/responses`, { model: MODEL, ...body });
    assert.equal(r.status, 400, `${JSON.stringify(body)}: ${JSON.stringify(r.body)}`);
    assert.equal(r.body.error.param, param, `${JSON.stringify(body)}: ${r.body.error.message}`);
    assert.ok(r.body.error.message.includes(param), r.body.error.message);
  }
  const big = await post(`${server.url}/v1/responses`, { model: MODEL, input: Array.from({ length: 2049 }, () => ({ role: "user", content: "x" })) });
  assert.equal(big.status, 400);
  assert.equal(big.body.error.param, "input");
  assert.equal(big.body.error.code, "array_above_max_length");
  // 2048 items pass the body's bound; with the instructions the conversation is one message more than a request may have.
  const over = await post(`${server.url}/v1/responses`, { model: MODEL, instructions: "hi", input: Array.from({ length: 2048 }, () => ({ role: "user", content: "x" })) });
  assert.equal(over.status, 400);
  assert.equal(over.body.error.param, "input");
  assert.equal(over.body.error.code, "array_above_max_length", over.body.error.message);
  const bad = await post(`${server.url}/v1/responses`, { model: MODEL, input: "x", text: { format: { type: "json_schema", name: "s", schema: { type: "object", properties: { a: { type: "nonsense" } } } } } });
  assert.equal(bad.status, 400, JSON.stringify(bad.body));
  assert.ok(bad.body.error.param?.startsWith("text.format.schema"), bad.body.error.param ?? "");
  const ok = await server.openai.responses.create({ model: MODEL, input: "still there?", max_output_tokens: 2 });
  assert.equal(ok.usage!.output_tokens, 2);
});

test("a client that leaves a stream has its request aborted; the server goes on", async () => {
  const before = metric(await server.metrics(), "vllm:request_success_total", { finished_reason: "abort" }, MODEL);
  const stream = await server.openai.responses.create({ model: MODEL, input: "Count to a thousand.", max_output_tokens: 2000, temperature: 0, stream: true });
  for await (const e of stream) if (e.type === "response.output_text.delta") break; // leaves: the SDK aborts the request
  const deadline = Date.now() + 5000;
  let m = await server.metrics();
  while (metric(m, "vllm:request_success_total", { finished_reason: "abort" }, MODEL) === before && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    m = await server.metrics();
  }
  assert.equal(metric(m, "vllm:request_success_total", { finished_reason: "abort" }, MODEL), before + 1, "the gone client's request was aborted");
  assert.equal(metric(m, "vllm:num_requests_running", {}, MODEL), 0);
  const ok = await server.openai.responses.create({ model: MODEL, input: "after", max_output_tokens: 2 });
  assert.equal(ok.usage!.output_tokens, 2);
});

test("a stored response's path takes GET and DELETE, and says so in a 405's Allow", async () => {
  const wrong = await post(`${server.url}/v1/responses/resp_x`, {});
  assert.deepEqual([wrong.status, wrong.headers.get("allow")], [405, "GET, DELETE"]);
  const list = await fetch(`${server.url}/v1/responses`);
  assert.deepEqual([list.status, list.headers.get("allow")], [405, "POST"]);
  const missing = await fetch(`${server.url}/v1/responses/resp_missing`, { method: "DELETE" });
  assert.equal(missing.status, 404);
});

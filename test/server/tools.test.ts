// Tool calling end to end: a tiny random-weight Qwen3 with the real Qwen3
// tokenizer (151k byte-level vocabulary) and chat template (Hermes
// <tool_call> format, picked from the template), served by `kvflash serve`
// and driven by the official openai client. tool_choice "required" and a named
// function must yield calls whose arguments validate against the tool's schema
// (ajv); streamed deltas must rebuild the non-streamed calls; tool messages
// must go through the template.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Ajv } from "ajv";
import type OpenAI from "openai";
import { writeTinyModel } from "../../src/testing/index.js";
import { realTokenizerDir } from "../tokenizer/real-tokenizers.js";
import { type ServerProcess, startServer } from "./harness.js";

const MODEL = "tiny-qwen3";
let server: ServerProcess;
let dir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvflash-tools-model-"));
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

const WEATHER: OpenAI.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather in a city",
    parameters: {
      type: "object",
      properties: { city: { enum: ["Paris", "Oslo", "Lima"] }, days: { type: "integer", minimum: 1, maximum: 7 }, unit: { enum: ["C", "F"] } },
      required: ["city", "days"],
      additionalProperties: false,
    },
  },
};
const TIME: OpenAI.ChatCompletionTool = {
  type: "function",
  function: { name: "get_time", parameters: { type: "object", properties: { zone: { enum: ["UTC", "CET"] } }, required: ["zone"], additionalProperties: false } },
};
const tools = [WEATHER, TIME];
const schemas = new Map(tools.map((t) => [t.function.name, new Ajv({ strict: false }).compile(t.function.parameters!)]));
const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Weather in Paris for three days, and the time?" }];

function checkCalls(calls: OpenAI.ChatCompletionMessageFunctionToolCall[] | undefined, seed: number): void {
  assert.ok(calls !== undefined && calls.length >= 1, `seed ${seed}: tool calls`);
  for (const c of calls) {
    assert.match(c.id, /^call_[0-9a-f]{24}$/);
    const validate = schemas.get(c.function.name);
    assert.ok(validate !== undefined, `seed ${seed}: a known function, got ${c.function.name}`);
    assert.ok(validate(JSON.parse(c.function.arguments)), `seed ${seed}: ${c.function.arguments}: ${JSON.stringify(validate.errors)}`);
  }
}

test('tool_choice "required": every seeded reply is tool calls whose arguments validate, finish_reason "tool_calls"', async () => {
  const replies = await Promise.all(
    Array.from({ length: 12 }, (_, seed) => server.openai.chat.completions.create({ model: MODEL, messages, tools, tool_choice: "required", max_tokens: 200, seed })),
  );
  for (const [seed, r] of replies.entries()) {
    const c = r.choices[0]!;
    assert.equal(c.finish_reason, "tool_calls", `seed ${seed}`);
    assert.equal(c.message.content, null);
    checkCalls(c.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[] | undefined, seed);
  }
  const single = await server.openai.chat.completions.create({ model: MODEL, messages, tools, tool_choice: "required", parallel_tool_calls: false, max_tokens: 200, seed: 3 });
  assert.equal(single.choices[0]!.message.tool_calls!.length, 1, "parallel_tool_calls false: one call");
});

test('a named function (parallel_tool_calls left at its default): exactly one call of it, finish_reason "stop" as OpenAI answers; streamed deltas concatenate to it', async () => {
  for (const seed of [1, 2, 3]) {
    const body = { model: MODEL, messages, tools, tool_choice: { type: "function" as const, function: { name: "get_time" } }, max_tokens: 100, seed };
    const full = await server.openai.chat.completions.create(body);
    const calls = full.choices[0]!.message.tool_calls! as OpenAI.ChatCompletionMessageFunctionToolCall[];
    checkCalls(calls, seed);
    assert.deepEqual(calls.map((c) => c.function.name), ["get_time"], `seed ${seed}: one call`);
    assert.equal(full.choices[0]!.finish_reason, "stop", `seed ${seed}`);
    assert.equal(full.choices[0]!.message.content, null, `seed ${seed}: no markup left in content`);

    const stream = await server.openai.chat.completions.create({ ...body, stream: true });
    const streamed: { id: string; name: string; arguments: string }[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const ch = chunk.choices[0];
      if (ch === undefined) continue;
      if (ch.finish_reason) finish = ch.finish_reason;
      for (const d of ch.delta.tool_calls ?? []) {
        if (d.id !== undefined) {
          assert.equal(d.index, streamed.length, "a call's first delta carries its index, id and name");
          streamed.push({ id: d.id, name: d.function!.name!, arguments: d.function!.arguments ?? "" });
        } else streamed[d.index]!.arguments += d.function!.arguments ?? "";
      }
    }
    assert.equal(finish, "stop");
    assert.deepEqual(streamed.map((c) => [c.name, c.arguments]), calls.map((c) => [c.function.name, c.function.arguments]));
  }
});

test('tool results go back through the chat template; "auto" and "none" answer in text', async () => {
  const first = await server.openai.chat.completions.create({ model: MODEL, messages, tools, tool_choice: "required", max_tokens: 200, seed: 9 });
  const call = first.choices[0]!.message.tool_calls![0]!;
  const followUp: OpenAI.ChatCompletionMessageParam[] = [
    ...messages,
    { role: "assistant", content: null, tool_calls: [call] },
    { role: "tool", tool_call_id: call.id, content: "sunny, 21 C" },
  ];
  const auto = await server.openai.chat.completions.create({ model: MODEL, messages: followUp, tools, max_tokens: 12, seed: 9 });
  assert.ok(auto.usage!.prompt_tokens > first.usage!.prompt_tokens, "the tool call and its result are in the prompt");
  const c = auto.choices[0]!;
  assert.ok(c.finish_reason === "length" || c.finish_reason === "stop" || c.finish_reason === "tool_calls");
  if (c.message.tool_calls) checkCalls(c.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[], 9);
  const none = await server.openai.chat.completions.create({ model: MODEL, messages, tools, tool_choice: "none", max_tokens: 8, seed: 9 });
  assert.equal(none.choices[0]!.message.tool_calls, undefined);
});

// The generic tool format on a template that refuses a system message (Mistral
// Instruct's [INST] template, which raises "Only user and assistant roles are
// supported!", as Gemma's raises on a system role): the tools lead the first
// user turn instead, and a tool request through the official openai client is
// answered with calls, not a 400. A tiny random-weight Mistral with the
// synthetic tokenizer, served by `kvflash serve`.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type OpenAI from "openai";
import { writeTinyModel } from "../../src/testing/index.js";
import { type ServerProcess, startServer } from "./harness.js";

const MODEL = "tiny-mistral";
let server: ServerProcess;
let dir: string;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvflash-tools-mistral-"));
  writeTinyModel(dir, { arch: "mistral", seed: 2, hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, maxPositionEmbeddings: 2048, dtype: "bf16", tokenizer: { kind: "synthetic" } });
  server = await startServer(["--model", dir, "--served-model-name", MODEL, "--num-gpu-blocks-override", "256", "--block-size", "16"]);
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
  rmSync(dir, { recursive: true, force: true });
});

const tools: OpenAI.ChatCompletionTool[] = [
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { enum: ["UTC", "CET"] } }, required: ["zone"], additionalProperties: false } } },
];

test("no system role in the template: the tools go into the first user turn; named and required choices give one valid call", async () => {
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What time is it?" }];
  const plain = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 1 });
  for (const tool_choice of ["required", { type: "function", function: { name: "get_time" } }] as const) {
    const r = await server.openai.chat.completions.create({ model: MODEL, messages, tools, tool_choice, parallel_tool_calls: false, max_tokens: 300, seed: 1 });
    const c = r.choices[0]!;
    assert.equal(c.finish_reason, tool_choice === "required" ? "tool_calls" : "stop");
    const calls = c.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
    assert.equal(calls.length, 1);
    assert.equal(calls[0]!.function.name, "get_time");
    assert.ok(["UTC", "CET"].includes((JSON.parse(calls[0]!.function.arguments) as { zone: string }).zone), calls[0]!.function.arguments);
    assert.ok(r.usage!.prompt_tokens > plain.usage!.prompt_tokens + 20, `the tools are in the prompt: ${r.usage!.prompt_tokens} vs ${plain.usage!.prompt_tokens} tokens`);
  }
});

// The high-level API (src/llm/llm.ts) on the embedded default model, checked
// against the server it fronts: chat's greedy text equals what an
// independently started serve() answers for the same body, stream deltas
// concatenate to it, countTokens equals /tokenize, and structured output,
// named tool_choice, cancellation, a bad option, concurrent calls and the
// event loop's responsiveness during a generation each get a case.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ajv } from "ajv";
import { LLM, LLMError, type LoadProgressEvent, type RunningServer, serve } from "../../src/index.js";

let llm: LLM;
let server: RunningServer;
const progress: LoadProgressEvent[] = [];
const HELLO = [{ role: "user", content: "Tell me about the sea." }];

before(async () => {
  // hermes: the default model's template names no tool format; the tool case below needs one.
  llm = await LLM.load({ threads: 1, toolCallParser: "hermes", onProgress: (e) => progress.push(e) });
  server = await serve({ port: 0, threads: 1 });
  await server.ready;
});
after(async () => {
  await llm.close();
  await server.close();
});

async function serverPost(path: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

test("LLM.load() loads the default model and reports load progress in bytes, ending at the total", () => {
  assert.equal(llm.model, "kvflash-default");
  assert.ok(llm.info.maxModelLen > 0);
  const load = progress.filter((e) => e.phase === "load");
  assert.ok(load.length >= 1, `load progress events: ${JSON.stringify(progress)}`);
  assert.ok(progress.every((e) => e.phase === "load"), "a local model downloads nothing");
  const last = load[load.length - 1]!;
  assert.ok(last.total > 1_000_000, `the default model's weights are ~8 MB, got total ${last.total}`);
  assert.equal(last.done, last.total);
  for (let i = 1; i < load.length; i++) assert.ok(load[i]!.done >= load[i - 1]!.done, "progress never goes back");
});

test("chat: greedy text and usage equal the server's answer to the same body; stream deltas concatenate to it", async () => {
  const reply = await llm.chat(HELLO, { maxTokens: 24, temperature: 0, ignoreEos: true });
  const want = await serverPost("/v1/chat/completions", { messages: HELLO, max_tokens: 24, temperature: 0, ignore_eos: true });
  assert.equal(want.status, 200);
  const wantChoice = (want.json["choices"] as { message: { content: string }; finish_reason: string }[])[0]!;
  assert.equal(reply.object, "chat.completion");
  assert.equal(reply.text, wantChoice.message.content);
  assert.equal(reply.choices[0]!.message.content, reply.text);
  assert.equal(reply.choices[0]!.finish_reason, "length");
  assert.deepEqual(reply.usage, want.json["usage"]);
  assert.ok(reply.text.length > 0);

  const deltas: string[] = [];
  let finish: string | null = null;
  for await (const d of llm.stream(HELLO, { maxTokens: 24, temperature: 0, ignoreEos: true })) {
    assert.equal(d.object, "chat.completion.chunk");
    deltas.push(d.text);
    finish = d.choices[0]?.finish_reason ?? finish;
  }
  assert.ok(deltas.length > 2, `streamed in pieces: ${deltas.length}`);
  assert.equal(deltas.join(""), reply.text);
  assert.equal(finish, "length");
});

test("complete and countTokens equal the server's /v1/completions and /tokenize", async () => {
  const c = await llm.complete("Once upon a time", { maxTokens: 16, temperature: 0, ignoreEos: true, logprobs: 2 });
  const want = await serverPost("/v1/completions", { prompt: "Once upon a time", max_tokens: 16, temperature: 0, ignore_eos: true, logprobs: 2 });
  const wantChoice = (want.json["choices"] as { text: string; logprobs: unknown }[])[0]!;
  assert.equal(c.object, "text_completion");
  assert.equal(c.text, wantChoice.text);
  assert.deepEqual(c.choices[0]!.logprobs, wantChoice.logprobs);
  assert.equal(c.usage.completion_tokens, 16);

  const text = "The sea is wide and deep.";
  const n = await llm.countTokens(text);
  assert.equal(n, (await serverPost("/tokenize", { prompt: text })).json["count"]);
  const m = await llm.countTokens(HELLO);
  assert.equal(m, (await serverPost("/tokenize", { messages: HELLO })).json["count"]);
  assert.ok(m > n / 2 && n > 3, `${n} text tokens, ${m} chat tokens`);
});

test("every sampling option maps to its body field: n, seed, penalties, stop, logprobs… answer as the server does", async () => {
  const options = {
    n: 2, seed: 7, temperature: 0.9, topP: 0.95, topK: 40, minP: 0.01, repetitionPenalty: 1.1, presencePenalty: 0.2, frequencyPenalty: 0.1,
    logitBias: { "5": -100 }, stop: [".", "!"], includeStopStrInOutput: true, skipSpecialTokens: true, logprobs: true, topLogprobs: 2, maxCompletionTokens: 20, cacheSalt: "s",
  } as const;
  const body = {
    messages: HELLO, n: 2, seed: 7, temperature: 0.9, top_p: 0.95, top_k: 40, min_p: 0.01, repetition_penalty: 1.1, presence_penalty: 0.2, frequency_penalty: 0.1,
    logit_bias: { "5": -100 }, stop: [".", "!"], include_stop_str_in_output: true, skip_special_tokens: true, logprobs: true, top_logprobs: 2, max_completion_tokens: 20, cache_salt: "s",
  };
  const pick = (choices: readonly { message: unknown; logprobs: unknown; finish_reason: unknown; stop_reason: unknown }[]) => choices.map((c) => [c.message, c.logprobs, c.finish_reason, c.stop_reason]);
  const reply = await llm.chat(HELLO, options);
  const want = await serverPost("/v1/chat/completions", body);
  assert.equal(reply.choices.length, 2);
  assert.deepEqual(pick(reply.choices), pick(want.json["choices"] as never));
  assert.deepEqual(reply.usage, want.json["usage"]);

  // Streamed with streamOptions.includeUsage: per-choice deltas rebuild the choices, the last chunk has the usage.
  const texts = ["", ""];
  let usage: unknown = null;
  for await (const d of llm.stream(HELLO, { ...options, streamOptions: { includeUsage: true } })) {
    if (d.choices.length > 0) texts[d.choices[0]!.index] += d.text;
    if (d.usage) usage = d.usage;
  }
  assert.deepEqual(texts, reply.choices.map((c) => c.message.content));
  assert.deepEqual(usage, reply.usage);

  const c = await llm.complete("Once upon a time", { n: 2, seed: 3, temperature: 0.7, echo: true, logprobs: 1, stop: ["e"], stopTokenIds: [7], maxTokens: 10 });
  const wantC = await serverPost("/v1/completions", { prompt: "Once upon a time", n: 2, seed: 3, temperature: 0.7, echo: true, logprobs: 1, stop: ["e"], stop_token_ids: [7], max_tokens: 10 });
  assert.deepEqual(c.choices, wantC.json["choices"]);
  assert.ok(c.text.startsWith("Once upon a time"), "echo");
});

test("responseFormat json_schema: parsed is an object the schema accepts", async () => {
  const schema = {
    type: "object",
    properties: { name: { type: "string", maxLength: 12 }, age: { type: "integer", minimum: 0, maximum: 120 } },
    required: ["name", "age"],
    additionalProperties: false,
  };
  const obj = await llm.chat(HELLO, { maxTokens: 64, temperature: 0, responseFormat: { type: "json_schema", schema } });
  assert.equal(obj.choices[0]!.finish_reason, "stop", obj.text);
  assert.deepEqual(obj.parsed, JSON.parse(obj.text));
  assert.ok(new Ajv().validate(schema, obj.parsed), `${obj.text} fits the schema`);
});

test("tools with a named toolChoice: one call of that function, arguments valid for its schema", async () => {
  const parameters = { type: "object", properties: { city: { enum: ["Paris", "Oslo"] } }, required: ["city"], additionalProperties: false };
  const reply = await llm.chat([{ role: "user", content: "Weather in Oslo?" }], {
    maxTokens: 200,
    temperature: 0,
    tools: [{ type: "function", function: { name: "get_weather", parameters } }, { type: "function", function: { name: "get_time", parameters: { type: "object" } } }],
    toolChoice: { type: "function", function: { name: "get_weather" } },
  });
  const calls = reply.choices[0]!.message.tool_calls ?? [];
  assert.equal(calls.length, 1, JSON.stringify(reply.choices[0]));
  assert.equal(calls[0]!.function.name, "get_weather");
  assert.ok(new Ajv().validate(parameters, JSON.parse(calls[0]!.function.arguments)), calls[0]!.function.arguments);
});

test("an AbortSignal cancels chat and stream (AbortError), so does leaving a stream early; the engine has nothing in flight after", async () => {
  const body = { maxTokens: 1000, ignoreEos: true, temperature: 0 };
  const controller = new AbortController();
  const pending = llm.chat(HELLO, { ...body, signal: controller.signal });
  await waitFor(() => llm.numInFlight === 1);
  controller.abort();
  await assert.rejects(pending, { name: "AbortError" });
  await waitFor(() => llm.numInFlight === 0);

  const streamAbort = new AbortController();
  let pieces = 0;
  await assert.rejects(
    (async () => {
      for await (const _ of llm.stream(HELLO, { ...body, signal: streamAbort.signal })) if (++pieces === 3) streamAbort.abort();
    })(),
    { name: "AbortError" },
  );
  assert.equal(pieces, 3);
  await waitFor(() => llm.numInFlight === 0);
  await assert.rejects(llm.chat(HELLO, { signal: AbortSignal.abort() }), { name: "AbortError" });

  // Leaving the loop early cancels too.
  let seen = 0;
  for await (const _ of llm.stream(HELLO, body)) if (++seen === 2) break;
  await waitFor(() => llm.numInFlight === 0);
});

test("a bad option is the server's 400 as an LLMError naming the field; the LLM goes on", async () => {
  const e = await llm.chat(HELLO, { temperature: -1 }).then(
    () => assert.fail("temperature -1 was accepted"),
    (err: unknown) => err,
  );
  assert.ok(e instanceof LLMError, String(e));
  assert.equal(e.status, 400);
  assert.equal(e.param, "temperature");
  assert.equal(e.type, "invalid_request_error");
  assert.match(e.message, /temperature/);
  const want = await serverPost("/v1/chat/completions", { messages: HELLO, temperature: -1 });
  assert.deepEqual({ message: e.message, type: e.type, param: e.param, code: e.code }, want.json["error"]);
  // An option name that is not one is refused before any request.
  await assert.rejects(llm.chat(HELLO, { max_tokens: 4 } as object), { name: "ArgumentError", message: /options\.max_tokens is not a chat\(\) option/ });
  assert.equal((await llm.chat(HELLO, { maxTokens: 2, ignoreEos: true })).usage.completion_tokens, 2);
});

test("two concurrent chats both succeed, each with its own greedy answer", async () => {
  const other = [{ role: "user", content: "Name a colour." }];
  let most = 0;
  const watch = setInterval(() => (most = Math.max(most, llm.numInFlight)), 1);
  const [a, b] = await Promise.all([llm.chat(HELLO, { maxTokens: 32, temperature: 0, ignoreEos: true }), llm.chat(other, { maxTokens: 32, temperature: 0, ignoreEos: true })]);
  clearInterval(watch);
  assert.equal(most, 2, "both were in the engine at once (its steps batch them)");
  assert.equal(a.usage.completion_tokens, 32);
  assert.equal(b.usage.completion_tokens, 32);
  assert.equal(a.text, (await llm.chat(HELLO, { maxTokens: 32, temperature: 0, ignoreEos: true })).text);
  assert.equal(b.text, (await llm.chat(other, { maxTokens: 32, temperature: 0, ignoreEos: true })).text);
});

test("the event loop stays responsive during a 64-token generation (a 10 ms timer's worst lag)", async () => {
  let worst = 0;
  let ticks = 0;
  let expected = performance.now() + 10;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - expected);
    expected = now + 10;
    ticks++;
  }, 10);
  const t0 = performance.now();
  const reply = await llm.chat(HELLO, { maxTokens: 64, ignoreEos: true, temperature: 0 });
  const ms = performance.now() - t0;
  clearInterval(timer);
  assert.equal(reply.usage.completion_tokens, 64);
  process.stdout.write(`# event-loop lag during a 64-token chat: worst ${worst.toFixed(1)} ms over ${ticks} ticks, generation ${ms.toFixed(0)} ms\n`);
  assert.ok(ticks > 0, "the timer fired during the generation");
  assert.ok(worst < 500, `worst timer lag ${worst.toFixed(1)} ms`);
});

async function waitFor(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${cond.toString()}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

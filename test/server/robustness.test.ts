// Robustness end to end: malformed JSON, wrong types and out-of-range values
// get a 400 in OpenAI's shape naming the field; an unknown model a 404
// model_not_found (as OpenAI and vLLM answer); n > 1 and prompts beyond the
// context a clear 400; the server keeps serving after each. A full waiting
// queue answers 429; --api-key guards /v1; CORS only with --cors-origin; a
// failed forward fails its requests and the server goes on; SIGTERM drains
// in-flight requests, or cancels them after --shutdown-timeout, and exits 0.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import { type ErrorBody, MODEL, type ServerProcess, faultyModelArgs, metric, modelArgs, post, startServer } from "./harness.js";

let server: ServerProcess;
before(async () => {
  server = await startServer([...modelArgs(), "--max-model-len", "64"]);
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
});

const chat = (extra: Record<string, unknown>) => ({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 2, ...extra });

function assertError(r: { status: number; body: ErrorBody }, status: number, param: string | null, message: RegExp): void {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.deepEqual(Object.keys(r.body.error).sort(), ["code", "message", "param", "type"]);
  assert.equal(r.body.error.param, param);
  assert.match(r.body.error.message, message);
  assert.equal(typeof r.body.error.type, "string");
}

async function stillServes(): Promise<void> {
  const ok = await server.openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "ok?" }], max_tokens: 2, temperature: 0 });
  assert.equal(ok.usage!.completion_tokens, 2);
}

test("malformed JSON and non-object bodies: 400 in OpenAI's shape", async () => {
  const url = `${server.url}/v1/chat/completions`;
  assertError(await post(url, '{"model": "x", "messages": ['), 400, null, /not valid JSON/);
  assertError(await post(url, "[1, 2]"), 400, null, /must be a JSON object, got \[1, 2\]/);
  assertError(await post(url, ""), 400, null, /body is empty/);
  await stillServes();
});

test("wrong types and values: 400 naming the field and the value", async () => {
  const url = `${server.url}/v1/chat/completions`;
  const cases: [Record<string, unknown>, string, RegExp][] = [
    [{ temperature: "hot" }, "temperature", /temperature must be a number, got "hot"/],
    [{ temperature: -1 }, "temperature", /temperature must be ≥ 0, got -1/],
    [{ max_tokens: "10" }, "max_tokens", /max_tokens must be an integer, got "10"/],
    [{ max_tokens: 0 }, "max_tokens", /max_tokens must be ≥ 1, got 0/],
    [{ top_p: 0 }, "top_p", /top_p must be > 0, got 0/],
    [{ top_k: 2.5 }, "top_k", /top_k must be an integer, got 2.5/],
    [{ stop: 5 }, "stop", /stop must be a string or an array of strings, got 5/],
    [{ stream: "yes" }, "stream", /stream must be true or false, got "yes"/],
    [{ logit_bias: { "5": "x" } }, "logit_bias", /logit_bias\["5"\] must be a number/],
    [{ logit_bias: { "99999999": 1 } }, "logit_bias", /logit_bias key must be in \[0, 31999\]/],
    [{ stop_token_ids: [1, "2"] }, "stop_token_ids", /stop_token_ids must be an array of integers/],
    [{ seed: -3 }, "seed", /seed must be an integer in \[0, 2\^53\), got -3/],
    [{ top_logprobs: 2 }, "top_logprobs", /top_logprobs requires logprobs to be true/],
    [{ logprobs: true, top_logprobs: 21 }, "top_logprobs", /top_logprobs must be ≤ 20, got 21/],
    [{ stream_options: { include_usage: true } }, "stream_options", /only allowed when stream is true/],
    [{ stream: true, stream_options: { include_usage: 1 } }, "stream_options.include_usage", /must be true or false, got 1/],
    [{ messages: "hi" }, "messages", /messages must be a non-empty array/],
    [{ messages: [{ content: "no role" }] }, "messages[0]", /must be an object with a string role/],
    [{ messages: [{ role: "user", content: 7 }] }, "messages[0].content", /must be a string or an array of content parts, got 7/],
    [{ messages: [{ role: "assistant", content: "a" }] }, "messages", /chat template cannot render these messages: .*alternate/],
    [{ n: 0 }, "n", /n must be ≥ 1, got 0/],
    [{ n: 2, best_of: 3 }, "best_of", /best_of must equal n \(2\)/],
    [{ tools: { type: "function", function: { name: "f" } } }, "tools", /tools must be an array of functions, got \{/],
    [{ tools: [{ type: "function", function: { name: "f g" } }] }, "tools[0].function.name", /must be 1–64 letters, digits, _ \. or -, got "f g"/],
    [{ tools: [{ type: "function", function: { name: "f" } }], tool_choice: { type: "function", function: { name: "g" } } }, "tool_choice", /names the function "g", which is not among the tools \(f\)/],
    [{ response_format: { type: "xml" } }, "response_format.type", /must be "text", "json_object" or "json_schema", got "xml"/],
    [{ guided_regex: "a", guided_choice: ["b"] }, "guided_choice", /only one structured-output constraint per request, got guided_regex and guided_choice/],
  ];
  for (const [extra, param, message] of cases) assertError(await post(url, chat(extra)), 400, param, message);
  const comp = `${server.url}/v1/completions`;
  assertError(await post(comp, { model: MODEL, prompt: { text: "x" } }), 400, "prompt", /prompt must be a string, an array of token ids/);
  assertError(await post(comp, { model: MODEL, prompt: [1, 2, 40000] }), 400, "prompt", /prompt\[2\] must be a token id in \[0, 32000\), got 40000/);
  assertError(await post(comp, { model: MODEL, prompt: "x", logprobs: true }), 400, "logprobs", /logprobs must be an integer, got true/);
  await stillServes();
});

test("unknown model: 404 model_not_found; the openai client raises it", async () => {
  const r = await post(`${server.url}/v1/chat/completions`, chat({ model: "gpt-4o" }));
  assertError(r, 404, "model", /The model `gpt-4o` does not exist/);
  assert.equal(r.body.error.code, "model_not_found");
  await assert.rejects(server.openai.completions.create({ model: "nope", prompt: "x" }), (e: InstanceType<typeof OpenAI.NotFoundError>) => e.status === 404 && e.code === "model_not_found");
  await assert.rejects(
    server.openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "x" }], temperature: 9000 }),
    (e: InstanceType<typeof OpenAI.BadRequestError>) => e.status === 400 && e.param === "temperature",
  );
  await stillServes();
});

test("a prompt beyond the context and max_tokens beyond what is left: 400 context_length_exceeded", async () => {
  const long = "word ".repeat(200);
  const r = await post(`${server.url}/v1/completions`, { model: MODEL, prompt: long });
  assertError(r, 400, "prompt", /maximum context length is 64 tokens. However, your prompt has (more than )?\d+ tokens/);
  assert.equal(r.body.error.code, "context_length_exceeded");
  assertError(await post(`${server.url}/v1/chat/completions`, chat({ messages: [{ role: "user", content: long }] })), 400, "messages", /maximum context length is 64/);
  assertError(await post(`${server.url}/v1/completions`, { model: MODEL, prompt: "short", max_tokens: 100 }), 400, "max_tokens", /max_tokens is too large: 100/);
  await stillServes();
});

test("unknown routes 404, wrong methods 405, no CORS headers by default", async () => {
  const nope = await fetch(`${server.url}/v1/nope`);
  assert.equal(nope.status, 404);
  assert.equal(((await nope.json()) as ErrorBody).error.type, "not_found_error");
  const wrong = await fetch(`${server.url}/v1/chat/completions`);
  assert.deepEqual([wrong.status, wrong.headers.get("allow")], [405, "POST"]);
  const health = await fetch(`${server.url}/health`, { headers: { origin: "http://elsewhere.example" } });
  assert.equal(health.headers.get("access-control-allow-origin"), null);
});

test("a full waiting queue answers 429; --api-key guards /v1 and the tokenizer routes; --cors-origin adds CORS", { timeout: 60_000 }, async () => {
  const s = await startServer([...modelArgs(), "--max-num-seqs", "1", "--max-waiting-requests", "1", "--api-key", "sekret", "--cors-origin", "http://app.example"], { apiKey: "sekret" });
  try {
    const anonymous = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "wrong", maxRetries: 0 });
    await assert.rejects(anonymous.models.list(), (e: InstanceType<typeof OpenAI.AuthenticationError>) => e.status === 401);
    assert.equal((await post(`${s.url}/tokenize`, { prompt: "x" })).status, 401);
    assert.equal((await fetch(`${s.url}/health`)).status, 200, "health needs no key");
    const models = await fetch(`${s.url}/v1/models`, { headers: { authorization: "Bearer sekret", origin: "http://app.example" } });
    assert.equal(models.status, 200);
    assert.equal(models.headers.get("access-control-allow-origin"), "http://app.example");
    const preflight = await fetch(`${s.url}/v1/chat/completions`, { method: "OPTIONS", headers: { origin: "http://app.example", "access-control-request-method": "POST" } });
    assert.equal(preflight.status, 204);
    assert.match(preflight.headers.get("access-control-allow-headers")!, /authorization/);

    const body = { model: MODEL, messages: [{ role: "user" as const, content: "long" }], max_tokens: 2000, temperature: 0.8, stream: true as const, ignore_eos: true };
    const running = await s.openai.chat.completions.create(body);
    const it = running[Symbol.asyncIterator]();
    await it.next(); // the first request runs
    const waiting = s.openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "queued" }], max_tokens: 3, temperature: 0 });
    await new Promise((r) => setTimeout(r, 100)); // let the second request reach the queue
    const full = await post(`${s.url}/v1/chat/completions`, { ...body, stream: false, max_tokens: 2 }, { authorization: "Bearer sekret" });
    assertError(full, 429, null, /The server is busy: the waiting queue is full \(1 requests\)/);
    assert.equal(full.body.error.code, "rate_limit_exceeded");
    assert.equal(full.headers.get("retry-after"), "1", "a 429 says when to retry");
    running.controller.abort();
    assert.equal((await waiting).usage!.completion_tokens, 3, "the queued request runs once the first is gone");
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test("a failed forward fails its requests with a 500 and the server goes on serving", { timeout: 60_000 }, async () => {
  const failToken = 1234;
  const s = await startServer(faultyModelArgs(failToken));
  try {
    const bad = await post(`${s.url}/v1/completions`, { model: MODEL, prompt: [1, 50, failToken, 60], max_tokens: 4 });
    assertError(bad, 500, null, /forward failed: injected failure: the batch contains token 1234/);
    const stream = await fetch(`${s.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, prompt: [1, failToken], max_tokens: 4, stream: true }),
    });
    const text = await stream.text();
    assert.match(text, /^data: \{"error":\{"message":"forward failed: injected failure/m, "the stream carries the error");
    assert.ok(text.endsWith("data: [DONE]\n\n"));
    const ok = await s.openai.completions.create({ model: MODEL, prompt: "fine", max_tokens: 5, temperature: 0 });
    assert.equal(ok.usage!.completion_tokens, 5);
    const m = await s.metrics();
    assert.equal(metric(m, "kvflash:failed_forwards_total"), 2);
    assert.equal(metric(m, "vllm:request_success_total", { finished_reason: "error" }), 2);
    assert.equal(metric(m, "kvflash:num_free_kv_blocks"), metric(m, "kvflash:num_kv_blocks"));
  } finally {
    assert.equal(await s.stop(), 0);
  }
});

test("SIGTERM lets an in-flight stream finish, refuses new requests, and exits 0", { timeout: 60_000 }, async () => {
  const s = await startServer(modelArgs());
  const stream = await s.openai.completions.create({ model: MODEL, prompt: "drain", max_tokens: 400, temperature: 0, stream: true });
  const it = stream[Symbol.asyncIterator]();
  let text = (await it.next()).value!.choices[0]!.text;
  const code = s.stop("SIGTERM");
  let finish: string | null = null;
  for (let r = await it.next(); !r.done; r = await it.next()) {
    text += r.value.choices[0]?.text ?? "";
    finish = r.value.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, "length", "the in-flight request completed");
  assert.equal(await code, 0);
  assert.match(s.stderr(), /SIGTERM: draining 1 request\(s\)/);
  await assert.rejects(fetch(`${s.url}/health`), "the port is closed");
});

test("SIGTERM past --shutdown-timeout cancels what is left and exits 0", { timeout: 60_000 }, async () => {
  const s = await startServer([...modelArgs(), "--shutdown-timeout", "0"]);
  const res = await fetch(`${s.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt: "endless", max_tokens: 2000, ignore_eos: true, stream: true }),
  });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  await reader.read();
  const code = s.stop("SIGTERM");
  let text = "";
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += Buffer.from(r.value).toString("utf8");
  assert.match(text, /"error":\{"message":"the engine stopped"/);
  assert.equal(await code, 0);
});

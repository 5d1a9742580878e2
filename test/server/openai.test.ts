// The OpenAI API end to end, with the official `openai` client against a real
// `kvflash serve` process: chat and completions, streaming and not, usage,
// logprobs, stop strings, several prompts in one completion request, the
// models list, /tokenize and /detokenize, and the metrics they leave behind.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { MODEL, type ServerProcess, metric, modelArgs, post, startServer } from "./harness.js";

let server: ServerProcess;
before(async () => {
  server = await startServer(modelArgs());
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
});

const messages = [
  { role: "system" as const, content: "You are terse." },
  { role: "user" as const, content: "Name three colours." },
];

test("chat: a streamed greedy reply equals the non-streamed one, chunk by chunk, with usage last", async () => {
  const full = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 0 });
  assert.equal(full.object, "chat.completion");
  assert.match(full.id, /^chatcmpl-/);
  const choice = full.choices[0]!;
  assert.equal(choice.message.role, "assistant");
  assert.ok(choice.message.content!.length > 0);
  assert.ok(choice.finish_reason === "length" || choice.finish_reason === "stop");
  const tokens = await post<{ count: number }>(`${server.url}/tokenize`, { messages });
  assert.equal(full.usage!.prompt_tokens, tokens.body.count);
  assert.equal(full.usage!.total_tokens, full.usage!.prompt_tokens + full.usage!.completion_tokens);

  const stream = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = "";
  let role: string | undefined;
  let finish: string | null = null;
  let usage = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, "chat.completion.chunk");
    if (chunk.usage) {
      assert.deepEqual(chunk.choices, [], "the usage chunk has no choices");
      usage = chunk.usage;
      continue;
    }
    assert.equal(chunk.usage, null, "include_usage: every other chunk has usage null");
    const c = chunk.choices[0]!;
    role ??= c.delta.role;
    text += c.delta.content ?? "";
    if (c.finish_reason) finish = c.finish_reason;
  }
  assert.equal(role, "assistant");
  assert.equal(text, choice.message.content);
  assert.equal(finish, choice.finish_reason);
  assert.deepEqual(usage, { ...full.usage, prompt_tokens_details: { cached_tokens: usage!.prompt_tokens_details!.cached_tokens } });
  assert.ok(chunks >= 3);
});

test("completions: text prompt, token-id prompt, several prompts, echo, streaming; the same greedy text each way", async () => {
  const prompt = "The quick brown fox";
  const full = await server.openai.completions.create({ model: MODEL, prompt, max_tokens: 10, temperature: 0 });
  assert.equal(full.object, "text_completion");
  const text = full.choices[0]!.text;
  assert.equal(full.usage!.completion_tokens, 10);

  const ids = (await post<{ tokens: number[] }>(`${server.url}/tokenize`, { prompt })).body.tokens;
  const byIds = await server.openai.completions.create({ model: MODEL, prompt: ids, max_tokens: 10, temperature: 0 });
  assert.equal(byIds.choices[0]!.text, text);

  const two = await server.openai.completions.create({ model: MODEL, prompt: [prompt, "Hello"], max_tokens: 10, temperature: 0 });
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  assert.equal(two.choices[0]!.text, text);
  assert.equal(two.usage!.completion_tokens, 20);

  const echo = await server.openai.completions.create({ model: MODEL, prompt, max_tokens: 10, temperature: 0, echo: true });
  assert.equal(echo.choices[0]!.text, prompt + text);

  const stream = await server.openai.completions.create({ model: MODEL, prompt, max_tokens: 10, temperature: 0, stream: true });
  let streamed = "";
  for await (const chunk of stream) streamed += chunk.choices[0]?.text ?? "";
  assert.equal(streamed, text);
});

test("logprobs: chat top_logprobs and completions logprobs, one entry per generated token", async () => {
  const chat = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 3 });
  const content = chat.choices[0]!.logprobs!.content!;
  assert.equal(content.length, chat.usage!.completion_tokens);
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 3);
    assert.equal(entry.token, entry.top_logprobs[0]!.token, "greedy: the chosen token is the most likely");
    assert.ok(entry.logprob <= 0);
    assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, "utf8")]);
  }
  assert.equal(content.map((e) => e.token).join(""), chat.choices[0]!.message.content);

  const comp = await server.openai.completions.create({ model: MODEL, prompt: "Once upon", max_tokens: 4, temperature: 0, logprobs: 2 });
  const lp = comp.choices[0]!.logprobs!;
  assert.equal(lp.tokens!.length, 4);
  assert.equal(lp.token_logprobs!.length, 4);
  assert.ok(lp.top_logprobs!.every((top) => Object.keys(top).length >= 2));
  assert.equal(lp.tokens!.join(""), comp.choices[0]!.text);
});

test("stop strings are trimmed and reported as stop_reason; a seeded sample repeats", async () => {
  const base = await server.openai.completions.create({ model: MODEL, prompt: "Numbers:", max_tokens: 16, temperature: 0 });
  const text = base.choices[0]!.text;
  const stop = text.slice(6, 9);
  assert.ok(stop.length === 3 && text.indexOf(stop) >= 1, `a stop string inside ${JSON.stringify(text)}`);
  const stopped = await server.openai.completions.create({ model: MODEL, prompt: "Numbers:", max_tokens: 16, temperature: 0, stop: [stop] });
  const c = stopped.choices[0]! as (typeof stopped.choices)[0] & { stop_reason?: string };
  assert.equal(c.text, text.slice(0, text.indexOf(stop)));
  assert.equal(c.finish_reason, "stop");
  assert.equal(c.stop_reason, stop);

  const sample = () => server.openai.completions.create({ model: MODEL, prompt: "Numbers:", max_tokens: 12, temperature: 1.0, top_p: 0.9, seed: 1234 });
  const [a, b] = await Promise.all([sample(), sample()]);
  assert.equal(a.choices[0]!.text, b.choices[0]!.text);
});

test("models, tokenize / detokenize, and the metrics these requests left", async () => {
  const list = await server.openai.models.list();
  assert.deepEqual(list.data.map((m) => [m.id, m.object, m.owned_by]), [[MODEL, "model", "kvflash"]]);
  const tok = await post<{ tokens: number[]; count: number; max_model_len: number }>(`${server.url}/tokenize`, { prompt: "Hello world", add_special_tokens: false });
  assert.equal(tok.status, 200);
  assert.equal(tok.body.count, tok.body.tokens.length);
  assert.ok(tok.body.max_model_len > 0);
  const detok = await post<{ prompt: string }>(`${server.url}/detokenize`, { tokens: tok.body.tokens });
  assert.equal(detok.body.prompt, "Hello world");

  const m = await server.metrics();
  assert.ok(metric(m, "vllm:request_success_total", { finished_reason: "length" }) > 0);
  assert.ok(metric(m, "vllm:generation_tokens_total") > 0);
  assert.ok(metric(m, "vllm:prompt_tokens_total") > 0);
  assert.ok(metric(m, "vllm:prefix_cache_queries_total") > 0);
  assert.ok(metric(m, "vllm:prefix_cache_hits_total") > 0, "the same prompts were sent more than once");
  assert.ok(metric(m, "vllm:time_to_first_token_seconds_count") > 0);
  assert.ok(metric(m, "vllm:inter_token_latency_seconds_count") > 0);
  assert.equal(metric(m, "vllm:e2e_request_latency_seconds_count"), metric(m, "vllm:e2e_request_latency_seconds_bucket", { le: "+Inf" }));
  assert.equal(metric(m, "vllm:num_requests_running"), 0);
  assert.equal(metric(m, "vllm:kv_cache_usage_perc"), 0);
});

test("a generative model answers /v1/embeddings, /v1/rerank and /v1/score with a 400 naming the model, and goes on", async () => {
  const r = await post(`${server.url}/v1/embeddings`, { model: MODEL, input: "hello" });
  assert.equal(r.status, 400);
  assert.equal(r.body.error.param, "model");
  assert.match(r.body.error.message, /does not support the Embeddings API/);
  assert.match(r.body.error.message, /--task embed/);
  for (const [path, body, api] of [["/v1/rerank", { model: MODEL, query: "a", documents: ["b"] }, "Rerank"], ["/v1/score", { model: MODEL, text_1: "a", text_2: "b" }, "Score"]] as const) {
    const s = await post(`${server.url}${path}`, body);
    assert.equal(s.status, 400, path);
    assert.equal(s.body.error.param, "model");
    assert.match(s.body.error.message, new RegExp(`\`${MODEL}\` does not support the ${api} API: it is a generative model`));
  }
  const c = await server.openai.completions.create({ model: MODEL, prompt: "Hi", max_tokens: 2 });
  assert.equal(c.choices.length, 1);
});

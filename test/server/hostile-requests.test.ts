// A hostile client against one server (issue #32 items 2 and 5): each request
// below once stalled /health for seconds or built a response of tens of MB.
// Each is now refused by a bound checked before any work (a 400 naming the
// field and its count) or done off the HTTP thread; after each case:
//   - /health answered within 1 s all through the attack;
//   - an unrelated stream kept producing tokens while it ran;
//   - a normal structured-output request still succeeds.
// Attacks are scaled down where the bound refuses them at once anyway (300k
// messages rather than 1M), but every one is past its bound by far.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { SHAPE_LIMITS } from "../../src/request-shape.js";
import { type ErrorBody, MODEL, type ServerProcess, modelArgs, post, startServer } from "./harness.js";

let server: ServerProcess;
before(async () => {
  server = await startServer(modelArgs());
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
});

/** Polls /health every 20 ms until stopped; resolves with the slowest answer's time (ms). */
function watchHealth(stopped: () => boolean): Promise<number> {
  return (async () => {
    let worst = 0;
    while (!stopped()) {
      const t0 = performance.now();
      const res = await fetch(`${server.url}/health`, { signal: AbortSignal.timeout(5000) });
      await res.arrayBuffer();
      assert.equal(res.status, 200);
      worst = Math.max(worst, performance.now() - t0);
      await new Promise((r) => setTimeout(r, 20));
    }
    return worst;
  })();
}

/** An unrelated stream; counts its chunks until stopped. */
async function unrelatedStream(started: () => void, stopped: () => boolean): Promise<number[]> {
  const controller = new AbortController();
  const res = await fetch(`${server.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt: "a stream that goes on", max_tokens: 1900, ignore_eos: true, stream: true }),
    signal: controller.signal,
  });
  const reader = res.body!.getReader();
  await reader.read();
  started();
  const times: number[] = [];
  while (!stopped()) {
    const r = await reader.read();
    if (r.done) break;
    times.push(performance.now());
  }
  controller.abort();
  return times;
}

/**
 * Runs `attack` while /health is polled and a stream runs; checks the three
 * liveness rules and returns what the attack resolved with. Big bodies are
 * JSON text built before (building them here would stall this process's own
 * /health polling).
 */
async function underAttack<T>(attack: () => Promise<T>): Promise<T> {
  let stop = false;
  let streaming!: () => void;
  const streamStarted = new Promise<void>((r) => (streaming = r));
  const stream = unrelatedStream(streaming, () => stop);
  await streamStarted;
  const health = watchHealth(() => stop);
  const t0 = performance.now();
  let value: T;
  try {
    value = await attack();
    await new Promise((r) => setTimeout(r, 100));
  } finally {
    stop = true;
  }
  const t1 = performance.now();
  const worst = await health;
  const chunks = (await stream).filter((t) => t >= t0 && t <= t1);
  assert.ok(worst < 1000, `/health took ${Math.round(worst)} ms to answer during the attack`);
  assert.ok(chunks.length > 0, "the unrelated stream produced tokens during the attack");
  const json = await server.openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "json please" }], max_tokens: 8, response_format: { type: "json_object" } });
  assert.ok(json.choices[0]!.message.content!.length > 0, "a structured-output request still succeeds");
  return value;
}

function refused(r: { status: number; body: ErrorBody }, param: string, message: RegExp): void {
  assert.equal(r.status, 400, JSON.stringify(r.body).slice(0, 300));
  assert.equal(r.body.error.param, param);
  assert.match(r.body.error.message, message);
}

const chat = `/v1/chat/completions`;

test("a chat of 300k messages the template would skip (4 MB): refused in the parsing worker", async () => {
  const messages = Array.from({ length: 300_000 }, () => ({ role: "system", content: "" }));
  messages.push({ role: "user", content: "hi" });
  const body = JSON.stringify({ model: MODEL, messages, max_tokens: 1 });
  const r = await underAttack(() => post(`${server.url}${chat}`, body));
  refused(r, "messages", /^messages has 300001 messages, more than the 2048 one request may have$/);
  assert.equal(r.body.error.code, "array_above_max_length");
});

test("2049 messages in a small body: refused on the HTTP thread before rendering; 2048 render in a worker", async () => {
  const messages = (n: number) => Array.from({ length: n }, (_, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: "ok" }));
  refused(await post(`${server.url}${chat}`, { model: MODEL, messages: messages(SHAPE_LIMITS.messages + 1), max_tokens: 1 }), "messages", /has 2049 messages/);
  const body = JSON.stringify({ model: MODEL, messages: messages(SHAPE_LIMITS.messages - 1), max_tokens: 1 });
  const r = await underAttack(() => post(`${server.url}${chat}`, body));
  // Rendered (in a worker) and encoded: far more tokens than the 2048 context.
  refused(r, "messages", /maximum context length is 2048 tokens/);
  const parts = [{ role: "user", content: Array.from({ length: 2100 }, () => ({ type: "text", text: "x" })) }];
  refused(await post(`${server.url}${chat}`, { model: MODEL, messages: parts }), "messages[0].content", /more than 2048 content parts/);
});

test("/detokenize and a completion prompt of 1M ids: refused in the parsing worker; the context's worth is decoded in a worker", async () => {
  const tokens = Array.from({ length: 1_000_000 }, (_, i) => 100 + (i % 1000));
  const body = JSON.stringify({ model: MODEL, tokens });
  const r = await underAttack(() => post(`${server.url}/detokenize`, body));
  refused(r, "tokens", /^tokens has 1000000 token ids, more than this model's context \(max_model_len 2048\) holds$/);
  refused(await post(`${server.url}/detokenize`, { tokens: tokens.slice(0, 2049) }), "tokens", /has 2049 token ids/);
  // The same ids as a completion prompt: refused with the count, before a single id is checked on the HTTP thread.
  const prompt = JSON.stringify({ model: MODEL, prompt: tokens, max_tokens: 1 });
  refused(await underAttack(() => post(`${server.url}/v1/completions`, prompt)), "prompt", /^prompt has 1000000 token ids, more than this model's context \(max_model_len 2048\) holds$/);
  refused(await post(`${server.url}/v1/completions`, { prompt: ["a", tokens] }), "prompt[1]", /has 1000000 token ids/);
  const ok = await post<{ prompt: string }>(`${server.url}/detokenize`, { tokens: tokens.slice(0, 2048) });
  assert.equal(ok.status, 200);
  assert.ok(ok.body.prompt.length > 2048);
});

test("a structural_tag of 5000 tags, and 1000 tools with tool_choice required: refused before any grammar work", async () => {
  const tags = Array.from({ length: 5000 }, (_, i) => ({ begin: `<f${i}>`, schema: { type: "object" }, end: `</f${i}>` }));
  const tag = { type: "structural_tag", structures: tags, triggers: ["<f"] };
  const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "x" }], max_tokens: 4, structured_outputs: { structural_tag: tag } });
  const r = await underAttack(() => post(`${server.url}${chat}`, body));
  refused(r, "structured_outputs.structural_tag", /has more than 128 tags, the most one request may have$/);
  // As JSON text, the same.
  refused(await post(`${server.url}${chat}`, { model: MODEL, messages: [{ role: "user", content: "x" }], structured_outputs: { structural_tag: JSON.stringify(tag) } }), "structured_outputs.structural_tag", /more than 128/);
  const tools = Array.from({ length: 1000 }, (_, i) => ({ type: "function", function: { name: `f${i}`, parameters: { type: "object", properties: { a: { type: "string" } } } } }));
  const toolsBody = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "x" }], tools, tool_choice: "required", max_tokens: 4 });
  const t = await underAttack(() => post(`${server.url}${chat}`, toolsBody));
  refused(t, "tools", /^tools has 1000 tools, more than the 128 one request may have$/);
});

test("logit_bias with 300k entries (5 MB) is refused in the parsing worker; 301 on the HTTP thread", async () => {
  const bias = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [String(i), -1]));
  const body = JSON.stringify({ model: MODEL, prompt: "x", max_tokens: 1, logit_bias: bias(300_000) });
  const r = await underAttack(() => post(`${server.url}/v1/completions`, body));
  refused(r, "logit_bias", /^logit_bias has 300000 entries, more than the 300 one request may have$/);
  refused(await post(`${server.url}/v1/completions`, { model: MODEL, prompt: "x", logit_bias: bias(301) }), "logit_bias", /has 301 entries/);
  const ok = await post(`${server.url}/v1/completions`, { model: MODEL, prompt: "x", max_tokens: 1, logit_bias: bias(300) });
  assert.equal(ok.status, 200);
});

test("n 128 × top_logprobs 20 × 900 tokens, non-streamed: refused before it runs; 128 prompts × n 128: refused before tokenizing", async () => {
  const r = await underAttack(() =>
    post(`${server.url}${chat}`, { model: MODEL, messages: [{ role: "user", content: "x" }], n: 128, max_tokens: 900, logprobs: true, top_logprobs: 20 }),
  );
  refused(r, "top_logprobs", /^top_logprobs 20 with n 128 and max_tokens up to 900 asks for 2419200 logprob entries in one response, more than the 65536 a non-streamed response may hold; send stream: true/);
  const c = await post(`${server.url}/v1/completions`, { model: MODEL, prompt: "x", n: 4, max_tokens: 900, logprobs: 20 });
  refused(c, "logprobs", /asks for 75600 logprob entries/);
  const many = await underAttack(() => post(`${server.url}/v1/completions`, { model: MODEL, prompt: Array.from({ length: 128 }, (_, i) => `p${i}`), n: 128, max_tokens: 4 }));
  refused(many, "n", /^n is 128 for 128 prompts: 16384 choices, more than the 128 one request may have/);
  // Within the bound, a non-streamed response with logprobs is built as before.
  const ok = await server.openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "x" }], n: 2, max_tokens: 8, logprobs: true, top_logprobs: 5 });
  assert.equal(ok.choices.length, 2);
  assert.equal(ok.choices[0]!.logprobs!.content!.length, ok.usage!.completion_tokens / 2);
});

test("a non-streamed response with n 2 × top_logprobs 20 × 390 tokens of logprobs is built in slices while /health answers", { timeout: 120_000 }, async () => {
  const r = await underAttack(() =>
    post<{ choices: { logprobs: { content: { top_logprobs: unknown[] }[] } }[] }>(`${server.url}${chat}`, {
      model: MODEL,
      messages: [{ role: "user", content: "x" }],
      n: 2,
      max_tokens: 390,
      ignore_eos: true,
      logprobs: true,
      top_logprobs: 20,
    }),
  );
  assert.equal(r.status, 200);
  assert.equal(r.body.choices.length, 2);
  for (const c of r.body.choices) {
    assert.equal(c.logprobs.content.length, 390);
    assert.equal(c.logprobs.content[389]!.top_logprobs.length, 20);
  }
});

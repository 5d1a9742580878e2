// `kvflash serve` with no --model (what `npm start` runs): the embedded default
// model through the decoder, ready to answer a chat request; and /health and the
// API while a model is still loading.
import assert from "node:assert/strict";
import { test } from "node:test";
import { faultyModelArgs, post, startServer, waitHealthy } from "./harness.js";

test("without --model the server serves the embedded default model as kvflash-default", { timeout: 60_000 }, async () => {
  const server = await startServer([]);
  try {
    assert.match(server.stderr(), /loading the embedded default model/);
    assert.deepEqual((await server.openai.models.list()).data.map((m) => m.id), ["kvflash-default"]);
    const r = await server.openai.chat.completions.create({
      model: "kvflash-default",
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 8,
      temperature: 0,
      ignore_eos: true,
    } as Parameters<typeof server.openai.chat.completions.create>[0] & { stream?: false });
    assert.equal(r.choices[0]!.finish_reason, "length");
    assert.equal(r.usage!.completion_tokens, 8);
    assert.ok(r.usage!.prompt_tokens > 3, `the chat template wraps the message: ${r.usage!.prompt_tokens} prompt tokens`);
    assert.equal(typeof r.choices[0]!.message.content, "string");
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("while the model loads: /health is 503 with the progress, the API 503 naming it; then 200", { timeout: 60_000 }, async () => {
  const server = await startServer(faultyModelArgs(-1, {}, 4000), { waitReady: false });
  try {
    // Until the worker has started and reported, the progress is 0 of unknown.
    let body: unknown;
    for (;;) {
      const health = await fetch(`${server.url}/health`);
      assert.equal(health.status, 503);
      body = await health.json();
      if ((body as { bytes_total: number | null }).bytes_total !== null) break;
      assert.deepEqual(body, { status: "loading", progress: 0, bytes_loaded: 0, bytes_total: null });
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.deepEqual(body, { status: "loading", progress: 0.25, bytes_loaded: 1, bytes_total: 4 });
    const early = await post<{ error: { message: string } }>(`${server.url}/v1/completions`, { model: "kvflash-test", prompt: "Hi", max_tokens: 2 });
    assert.equal(early.status, 503);
    assert.match(early.body.error.message, /the model is still loading \(25%\)/);
    await waitHealthy(server.url, server.stderr);
    const late = await post<{ choices: { text: string }[] }>(`${server.url}/v1/completions`, { model: "kvflash-test", prompt: "Hi", max_tokens: 2 });
    assert.equal(late.status, 200);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

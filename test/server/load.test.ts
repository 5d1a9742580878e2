// Many clients at once, end to end through the openai client: 32 concurrent
// streams each equal to the same request run alone; a KV pool too small for
// every request at once (preemptions, and every output still correct); 100
// streams aborted mid-way leave every KV block free.
import assert from "node:assert/strict";
import { test } from "node:test";
import type OpenAI from "openai";
import type { ChatCompletionCreateParamsStreaming } from "openai/resources/chat/completions";
import { MODEL, type ServerProcess, metric, modelArgs, startServer, waitMetrics } from "./harness.js";

const prompts = Array.from({ length: 32 }, (_, i) => `Request ${i}: tell me about ${["cats", "rivers", "stars", "bread"][i % 4]} number ${i * 7}.`);

async function streamText(openai: OpenAI, content: string, maxTokens: number): Promise<{ text: string; finish: string | null }> {
  const stream = await openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content }], max_tokens: maxTokens, temperature: 0, stream: true });
  let text = "";
  let finish: string | null = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? "";
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { text, finish };
}

async function alone(server: ServerProcess, maxTokens: number): Promise<string[]> {
  const out: string[] = [];
  for (const p of prompts) out.push((await streamText(server.openai, p, maxTokens)).text);
  return out;
}

test("32 concurrent greedy streams all complete, each equal to the request run alone", { timeout: 120_000 }, async () => {
  const server = await startServer(modelArgs());
  try {
    const want = await alone(server, 16);
    const got = await Promise.all(prompts.map((p) => streamText(server.openai, p, 16)));
    got.forEach((g, i) => {
      assert.equal(g.text, want[i], `request ${i}`);
      assert.ok(g.finish === "length" || g.finish === "stop");
    });
    const m = await server.metrics();
    assert.equal(metric(m, "vllm:request_success_total", { finished_reason: "length" }) + metric(m, "vllm:request_success_total", { finished_reason: "stop" }), 64);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("a KV pool too small for all requests at once: preemptions, and every request still completes correctly", { timeout: 120_000 }, async () => {
  // 16 requests of ~40 tokens in 4-token blocks need ~160 blocks at once; the pool has 48.
  const server = await startServer([...modelArgs({ numBlocks: 48, blockSize: 4 }), "--max-num-seqs", "16"]);
  try {
    const subset = prompts.slice(0, 16);
    const want: string[] = [];
    for (const p of subset) want.push((await streamText(server.openai, p, 24)).text);
    const before = metric(await server.metrics(), "vllm:num_preemptions_total");
    assert.equal(before, 0, "one request at a time fits");
    const got = await Promise.all(subset.map((p) => streamText(server.openai, p, 24)));
    got.forEach((g, i) => assert.equal(g.text, want[i], `request ${i}`));
    const m = await server.metrics();
    assert.ok(metric(m, "vllm:num_preemptions_total") > 0, "expected preemptions");
    assert.equal(metric(m, "kvflash:num_free_kv_blocks"), 48);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

test("100 streams aborted mid-way: every request is cancelled and every KV block is free", { timeout: 120_000 }, async () => {
  const server = await startServer(modelArgs({ numBlocks: 2048, blockSize: 16 }));
  try {
    const started = await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        // ignore_eos: vLLM's extra sampling field, which the openai client passes through.
        const body: ChatCompletionCreateParamsStreaming & { ignore_eos: boolean } = {
          model: MODEL,
          messages: [{ role: "user", content: `Abort me ${i}` }],
          max_tokens: 1000,
          temperature: 0.8,
          stream: true,
          ignore_eos: true,
        };
        const stream = await server.openai.chat.completions.create(body);
        let pieces = 0;
        for await (const chunk of stream) {
          if (chunk.choices[0]?.delta.content) pieces++;
          if (pieces === 2) break; // leaving the loop aborts the HTTP request
        }
        return pieces;
      }),
    );
    assert.ok(started.every((n) => n === 2), "every stream was mid-way when aborted");
    const m = await waitMetrics(server, (x) => metric(x, "vllm:num_requests_running") === 0 && metric(x, "vllm:num_requests_waiting") === 0);
    assert.equal(metric(m, "vllm:kv_cache_usage_perc"), 0);
    assert.equal(metric(m, "kvflash:num_free_kv_blocks"), metric(m, "kvflash:num_kv_blocks"));
    assert.equal(metric(m, "vllm:request_success_total", { finished_reason: "abort" }), 100);
    assert.ok(metric(m, "vllm:generation_tokens_total") < 100 * 1000, "no request ran to its end");
    // The server still serves.
    const after = await server.openai.completions.create({ model: MODEL, prompt: "still here", max_tokens: 3, temperature: 0 });
    assert.equal(after.usage!.completion_tokens, 3);
  } finally {
    assert.equal(await server.stop(), 0);
  }
});

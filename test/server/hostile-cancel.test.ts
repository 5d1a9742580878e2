// Clients that leave before their request runs (issue #32 item 3): 40 clients
// send a completion or chat request and close their connection while it is
// still being parsed, rendered, tokenized or queued. None of them may run to
// max_tokens: work for a gone client is dropped at once (never submitted, or
// aborted), and the engine's gauges are back at 0 right after.
import assert from "node:assert/strict";
import { connect } from "node:net";
import { after, before, test } from "node:test";
import { MODEL, type ServerProcess, metric, modelArgs, startServer } from "./harness.js";

let server: ServerProcess;
before(async () => {
  server = await startServer(modelArgs());
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
});

/** Sends a whole POST, then closes the connection `leaveAfterMs` later without reading the answer. */
function sendAndLeave(path: string, body: unknown, leaveAfterMs: number): Promise<void> {
  const url = new URL(server.url);
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname, () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${payload.length}\r\n\r\n`);
      socket.write(payload);
      setTimeout(() => socket.destroy(), leaveAfterMs);
    });
    socket.on("close", () => resolve());
    socket.on("error", reject);
  });
}

/** ~`chars` characters of words (random enough that no prefix cache makes tokenizing trivial). */
function words(chars: number, seed: number): string {
  const vocab = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"];
  const out: string[] = [];
  let s = seed;
  for (let n = 0; n < chars; ) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const w = vocab[s % vocab.length]!;
    out.push(w);
    n += w.length + 1;
  }
  return out.join(" ");
}

test("40 clients that leave while their requests are parsed, rendered, tokenized or queued: none runs on, the gauges go back to 0", { timeout: 60_000 }, async () => {
  // Warm: the grammar engine loads on first use, and that first load alone outlasts the clients' patience.
  await server.openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "warm" }], max_tokens: 2, response_format: { type: "json_object" } });
  const m0 = await server.metrics();
  const lengthBefore = metric(m0, "vllm:request_success_total", { finished_reason: "length" });
  await Promise.all(
    Array.from({ length: 40 }, (_, i) => {
      const text = words(800, i + 1);
      const body =
        i % 2 === 0
          ? { model: MODEL, prompt: text, max_tokens: 1000, ignore_eos: true }
          : { model: MODEL, messages: [{ role: "user", content: text }], max_tokens: 1000, ignore_eos: true, response_format: { type: "json_object" } };
      return sendAndLeave(i % 2 === 0 ? "/v1/completions" : "/v1/chat/completions", body, 5 + (i % 4) * 5);
    }),
  );
  // The server may still be reading, parsing and tokenizing what the clients left behind: give it 1.5 s, then
  // 3 s more for the gauges to reach 0 (generous for a loaded 2-core machine; before the fix, all 40 still ran 5 s later).
  await new Promise((r) => setTimeout(r, 1500));
  const deadline = Date.now() + 3000;
  let m = await server.metrics();
  while ((metric(m, "vllm:num_requests_running") > 0 || metric(m, "vllm:num_requests_waiting") > 0) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    m = await server.metrics();
  }
  assert.equal(metric(m, "vllm:num_requests_running"), 0, "3 s after the clients left, nothing of theirs runs");
  assert.equal(metric(m, "vllm:num_requests_waiting"), 0, "nor waits");
  assert.equal(metric(m, "vllm:request_success_total", { finished_reason: "length" }), lengthBefore, "no request of a gone client ran to max_tokens");
  // The server goes on: a normal request still completes.
  const ok = await server.openai.completions.create({ model: MODEL, prompt: "after", max_tokens: 3, temperature: 0 });
  assert.equal(ok.usage!.completion_tokens, 3);
});

// What a hostile or careless client can no longer do (issue #14): JSON nested
// 100k deep is a 400 naming the body; dropped uploads log one rate-limited
// line, not a stack trace each; a 1 MB `model` or `temperature` is not echoed
// whole; `//x/v1/models` is not /v1/models; a prompt list is bounded and
// admitted to the waiting queue all together or not at all; a request naming
// the second --served-model-name is answered under it; the SIGTERM drain
// answers 503 instead of refusing connections; the startup hint shows the
// Authorization header when --api-key is set.
import assert from "node:assert/strict";
import { get as httpGet } from "node:http";
import { connect } from "node:net";
import { after, before, test } from "node:test";
import { type ErrorBody, MODEL, type ServerProcess, metric, modelArgs, post, startServer, waitMetrics } from "./harness.js";

let server: ServerProcess;
before(async () => {
  server = await startServer([...modelArgs(), "--served-model-name", MODEL, "second-name", "--max-num-seqs", "1", "--max-waiting-requests", "4"]);
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
});

test("JSON nested 100k levels deep: a 400 naming the body, and the server goes on", async () => {
  const deep = `{"model": "${MODEL}", "prompt": ${"[".repeat(100_000)}${"]".repeat(100_000)}}`;
  for (const route of ["/v1/completions", "/v1/chat/completions", "/tokenize"]) {
    const r = await post(`${server.url}${route}`, deep);
    assert.equal(r.status, 400, route);
    assert.equal(r.body.error.param, null);
    assert.match(r.body.error.message, /^the request body nests arrays and objects more than 256 levels deep$/);
  }
  // Over 256 KiB, the body is parsed in a worker: the same answer.
  const big = `{"model": "${MODEL}", "prompt": "${"x".repeat(300_000)}", "n": ${"[".repeat(300)}${"]".repeat(300)}}`;
  assert.match((await post(`${server.url}/v1/completions`, big)).body.error.message, /nests arrays and objects more than 256 levels deep/);
  assert.match((await post(`${server.url}/v1/completions`, `{"prompt": "${"x".repeat(300_000)}"`)).body.error.message, /^the request body is not valid JSON/);
  assert.doesNotMatch(server.stderr(), /RangeError|Maximum call stack/);
  const ok = await server.openai.completions.create({ model: MODEL, prompt: "still", max_tokens: 2, temperature: 0 });
  assert.equal(ok.usage!.completion_tokens, 2);
});

test("60 clients that drop mid-upload log one line, no stack trace", async () => {
  const before = server.stderr().length;
  await Promise.all(
    Array.from(
      { length: 60 },
      () =>
        new Promise<void>((resolve, reject) => {
          const url = new URL(server.url);
          const socket = connect(Number(url.port), url.hostname, () => {
            socket.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"prompt": "`);
            setTimeout(() => socket.destroy(), 20);
          });
          socket.on("close", () => resolve());
          socket.on("error", reject);
        }),
    ),
  );
  await new Promise((r) => setTimeout(r, 300));
  const logged = server.stderr().slice(before);
  // Request lines (server/request-log.ts) of earlier requests may land here; a dropped upload gets none.
  const lines = logged.split("\n").filter((l) => l !== "" && !/^kvflash: [A-Z]+ \S+ \d{3} id=/.test(l));
  assert.equal(lines.length, 1, logged);
  assert.match(lines[0]!, /^kvflash: POST \/v1\/completions: the client went away during the upload \(\d+ bytes read\)/);
  assert.doesNotMatch(logged, /\n\s+at /, "no stack trace");
});

test("a 1 MB model or temperature is echoed as 100 characters and its length", async () => {
  const huge = "m".repeat(1_000_000);
  for (const body of [{ model: huge, prompt: "x" }, { model: MODEL, prompt: "x", temperature: huge }]) {
    const res = await fetch(`${server.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const text = await res.text();
    assert.ok(res.status === 400 || res.status === 404, text.slice(0, 200));
    assert.ok(text.length < 600, `the answer is ${text.length} bytes`);
    assert.match(text, /m{100}(\\")?… \(1000000 characters\)/);
  }
  const tokenize = await post(`${server.url}/tokenize`, { model: huge, prompt: "x" });
  assert.ok(JSON.stringify(tokenize.body).length < 600);
});

/** GET with the path sent exactly as given (fetch would resolve "..", as a browser does). */
function rawGet(path: string): Promise<{ status: number; body: string }> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = httpGet({ host: url.hostname, port: url.port, path }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode!, body }));
    });
    req.on("error", reject);
  });
}

test("paths match routes exactly: //anything/v1/models and friends are 404", async () => {
  for (const path of ["//anything/v1/models", "//v1/models", "/v1/../v1/models", "/./health", "/v1/models/", "/v1//models", "/health/", "//health", "http://x/health"]) {
    const res = await rawGet(path);
    assert.equal(res.status, 404, path);
    assert.equal((JSON.parse(res.body) as ErrorBody).error.type, "not_found_error");
  }
  assert.equal((await fetch(`${server.url}/v1/models?x=1`)).status, 200, "a query string is fine");
});

test("the second served name is answered under that name", async () => {
  const r = await server.openai.chat.completions.create({ model: "second-name", messages: [{ role: "user", content: "hi" }], max_tokens: 2, temperature: 0 });
  assert.equal(r.model, "second-name");
  const c = await server.openai.completions.create({ model: MODEL, prompt: "hi", max_tokens: 2, temperature: 0 });
  assert.equal(c.model, MODEL);
});

test("a prompt list: at most 128 prompts; the waiting queue counts client requests, each admitted whole or not at all", { timeout: 60_000 }, async () => {
  const url = `${server.url}/v1/completions`;
  const tooMany = await post(url, { model: MODEL, prompt: Array.from({ length: 129 }, () => "x"), max_tokens: 1 });
  assert.equal(tooMany.status, 400);
  assert.equal(tooMany.body.error.param, "prompt");
  assert.match(tooMany.body.error.message, /prompt lists 129 prompts, more than the 128 one request may have/);

  // One request runs (--max-num-seqs 1). The queue holds 4 client requests: one of 6 prompts and three single ones.
  const running = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, prompt: "run", max_tokens: 2000, ignore_eos: true, stream: true }) });
  const reader = running.body!.getReader();
  await reader.read();
  const six = post<{ choices: unknown[] }>(url, { model: MODEL, prompt: ["p", "q", "r", "s", "t", "u"], max_tokens: 2 });
  await waitMetrics(server, (m) => metric(m, "vllm:num_requests_waiting") === 6);
  const singles = ["v", "w", "x"].map((p) => post<{ choices: unknown[] }>(url, { model: MODEL, prompt: p, max_tokens: 2 }));
  await waitMetrics(server, (m) => metric(m, "vllm:num_requests_waiting") === 9);
  const abortsBefore = metric(await server.metrics(), "vllm:request_success_total", { finished_reason: "abort" });
  const two = await post(url, { model: MODEL, prompt: ["y", "z"], max_tokens: 2 });
  assert.equal(two.status, 429);
  assert.match(two.body.error.message, /the waiting queue is full \(4 requests\)/);
  assert.equal(two.headers.get("retry-after"), "1");
  const m = await server.metrics();
  assert.equal(metric(m, "vllm:num_requests_waiting"), 9, "nothing of the refused request was queued");
  assert.equal(metric(m, "vllm:request_success_total", { finished_reason: "abort" }), abortsBefore, "nor queued and aborted");
  await reader.cancel();
  assert.equal((await six).body.choices.length, 6);
  for (const single of singles) assert.equal((await single).status, 200);
});

test("SIGTERM drain: /health and new requests get 503 until in-flight requests end, then exit 0", { timeout: 60_000 }, async () => {
  const s = await startServer([...modelArgs(), "--shutdown-timeout", "30", "--api-key", "sekret"], { apiKey: "sekret" });
  assert.match(s.stderr(), /curl http:\/\/[^\s]+\/v1\/chat\/completions -H 'Content-Type: application\/json' -H "Authorization: Bearer \$KVFLASH_API_KEY"/);
  assert.match(s.stderr(), /with KVFLASH_API_KEY set to the --api-key value/);
  assert.doesNotMatch(s.stderr(), /sekret/, "the key itself is not logged");
  const auth = { authorization: "Bearer sekret" };
  const res = await fetch(`${s.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth },
    body: JSON.stringify({ model: MODEL, prompt: "drain", max_tokens: 2000, ignore_eos: true, stream: true }),
  });
  const reader = res.body!.getReader();
  await reader.read();
  const code = s.stop("SIGTERM");
  await new Promise((r) => setTimeout(r, 200));
  const health = await fetch(`${s.url}/health`);
  assert.equal(health.status, 503);
  assert.deepEqual(await health.json(), { status: "shutting_down" });
  assert.equal(health.headers.get("connection"), "close");
  const refused = await post(`${s.url}/v1/completions`, { model: MODEL, prompt: "late", max_tokens: 2 }, auth);
  assert.equal(refused.status, 503);
  assert.match(refused.body.error.message, /shutting down/);
  await reader.cancel(); // the last in-flight request ends: the drain is over
  assert.equal(await code, 0);
  await assert.rejects(fetch(`${s.url}/health`), "the port is closed once the drain is over");
});

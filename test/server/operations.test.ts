// What an operator sees of `kvflash serve`, as a real process: one log line
// per request (2xx, 4xx, 5xx and a client that left, each with its id, route,
// status, tokens and times), the throughput line under load and silence when
// idle, --disable-log-requests / --disable-log-stats, GET /version, and a
// listen that fails (port in use, an address not on this machine) ending the
// process at once with a non-zero code.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { MODEL, type ServerProcess, faultyModelArgs, modelArgs, post, startServer } from "./harness.js";

const CLI = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const VERSION = (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version;
const FAIL_TOKEN = 1234;
/** KVFLASH_LOG_STATS_INTERVAL for the test server, seconds. */
const INTERVAL_S = 0.25;

interface RequestLine {
  method: string;
  path: string;
  status: number;
  fields: Record<string, string>;
}

/** The server's request lines: "kvflash: METHOD PATH STATUS key=value …". */
function requestLines(stderr: string): RequestLine[] {
  const out: RequestLine[] = [];
  for (const m of stderr.matchAll(/^kvflash: ([A-Z]+) (\S+) (\d{3}) (id=.*)$/gm)) {
    const fields = Object.fromEntries([...m[4]!.matchAll(/(\w+)=("(?:[^"\\]|\\.)*"|\S+)/g)].map((f) => [f[1]!, f[2]!.startsWith('"') ? (JSON.parse(f[2]!) as string) : f[2]!]));
    out.push({ method: m[1]!, path: m[2]!, status: Number(m[3]), fields });
  }
  return out;
}

const throughputLines = (stderr: string): string[] => [...stderr.matchAll(/^kvflash: (Avg prompt throughput: .*)$/gm)].map((m) => m[1]!);

async function until<T>(what: string, read: () => T | undefined, stderr: () => string): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const v = read();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what} never came:\n${stderr()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const seconds = (s: string): number => {
  assert.match(s, /^\d+\.\d{3}s$/);
  return Number(s.slice(0, -1));
};

let server: ServerProcess;

before(async () => {
  server = await startServer(faultyModelArgs(FAIL_TOKEN), { env: { KVFLASH_LOG_STATS_INTERVAL: String(INTERVAL_S) } });
});
after(async () => {
  await server.stop();
});

test("one line per request: id, route, status, prompt and output tokens, time to first token, total time; 2xx, 4xx, 5xx and 499 alike", async () => {
  const chat = await server.openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hello there" }], max_tokens: 5, temperature: 0 });
  const stream = await server.openai.completions.create({ model: MODEL, prompt: "Once upon", max_tokens: 4, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let streamId = "";
  let streamUsage: { prompt_tokens: number; completion_tokens: number } | undefined;
  for await (const c of stream) {
    streamId = c.id;
    if (c.usage) streamUsage = c.usage;
  }
  const badRequest = await post(`${server.url}/v1/completions`, { model: MODEL, prompt: "x", max_tokens: -1 });
  assert.equal(badRequest.status, 400);
  const noRoute = await fetch(`${server.url}/v1/nothing-here`);
  assert.equal(noRoute.status, 404);
  const failed = await post(`${server.url}/v1/completions`, { model: MODEL, prompt: [1, 50, FAIL_TOKEN], max_tokens: 4 });
  assert.equal(failed.status, 500);
  // A client that leaves mid-stream: its line says 499.
  const gone = new AbortController();
  const res = await fetch(`${server.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, prompt: "Left early", max_tokens: 400, ignore_eos: true, stream: true }),
    signal: gone.signal,
  });
  const reader = res.body!.getReader();
  await reader.read();
  gone.abort();
  await reader.read().catch(() => null);
  assert.equal((await fetch(`${server.url}/health`)).status, 200);

  const lines = await until("six request lines", () => {
    const l = requestLines(server.stderr());
    return l.length >= 6 ? l : undefined;
  }, server.stderr);
  const [chatLine, streamLine, badLine, noRouteLine, failedLine, goneLine] = lines;

  assert.deepEqual([chatLine!.method, chatLine!.path, chatLine!.status], ["POST", "/v1/chat/completions", 200]);
  assert.equal(chatLine!.fields["id"], chat.id);
  assert.equal(chatLine!.fields["prompt_tokens"], String(chat.usage!.prompt_tokens));
  assert.equal(chatLine!.fields["output_tokens"], String(chat.usage!.completion_tokens));
  assert.equal(chatLine!.fields["client"], "127.0.0.1");
  assert.ok(seconds(chatLine!.fields["ttft"]!) <= seconds(chatLine!.fields["total"]!), JSON.stringify(chatLine));
  assert.equal(chatLine!.fields["error"], undefined);

  assert.deepEqual([streamLine!.path, streamLine!.status, streamLine!.fields["id"]], ["/v1/completions", 200, streamId]);
  assert.equal(streamLine!.fields["prompt_tokens"], String(streamUsage!.prompt_tokens));
  assert.equal(streamLine!.fields["output_tokens"], String(streamUsage!.completion_tokens));
  assert.ok(seconds(streamLine!.fields["ttft"]!) <= seconds(streamLine!.fields["total"]!));

  assert.deepEqual([badLine!.path, badLine!.status], ["/v1/completions", 400]);
  assert.match(badLine!.fields["id"]!, /^req-\d+$/);
  assert.deepEqual([badLine!.fields["prompt_tokens"], badLine!.fields["output_tokens"], badLine!.fields["ttft"]], ["-", "-", "-"]);
  assert.equal(badLine!.fields["error"], badRequest.body.error.message);
  seconds(badLine!.fields["total"]!);

  assert.deepEqual([noRouteLine!.method, noRouteLine!.path, noRouteLine!.status], ["GET", "/v1/nothing-here", 404]);
  assert.match(noRouteLine!.fields["error"]!, /no route for GET \/v1\/nothing-here/);

  assert.deepEqual([failedLine!.path, failedLine!.status], ["/v1/completions", 500]);
  assert.match(failedLine!.fields["id"]!, /^cmpl-/);
  assert.equal(failedLine!.fields["prompt_tokens"], "3");
  assert.match(failedLine!.fields["error"]!, /injected failure/);

  assert.deepEqual([goneLine!.path, goneLine!.status], ["/v1/completions", 499]);
  assert.match(goneLine!.fields["id"]!, /^cmpl-/);
  assert.ok(Number(goneLine!.fields["output_tokens"]) < 400, JSON.stringify(goneLine));

  // Health checks are not logged; ids are unique.
  assert.ok(!requestLines(server.stderr()).some((l) => l.path === "/health"));
  const ids = lines.map((l) => l.fields["id"]);
  assert.equal(new Set(ids).size, ids.length);
});

test("a throughput line every interval while there is load, and nothing when idle", async () => {
  const before = throughputLines(server.stderr()).length;
  await Promise.all(
    [0, 1, 2].map((i) => server.openai.completions.create({ model: MODEL, prompt: `Load ${i}`, max_tokens: 24, ignore_eos: true, temperature: 0 } as never)),
  );
  const lines = await until("a throughput line with generated tokens", () => {
    const l = throughputLines(server.stderr()).slice(before);
    return l.some((x) => !/Avg generation throughput: 0\.0 tokens\/s/.test(x)) ? l : undefined;
  }, server.stderr);
  for (const line of lines) {
    assert.match(line, /^Avg prompt throughput: \d+\.\d tokens\/s, Avg generation throughput: \d+\.\d tokens\/s, Running: \d+ reqs, Waiting: \d+ reqs, KV cache usage: \d+\.\d%, Prefix cache hit rate: \d+\.\d%$/);
  }
  // Idle: at most one more line (the interval the load ended in, then the one that shows zero), then none.
  await new Promise((r) => setTimeout(r, 4 * INTERVAL_S * 1000));
  const settled = throughputLines(server.stderr()).length;
  await new Promise((r) => setTimeout(r, 6 * INTERVAL_S * 1000));
  assert.equal(throughputLines(server.stderr()).length, settled, `lines while idle:\n${throughputLines(server.stderr()).slice(settled).join("\n")}`);
  assert.match(throughputLines(server.stderr()).at(-1)!, /^Avg prompt throughput: 0\.0 tokens\/s, Avg generation throughput: 0\.0 tokens\/s, Running: 0 reqs, Waiting: 0 reqs/);
});

test("GET /version answers kvflash's package version, as vLLM's route does", async () => {
  const res = await fetch(`${server.url}/version`);
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { version: VERSION });
});

test("--disable-log-requests and --disable-log-stats turn the lines off", async () => {
  const quiet = await startServer([...modelArgs(), "--disable-log-requests", "--disable-log-stats"], { env: { KVFLASH_LOG_STATS_INTERVAL: String(INTERVAL_S) } });
  try {
    await quiet.openai.completions.create({ model: MODEL, prompt: "Quiet", max_tokens: 8, ignore_eos: true } as never);
    assert.equal((await post(`${quiet.url}/v1/completions`, { model: MODEL, prompt: "x", max_tokens: -1 })).status, 400);
    await new Promise((r) => setTimeout(r, 4 * INTERVAL_S * 1000));
    assert.deepEqual(requestLines(quiet.stderr()), []);
    assert.deepEqual(throughputLines(quiet.stderr()), []);
  } finally {
    await quiet.stop();
  }
});

/** Runs `kvflash serve ARGS` and resolves with its exit code and stderr, or rejects if it is still up after 60 s. */
function serveExit(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const proc = spawn(process.execPath, [CLI, "serve", "--threads", "1", ...args], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  proc.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`kvflash serve ${args.join(" ")} was still running after 60 s:\n${stderr}`));
    }, 60_000);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

test("a port in use ends the process at once with code 1 and says which port and what to do", async () => {
  const taken = createServer();
  await new Promise<void>((r) => taken.listen(0, "127.0.0.1", r));
  const port = (taken.address() as AddressInfo).port;
  try {
    const { code, stderr } = await serveExit(["--port", String(port)]);
    assert.equal(code, 1, stderr);
    assert.match(stderr, new RegExp(`kvflash: --port ${port}: 127\\.0\\.0\\.1:${port} is already in use .*--port 0 for a free one`));
  } finally {
    taken.close();
  }
});

test("any other listen failure ends the process too: an address that is not this machine's", async () => {
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): never a local address, so bind() fails with EADDRNOTAVAIL.
  const { code, stderr } = await serveExit(["--port", "0", "--host", "192.0.2.1"]);
  assert.equal(code, 1, stderr);
  assert.match(stderr, /kvflash: --host "192\.0\.2\.1" is not an address of this machine/);
});

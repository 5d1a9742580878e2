/**
 * Suite `stall` (issue #14, item 1: no request may stall /health or another
 * stream by more than ~50 ms): a `kvflash serve` process, a gap meter in a
 * third process (gap-meter.ts: GET /health every 10 ms and a streaming
 * completion), and this process sending one long text prompt at a time —
 * 256 KiB, 1 MiB, 4 MiB and 15 MB of ASCII words — as a /v1/completions
 * prompt, as chat message content, and as a /tokenize prompt. Each row is
 * one such request: its status and time, and the longest and 99th-percentile
 * gap each watcher saw while it ran (and 200 ms either side). A row with
 * prompt_bytes 0 measures the same window with no request: the floor of
 * this machine under its current load (load1, from os.loadavg()).
 *
 * On the default server, the hostile requests of issue #32 first
 * (bench/hostile-cases.ts): a row each, `endpoint` naming the case and
 * `was` what the issue measured before their bounds; then its grammar
 * attacks (stall-grammar.ts: one row each, endpoint "grammar: <case>").
 * There the meter also reads a constrained stream (gap-meter.ts), whose
 * longest gap is `structured_max_gap_ms`: a structured stream must keep its
 * masks while another request's new grammar compiles.
 *
 * KVFLASH_STALL_ROWS=<regex> runs only the rows whose "<config> <endpoint>"
 * it matches (and each server's idle row), e.g. `KVFLASH_STALL_ROWS=accepted`
 * for the two accepted grammars; a server none of whose rows match is not started.
 *
 * Two servers: `default` (models/default, max_model_len 1024: every size
 * here is refused by its length before tokenizing) and `long-context` (a tiny
 * model with the default model's tokenizer and max_model_len 32768: a
 * 256 KiB prompt is under the character bound, so it is tokenized, in a
 * worker, until it is known not to fit).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { request } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { defaultModelDir } from "../../src/index.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { GapMeter } from "../gap-watch.js";
import { HOSTILE_CASES } from "../hostile-cases.js";
import type { Row, Suite } from "../harness.js";
import { grammarRows } from "./stall-grammar.js";
import { ownChild } from "../child-processes.js";

const CLI = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const MODEL = "stall-bench";
const SIZES = [256 * 1024, 2 ** 20, 4 * 2 ** 20, 15_000_000];
const ENDPOINTS = ["completions", "chat", "tokenize"] as const;
type Endpoint = (typeof ENDPOINTS)[number];

/** ASCII words of exactly `bytes` bytes (random, so no cache helps the tokenizer). */
export function asciiWords(bytes: number, seed = 1): string {
  const vocab = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "representations", "Hello,", "world!", "42"];
  let state = seed;
  const parts: string[] = [];
  let n = 0;
  while (n < bytes) {
    state = (state * 1103515245 + 12345) % 2147483648;
    const w = vocab[state % vocab.length]!;
    parts.push(w);
    n += w.length + 1;
  }
  return parts.join(" ").slice(0, bytes);
}

function body(endpoint: Endpoint, text: string): Buffer {
  const json =
    endpoint === "chat" ? { model: MODEL, messages: [{ role: "user", content: text }], max_tokens: 1 }
    : endpoint === "completions" ? { model: MODEL, prompt: text, max_tokens: 1 }
    : { model: MODEL, prompt: text };
  return Buffer.from(JSON.stringify(json));
}

const PATHS: Record<Endpoint, string> = { completions: "/v1/completions", chat: "/v1/chat/completions", tokenize: "/tokenize" };

/** POSTs a prepared body; resolves with the status and the response's size. */
function post(url: string, path: string, payload: Buffer): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = request(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json", "content-length": payload.length } }, (res) => {
      let bytes = 0;
      res.on("data", (c: Buffer) => (bytes += c.length));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, bytes }));
    });
    req.on("error", reject);
    req.end(payload);
  });
}

async function startServer(args: string[], log: (line: string) => void): Promise<{ url: string; proc: ChildProcess }> {
  const proc = ownChild(spawn(process.execPath, [CLI, "serve", "--port", "0", "--threads", "1", "--served-model-name", MODEL, ...args], { stdio: ["ignore", "ignore", "pipe"] }));
  let stderr = "";
  let ready = false;
  proc.stderr!.setEncoding("utf8");
  return new Promise((resolve, reject) => {
    proc.stderr!.on("data", (chunk: string) => {
      stderr += chunk;
      const url = /listening on (http:\/\/\S+)/.exec(stderr)?.[1];
      if (url && /ready in/.test(stderr) && !ready) {
        ready = true;
        log(`  server ${url} ready`);
        resolve({ url, proc });
      }
    });
    proc.once("exit", (code) => reject(new Error(`the server exited with code ${code}:\n${stderr}`)));
  });
}

/** KVFLASH_STALL_ROWS: which rows run ("<config> <endpoint>" matches it); all without it. */
function rowFilter(): (config: string, endpoint: string) => boolean {
  const only = process.env["KVFLASH_STALL_ROWS"];
  if (only === undefined || only === "") return () => true;
  const re = new RegExp(only);
  return (config, endpoint) => re.test(`${config} ${endpoint}`);
}

async function measureServer(config: string, args: string[], sizes: readonly number[], log: (line: string) => void, grammars = false): Promise<Row[]> {
  const keep = rowFilter();
  const { url, proc } = await startServer(args, log);
  const rows: Row[] = [];
  try {
    const meter = await GapMeter.start(url, MODEL, 1000, { structured: grammars }); // fits the default model's 1024-token context
    const row = (promptBytes: number, endpoint: string, status: number, ms: number, gaps: Awaited<ReturnType<GapMeter["during"]>>["gaps"]): Row => ({
      config,
      prompt_bytes: promptBytes,
      endpoint,
      status,
      response_ms: Math.round(ms),
      health_max_gap_ms: gaps.health.max_ms,
      health_p99_gap_ms: gaps.health.p99_ms,
      stream_max_gap_ms: gaps.stream.max_ms,
      stream_p99_gap_ms: gaps.stream.p99_ms,
      ...(gaps.structured === undefined ? {} : { structured_max_gap_ms: gaps.structured.max_ms, structured_p99_gap_ms: gaps.structured.p99_ms }),
      load1: Math.round(loadavg()[0]! * 100) / 100,
    });
    try {
      const idle = await meter.during(() => new Promise((r) => setTimeout(r, 1000)));
      rows.push(row(0, "none", 0, 1000, idle.gaps));
      if (config === "default") {
        for (const c of HOSTILE_CASES) {
          if (!keep(config, c.name)) continue;
          const payload = Buffer.from(JSON.stringify(c.body(MODEL)));
          const t0 = performance.now();
          const { value, gaps } = await meter.during(() => post(url, c.path, payload));
          const r: Row = { ...row(payload.length, c.name, value.status, performance.now() - t0 - 400, gaps), was: c.was };
          log(`  hostile: ${c.name} → ${value.status} in ${r["response_ms"]} ms; longest gap /health ${gaps.health.max_ms} ms, stream ${gaps.stream.max_ms} ms`);
          rows.push(r);
        }
      }
      for (const size of sizes) {
        const text = asciiWords(size);
        for (const endpoint of ENDPOINTS) {
          if (!keep(config, endpoint)) continue;
          const payload = body(endpoint, text);
          const t0 = performance.now();
          const { value, gaps } = await meter.during(() => post(url, PATHS[endpoint], payload));
          const r = row(size, endpoint, value.status, performance.now() - t0 - 400, gaps);
          log(`  ${config} ${size} B → ${endpoint}: ${value.status} in ${r["response_ms"]} ms; longest gap /health ${gaps.health.max_ms} ms, stream ${gaps.stream.max_ms} ms`);
          rows.push(r);
        }
      }
      if (grammars) rows.push(...(await grammarRows(url, MODEL, meter, post, log, row, (name) => keep(config, name))));
    } finally {
      await meter.close();
    }
  } finally {
    proc.kill("SIGTERM");
    await new Promise((r) => proc.once("exit", r));
  }
  return rows;
}

export const stall: Suite = {
  name: "stall",
  description: "longest /health and stream gaps while another client sends a hostile request or grammar (#32), or a 256 KiB–15 MB text prompt to /v1/completions, chat and /tokenize (#14 item 1)",
  async run({ quick, log }) {
    const sizes = quick ? [256 * 1024, 4 * 2 ** 20] : SIZES;
    const rows = await measureServer("default", ["--model", defaultModelDir(), "--tool-call-parser", "hermes"], sizes, log, true);
    const keep = rowFilter();
    if (quick || !ENDPOINTS.some((e) => keep("long-context", e))) return rows;
    const dir = mkdtempSync(join(tmpdir(), "kvflash-stall-bench-"));
    try {
      writeTinyModel(dir, {
        arch: "llama", seed: 5, hiddenSize: 32, intermediateSize: 64, numLayers: 1, numHeads: 2, numKvHeads: 1,
        maxPositionEmbeddings: 32768, dtype: "f32", tokenizer: { kind: "copy", dir: defaultModelDir() },
      });
      rows.push(...(await measureServer("long-context", ["--model", dir, "--num-gpu-blocks-override", "2048", "--block-size", "16"], SIZES, log)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    return rows;
  },
};

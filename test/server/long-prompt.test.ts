// One long prompt cannot freeze the server (issue #14, 1): a prompt of more
// characters than max_model_len × the tokenizer's maxTokenChars is a 400
// context_length_exceeded before any tokenizing, and any shorter one is
// tokenized in the tokenizer workers, which stop once it cannot fit. Meanwhile
// another process polls /health and reads a stream: neither sees a gap near
// the seconds the HTTP thread used to spend tokenizing (a 500 k-character
// prompt took ~40 s there). The bound is generous for a loaded 2-core box;
// the gaps seen are printed.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { llama2Tokenizer, writeTinyModel } from "../../src/testing/index.js";
import { type ErrorBody, MODEL, type ServerProcess, post, startServer } from "./harness.js";

/** Longest pause the test accepts between two /health answers or two stream chunks (today's: tens of seconds). */
const MAX_GAP_MS = 3000;
/** 2048 blocks × 16 tokens: max_model_len 32768, so up to 32768 × 16 characters reach the tokenizer. */
const CONTEXT = 32768;

let server: ServerProcess;
let dir: string;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), "kvflash-long-prompt-"));
  writeTinyModel(dir, {
    arch: "llama",
    seed: 5,
    hiddenSize: 32,
    intermediateSize: 64,
    numLayers: 1,
    numHeads: 2,
    numKvHeads: 1,
    maxPositionEmbeddings: CONTEXT,
    dtype: "f32",
    tokenizer: llama2Tokenizer(),
  });
  server = await startServer(["--model", dir, "--served-model-name", MODEL, "--num-gpu-blocks-override", String(CONTEXT / 16), "--block-size", "16"]);
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
  rmSync(dir, { recursive: true, force: true });
});

/** Random words (a tokenizer cache cannot help): about 3.5 characters a token. */
function words(chars: number, seed = 1): string {
  const vocab = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "representations", "Hello,", "world!", "42", "é", "日本"];
  let state = seed;
  const parts: string[] = [];
  let n = 0;
  while (n < chars) {
    state = (state * 1103515245 + 12345) % 2147483648;
    const w = vocab[state % vocab.length]!;
    parts.push(w);
    n += w.length + 1;
  }
  return parts.join(" ").slice(0, chars);
}

const GAP_METER = fileURLToPath(new URL("./gap-meter.js", import.meta.url));

/** Runs `work` while another process polls /health and reads a stream (gap-meter.ts); returns the longest gaps it saw. */
async function gapsDuring(work: () => Promise<void>): Promise<{ health: number; stream: number }> {
  const meter = spawn(process.execPath, [GAP_METER, server.url, MODEL], { stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  meter.stdout!.setEncoding("utf8");
  const started = new Promise<void>((resolve, reject) => {
    meter.stdout!.on("data", (chunk: string) => {
      out += chunk;
      if (out.includes("started\n")) resolve();
    });
    meter.once("exit", (code) => reject(new Error(`the gap meter exited (${code}): ${out}`)));
  });
  const exited = new Promise<void>((resolve) => meter.once("exit", () => resolve()));
  await started;
  await new Promise((r) => setTimeout(r, 200)); // a few gaps measured before the work
  try {
    await work();
  } finally {
    meter.stdin!.end();
    await exited;
  }
  return JSON.parse(out.slice(out.indexOf("started\n") + 8)) as { health: number; stream: number };
}

function assertTooLong(r: { status: number; body: ErrorBody }, param: string, message: RegExp): void {
  assert.equal(r.status, 400, JSON.stringify(r.body).slice(0, 300));
  assert.equal(r.body.error.code, "context_length_exceeded");
  assert.equal(r.body.error.param, param);
  assert.match(r.body.error.message, message);
}

test("a 2 MiB prompt is refused by its length alone: completions, chat, /tokenize", { timeout: 60_000 }, async () => {
  const huge = words(2 * 2 ** 20);
  const chars = new RegExp(`maximum context length is ${CONTEXT} tokens. However, your (prompt|messages) has ${huge.length} characters, more than ${CONTEXT} tokens of at most 16`);
  const gaps = await gapsDuring(async () => {
    await Promise.all([
      post(`${server.url}/v1/completions`, { model: MODEL, prompt: huge, max_tokens: 1 }).then((r) => assertTooLong(r, "prompt", chars)),
      post(`${server.url}/v1/chat/completions`, { model: MODEL, messages: [{ role: "user", content: huge }] }).then((r) => assertTooLong(r, "messages", chars)),
      post(`${server.url}/tokenize`, { model: MODEL, prompt: huge }).then((r) => assertTooLong(r, "prompt", chars)),
    ]);
  });
  assert.ok(gaps.health < MAX_GAP_MS && gaps.stream < MAX_GAP_MS, `longest gaps: /health ${gaps.health.toFixed(0)} ms, stream ${gaps.stream.toFixed(0)} ms`);
  process.stderr.write(`# longest gaps while refusing 3 × 2 MiB: /health ${gaps.health.toFixed(0)} ms, stream ${gaps.stream.toFixed(0)} ms\n`);
});

test("a 500 k-character prompt is tokenized in a worker, which stops once it cannot fit; nobody waits on it", { timeout: 120_000 }, async () => {
  const long = words(500_000, 2);
  assert.ok(long.length <= CONTEXT * 16, "under the character bound: it must be tokenized");
  const tokens = new RegExp(`maximum context length is ${CONTEXT} tokens. However, your (prompt|messages) has more than ${CONTEXT} tokens`);
  const gaps = await gapsDuring(async () => {
    await Promise.all([
      post(`${server.url}/v1/completions`, { model: MODEL, prompt: long, max_tokens: 1 }).then((r) => assertTooLong(r, "prompt", tokens)),
      post(`${server.url}/v1/chat/completions`, { model: MODEL, messages: [{ role: "user", content: long }] }).then((r) => assertTooLong(r, "messages", tokens)),
      post(`${server.url}/tokenize`, { model: MODEL, prompt: long }).then((r) => assertTooLong(r, "prompt", tokens)),
    ]);
  });
  assert.ok(gaps.health < MAX_GAP_MS && gaps.stream < MAX_GAP_MS, `longest gaps: /health ${gaps.health.toFixed(0)} ms, stream ${gaps.stream.toFixed(0)} ms`);
  process.stderr.write(`# longest gaps while tokenizing 3 × 500 k characters: /health ${gaps.health.toFixed(0)} ms, stream ${gaps.stream.toFixed(0)} ms\n`);
  // A prompt that fits is still served, with the worker's exact ids.
  const text = words(40_000, 3);
  const r = await post<{ count: number; tokens: number[] }>(`${server.url}/tokenize`, { model: MODEL, prompt: text });
  assert.equal(r.status, 200);
  assert.ok(r.body.count > 5000 && r.body.count < CONTEXT, `count ${r.body.count}`);
  const done = await server.openai.completions.create({ model: MODEL, prompt: r.body.tokens.slice(0, 4000), max_tokens: 2, temperature: 0 });
  assert.equal(done.usage!.prompt_tokens, 4000);
});

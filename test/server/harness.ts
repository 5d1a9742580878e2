// End-to-end harness: `kvflash serve` as a real child process on a free
// loopback port, waited on until GET /health is 200; its stderr is kept for
// failure messages. The official openai client talks to it.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { parseMetrics } from "../../src/server/metrics.js";
import { DEFAULT_LOADER } from "../../src/server/start-server.js";
import { llama2Tokenizer, writeTinyModel } from "../../src/testing/index.js";

const CLI = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const FAULTY_LOADER = fileURLToPath(new URL("./faulty-loader.js", import.meta.url));

export interface KvGeometry {
  /** KV blocks in the pool. */
  numBlocks?: number;
  /** Tokens per block. */
  blockSize?: number;
}

/** The name the test server serves its model under. */
export const MODEL = "kvflash-test";

let modelDir: string | null = null;

/**
 * A tiny Llama written once per test process (writeTinyModel): 2 layers,
 * hidden 64, GQA 4/2, untied embeddings, a real 32k SentencePiece-style
 * tokenizer with Llama 2 Chat's template (llama2Tokenizer). Untied, its greedy text varies with the whole
 * context, so comparing outputs checks the KV cache (the embedded default
 * model, tied, mostly repeats its input's last token).
 */
export function testModelDir(): string {
  if (modelDir === null) {
    const dir = mkdtempSync(join(tmpdir(), "kvflash-e2e-model-"));
    writeTinyModel(dir, {
      arch: "llama",
      seed: 3,
      hiddenSize: 64,
      intermediateSize: 192,
      numLayers: 2,
      numHeads: 4,
      numKvHeads: 2,
      maxPositionEmbeddings: 2048,
      tieWordEmbeddings: false,
      embeddingStd: 0.3,
      dtype: "bf16",
      tokenizer: llama2Tokenizer(),
    });
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    modelDir = dir;
  }
  return modelDir;
}

/** The serve arguments for the test model (through the decoder, the server's default loader) and its KV pool. */
export function modelArgs(kv: KvGeometry = {}): string[] {
  return ["--model", testModelDir(), "--served-model-name", MODEL, "--num-gpu-blocks-override", String(kv.numBlocks ?? 512), "--block-size", String(kv.blockSize ?? 16)];
}

/** modelArgs, with the decoder's forward made to throw on any batch that contains `failToken` (faulty-loader.ts). */
export function faultyModelArgs(failToken: number, kv: KvGeometry = {}, loadDelayMs = 0): string[] {
  return ["--loader", FAULTY_LOADER, "--loader-options", JSON.stringify({ base: DEFAULT_LOADER, failToken, loadDelayMs }), ...modelArgs(kv)];
}

export interface ServerProcess {
  url: string;
  proc: ChildProcess;
  openai: OpenAI;
  stderr(): string;
  /** GET /metrics parsed: `name{labels}` → value. */
  metrics(): Promise<Map<string, number>>;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function startServer(args: readonly string[], options: { apiKey?: string; waitReady?: boolean; env?: Record<string, string> } = {}): Promise<ServerProcess> {
  const env = options.env === undefined ? process.env : { ...process.env, ...options.env };
  const proc = spawn(process.execPath, [CLI, "serve", "--port", "0", "--threads", "1", ...args], { stdio: ["ignore", "ignore", "pipe"], env });
  let stderr = "";
  proc.stderr!.setEncoding("utf8");
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill("SIGKILL");
      reject(new Error(`the server did not start in 30 s:\n${stderr}`));
    }, 30_000);
    proc.stderr!.on("data", (chunk: string) => {
      stderr += chunk;
      const m = /listening on (http:\/\/[^\s]+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the server exited with code ${code}:\n${stderr}`));
    });
  });
  const exited = new Promise<number | null>((resolve) => {
    if (proc.exitCode !== null) resolve(proc.exitCode);
    else proc.once("exit", (code) => resolve(code));
  });
  const server: ServerProcess = {
    url,
    proc,
    openai: new OpenAI({ baseURL: `${url}/v1`, apiKey: options.apiKey ?? "unused", maxRetries: 0, timeout: 60_000 }),
    stderr: () => stderr,
    metrics: async () => parseMetrics(await (await fetch(`${url}/metrics`)).text()),
    stop: async (signal = "SIGTERM") => {
      if (proc.exitCode === null) proc.kill(signal);
      return exited;
    },
  };
  if (options.waitReady ?? true) {
    try {
      await waitHealthy(url, () => stderr);
    } catch (e) {
      // A server that never got ready must not outlive the test file (its pipes would keep the file's process running forever).
      proc.kill("SIGKILL");
      throw e;
    }
  }
  return server;
}

export async function waitHealthy(url: string, stderr: () => string = () => ""): Promise<void> {
  // Generous: a tiny model took over 60 s to load on a 2-core machine at load 15.
  const deadline = Date.now() + 180_000;
  for (;;) {
    const res = await fetch(`${url}/health`).catch(() => null);
    if (res?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`the server did not become healthy in 180 s:\n${stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Polls /metrics until `done` holds for it (or fails after 30 s, showing the last metrics). */
export async function waitMetrics(server: ServerProcess, done: (m: Map<string, number>) => boolean): Promise<Map<string, number>> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const m = await server.metrics();
    if (done(m)) return m;
    if (Date.now() > deadline) throw new Error(`metrics never reached the expected state:\n${[...m].map(([k, v]) => `${k} ${v}`).join("\n")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A metric's value for the served model (the default model's name unless given). */
export function metric(m: Map<string, number>, name: string, labels: Record<string, string> = {}, model = MODEL): number {
  const all = { model_name: model, ...labels };
  const key = `${name}{${Object.entries(all).map(([k, v]) => `${k}="${v}"`).join(",")}}`;
  const v = m.get(key);
  if (v === undefined) throw new Error(`no metric ${key}`);
  return v;
}

/** OpenAI's error shape. */
export interface ErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** POST JSON (or a raw string) and return status and parsed body (typed as the caller expects). */
export async function post<T = ErrorBody>(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: T; headers: Headers }> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body: parsed as T, headers: res.headers };
}

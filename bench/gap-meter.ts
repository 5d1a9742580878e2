/**
 * A separate process that watches a server the way its other clients see it
 * (issue #14, item 1: no request may stall /health or another stream): it
 * polls GET /health every POLL_MS and reads a long completion stream (started
 * again whenever it ends), and records the gaps (ms) between two /health
 * answers and between two stream chunks. With `structured` it also reads a
 * constrained stream (STRUCTURED_GRAMMAR: its mask is filled by a grammar
 * host every token, so a host busy compiling shows up as a gap there). Its
 * own process, so nothing the caller does (building and sending a 15 MB
 * body) shows up as a gap.
 *
 *   node gap-meter.js URL MODEL [MAX_TOKENS] [structured]
 *   stdout: "started\n" once every watcher runs
 *   stdin:  "begin\n" starts a window; "end\n" prints the window's gaps as one JSON line,
 *           { health: Gaps, stream: Gaps, structured?: Gaps }; closing stdin ends the process.
 *
 * Used by `npm run bench -- stall` (bench/suites/stall.ts) and by
 * test/server/long-prompt.test.ts. `node --test dist/` does not run it (no .test.js).
 */
import { createInterface } from "node:readline";

/** The gaps one watcher saw in a window. */
export interface Gaps {
  count: number;
  max_ms: number;
  p99_ms: number;
}

const POLL_MS = 10;
/**
 * The constrained stream's grammar (XGrammar EBNF): lowercase words, done only
 * at a NUL the model all but never picks, so the stream runs to max_tokens.
 */
export const STRUCTURED_GRAMMAR = 'root ::= [a-z ]+ "\\x00"';

class Window {
  #gaps: number[] = [];
  #open = false;
  begin(): void {
    this.#gaps = [];
    this.#open = true;
  }
  add(gap: number): void {
    if (this.#open) this.#gaps.push(gap);
  }
  end(): Gaps {
    this.#open = false;
    const s = [...this.#gaps].sort((a, b) => a - b);
    const at = (q: number): number => (s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)]!);
    return { count: s.length, max_ms: round(at(1)), p99_ms: round(at(0.99)) };
  }
}

const round = (x: number): number => Math.round(x * 10) / 10;

async function pollHealth(url: string, window: Window, stopped: () => boolean): Promise<void> {
  let last = performance.now();
  while (!stopped()) {
    const res = await fetch(`${url}/health`);
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`/health answered ${res.status}`);
    const now = performance.now();
    window.add(now - last);
    last = now;
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** Reads one stream after another; the gap between two streams (a new request's first token) is not counted. */
async function readStreams(url: string, body: object, window: Window, started: () => void, stopped: () => boolean): Promise<void> {
  while (!stopped()) {
    const controller = new AbortController();
    const res = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...body, stream: true }),
      signal: controller.signal,
    });
    if (res.status !== 200) throw new Error(`the stream request answered ${res.status}: ${await res.text()}`);
    const reader = res.body!.getReader();
    await reader.read();
    started();
    let last = performance.now();
    while (!stopped()) {
      const r = await reader.read();
      if (r.done) break;
      const now = performance.now();
      window.add(now - last);
      last = now;
    }
    controller.abort();
  }
}

async function main(url: string, model: string, maxTokens: number, structured: boolean): Promise<void> {
  let stop = false;
  const stopped = (): boolean => stop;
  const health = new Window();
  const stream = new Window();
  const constrained = structured ? new Window() : null;
  const body = { model, prompt: "stream on", max_tokens: maxTokens, ignore_eos: true };
  const started: Promise<void>[] = [];
  const reader = (window: Window, extra: object): Promise<void> => {
    let resolve!: () => void;
    started.push(new Promise<void>((r) => (resolve = r)));
    return readStreams(url, { ...body, ...extra }, window, resolve, stopped);
  };
  const watchers = Promise.all([pollHealth(url, health, stopped), reader(stream, {}), ...(constrained === null ? [] : [reader(constrained, { guided_grammar: STRUCTURED_GRAMMAR })])]);
  watchers.catch((e: Error) => {
    process.stderr.write(`gap-meter: ${e.message}\n`);
    process.exit(1);
  });
  await Promise.all(started);
  process.stdout.write("started\n");
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line === "begin") {
      health.begin();
      stream.begin();
      constrained?.begin();
    } else if (line === "end") {
      process.stdout.write(`${JSON.stringify({ health: health.end(), stream: stream.end(), ...(constrained === null ? {} : { structured: constrained.end() }) })}\n`);
    }
  }
  stop = true;
  process.exit(0);
}

if (process.argv.length >= 4) await main(process.argv[2]!, process.argv[3]!, Number(process.argv[4] ?? 30000), process.argv[5] === "structured");

// A client that reads its stream slowly, or not at all, must not make the
// server buffer without bound (issue #32): SseStream reports a full socket
// and `drained()` waits for it (src/server/sse.ts), and an OutputStream whose
// reader fell behind merges its pending outputs into one
// (src/engine/engine-client.ts mergeOutputs). Real sockets on port 0.
import assert from "node:assert/strict";
import { type IncomingMessage, createServer, get } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { OutputStream } from "../../src/engine/engine-client.js";
import type { EngineOutput } from "../../src/engine/engine.js";
import { SseStream } from "../../src/server/sse.js";

const output = (text: string, tokenIds: number[], extra: Partial<EngineOutput> = {}): EngineOutput => ({
  requestId: "r",
  text,
  tokenIds,
  logprobs: null,
  finishReason: null,
  stopReason: null,
  error: null,
  numPromptTokens: 0,
  numOutputTokens: 0,
  numCachedTokens: 0,
  ...extra,
});

test("outputs pushed while the reader is behind merge into one: text and tokens in order, logprobs kept, the last counts and finish", async () => {
  const stream = new OutputStream("r");
  const lp = (t: number) => ({ token: t, logprob: -t, top: [] });
  stream.push(output("a", [1], { numPromptTokens: 7, numOutputTokens: 1, logprobs: [lp(1)] }));
  stream.push(output("b", [2], { numOutputTokens: 2, logprobs: [lp(2)] }));
  stream.push(output("", [3], { numOutputTokens: 3, numCachedTokens: 4, logprobs: [lp(3)] }));
  const it = stream[Symbol.asyncIterator]();
  const first = (await it.next()).value as EngineOutput;
  assert.deepEqual([first.text, first.tokenIds, first.numPromptTokens, first.numOutputTokens, first.numCachedTokens], ["ab", [1, 2, 3], 7, 3, 4]);
  assert.deepEqual(first.logprobs?.map((l) => l.token), [1, 2, 3]);
  // Read up to date: the next push is delivered alone; one after the end is dropped.
  const next = it.next();
  stream.push(output("c", [4], { numOutputTokens: 4, finishReason: "length" }));
  stream.push(output("d", [5]));
  const last = (await next).value as EngineOutput;
  assert.deepEqual([last.text, last.tokenIds, last.finishReason, last.numPromptTokens], ["c", [4], "length", 0]);
  assert.equal((await it.next()).done, true);
});

/** A server whose one route writes `events` SSE events of `size` bytes as a route does: send, then await drained(). */
async function sseServer(events: number, size: number): Promise<{ url: string; close: () => Promise<void>; maxBuffered: () => number; highWaterMark: () => number; finished: Promise<number> }> {
  let maxBuffered = 0;
  let highWaterMark = 0;
  let resolveFinished!: (sent: number) => void;
  const finished = new Promise<number>((r) => (resolveFinished = r));
  const server = createServer((_req, res) => {
    const sse = new SseStream(res);
    highWaterMark = res.writableHighWaterMark; // 16 KiB on Node 20, 64 KiB on Node 22+
    void (async () => {
      let sent = 0;
      for (let i = 0; i < events && !sse.closed; i++) {
        sse.send({ i, pad: "x".repeat(size) });
        sent++;
        maxBuffered = Math.max(maxBuffered, res.writableLength);
        await sse.drained();
      }
      sse.end();
      resolveFinished(sent);
    })();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => {
      server.closeAllConnections(); // a paused client left open by a failed assertion must not hold the close
      return new Promise((r) => server.close(() => r()));
    },
    maxBuffered: () => maxBuffered,
    highWaterMark: () => highWaterMark,
    finished,
  };
}

const EVENTS = 4000;
const SIZE = 4096; // 16 MB in all: more than the kernel's socket buffers and Node's high-water mark can hold

test("a paused reader: the server buffers at most its high-water mark plus one event, and every event arrives in order once it reads", async () => {
  const s = await sseServer(EVENTS, SIZE);
  try {
    const res = await new Promise<IncomingMessage>((r) => get(s.url, r));
    res.pause();
    await new Promise((r) => setTimeout(r, 500)); // the writer fills the sockets, then waits
    const bound = s.highWaterMark() + SIZE + 64;
    assert.ok(s.highWaterMark() > 0 && s.highWaterMark() <= 64 * 1024, `high-water mark ${s.highWaterMark()}`);
    assert.ok(s.maxBuffered() <= bound, `buffered ${s.maxBuffered()} bytes in the server, bound ${bound}`);
    let text = "";
    res.setEncoding("utf8");
    res.on("data", (d: string) => (text += d));
    res.resume();
    await new Promise((r) => res.on("end", r));
    assert.equal(await s.finished, EVENTS);
    const ids = [...text.matchAll(/"i":(\d+)/g)].map((m) => Number(m[1]));
    assert.deepEqual(ids, Array.from({ length: EVENTS }, (_, i) => i));
    assert.ok(text.endsWith("data: [DONE]\n\n"));
    assert.ok(s.maxBuffered() <= bound, `buffered ${s.maxBuffered()} bytes in the server, bound ${bound}`);
  } finally {
    await s.close();
  }
});

test("a reader that leaves while the writer waits for the socket: drained() resolves and the writer stops", async () => {
  const s = await sseServer(EVENTS, SIZE);
  try {
    const res = await new Promise<IncomingMessage>((r) => get(s.url, r));
    res.pause();
    await new Promise((r) => setTimeout(r, 300));
    res.destroy();
    const sent = await s.finished;
    assert.ok(sent < EVENTS, `the writer stopped after ${sent} of ${EVENTS} events`);
  } finally {
    await s.close();
  }
});

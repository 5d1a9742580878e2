/**
 * Server-sent events as OpenAI streams them: `data: {json}\n\n` per chunk,
 * `data: [DONE]\n\n` at the end (chat and completions), or typed events
 * `event: <type>\ndata: {json}\n\n` with no end marker (the Responses API). Once the client went away (the socket
 * closed before end()) writes are dropped; cancelling the request behind the
 * stream is the route's job (routes/run-generation.ts: the request's client-gone signal).
 *
 * Backpressure: `send` and `event` return false once the socket's buffer is
 * past its high-water mark; the route then awaits `drained()` before it reads
 * the request's next output, and the engine's outputs merge while it waits
 * (engine-client.ts OutputStream), so a client that reads slowly, or not at
 * all, never makes the server buffer more than one output per request.
 */
import type { ServerResponse } from "node:http";

export class SseStream {
  readonly #res: ServerResponse;
  #closed = false;
  #ended = false;

  constructor(res: ServerResponse, headers: Record<string, string> = {}) {
    this.#res = res;
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
      "x-accel-buffering": "no",
      ...headers,
    });
    res.flushHeaders();
    res.on("close", () => {
      this.#closed = true;
    });
  }

  /** True once the client disconnected or the stream ended. */
  get closed(): boolean {
    return this.#closed || this.#ended;
  }

  /** Writes one `data:` event; false when the socket's buffer is full (await `drained()`) or the stream is closed. */
  send(data: unknown): boolean {
    if (this.closed) return false;
    return this.#res.write(`data: ${JSON.stringify(data)}\n\n`);
  }

  /** A typed event: `event: <type>` before its data (the Responses API's stream). Returns as `send` does. */
  event(type: string, data: unknown): boolean {
    if (this.closed) return false;
    return this.#res.write(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  /** Resolves once the socket's buffer drained below its high-water mark, or the stream closed; at once if it is not full. */
  drained(): Promise<void> {
    const res = this.#res;
    if (this.closed || !res.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        res.off("drain", done);
        res.off("close", done);
        resolve();
      };
      res.on("drain", done);
      res.on("close", done);
    });
  }

  /** Sends `data: [DONE]` (unless `done` is false: typed event streams have no end marker) and ends the response. */
  end(done = true): void {
    if (this.closed) return;
    this.#ended = true;
    this.#res.end(done ? "data: [DONE]\n\n" : "");
  }
}

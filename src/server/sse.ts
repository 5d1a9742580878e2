/**
 * Server-sent events as OpenAI streams them: `data: {json}\n\n` per chunk,
 * `data: [DONE]\n\n` at the end. Once the client went away (the socket
 * closed before end()) writes are dropped; cancelling the request behind the
 * stream is the route's job (routes/run-generation.ts: the request's client-gone signal).
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

  send(data: unknown): void {
    if (this.closed) return;
    this.#res.write(`data: ${JSON.stringify(data)}\n\n`);
  }

  /** Sends `data: [DONE]` and ends the response. */
  end(): void {
    if (this.closed) return;
    this.#ended = true;
    this.#res.end("data: [DONE]\n\n");
  }
}

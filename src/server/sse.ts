/**
 * Server-sent events as OpenAI streams them: `data: {json}\n\n` per chunk,
 * `data: [DONE]\n\n` at the end. The stream knows when the client went away
 * (the socket closed before end()) and tells its owner once, so the request
 * behind it can be cancelled; writes after that are dropped.
 */
import type { ServerResponse } from "node:http";

export class SseStream {
  readonly #res: ServerResponse;
  #closed = false;
  #ended = false;
  readonly #onDisconnect: (() => void)[] = [];

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
      if (!this.#ended) for (const f of this.#onDisconnect) f();
    });
  }

  /** True once the client disconnected or the stream ended. */
  get closed(): boolean {
    return this.#closed || this.#ended;
  }

  /** Calls `f` if the client disconnects before end(). */
  onDisconnect(f: () => void): void {
    this.#onDisconnect.push(f);
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

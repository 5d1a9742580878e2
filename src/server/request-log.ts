/**
 * One log line per request, written when its response closes, for 2xx, 4xx
 * and 5xx alike: what vLLM's access log ("POST /v1/chat/completions 200") and
 * its "Finished request" line, or llama-server's per-request timings, tell an
 * operator, in one logfmt-style line:
 *
 *   POST /v1/chat/completions 200 id=chatcmpl-3f… client=127.0.0.1 prompt_tokens=12 output_tokens=32 ttft=0.081s total=0.412s
 *   POST /v1/completions 400 id=req-7 client=127.0.0.1 prompt_tokens=- output_tokens=- ttft=- total=0.002s error="max_tokens must be …"
 *
 * `-` is a value the request never got to (no prompt was encoded, no token
 * came). Probes and scrapes (GET /health, GET /metrics) are not logged: a
 * load balancer's health check every few seconds would drown the rest. A response the client left before it ended logs status 499 (nginx's
 * "client closed request"). The dispatcher (server.ts) opens an entry per
 * request; the generation route fills in its id, tokens and first-token time.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { clip } from "../errors.js";

/** nginx's status for a request whose client closed the connection before the response ended. */
export const CLIENT_CLOSED_STATUS = 499;

export class RequestLogEntry {
  /** The request's id: the completion's id once a generation starts, else req-N. */
  id: string;
  promptTokens: number | null = null;
  outputTokens: number | null = null;
  /** performance.now() of the first output token, or null. */
  firstTokenAt: number | null = null;
  /** Why the request failed (an error answer, or an error event in a stream), or null. */
  error: string | null = null;
  /** performance.now() when the request arrived. */
  readonly startedAt = performance.now();

  constructor(id: string) {
    this.id = id;
  }

  /** Notes that an output token came now (only the first counts). */
  firstToken(): void {
    this.firstTokenAt ??= performance.now();
  }

  /** The line, given how the response ended and when (performance.now()). */
  format(method: string, path: string, status: number, client: string, endedAt: number): string {
    const count = (n: number | null): string => (n === null ? "-" : String(n));
    const seconds = (ms: number | null): string => (ms === null ? "-" : `${(ms / 1000).toFixed(3)}s`);
    const ttft = this.firstTokenAt === null ? null : this.firstTokenAt - this.startedAt;
    const error = this.error === null ? "" : ` error=${JSON.stringify(clip(this.error.split("\n", 1)[0]!, 200))}`;
    return (
      `${clip(method, 16)} ${clip(path)} ${status} id=${this.id} client=${client} prompt_tokens=${count(this.promptTokens)} ` +
      `output_tokens=${count(this.outputTokens)} ttft=${seconds(ttft)} total=${seconds(endedAt - this.startedAt)}${error}`
    );
  }
}

/** Paths whose requests get no line (health checks, Prometheus scrapes). */
export const UNLOGGED_PATHS: ReadonlySet<string> = new Set(["/health", "/metrics"]);

const entries = new WeakMap<ServerResponse, RequestLogEntry>();

export interface RequestLogHandle {
  entry: RequestLogEntry;
  /** The handler returned: the line goes out once the response has closed too. */
  done(): void;
  /** No line for this request (a client that left mid-upload: the dispatcher's rate-limited line tells of those). */
  skip(): void;
}

/**
 * Opens the request's entry. Its line is written through `write` once both
 * the response has closed (finished, or cut off by the client: 499) and the
 * handler has returned (`done()`, so a generation the client left has
 * counted its tokens); the total time is the response's.
 */
export function logRequest(req: IncomingMessage, res: ServerResponse, path: string, id: string, write: (line: string) => void): RequestLogHandle {
  const entry = new RequestLogEntry(id);
  entries.set(res, entry);
  const client = req.socket.remoteAddress ?? "-";
  let closed: { status: number; at: number } | null = null;
  let handled = false;
  let skipped = false;
  const flush = (): void => {
    if (closed !== null && handled && !skipped) write(entry.format(req.method ?? "-", path, closed.status, client, closed.at));
  };
  res.once("close", () => {
    closed = { status: res.writableFinished ? res.statusCode : CLIENT_CLOSED_STATUS, at: performance.now() };
    flush();
  });
  return {
    entry,
    done: () => {
      handled = true;
      flush();
    },
    skip: () => {
      skipped = true;
    },
  };
}

/** The request's log entry, if request logging is on. */
export function requestLogEntry(res: ServerResponse): RequestLogEntry | undefined {
  return entries.get(res);
}

/**
 * HTTP errors in OpenAI's shape, `{ error: { message, type, param, code } }`.
 * Handlers throw an HttpError (Hono's HTTPException, in effect); the one
 * dispatcher in server.ts maps whatever was thrown through toHttpError.
 */
import type { ServerResponse } from "node:http";
import { EngineRejectedError } from "../engine/engine-client.js";
import { ArgumentError } from "../errors.js";

export interface ErrorDetails {
  /** OpenAI's error type: "invalid_request_error", "not_found_error", … Default by status. */
  type?: string;
  /** The request field at fault. */
  param?: string | null;
  /** A machine-readable code: "model_not_found", "context_length_exceeded", … */
  code?: string | null;
}

const DEFAULT_TYPE: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  404: "not_found_error",
  405: "invalid_request_error",
  413: "invalid_request_error",
  429: "rate_limit_error",
  500: "internal_server_error",
  503: "service_unavailable_error",
};

export class HttpError extends Error {
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  readonly code: string | null;
  /** Extra response headers (Retry-After on a 429). */
  readonly headers: Readonly<Record<string, string>>;
  constructor(status: number, message: string, details: ErrorDetails = {}, headers: Record<string, string> = {}) {
    super(message);
    this.name = "HttpError";
    this.status = status;
    this.type = details.type ?? DEFAULT_TYPE[status] ?? (status >= 500 ? "internal_server_error" : "invalid_request_error");
    this.param = details.param ?? null;
    this.code = details.code ?? null;
    this.headers = headers;
  }

  toJSON(): { error: { message: string; type: string; param: string | null; code: string | null } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

/** The client closed its connection before its request was read: nothing to answer, worth one log line. */
export class ClientGoneError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ClientGoneError";
  }
}

/** A 400 naming the field at fault. */
export function badRequest(param: string | null, message: string, code: string | null = null): HttpError {
  return new HttpError(400, message, { param, code });
}

/** Seconds a 429 asks the client to wait (Retry-After): about the time a few decode steps free a slot. */
export const RETRY_AFTER_S = 1;

/** Maps anything a handler threw to the HttpError to answer with. */
export function toHttpError(e: unknown): HttpError {
  if (e instanceof HttpError) return e;
  if (e instanceof EngineRejectedError) {
    if (e.reason === "queue_full") {
      return new HttpError(429, `The server is busy: ${e.message}. Retry later.`, { code: "rate_limit_exceeded" }, { "retry-after": String(RETRY_AFTER_S) });
    }
    if (e.reason === "unavailable") return new HttpError(503, e.message);
    return badRequest(e.param, e.message);
  }
  if (e instanceof ArgumentError) return badRequest(e.argument, e.message);
  return new HttpError(500, `internal error: ${e instanceof Error ? e.message : String(e)}`);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

export function sendError(res: ServerResponse, error: HttpError): void {
  sendJson(res, error.status, error.toJSON(), { ...error.headers });
}

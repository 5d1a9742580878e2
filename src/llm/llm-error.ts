/**
 * LLMError: a request the server's routes refused or failed, with the
 * fields of the server's OpenAI error body (server/errors.ts HttpError →
 * `{ error: { message, type, param, code } }`) and its HTTP status — what the
 * openai client's APIError carries. A 400 names the request field at fault in
 * `param` in the body's snake_case spelling ("temperature", "response_format.json_schema.schema").
 */

export class LLMError extends Error {
  /** The HTTP status the server answered: 400 bad request, 429 busy, 500 generation failed, 503 shutting down. */
  readonly status: number;
  /** OpenAI's error type: "invalid_request_error", "rate_limit_error", "internal_server_error", … */
  readonly type: string;
  /** The request field at fault, or null. */
  readonly param: string | null;
  /** A machine-readable code ("context_length_exceeded", …), or null. */
  readonly code: string | null;
  constructor(status: number, body: { message?: unknown; type?: unknown; param?: unknown; code?: unknown }) {
    super(typeof body.message === "string" ? body.message : `the server answered ${status}`);
    this.name = "LLMError";
    this.status = status;
    this.type = typeof body.type === "string" ? body.type : "internal_server_error";
    this.param = typeof body.param === "string" ? body.param : null;
    this.code = typeof body.code === "string" ? body.code : null;
  }

  /** The error of a non-2xx answer, from its body (`{ error: {...} }`), or its status alone if the body is not that. */
  static async fromResponse(res: Response): Promise<LLMError> {
    const text = await res.text();
    let error: unknown;
    try {
      error = (JSON.parse(text) as { error?: unknown }).error;
    } catch {
      error = undefined;
    }
    return new LLMError(res.status, typeof error === "object" && error !== null ? error : { message: `the server answered ${res.status}: ${text.slice(0, 200)}` });
  }
}

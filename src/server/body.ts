/**
 * Reading a request body as JSON: a size limit (413), a nesting limit and a
 * 400 that says where the JSON broke (json-bytes.ts). A body of more than
 * OFF_THREAD_BYTES goes to a tokenizer worker without ever being whole on
 * the HTTP thread: its chunks are copied, as they arrive, into
 * SharedArrayBuffer segments the worker reads in place, and the worker
 * parses it and counts its prompt text, so a prompt that cannot fit the
 * context comes back as a count and a 400, not as a 15 MB string (copying,
 * concatenating and cloning megabytes cost the HTTP thread 100–300 ms on a
 * loaded machine, which /health and every stream waited out). A client that
 * goes away mid-upload is a ClientGoneError, not a server error.
 * A body beyond a shape bound (request-shape.ts: 10⁶ logit_bias entries or
 * messages) is a 400 naming the field, found in the worker for a big body,
 * here for a small one, before any route works on it. The content
 * type is not checked: `curl -d '{…}'` sends
 * application/x-www-form-urlencoded, and the body is JSON all the same.
 */
import type { IncomingMessage } from "node:http";
import { JsonBytesError, parseJsonBytes } from "../json-bytes.js";
import type { LongPromptText } from "../prompt-text.js";
import { type ServerContext, maxModelLen } from "./context.js";
import { whileConnected } from "./client-gone.js";
import { ClientGoneError, HttpError, badRequest } from "./errors.js";
import { refuseLongText } from "./prompt-length.js";
import { type ShapeViolation, findShapeViolation } from "../request-shape.js";

/** Default largest body: 16 MiB (long prompts as token ids fit many times over). */
export const MAX_BODY_BYTES = 16 * 2 ** 20;

/** Deepest nesting of arrays and objects a body may have (OpenAI bodies need < 10; JSON schemas a few dozen). */
export const MAX_JSON_DEPTH = 256;

/** Bodies larger than this are parsed by `parseOffThread` when one is given. */
export const OFF_THREAD_BYTES = 256 * 1024;

/** Bytes per SharedArrayBuffer segment of a big body. */
const SEGMENT_BYTES = 2 ** 20;

export interface ReadJsonOptions {
  maxBytes?: number;
  /**
   * Parses a body of more than OFF_THREAD_BYTES elsewhere (TokenizerPool.parseJson):
   * its bytes, in order, on SharedArrayBuffers. Resolves with the value, or
   * throws the HTTP error the body earns.
   */
  parseOffThread?: (segments: Uint8Array[], maxDepth: number) => Promise<unknown>;
  /** Checks a body parsed here (a small one): throws the HTTP error it earns (parseOffThread checks its own). */
  checkParsed?: (value: unknown) => void;
  /** The client-gone signal (client-gone.ts): a client that leaves while its body is parsed elsewhere ends the read at once. */
  signal?: AbortSignal;
}

/** A body's bytes: small ones as Node's chunks, big ones copied into shared segments as they come. */
class BodyBytes {
  size = 0;
  readonly #chunks: Buffer[] = [];
  readonly #segments: Uint8Array[] = [];
  #filled = 0;
  readonly #shared: boolean;

  constructor(shared: boolean) {
    this.#shared = shared;
  }

  push(chunk: Buffer): void {
    this.size += chunk.length;
    if (!this.#shared || this.size <= OFF_THREAD_BYTES) {
      this.#chunks.push(chunk);
      return;
    }
    for (const c of this.#chunks.splice(0)) this.#copy(c);
    this.#copy(chunk);
  }

  #copy(chunk: Uint8Array): void {
    for (let at = 0; at < chunk.length; ) {
      let segment = this.#segments.at(-1);
      if (segment === undefined || this.#filled === segment.length) {
        segment = new Uint8Array(new SharedArrayBuffer(SEGMENT_BYTES));
        this.#segments.push(segment);
        this.#filled = 0;
      }
      const n = Math.min(chunk.length - at, segment.length - this.#filled);
      segment.set(chunk.subarray(at, at + n), this.#filled);
      this.#filled += n;
      at += n;
    }
  }

  /** Big bodies: the filled part of each shared segment; null for a small body. */
  segments(): Uint8Array[] | null {
    if (this.#segments.length === 0) return null;
    const last = this.#segments.length - 1;
    return this.#segments.map((s, i) => (i === last ? s.subarray(0, this.#filled) : s));
  }

  whole(): Buffer {
    return Buffer.concat(this.#chunks);
  }
}

export async function readJsonBody(req: IncomingMessage, options: ReadJsonOptions = {}): Promise<unknown> {
  const maxBytes = options.maxBytes ?? MAX_BODY_BYTES;
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > maxBytes) throw new HttpError(413, `the request body is ${declared} bytes, more than the limit of ${maxBytes}`);
  const body = new BodyBytes(options.parseOffThread !== undefined);
  let value: unknown;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      if (body.size + chunk.length > maxBytes) throw new HttpError(413, `the request body is more than the limit of ${maxBytes} bytes`);
      body.push(chunk);
    }
  } catch (e) {
    if (e instanceof HttpError) throw e;
    throw new ClientGoneError(`the client went away during the upload (${body.size} bytes read): ${(e as Error).message}`);
  }
  try {
    const segments = body.segments();
    if (segments !== null) {
      const parsed = options.parseOffThread!(segments, MAX_JSON_DEPTH);
      return await (options.signal === undefined ? parsed : whileConnected(options.signal, parsed));
    }
    value = parseJsonBytes(body.whole(), MAX_JSON_DEPTH);
  } catch (e) {
    if (!(e instanceof JsonBytesError)) throw e;
    throw badRequest(null, `the request body ${e.message}`, e.message.startsWith("is empty") ? null : "invalid_json");
  }
  options.checkParsed?.(value);
  return value;
}

/**
 * The server's way to read bodies: big ones are parsed in its tokenizer pool,
 * which also refuses a prompt text the context cannot hold (prompt-length.ts's
 * character bound, the same 400 the routes give for a small body).
 */
export function bodyOptions(ctx: ServerContext, signal: AbortSignal): ReadJsonOptions {
  return {
    signal,
    parseOffThread: async (segments, maxDepth) => {
      const limit = maxModelLen(ctx);
      const r = await ctx.tokenizerPool.parseJson(segments, maxDepth, limit === null ? null : limit * ctx.tokenizer.maxTokenChars, { maxTokenIds: limit }, { signal });
      if ("shape" in r) throw shapeError(r.shape);
      if ("longPrompt" in r) refuseLongPrompt(ctx, r.longPrompt);
      return (r as { value: unknown }).value;
    },
    checkParsed: (value) => {
      const v = findShapeViolation(value, { maxTokenIds: maxModelLen(ctx) });
      if (v !== null) throw shapeError(v);
    },
  };
}

/** A 400 for a body beyond a shape bound (OpenAI's code for an array past its maximum length). */
function shapeError(v: ShapeViolation): HttpError {
  return badRequest(v.param, v.message, "array_above_max_length");
}

function refuseLongPrompt(ctx: ServerContext, found: LongPromptText): never {
  refuseLongText(ctx, found.chars, found.param);
  throw new Error(`the tokenizer worker counted ${found.chars} characters at ${found.param}, within the limit`);
}

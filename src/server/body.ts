/**
 * Reading a request body as JSON: a size limit (413), a nesting limit and a
 * 400 that says where the JSON broke (json-bytes.ts). A body of more than
 * OFF_THREAD_BYTES is decoded and parsed off the HTTP thread (in a tokenizer
 * worker: megabytes of UTF-8 cost hundreds of ms on a loaded machine, which
 * /health and every stream would wait out). A client that goes away
 * mid-upload is a ClientGoneError, not a server error. The content type is
 * not checked: `curl -d '{…}'` sends application/x-www-form-urlencoded, and
 * the body is JSON all the same.
 */
import type { IncomingMessage } from "node:http";
import { JsonBytesError, parseJsonBytes } from "../json-bytes.js";
import type { ServerContext } from "./context.js";
import { ClientGoneError, HttpError, badRequest } from "./errors.js";

/** Default largest body: 16 MiB (long prompts as token ids fit many times over). */
export const MAX_BODY_BYTES = 16 * 2 ** 20;

/** Deepest nesting of arrays and objects a body may have (OpenAI bodies need < 10; JSON schemas a few dozen). */
export const MAX_JSON_DEPTH = 256;

/** Bodies larger than this are parsed by `parseOffThread` when one is given. */
export const OFF_THREAD_BYTES = 256 * 1024;

export interface ReadJsonOptions {
  maxBytes?: number;
  /** Runs parseJsonBytes elsewhere (TokenizerPool.parseJson), for bodies over OFF_THREAD_BYTES. */
  parseOffThread?: (bytes: Uint8Array, maxDepth: number) => Promise<unknown>;
}

export async function readJsonBody(req: IncomingMessage, options: ReadJsonOptions = {}): Promise<unknown> {
  const maxBytes = options.maxBytes ?? MAX_BODY_BYTES;
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > maxBytes) throw new HttpError(413, `the request body is ${declared} bytes, more than the limit of ${maxBytes}`);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBytes) throw new HttpError(413, `the request body is more than the limit of ${maxBytes} bytes`);
      chunks.push(chunk);
    }
  } catch (e) {
    if (e instanceof HttpError) throw e;
    throw new ClientGoneError(`the client went away during the upload (${size} bytes read): ${(e as Error).message}`);
  }
  const bytes = Buffer.concat(chunks);
  try {
    if (options.parseOffThread !== undefined && bytes.length > OFF_THREAD_BYTES) return await options.parseOffThread(bytes, MAX_JSON_DEPTH);
    return parseJsonBytes(bytes, MAX_JSON_DEPTH);
  } catch (e) {
    if (!(e instanceof JsonBytesError)) throw e;
    throw badRequest(null, `the request body ${e.message}`, e.message.startsWith("is empty") ? null : "invalid_json");
  }
}

/** The server's way to read bodies: big ones are parsed in its tokenizer pool. */
export function bodyOptions(ctx: ServerContext): ReadJsonOptions {
  return { parseOffThread: (bytes, maxDepth) => ctx.tokenizerPool.parseJson(bytes, maxDepth) };
}

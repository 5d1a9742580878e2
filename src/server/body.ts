/**
 * Reading a request body as JSON: a size limit (413), a nesting limit (400:
 * 100k nested arrays would overflow the stack of whatever walks the value
 * next), and a 400 that says where the JSON broke. A client that goes away
 * mid-upload is a ClientGoneError, not a server error. The content type is
 * not checked: `curl -d '{…}'` sends application/x-www-form-urlencoded, and
 * the body is JSON all the same.
 */
import type { IncomingMessage } from "node:http";
import { ClientGoneError, HttpError, badRequest } from "./errors.js";

/** Default largest body: 16 MiB (long prompts as token ids fit many times over). */
export const MAX_BODY_BYTES = 16 * 2 ** 20;

/** Deepest nesting of arrays and objects a body may have (OpenAI bodies need < 10; JSON schemas a few dozen). */
export const MAX_JSON_DEPTH = 256;

export async function readJsonBody(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<unknown> {
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
  if (jsonDepth(bytes, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) throw badRequest(null, `the request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`, "invalid_json");
  const text = bytes.toString("utf8");
  if (text.trim() === "") throw badRequest(null, "the request body is empty: expected a JSON object");
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(null, `the request body is not valid JSON: ${(e as Error).message}`, "invalid_json");
  }
}

/**
 * The deepest nesting of [ and { in UTF-8 JSON (outside strings), counted up
 * to limit + 1. Scans bytes, not a string: '"', '\\', brackets are ASCII and
 * never part of a multi-byte character.
 */
export function jsonDepth(bytes: Uint8Array, limit: number): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c === 0x22) {
      // Skip the string (natively: a prompt is mostly one long string) to the next quote that an even run of backslashes precedes.
      for (;;) {
        const quote = bytes.indexOf(0x22, i + 1);
        if (quote < 0) return deepest; // unterminated: JSON.parse says so
        let b = quote - 1;
        while (bytes[b] === 0x5c) b--;
        i = quote;
        if ((quote - 1 - b) % 2 === 0) break;
      }
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

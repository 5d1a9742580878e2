/**
 * Reading a request body as JSON: a size limit (413) and a 400 that says
 * where the JSON broke. The content type is not checked: `curl -d '{…}'`
 * sends application/x-www-form-urlencoded, and the body is JSON all the same.
 */
import type { IncomingMessage } from "node:http";
import { HttpError, badRequest } from "./errors.js";

/** Default largest body: 16 MiB (long prompts as token ids fit many times over). */
export const MAX_BODY_BYTES = 16 * 2 ** 20;

export async function readJsonBody(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<unknown> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > maxBytes) throw new HttpError(413, `the request body is ${declared} bytes, more than the limit of ${maxBytes}`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new HttpError(413, `the request body is more than the limit of ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") throw badRequest(null, "the request body is empty: expected a JSON object");
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(null, `the request body is not valid JSON: ${(e as Error).message}`, "invalid_json");
  }
}

/**
 * UTF-8 JSON bytes → a value, with a nesting limit: 100k nested arrays parse,
 * but would overflow the stack of whatever walks the value next. Pure, so the
 * server can run it on its HTTP thread for small bodies and in a tokenizer
 * worker (TokenizerPool.parseJson) for big ones.
 */

/** What is wrong with a JSON body: the message completes "the request body …". */
export class JsonBytesError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "JsonBytesError";
  }
}

/** Parses UTF-8 JSON; throws JsonBytesError when it is empty, nests deeper than maxDepth, or does not parse. */
export function parseJsonBytes(bytes: Uint8Array, maxDepth: number): unknown {
  if (jsonDepth(bytes, maxDepth) > maxDepth) throw new JsonBytesError(`nests arrays and objects more than ${maxDepth} levels deep`);
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
  if (text.trim() === "") throw new JsonBytesError("is empty: expected a JSON object");
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new JsonBytesError(`is not valid JSON: ${(e as Error).message}`);
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

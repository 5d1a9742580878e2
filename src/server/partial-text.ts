/**
 * Reading a model's reply while it is still growing (the tool-call parsers'
 * shared helpers): a tag that may be half written at the end of the text, and
 * JSON that may be cut anywhere. readJsonPrefix is a recursive-descent reader
 * (RFC 8259's grammar) that returns the spans of what it has seen, so a parser
 * can quote a value's raw text (a call's `arguments`) or decode the part of a
 * string written so far — the partial-JSON reading vLLM's and llama.cpp's
 * streaming tool parsers do, as spans rather than repaired values.
 */

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
export function partialTagAtEnd(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) if (text.endsWith(tag.slice(0, n))) return n;
  return 0;
}

/**
 * A JSON value seen from `start`; `end` is the index just past it, or null
 * when the text ends inside it. An object lists the members whose key is
 * complete (value null until it starts); an array, the items begun.
 */
export type JsonSpan =
  | { type: "object"; start: number; end: number | null; members: { key: string; value: JsonSpan | null }[] }
  | { type: "array"; start: number; end: number | null; items: JsonSpan[] }
  | { type: "string"; start: number; end: number | null }
  | { type: "scalar"; start: number; end: number | null };

/** Thrown inside the reader when the text is not (a prefix of) JSON. */
class NotJson extends Error {}

const WS = /[ \t\n\r]*/y;
/** An escape: \" \\ \/ \b \f \n \r \t, or \u and up to four hex digits (a cut one has fewer). */
const ESCAPE = /\\(?:["\\/bfnrt]|u[0-9A-Fa-f]{0,4})/y;
/** The characters a number or literal is made of (how far one may run). */
const SCALAR_CHARS = /[-+0-9.a-zA-Z]*/y;
const SCALAR = /(?:true|false|null|-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)/y;

function skipWs(text: string, i: number): number {
  WS.lastIndex = i;
  WS.exec(text);
  return WS.lastIndex;
}

/** Index past the string whose opening quote is at `i`, or null when the text ends inside it. */
function stringEnd(text: string, i: number): number | null {
  for (let j = i + 1; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === 0x5c) {
      ESCAPE.lastIndex = j;
      const m = ESCAPE.exec(text);
      const whole = m !== null && (m[0][1] !== "u" || m[0].length === 6);
      if (!whole && (m === null ? j + 1 < text.length : j + m[0].length < text.length)) throw new NotJson();
      j += (m?.[0].length ?? 1) - 1;
    } else if (c === 0x22) return j + 1;
    else if (c < 0x20) throw new NotJson();
  }
  return null;
}

/** A scalar at `i`; one that runs to the end of the text may still grow ("12." → "12.5", "tr" → "true"). */
function readScalar(text: string, i: number): JsonSpan {
  SCALAR_CHARS.lastIndex = i;
  SCALAR_CHARS.exec(text);
  if (SCALAR_CHARS.lastIndex === text.length) {
    const rest = text.slice(i);
    if (/^-?[0-9]*(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?$/.test(rest) || "true".startsWith(rest) || "false".startsWith(rest) || "null".startsWith(rest)) return { type: "scalar", start: i, end: null };
  }
  SCALAR.lastIndex = i;
  if (SCALAR.exec(text) === null) throw new NotJson();
  return { type: "scalar", start: i, end: SCALAR.lastIndex };
}

function readValue(text: string, i: number): JsonSpan {
  const c = text[i];
  if (c === "{") return readObject(text, i);
  if (c === "[") return readArray(text, i);
  if (c === '"') return { type: "string", start: i, end: stringEnd(text, i) };
  return readScalar(text, i);
}

function readObject(text: string, start: number): JsonSpan {
  const members: { key: string; value: JsonSpan | null }[] = [];
  const open = { type: "object" as const, start, end: null, members };
  let i = skipWs(text, start + 1);
  if (text[i] === "}") return { ...open, end: i + 1 };
  for (;;) {
    if (i >= text.length) return open;
    if (text[i] !== '"') throw new NotJson();
    const keyEnd = stringEnd(text, i);
    if (keyEnd === null) return open;
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    i = skipWs(text, keyEnd);
    if (i >= text.length) return open;
    if (text[i] !== ":") throw new NotJson();
    i = skipWs(text, i + 1);
    if (i >= text.length) {
      members.push({ key, value: null });
      return open;
    }
    const value = readValue(text, i);
    members.push({ key, value });
    if (value.end === null) return open;
    i = skipWs(text, value.end);
    if (i >= text.length) return open;
    if (text[i] === "}") return { ...open, end: i + 1 };
    if (text[i] !== ",") throw new NotJson();
    i = skipWs(text, i + 1);
  }
}

function readArray(text: string, start: number): JsonSpan {
  const items: JsonSpan[] = [];
  const open = { type: "array" as const, start, end: null, items };
  let i = skipWs(text, start + 1);
  if (text[i] === "]") return { ...open, end: i + 1 };
  for (;;) {
    if (i >= text.length) return open;
    const item = readValue(text, i);
    items.push(item);
    if (item.end === null) return open;
    i = skipWs(text, item.end);
    if (i >= text.length) return open;
    if (text[i] === "]") return { ...open, end: i + 1 };
    if (text[i] !== ",") throw new NotJson();
    i = skipWs(text, i + 1);
  }
}

/**
 * The JSON value at `start` (after whitespace) of a text that may stop
 * anywhere: its spans, or null when the text is not a prefix of JSON there
 * (or holds nothing yet but whitespace).
 */
export function readJsonPrefix(text: string, start = 0): JsonSpan | null {
  const i = skipWs(text, start);
  if (i >= text.length) return null;
  try {
    return readValue(text, i);
  } catch (e) {
    if (e instanceof NotJson || e instanceof SyntaxError) return null;
    throw e;
  }
}

/** The decoded characters of a string span so far (a partial escape at the end is left out). */
export function decodeStringSpan(text: string, span: JsonSpan & { type: "string" }): string {
  if (span.end !== null) return JSON.parse(text.slice(span.start, span.end)) as string;
  // Up to the last whole character or escape (an escape may be cut at the end).
  const body = text.slice(span.start + 1);
  let whole = 0;
  for (let j = 0; j < body.length; whole = j) {
    if (body[j] !== "\\") j++;
    else if (body[j + 1] === undefined || (body[j + 1] === "u" && j + 6 > body.length)) break;
    else j += body[j + 1] === "u" ? 6 : 2;
  }
  return JSON.parse(`"${body.slice(0, whole)}"`) as string;
}

/** A value's text as the reply wrote it: whole once complete, else what is there with trailing whitespace held back. */
export function spanText(text: string, span: JsonSpan): string {
  return span.end !== null ? text.slice(span.start, span.end) : text.slice(span.start).trimEnd();
}

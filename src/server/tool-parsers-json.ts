/**
 * The tool-call parsers whose calls are JSON objects {"name": …, "arguments": …}
 * inside more JSON, read with partial-text.ts's span reader so a prefix yields
 * a prefix of the whole (see tool-parsers.ts):
 *
 *   mistral   text, then [TOOL_CALLS] and a JSON array of calls (vLLM's
 *             MistralToolParser; llama.cpp's Mistral Nemo format). The ids
 *             Mistral writes beside them are dropped: the server gives its own.
 *   generic   the whole reply is one JSON object: {"tool_call": call},
 *             {"tool_calls": [call, …]} or {"response": "text"} (llama.cpp's
 *             COMMON_CHAT_FORMAT_GENERIC, for templates with no tool format).
 */
import { type JsonSpan, decodeStringSpan, partialTagAtEnd, readJsonPrefix, spanText } from "./partial-text.js";
import type { ParsedOutput, ParsedToolCall } from "./tool-parse-types.js";

const TOOL_CALLS = "[TOOL_CALLS]";

function member(span: JsonSpan & { type: "object" }, ...keys: string[]): JsonSpan | null {
  return span.members.find((m) => keys.includes(m.key))?.value ?? null;
}

/**
 * A call object's span → the call, once its name is whole; its arguments'
 * text so far. Arguments given as a JSON string (some models quote them) are
 * that string's text, once it is complete.
 */
function callOf(text: string, span: JsonSpan): ParsedToolCall | null {
  if (span.type !== "object") return null;
  const name = member(span, "name");
  if (name === null || name.type !== "string" || name.end === null) return null;
  const done = span.end !== null;
  const args = member(span, "arguments", "parameters");
  let argsText: string;
  if (args === null) argsText = done ? "{}" : "";
  else if (args.type === "string") argsText = args.end === null ? "" : decodeStringSpan(text, args).trim();
  else argsText = spanText(text, args);
  return { name: decodeStringSpan(text, name), arguments: argsText, done };
}

/** The calls of an array span (or of one bare call object): in order, up to the first that cannot be read yet. */
function callsOf(text: string, span: JsonSpan, final: boolean): ParsedToolCall[] {
  const items = span.type === "array" ? span.items : [span];
  const calls: ParsedToolCall[] = [];
  for (const item of items) {
    const call = callOf(text, item);
    if (call !== null) calls.push(call);
    else if (!final) break; // a later call may not be listed before this one is
  }
  return calls;
}

export function parseMistral(text: string, final: boolean): ParsedOutput {
  const at = text.indexOf(TOOL_CALLS);
  if (at < 0) return { content: final ? text : text.slice(0, text.length - partialTagAtEnd(text, TOOL_CALLS)), calls: [] };
  const content = text.slice(0, at);
  const span = readJsonPrefix(text, at + TOOL_CALLS.length);
  if (span === null || (span.type !== "array" && span.type !== "object")) {
    // Nothing after the marker yet, or no JSON: the marker and the rest stay text once the reply ends.
    return { content: final ? text : content, calls: [] };
  }
  const calls = callsOf(text, span, final);
  const after = span.end !== null && final ? text.slice(span.end).trim() : "";
  return { content: after === "" ? content : `${content}${after}`, calls };
}

export function parseGeneric(text: string, final: boolean): ParsedOutput {
  const root = readJsonPrefix(text);
  const first = root?.type === "object" ? (root.members[0] ?? null) : null;
  const asText = { content: final ? text : "", calls: [] };
  if (first === null) return asText;
  const value = first.value;
  switch (first.key) {
    case "response":
      if (value === null) return { content: "", calls: [] };
      if (value.type === "string") return { content: decodeStringSpan(text, value), calls: [] };
      return { content: value.end !== null || final ? spanText(text, value) : "", calls: [] };
    case "tool_call":
    case "tool_calls":
      return { content: "", calls: value === null ? [] : callsOf(text, value, final) };
    default:
      return asText;
  }
}

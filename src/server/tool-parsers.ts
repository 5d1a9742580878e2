/**
 * Tool-call parsers (vLLM's --tool-call-parser): a model's text → content and
 * tool calls, on a finished text or on a prefix of one while streaming.
 *
 *   hermes        <tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>, any number,
 *                 with text around them (Qwen2.5, Qwen3, Hermes)
 *   llama3_json   {"name": "f", "parameters": {…}}, the whole reply, optionally after
 *                 <|python_tag|> (Llama 3.1 / 3.2 / 3.3)
 *   mistral       text, then [TOOL_CALLS][{"name": "f", "arguments": {…}}, …] (Mistral 7B v0.3,
 *                 Nemo, Small): tool-parsers-json.ts
 *   qwen3_coder   <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>
 *                 (Qwen3-Coder's XML): tool-parser-qwen3-coder.ts
 *   generic       {"tool_call": {…}} | {"tool_calls": [{…}, …]} | {"response": "…"}, for a
 *                 template with no tool format (llama.cpp's generic handler):
 *                 tool-parsers-json.ts
 *
 * `arguments` is the raw JSON text the model wrote for the arguments, trimmed,
 * so the fragments a stream sends concatenate exactly to it (qwen3_coder writes
 * no JSON: its arguments are the parameters' JSON, compact, one parameter at a
 * time). On a prefix, the parse holds back whatever may still turn out to be
 * markup (a partial "<tool_call>", the closing "}" and "</tool_call>"):
 * everything it returns is a prefix of what the whole text will give.
 */
import { partialTagAtEnd } from "./partial-text.js";
import { TOOL_CALL_CLOSE as CLOSE, TOOL_CALL_OPEN as OPEN, taggedToolCalls } from "./tool-call-tags.js";
import { parseQwen3Coder } from "./tool-parser-qwen3-coder.js";
import { parseGeneric, parseMistral } from "./tool-parsers-json.js";
import type { ParsedOutput, ParsedToolCall, ToolSchema } from "./tool-parse-types.js";

export type ToolParserName = "hermes" | "llama3_json" | "mistral" | "qwen3_coder" | "generic";

export const TOOL_PARSERS: readonly ToolParserName[] = ["hermes", "llama3_json", "mistral", "qwen3_coder", "generic"];

export type { ParsedOutput, ParsedToolCall, ToolSchema } from "./tool-parse-types.js";

const PYTHON_TAG = "<|python_tag|>";

/**
 * The parser a chat template was written for: the one whose markup it renders,
 * else "generic" (its tools go into the system prompt); null without a template.
 */
export function parserForTemplate(template: string | null): ToolParserName | null {
  if (template === null) return null;
  if (template.includes("<function=") && template.includes("<parameter=")) return "qwen3_coder";
  if (template.includes(OPEN)) return "hermes";
  if (template.includes("[TOOL_CALLS]")) return "mistral";
  if (template.includes(PYTHON_TAG) || template.includes('"parameters"')) return "llama3_json";
  return "generic";
}

/** `{"name": "f", "<key>": ` at the start of a call's text: the name and where the arguments start. */
function callHeader(body: string, keys: string): { name: string; argsStart: number } | null {
  const m = new RegExp(`^\\s*\\{\\s*"name"\\s*:\\s*"((?:[^"\\\\]|\\\\.)*)"\\s*,\\s*"(?:${keys})"\\s*:\\s*`).exec(body);
  if (m === null) return null;
  try {
    return { name: JSON.parse(`"${m[1]}"`) as string, argsStart: m[0].length };
  } catch {
    return null;
  }
}

/** One call's text (the JSON object) → the call; `closed` when its end is known. */
function parseCall(body: string, keys: string, closed: boolean): ParsedToolCall | null {
  const h = callHeader(body, keys);
  if (h === null) return null;
  let args = body.slice(h.argsStart);
  if (closed) {
    try {
      JSON.parse(body);
    } catch {
      return null;
    }
    return { name: h.name, arguments: args.replace(/\s*\}\s*$/, "").trim(), done: true };
  }
  // Still open: hold back a partial closing tag, then the object's own "}" and whitespace.
  args = args.slice(0, args.length - partialTagAtEnd(args, CLOSE)).replace(/\s*\}?\s*$/, "");
  return { name: h.name, arguments: args, done: false };
}

function parseHermes(text: string, final: boolean): ParsedOutput {
  return taggedToolCalls(text, final, (body, closed) => parseCall(body, "arguments", closed));
}

function parseLlama3(text: string, final: boolean): ParsedOutput {
  let body = text.trimStart();
  if (body.startsWith(PYTHON_TAG)) body = body.slice(PYTHON_TAG.length).trimStart();
  if (!final && PYTHON_TAG.startsWith(body)) return { content: "", calls: [] }; // "" or a partial <|python_tag|>
  if (!body.startsWith("{")) return { content: text, calls: [] };
  const call = parseCall(body, "parameters|arguments", final);
  if (call !== null) return { content: "", calls: [call] };
  return final ? { content: text, calls: [] } : { content: "", calls: [] };
}

/** Content and tool calls of `text`; `final` when no more text will come. `tools`: the request's (qwen3_coder reads their schemas). */
export function parseToolOutput(parser: ToolParserName, text: string, final: boolean, tools: readonly ToolSchema[] = []): ParsedOutput {
  switch (parser) {
    case "hermes":
      return parseHermes(text, final);
    case "llama3_json":
      return parseLlama3(text, final);
    case "mistral":
      return parseMistral(text, final);
    case "qwen3_coder":
      return parseQwen3Coder(text, final, tools);
    case "generic":
      return parseGeneric(text, final);
  }
}

/**
 * Tool-call parsers (vLLM's --tool-call-parser): a model's text → content and
 * tool calls, on a finished text or on a prefix of one while streaming.
 *
 *   hermes        <tool_call>\n{"name": "f", "arguments": {…}}\n</tool_call>, any number,
 *                 with text around them (Qwen2.5, Qwen3, Hermes)
 *   llama3_json   {"name": "f", "parameters": {…}}, the whole reply, optionally after
 *                 <|python_tag|> (Llama 3.1 / 3.2 / 3.3)
 *
 * `arguments` is the raw JSON text the model wrote for the arguments, trimmed,
 * so the fragments a stream sends concatenate exactly to it. On a prefix, the
 * parse holds back whatever may still turn out to be markup (a partial
 * "<tool_call>", the closing "}" and "</tool_call>"): everything it returns
 * is a prefix of what the whole text will give.
 */
export type ToolParserName = "hermes" | "llama3_json";

export const TOOL_PARSERS: readonly ToolParserName[] = ["hermes", "llama3_json"];

export interface ParsedToolCall {
  name: string;
  /** The arguments' JSON text so far (all of it once `done`). */
  arguments: string;
  /** The call's text is complete and parses. */
  done: boolean;
}

export interface ParsedOutput {
  content: string;
  calls: ParsedToolCall[];
}

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";
const PYTHON_TAG = "<|python_tag|>";

/** The parser a chat template was written for, or null when it renders no tool calls. */
export function parserForTemplate(template: string | null): ToolParserName | null {
  if (template === null) return null;
  if (template.includes(OPEN)) return "hermes";
  if (template.includes(PYTHON_TAG) || template.includes('"parameters"')) return "llama3_json";
  return null;
}

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialTagAtEnd(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) if (text.endsWith(tag.slice(0, n))) return n;
  return 0;
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
  const calls: ParsedToolCall[] = [];
  let content = "";
  let at = 0;
  for (;;) {
    const open = text.indexOf(OPEN, at);
    if (open < 0) {
      const rest = text.slice(at);
      content += final ? rest : rest.slice(0, rest.length - partialTagAtEnd(rest, OPEN));
      break;
    }
    content += text.slice(at, open);
    const close = text.indexOf(CLOSE, open + OPEN.length);
    const body = text.slice(open + OPEN.length, close < 0 ? undefined : close);
    const call = parseCall(body, "arguments", close >= 0);
    if (call !== null && (close >= 0 || !final)) calls.push(call);
    else if (close >= 0 || final) content += text.slice(open, close < 0 ? undefined : close + CLOSE.length);
    if (close < 0) break;
    at = close + CLOSE.length;
  }
  return { content, calls };
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

/** Content and tool calls of `text`; `final` when no more text will come. */
export function parseToolOutput(parser: ToolParserName, text: string, final: boolean): ParsedOutput {
  return parser === "hermes" ? parseHermes(text, final) : parseLlama3(text, final);
}

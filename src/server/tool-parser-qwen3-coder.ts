/**
 * The qwen3_coder tool-call parser (vLLM's Qwen3CoderToolParser): Qwen3-Coder
 * writes calls as XML, with text around them,
 *
 *   <tool_call>
 *   <function=get_weather>
 *   <parameter=city>
 *   Paris
 *   </parameter>
 *   <parameter=days>
 *   3
 *   </parameter>
 *   </function>
 *   </tool_call>
 *
 * A value loses one leading and one trailing newline; a parameter whose schema
 * type is "string" (or that the tool's schema does not list) stays text, any
 * other is read as JSON when it parses (3 → 3, true → true, {"a": 1} → {…})
 * and kept as text when it does not, as vLLM does. An enum member may come
 * bare or JSON-quoted ("UTC", as XGrammar's qwen_xml_parameter writes it). `arguments` is the
 * parameters as compact JSON ({"city":"Paris","days":3}), grown one whole
 * parameter at a time while streaming, so every prefix leads the whole.
 */
import { taggedToolCalls } from "./tool-call-tags.js";
import type { ParsedOutput, ParsedToolCall, ToolSchema } from "./tool-parse-types.js";

const FUNCTION = /^\s*<function=([^>\n]+)>/;
const PARAMETER = /<parameter=([^>\n]+)>([\s\S]*?)<\/parameter>/g;

interface ParameterSchema {
  type?: unknown;
  enum?: unknown;
}

/** One parameter's schema, or null when the tool does not describe it. */
function parameterSchema(tools: readonly ToolSchema[], fn: string, param: string): ParameterSchema | null {
  const schema = tools.find((t) => t.name === fn)?.parameters as { properties?: Record<string, ParameterSchema> } | undefined;
  return schema?.properties?.[param] ?? null;
}

function parseJson(text: string): { value: unknown } | null {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return null;
  }
}

/** A parameter's text → its value: text for strings, else JSON when it parses; an enum's member as written or JSON-quoted. */
function parameterValue(raw: string, schema: ParameterSchema | null): unknown {
  const value = raw.replace(/^\n/, "").replace(/\n$/, "");
  if (schema === null) return value;
  if (Array.isArray(schema.enum)) {
    const quoted = parseJson(value);
    if (quoted !== null && schema.enum.includes(quoted.value)) return quoted.value;
    if (schema.enum.includes(value)) return value;
  }
  const types = typeof schema.type === "string" ? [schema.type] : Array.isArray(schema.type) ? schema.type : [];
  if (types.length > 0 && types.every((t) => t === "string")) return value;
  const parsed = parseJson(value);
  return parsed === null ? value : parsed.value;
}

/** One call's body (between the tags) → the call; `closed` once </tool_call> was seen. Null: not a call (yet). */
function parseCall(body: string, closed: boolean, tools: readonly ToolSchema[]): ParsedToolCall | null {
  const fn = FUNCTION.exec(body);
  if (fn === null) return null;
  const name = fn[1]!.trim();
  const entries: string[] = [];
  for (const m of body.slice(fn[0].length).matchAll(PARAMETER)) {
    const param = m[1]!.trim();
    entries.push(`${JSON.stringify(param)}:${JSON.stringify(parameterValue(m[2]!, parameterSchema(tools, name, param)))}`);
  }
  const done = closed && body.includes("</function>");
  if (closed && !done) return null;
  return { name, arguments: `{${entries.join(",")}${done ? "}" : ""}`, done };
}

export function parseQwen3Coder(text: string, final: boolean, tools: readonly ToolSchema[]): ParsedOutput {
  return taggedToolCalls(text, final, (body, closed) => parseCall(body, closed, tools));
}

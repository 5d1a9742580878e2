/**
 * The grammar a tool-calling reply follows, per parser and tool_choice (vLLM's
 * structured-output tool calling; llama.cpp's common_chat_params_init_* build
 * the same shapes as GBNF). Everything here is a GrammarSpec that the
 * structured-output layer already compiles: a JSON schema, an XGrammar
 * structural tag, or the tool_calls EBNF.
 *
 *   "auto"       the model writes text until it opens a call (a triggered tag); the
 *                call then follows its tool's schema. generic has no trigger: the
 *                reply is {"tool_call"…} or {"response": "…"}
 *   "required"   calls only, one or (parallel_tool_calls) several
 *   named        exactly one call, of that function; the grammar ends after it, so
 *                the only next token is end-of-sequence
 */
import type { GrammarSpec } from "../structured/grammar-spec.js";
import { type Json, isObject } from "./fields.js";
import type { ToolDefinition, ToolPlan } from "./tool-plan.js";

/** One call's JSON schema: {"name": <one of the tools>, "<key>": <its parameters>}, in that order. */
function callSchema(tools: readonly ToolDefinition[], key: string): Json {
  const branches = tools.map((t) => ({ type: "object", properties: { name: { enum: [t.name] }, [key]: t.parameters }, required: ["name", key], additionalProperties: false }));
  return branches.length === 1 ? branches[0]! : { anyOf: branches };
}

function structuralTag(format: Json): GrammarSpec {
  return { type: "structural_tag", tag: JSON.stringify({ type: "structural_tag", format }) };
}

/** hermes / llama3_json "auto": free text until the model opens a call; then its arguments follow its tool's schema. */
function jsonAutoTag(parser: "hermes" | "llama3_json", tools: readonly ToolDefinition[], parallel: boolean): GrammarSpec {
  const tag = (t: ToolDefinition) =>
    parser === "hermes"
      ? { type: "tag", begin: `<tool_call>\n{"name": "${t.name}", "arguments": `, content: { type: "json_schema", json_schema: t.parameters }, end: "}\n</tool_call>" }
      : { type: "tag", begin: `{"name": "${t.name}", "parameters": `, content: { type: "json_schema", json_schema: t.parameters }, end: "}" };
  const triggers = parser === "hermes" ? ["<tool_call>"] : ['{"name": '];
  return structuralTag({ type: "triggered_tags", triggers, tags: tools.map(tag), stop_after_first: !parallel });
}

/**
 * mistral: [TOOL_CALLS] and a JSON array of calls (of one call unless
 * parallel), through the tool_calls EBNF (bounded JSON whitespace). "auto" has
 * no grammar: Mistral opens a call with its [TOOL_CALLS] special token, which a
 * grammar never allows (grammar-vocabulary.ts gives special tokens no text), so
 * auto stays free as in vLLM, and the reply keeps special tokens' text.
 */
function mistralGrammar(tools: readonly ToolDefinition[], choice: ToolPlan["choice"], parallel: boolean): GrammarSpec | null {
  if (choice === "auto") return null;
  return { type: "tool_calls", format: "mistral", schema: JSON.stringify(callSchema(tools, "arguments")), parallel };
}

/** An empty structural-tag element (XGrammar 0.1.27 refuses an empty const_string). */
const NOTHING = { type: "grammar", grammar: 'root ::= ""' };

/** A string parameter's text: any text up to the closing tag, or as many characters as min/maxLength allow. */
function stringText(schema: Json): Json {
  const min = typeof schema["minLength"] === "number" ? schema["minLength"] : 0;
  const max = typeof schema["maxLength"] === "number" ? schema["maxLength"] : null;
  if (min === 0 && max === null) return { type: "any_text" };
  return { type: "regex", pattern: `[\\s\\S]{${min},${max ?? ""}}` };
}

/**
 * One XML parameter as Qwen3-Coder's template writes it, "<parameter=p>\nvalue\n</parameter>\n":
 * a string is any text up to the closing tag (within its min/maxLength), string
 * enums their bare members,
 * anything else JSON by its schema. Optional parameters may be left out.
 */
function xmlParameter(name: string, schema: Json, required: boolean): Json {
  const members = Array.isArray(schema["enum"]) && schema["enum"].every((v) => typeof v === "string") ? (schema["enum"] as string[]) : null;
  let content: Json;
  if (members !== null) content = { type: "or", elements: members.map((value) => ({ type: "const_string", value })) };
  else if (schema["type"] === "string") content = stringText(schema);
  else content = { type: "json_schema", json_schema: schema };
  const tag = { type: "tag", begin: `<parameter=${name}>\n`, content, end: "\n</parameter>\n" };
  return required ? tag : { type: "or", elements: [tag, NOTHING] };
}

/**
 * qwen3_coder: each call a <tool_call> tag holding its function's parameters
 * in the schema's order, with exactly the template's newlines between them
 * (llama.cpp's Qwen3-Coder grammar does the same). Not XGrammar's
 * qwen_xml_parameter: it allows unbounded whitespace between parameters,
 * where a weak model stays forever.
 */
function qwen3CoderGrammar(tools: readonly ToolDefinition[], choice: ToolPlan["choice"], parallel: boolean): GrammarSpec {
  const content = (t: ToolDefinition) => {
    const properties = isObject(t.parameters["properties"]) ? t.parameters["properties"] : {};
    const required = Array.isArray(t.parameters["required"]) ? t.parameters["required"] : [];
    const params = Object.entries(properties).map(([name, schema]) => xmlParameter(name, isObject(schema) ? schema : {}, required.includes(name)));
    return params.length === 0 ? NOTHING : params.length === 1 ? params[0]! : { type: "sequence", elements: params };
  };
  const tags = tools.map((t) => ({ type: "tag", begin: `<tool_call>\n<function=${t.name}>\n`, content: content(t), end: "</function>\n</tool_call>" }));
  if (choice === "auto") return structuralTag({ type: "triggered_tags", triggers: ["<tool_call>"], tags, stop_after_first: !parallel });
  return structuralTag({ type: "tags_with_separator", tags, separator: "\n", at_least_one: true, stop_after_first: !parallel });
}

/** generic: the whole reply is one JSON object (llama.cpp's generic schema, without its call ids). */
export function genericSchema(tools: readonly ToolDefinition[], choice: ToolPlan["choice"], parallel: boolean): Json {
  const call = callSchema(tools, "arguments");
  const calls = parallel
    ? { type: "object", properties: { tool_calls: { type: "array", items: call, minItems: 1 } }, required: ["tool_calls"], additionalProperties: false }
    : { type: "object", properties: { tool_call: call }, required: ["tool_call"], additionalProperties: false };
  if (choice !== "auto") return calls;
  return { anyOf: [calls, { type: "object", properties: { response: { type: "string" } }, required: ["response"], additionalProperties: false }] };
}

/** The reply's grammar (null: free text). A named choice narrows the tools to that one and allows one call. */
export function toolGrammar(plan: ToolPlan): GrammarSpec | null {
  const { parser, choice } = plan;
  const tools = typeof choice === "object" ? plan.tools.filter((t) => t.name === choice.name) : plan.tools;
  const parallel = typeof choice === "object" ? false : plan.parallel;
  switch (parser) {
    case "hermes":
    case "llama3_json":
      if (choice === "auto") return jsonAutoTag(parser, tools, parallel);
      return { type: "tool_calls", format: parser, schema: JSON.stringify(callSchema(tools, parser === "hermes" ? "arguments" : "parameters")), parallel: parallel && parser === "hermes" };
    case "mistral":
      return mistralGrammar(tools, choice, parallel);
    case "qwen3_coder":
      return qwen3CoderGrammar(tools, choice, parallel);
    case "generic":
      return { type: "json", schema: JSON.stringify(genericSchema(tools, choice, parallel)) };
  }
}

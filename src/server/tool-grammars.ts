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
import type { ToolDefinition, ToolPlan } from "./tool-calls.js";

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

/** mistral: [TOOL_CALLS] and a JSON array of calls (of one call unless parallel). */
function mistralGrammar(tools: readonly ToolDefinition[], choice: ToolPlan["choice"], parallel: boolean): GrammarSpec {
  const array = { type: "json_schema", json_schema: { type: "array", items: callSchema(tools, "arguments"), minItems: 1, ...(parallel ? {} : { maxItems: 1 }) } };
  if (choice === "auto") return structuralTag({ type: "triggered_tags", triggers: ["[TOOL_CALLS]"], tags: [{ type: "tag", begin: "[TOOL_CALLS]", content: array, end: "" }], stop_after_first: true });
  return structuralTag({ type: "sequence", elements: [{ type: "const_string", value: "[TOOL_CALLS]" }, array] });
}

/**
 * qwen3_coder: each call a <tool_call> tag whose parameters are XGrammar's
 * qwen_xml_parameter of the tool's schema (which writes an enum's strings
 * JSON-quoted; the parser reads both). A tool with no properties takes no
 * parameters: XGrammar 0.1.27 cannot convert a schema without properties.
 */
function qwen3CoderGrammar(tools: readonly ToolDefinition[], choice: ToolPlan["choice"], parallel: boolean): GrammarSpec {
  const content = (t: ToolDefinition) => {
    const properties = isObject(t.parameters["properties"]) ? t.parameters["properties"] : {};
    return Object.keys(properties).length === 0 ? { type: "grammar", grammar: 'root ::= ""' } : { type: "qwen_xml_parameter", json_schema: t.parameters };
  };
  const tags = tools.map((t) => ({ type: "tag", begin: `<tool_call>\n<function=${t.name}>\n`, content: content(t), end: "\n</function>\n</tool_call>" }));
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

/** The reply's grammar. A named choice narrows the tools to that one and allows one call. */
export function toolGrammar(plan: ToolPlan): GrammarSpec {
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

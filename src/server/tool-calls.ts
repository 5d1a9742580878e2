/**
 * Tool calling on /v1/chat/completions (OpenAI's tools, tool_choice,
 * parallel_tool_calls; vLLM's serving_chat with --tool-call-parser):
 *
 *   tools            rendered by the chat template (Qwen2.5/3 and Llama 3.x take `tools`)
 *   tool_choice      "none": no parsing, no constraint
 *                    "auto" (the default with tools): a structural tag (XGrammar triggered
 *                      tags) constrains a call's arguments once the model opens one
 *                    "required" / {"type": "function", "function": {"name"}}: a grammar of
 *                      tool calls only, built from the tools' parameter schemas
 *   messages         assistant tool_calls' arguments (JSON text in OpenAI's API) are given
 *                    to the template as objects and their null content as "", as vLLM
 *                    does; tool-role messages pass as they are
 *
 * The reply's text is parsed (tool-parsers.ts) into message.tool_calls with
 * ids and finish_reason "tool_calls".
 */
import { randomUUID } from "node:crypto";
import { show } from "../errors.js";
import type { GrammarSpec } from "../structured/grammar-spec.js";
import { badRequest } from "./errors.js";
import { type Fields, type Json, isObject } from "./fields.js";
import type { GrammarRequest } from "./structured-request.js";
import { TOOL_PARSERS, type ToolParserName, parserForTemplate } from "./tool-parsers.js";

export interface ToolDefinition {
  name: string;
  /** The parameters' JSON schema (an object schema; {"type": "object"} when the tool gives none). */
  parameters: Json;
}

/** What the reply needs: how to parse it. Null when tool_choice is "none" or no tools are given. */
export interface ToolPlan {
  parser: ToolParserName;
  tools: ToolDefinition[];
  choice: "auto" | "required" | { name: string };
  parallel: boolean;
}

export interface ToolFields {
  /** The tools as given, for the chat template (undefined without tools). */
  templateTools: Json[] | undefined;
  plan: ToolPlan | null;
  grammar: GrammarRequest | null;
}

function toolDefinitions(raw: unknown[]): ToolDefinition[] {
  return raw.map((t, i) => {
    const fn = isObject(t) ? t["function"] : undefined;
    if (!isObject(t) || t["type"] !== "function" || !isObject(fn)) throw badRequest(`tools[${i}]`, `tools[${i}] must be { "type": "function", "function": { name, parameters } }, got ${show(t)}`);
    const name = fn["name"];
    if (typeof name !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(name)) throw badRequest(`tools[${i}].function.name`, `tools[${i}].function.name must be 1–64 letters, digits, _ . or -, got ${show(name)}`);
    const parameters = fn["parameters"] ?? { type: "object" };
    if (!isObject(parameters)) throw badRequest(`tools[${i}].function.parameters`, `tools[${i}].function.parameters must be a JSON schema object, got ${show(parameters)}`);
    return { name, parameters };
  });
}

function toolChoice(f: Fields, tools: ToolDefinition[]): "none" | "auto" | "required" | { name: string } {
  const c = f.raw("tool_choice");
  if (c === undefined || c === "auto") return "auto";
  if (c === "none" || c === "required") return c;
  const name = isObject(c) && c["type"] === "function" && isObject(c["function"]) ? c["function"]["name"] : undefined;
  if (typeof name !== "string") throw badRequest("tool_choice", `tool_choice must be "none", "auto", "required" or { "type": "function", "function": { "name" } }, got ${show(c)}`);
  if (!tools.some((t) => t.name === name)) throw badRequest("tool_choice", `tool_choice names the function ${show(name)}, which is not among the tools (${tools.map((t) => t.name).join(", ")})`);
  return { name };
}

/** One call's JSON schema: {"name": <one of the tools>, "<key>": <its parameters>}, in that order. */
function callSchema(tools: ToolDefinition[], key: string): Json {
  const branches = tools.map((t) => ({ type: "object", properties: { name: { enum: [t.name] }, [key]: t.parameters }, required: ["name", key], additionalProperties: false }));
  return branches.length === 1 ? branches[0]! : { anyOf: branches };
}

/** "auto": free text, until the model opens a call; then the call's arguments follow its tool's schema. */
function autoTag(parser: ToolParserName, tools: ToolDefinition[], parallel: boolean): string {
  const tag = (t: ToolDefinition) =>
    parser === "hermes"
      ? { type: "tag", begin: `<tool_call>\n{"name": "${t.name}", "arguments": `, content: { type: "json_schema", json_schema: t.parameters }, end: "}\n</tool_call>" }
      : { type: "tag", begin: `{"name": "${t.name}", "parameters": `, content: { type: "json_schema", json_schema: t.parameters }, end: "}" };
  const triggers = parser === "hermes" ? ["<tool_call>"] : ['{"name": '];
  return JSON.stringify({ type: "structural_tag", format: { type: "triggered_tags", triggers, tags: tools.map(tag), stop_after_first: !parallel } });
}

/** The tool fields of a chat request. `template`: the chat template in use (picks the parser unless `configured`). */
export function parseToolFields(f: Fields, template: string | null, configured: ToolParserName | null): ToolFields {
  const raw = f.raw("tools");
  if (raw !== undefined && !Array.isArray(raw)) throw badRequest("tools", `tools must be an array of functions, got ${show(raw)}`);
  const tools = toolDefinitions(raw ?? []);
  const parallel = f.boolean("parallel_tool_calls") ?? true;
  if (tools.length === 0) {
    const c = f.raw("tool_choice");
    if (c !== undefined && c !== "none" && c !== "auto") throw badRequest("tool_choice", `tool_choice ${show(c)} needs tools`);
    return { templateTools: undefined, plan: null, grammar: null };
  }
  const choice = toolChoice(f, tools);
  const templateTools = raw as Json[];
  if (choice === "none") return { templateTools, plan: null, grammar: null };
  const parser = configured ?? parserForTemplate(template);
  if (parser === null) {
    throw badRequest("tools", `this model's chat template renders no tool calls kvflash can parse; start the server with --tool-call-parser (${TOOL_PARSERS.join(", ")})`);
  }
  const plan: ToolPlan = { parser, tools, choice, parallel };
  let spec: GrammarSpec;
  if (choice === "auto") spec = { type: "structural_tag", tag: autoTag(parser, tools, parallel) };
  else {
    const chosen = choice === "required" ? tools : tools.filter((t) => t.name === choice.name);
    spec = { type: "tool_calls", format: parser, schema: JSON.stringify(callSchema(chosen, parser === "hermes" ? "arguments" : "parameters")), parallel: parallel && parser === "hermes" };
  }
  return { templateTools, plan, grammar: { spec, param: "tools" } };
}

/** Chat messages for the template: assistant tool_calls' arguments as objects (vLLM parses the JSON text). */
export function templateMessages(messages: unknown[]): unknown[] {
  return messages.map((m, i) => {
    if (!isObject(m) || !Array.isArray(m["tool_calls"])) return m;
    const calls = (m["tool_calls"] as unknown[]).map((c, j) => {
      const fn = isObject(c) ? c["function"] : undefined;
      if (!isObject(fn) || typeof fn["arguments"] !== "string") return c;
      try {
        return { ...c as Json, function: { ...fn, arguments: JSON.parse(fn["arguments"]) as unknown } };
      } catch (e) {
        throw badRequest(`messages[${i}].tool_calls[${j}].function.arguments`, `messages[${i}].tool_calls[${j}].function.arguments must be JSON text: ${(e as Error).message}`);
      }
    });
    return { ...m, content: m["content"] ?? "", tool_calls: calls }; // templates test `in content`: null breaks them
  });
}

/** A tool call id, as OpenAI spells them. */
export function toolCallId(): string {
  return `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`;
}

/**
 * Tool calling on /v1/chat/completions (OpenAI's tools, tool_choice,
 * parallel_tool_calls; vLLM's serving_chat with --tool-call-parser):
 *
 *   tools            rendered by the chat template (Qwen2.5/3, Llama 3.x, Mistral take
 *                    `tools`); a template with no tool format gets them in the system
 *                    prompt instead (the "generic" parser, generic-tool-prompt.ts)
 *   tool_choice      "none": no parsing, no constraint
 *                    "auto" (the default with tools), "required", or a named function
 *                      (exactly one call): the reply's grammar is tool-grammars.ts's
 *   messages         assistant tool_calls' arguments (JSON text in OpenAI's API) are given
 *                    to the template as objects and their null content as "", as vLLM
 *                    does; tool-role messages pass as they are
 *
 * The reply's text is parsed (tool-parsers.ts) into message.tool_calls with
 * ids and finish_reason "tool_calls" — "stop" for a named function, as
 * OpenAI answers (tool-call-output.ts).
 */
import { randomInt, randomUUID } from "node:crypto";
import { show } from "../errors.js";
import { badRequest } from "./errors.js";
import { type Fields, type Json, isObject } from "./fields.js";
import type { GrammarRequest } from "./structured-request.js";
import { toolGrammar } from "./tool-grammars.js";
import { type ToolParserName, parserForTemplate } from "./tool-parsers.js";
import type { ToolDefinition, ToolPlan } from "./tool-plan.js";

export type { ToolDefinition, ToolPlan };

export interface ToolFields {
  /** The tools as given, for the chat template (undefined without tools, and for the generic parser). */
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
    const description = fn["description"];
    return { name, parameters, ...(typeof description === "string" ? { description } : {}) };
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
  const parser = configured ?? parserForTemplate(template) ?? "generic";
  const plan: ToolPlan = { parser, tools, choice, parallel };
  const spec = toolGrammar(plan);
  return { templateTools: parser === "generic" ? undefined : templateTools, plan, grammar: spec === null ? null : { spec, param: "tools" } };
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

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/**
 * A tool call id, as OpenAI spells them; for mistral, 9 letters and digits,
 * because Mistral's chat templates refuse any other id when the call comes back
 * in the history (vLLM's MistralToolCall ids).
 */
export function toolCallId(parser: ToolParserName): string {
  if (parser === "mistral") return Array.from({ length: 9 }, () => ALPHANUMERIC[randomInt(ALPHANUMERIC.length)]).join("");
  return `call_${randomUUID().replaceAll("-", "").slice(0, 24)}`;
}

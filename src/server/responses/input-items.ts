/**
 * The Responses API's `input` → chat messages for the model's chat template
 * (vLLM's serving_responses does the same: its prompt is a chat conversation).
 *
 *   "text"                                   one user message
 *   { role, content } / { type: "message" }  roles user, system, developer (→ system:
 *                                            chat templates know no developer), assistant;
 *                                            content a string or input_text / output_text
 *                                            parts (joined with "\n", as vLLM joins text parts)
 *   { type: "function_call" }                an assistant tool call { call_id, name, arguments },
 *                                            joined to the assistant message before it
 *   { type: "function_call_output" }         a tool message { call_id, output } for a call
 *                                            made earlier in the conversation
 *
 * Anything else (images, files, audio, reasoning or built-in tool items,
 * item references) is a 400 naming the item. Each message remembers the
 * request field it came from, so a template's refusal names it too.
 */
import { show } from "../../errors.js";
import { badRequest } from "../errors.js";
import { type Json, isObject } from "../fields.js";

/** Chat messages and, for each, the request field it came from. */
export interface Conversation {
  messages: Json[];
  sources: string[];
}

const ROLES: Readonly<Record<string, string>> = { user: "user", system: "system", developer: "system", assistant: "assistant" };

/** A content list's text: input_text and output_text parts joined with "\n". */
function partsText(parts: unknown[], param: string): string {
  return parts
    .map((p, j) => {
      const type = isObject(p) ? p["type"] : undefined;
      if (type !== "input_text" && type !== "output_text") {
        throw badRequest(`${param}[${j}].type`, `${param}[${j}].type ${show(type)} is not supported: kvflash serves text models, send "input_text" (or "output_text" for the assistant's earlier replies)`);
      }
      const text = (p as Json)["text"];
      if (typeof text !== "string") throw badRequest(`${param}[${j}].text`, `${param}[${j}].text must be a string, got ${show(text)}`);
      return text;
    })
    .join("\n");
}

function contentText(content: unknown, param: string): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return partsText(content, param);
  throw badRequest(param, `${param} must be a string or an array of input_text parts, got ${show(content)}`);
}

function stringField(item: Json, name: string, param: string): string {
  const v = item[name];
  if (typeof v !== "string" || v === "") throw badRequest(`${param}.${name}`, `${param}.${name} must be a non-empty string, got ${show(v)}`);
  return v;
}

/** Tool call id → function name, over the assistant messages so far (a tool message names its function for the templates that print it). */
function callNames(messages: readonly unknown[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const m of messages) {
    if (!isObject(m) || !Array.isArray(m["tool_calls"])) continue;
    for (const c of m["tool_calls"] as unknown[]) {
      const fn = isObject(c) ? c["function"] : undefined;
      if (isObject(c) && typeof c["id"] === "string" && isObject(fn) && typeof fn["name"] === "string") names.set(c["id"], fn["name"]);
    }
  }
  return names;
}

/**
 * `input` (a string or a list of items) → the messages it adds after `history`
 * (the stored conversation `previous_response_id` continues, whose calls a
 * function_call_output may answer).
 */
export function inputConversation(input: unknown, history: readonly unknown[]): Conversation {
  if (typeof input === "string") return { messages: [{ role: "user", content: input }], sources: ["input"] };
  if (!Array.isArray(input) || input.length === 0) throw badRequest("input", `input must be a string or a non-empty array of input items, got ${show(input)}`);
  const messages: Json[] = [];
  const sources: string[] = [];
  const names = callNames(history);
  input.forEach((item, i) => {
    const param = `input[${i}]`;
    if (!isObject(item)) throw badRequest(param, `${param} must be an input item object, got ${show(item)}`);
    const type = item["type"] ?? "message";
    if (type === "message") {
      const role = item["role"];
      if (typeof role !== "string" || ROLES[role] === undefined) throw badRequest(`${param}.role`, `${param}.role must be "user", "system", "developer" or "assistant", got ${show(role)}`);
      messages.push({ role: ROLES[role]!, content: contentText(item["content"], `${param}.content`) });
      sources.push(param);
    } else if (type === "function_call") {
      const callId = stringField(item, "call_id", param);
      const name = stringField(item, "name", param);
      const args = item["arguments"];
      if (typeof args !== "string") throw badRequest(`${param}.arguments`, `${param}.arguments must be the call's arguments as JSON text, got ${show(args)}`);
      try {
        JSON.parse(args);
      } catch (e) {
        throw badRequest(`${param}.arguments`, `${param}.arguments must be JSON text: ${(e as Error).message}`);
      }
      names.set(callId, name);
      const call = { id: callId, type: "function", function: { name, arguments: args } };
      const last = messages.at(-1);
      if (last !== undefined && last["role"] === "assistant") last["tool_calls"] = [...(Array.isArray(last["tool_calls"]) ? (last["tool_calls"] as unknown[]) : []), call];
      else {
        messages.push({ role: "assistant", content: "", tool_calls: [call] });
        sources.push(param);
      }
    } else if (type === "function_call_output") {
      const callId = stringField(item, "call_id", param);
      const name = names.get(callId);
      if (name === undefined) throw badRequest(`${param}.call_id`, `${param}.call_id ${show(callId)} answers no function_call earlier in the conversation`);
      const output = item["output"];
      messages.push({ role: "tool", tool_call_id: callId, name, content: contentText(output, `${param}.output`) });
      sources.push(param);
    } else {
      throw badRequest(`${param}.type`, `${param}.type ${show(type)} is not supported: kvflash takes "message", "function_call" and "function_call_output" items`);
    }
  });
  return { messages, sources };
}

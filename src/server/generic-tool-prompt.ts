/**
 * The chat messages of a tool request for a template with no tool format (the
 * "generic" parser). llama.cpp's generic handler, with minja's polyfills for
 * templates without tools: the tools and the reply format go into the system
 * prompt; earlier calls come back as the assistant's JSON and tool results as
 * user messages, since such a template knows neither.
 *
 *   system      the request's system prompt, then the tools (name, description,
 *               parameters' schema) and the reply format that tool-grammars.ts's
 *               generic schema enforces; for a template without a system role
 *               (Mistral Instruct v0.1, Gemma), the start of the first user turn
 *   assistant   with tool_calls: content {"tool_call": …} or {"tool_calls": [ … ]}
 *   tool        a user message {"tool_response": {"tool_call_id", "name", "content"}}
 */
import { type Json, isObject } from "./fields.js";
import type { ToolPlan } from "./tool-calls.js";

/** The system prompt's tool section: the tools and the one reply shape the grammar allows. */
export function genericToolPrompt(plan: ToolPlan): string {
  const named = typeof plan.choice === "object" ? plan.choice.name : null;
  const tools = plan.tools.filter((t) => named === null || t.name === named).map((t) => ({ name: t.name, ...(t.description === undefined ? {} : { description: t.description }), parameters: t.parameters }));
  const call = '{"name": "<tool name>", "arguments": {<its arguments>}}';
  const parallel = plan.parallel && named === null;
  const callShape = parallel ? `{"tool_calls": [${call}, …]}` : `{"tool_call": ${call}}`;
  const lines = ["You can call these tools (their arguments follow the JSON schema given):", ...tools.map((t) => JSON.stringify(t)), ""]; // one a line: small contexts
  if (plan.choice === "auto") lines.push(`Reply with one JSON object: ${callShape} to call ${parallel ? "tools" : "a tool"}, or {"response": "<your reply>"} to answer the user.`);
  else lines.push(`Reply with one JSON object that calls ${named === null ? (parallel ? "tools" : "a tool") : `the tool ${named}`}: ${callShape}.`);
  return lines.join("\n");
}

function callsContent(calls: unknown[], parallel: boolean): string {
  const list = calls.map((c) => {
    const fn = isObject(c) && isObject(c["function"]) ? c["function"] : {};
    const args = fn["arguments"];
    let parsed: unknown = args;
    if (typeof args === "string") {
      try {
        parsed = JSON.parse(args) as unknown;
      } catch {
        parsed = args; // templateMessages has already refused arguments that are not JSON text
      }
    }
    return { name: fn["name"], arguments: parsed };
  });
  return JSON.stringify(list.length === 1 && !parallel ? { tool_call: list[0] } : { tool_calls: list });
}

/** The messages to render: the tool section in the system prompt (or the first user turn), calls and results as text. */
export function genericToolMessages(messages: readonly unknown[], plan: ToolPlan, place: "system" | "user" = "system"): unknown[] {
  const callNames = new Map<string, unknown>();
  const out = messages.map((m): unknown => {
    if (!isObject(m)) return m;
    if (m["role"] === "assistant" && Array.isArray(m["tool_calls"]) && m["tool_calls"].length > 0) {
      for (const c of m["tool_calls"] as unknown[]) if (isObject(c) && typeof c["id"] === "string" && isObject(c["function"])) callNames.set(c["id"], c["function"]["name"]);
      const { tool_calls: calls, ...rest } = m;
      return { ...rest, content: callsContent(calls as unknown[], plan.parallel) };
    }
    if (m["role"] === "tool") {
      const id = m["tool_call_id"];
      const response: Json = { ...(typeof id === "string" ? { tool_call_id: id } : {}), ...(typeof id === "string" && callNames.has(id) ? { name: callNames.get(id) as Json } : {}), content: m["content"] as Json };
      return { role: "user", content: JSON.stringify({ tool_response: response }) };
    }
    return m;
  });
  const prompt = genericToolPrompt(plan);
  if (place === "user") {
    const at = out.findIndex((m) => isObject(m) && m["role"] === "user" && typeof m["content"] === "string");
    if (at >= 0) {
      const m = out[at] as Json;
      return out.map((x, i) => (i === at ? { ...m, content: `${prompt}\n\n${m["content"] as string}` } : x));
    }
  }
  const first = out[0];
  if (isObject(first) && first["role"] === "system" && typeof first["content"] === "string") return [{ ...first, content: `${first["content"]}\n\n${prompt}` }, ...out.slice(1)];
  return [{ role: "system", content: prompt }, ...out];
}

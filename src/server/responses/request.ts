/**
 * A `POST /v1/responses` body → the chat request it means, run through the
 * chat route's own parser (openai-request.ts: template rendering in the
 * tokenizer workers, context and max_tokens checks, tools and their grammar,
 * structured output), so both routes share one path to the engine. vLLM's
 * serving_responses builds its prompt from the same chat machinery.
 *
 *   input, instructions, previous_response_id   → messages (input-items.ts; instructions a
 *                                                 leading system message, not carried over
 *                                                 by previous_response_id, as OpenAI says)
 *   max_output_tokens → max_tokens; temperature, top_p; vLLM's seed, top_k, min_p, repetition_penalty
 *   tools [{ type: "function", name, parameters, strict }] → chat tools; tool_choice
 *   text.format text | json_object | json_schema { name, schema, strict } → response_format
 *   metadata, store, user, parallel_tool_calls, stream
 *
 * Any other field is a 400 naming it: built-in tools, reasoning, background,
 * conversation, prompt templates, include, truncation "auto", logprobs. A 400
 * from the chat parser names the Responses field it came from
 * (messages[3] → input[2], max_tokens → max_output_tokens, …).
 */
import { randomUUID } from "node:crypto";
import { show } from "../../errors.js";
import { SHAPE_LIMITS } from "../../request-shape.js";
import type { ServerContext } from "../context.js";
import { HttpError, badRequest } from "../errors.js";
import { Fields, type Json, isObject } from "../fields.js";
import { type GenerationPlan, parseChatRequest } from "../openai-request.js";
import { type Conversation, inputConversation } from "./input-items.js";
import type { ResponseStore } from "./store.js";

/** What the Response object echoes of its request. */
export interface ResponseEcho {
  instructions: string | null;
  max_output_tokens: number | null;
  metadata: Record<string, string> | null;
  parallel_tool_calls: boolean;
  previous_response_id: string | null;
  store: boolean;
  text: { format: Json };
  tool_choice: unknown;
  tools: Json[];
  user: string | null;
}

export interface ResponsesPlan {
  /** The chat plan the engine runs (kind "chat", one prompt); its id is the response's, resp_…. */
  plan: GenerationPlan;
  echo: ResponseEcho;
  /** The conversation before the reply, instructions excluded: a follow-up's previous_response_id continues it. */
  history: Json[];
}

/** Fields taken as they are or translated. */
const FIELDS = new Set([
  "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream", "metadata", "store", "user",
  "tools", "tool_choice", "parallel_tool_calls", "text", "previous_response_id",
  // harmless hints, ignored: routing and caching keys, the tier
  "safety_identifier", "prompt_cache_key", "service_tier",
  // vLLM's sampling extras, as its Responses route takes them
  "seed", "top_k", "min_p", "repetition_penalty",
]);

/** Fields accepted at their neutral value only (what OpenAI does without them). */
const NEUTRAL: Readonly<Record<string, (v: unknown) => boolean>> = {
  background: (v) => v === false,
  include: (v) => Array.isArray(v) && v.length === 0,
  truncation: (v) => v === "disabled",
  top_logprobs: (v) => v === 0,
  stream_options: (v) => isObject(v) && Object.values(v).every((x) => x === false || x === null),
};

function refuseUnsupported(body: Json): void {
  for (const [name, v] of Object.entries(body)) {
    if (FIELDS.has(name) || v === null || v === undefined) continue;
    const neutral = NEUTRAL[name];
    if (neutral?.(v) === true) continue;
    throw badRequest(name, `${name} is not supported by kvflash's /v1/responses${neutral === undefined ? "" : `, got ${show(v)}`}`);
  }
}

function metadata(f: Fields): Record<string, string> | null {
  const m = f.object("metadata");
  if (m === undefined) return null;
  const entries = Object.entries(m);
  if (entries.length > 16) throw badRequest("metadata", `metadata has ${entries.length} keys, more than the 16 allowed`);
  for (const [k, v] of entries) {
    if (k.length > 64) throw badRequest("metadata", `metadata key ${show(k)} is longer than 64 characters`);
    if (typeof v !== "string" || v.length > 512) throw badRequest(`metadata.${k}`, `metadata.${k} must be a string of at most 512 characters, got ${show(v)}`);
  }
  return m as Record<string, string>;
}

/** Responses' flat function tools → chat's { type, function: { … } }, and the tools the response echoes. */
function functionTools(raw: unknown): { chat: Json[]; echo: Json[] } | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!Array.isArray(raw)) throw badRequest("tools", `tools must be an array of function tools, got ${show(raw)}`);
  const chat: Json[] = [];
  const echo: Json[] = [];
  raw.forEach((t, i) => {
    const p = `tools[${i}]`;
    if (!isObject(t)) throw badRequest(p, `${p} must be a tool object, got ${show(t)}`);
    if (t["type"] !== "function") throw badRequest(`${p}.type`, `${p}.type ${show(t["type"])} is not supported: kvflash runs function tools only (the client runs them), not built-in tools`);
    const { name, description, strict } = t;
    const parameters = t["parameters"] ?? { type: "object" };
    if (typeof name !== "string" || !/^[A-Za-z0-9_.-]{1,64}$/.test(name)) throw badRequest(`${p}.name`, `${p}.name must be 1–64 letters, digits, _ . or -, got ${show(name)}`);
    if (!isObject(parameters)) throw badRequest(`${p}.parameters`, `${p}.parameters must be a JSON schema object, got ${show(parameters)}`);
    if (description !== undefined && description !== null && typeof description !== "string") throw badRequest(`${p}.description`, `${p}.description must be a string, got ${show(description)}`);
    if (strict !== undefined && strict !== null && typeof strict !== "boolean") throw badRequest(`${p}.strict`, `${p}.strict must be true or false, got ${show(strict)}`);
    chat.push({ type: "function", function: { name, parameters, ...(typeof description === "string" ? { description } : {}) } });
    // The arguments always follow the schema (the call's grammar), so every tool is strict in effect.
    echo.push({ type: "function", name, description: description ?? null, parameters, strict: strict ?? true });
  });
  return { chat, echo };
}

/** Responses' tool_choice → chat's. */
function toolChoice(raw: unknown): unknown {
  if (raw === undefined || raw === "none" || raw === "auto" || raw === "required") return raw;
  if (isObject(raw) && raw["type"] === "function" && typeof raw["name"] === "string") return { type: "function", function: { name: raw["name"] } };
  throw badRequest("tool_choice", `tool_choice must be "none", "auto", "required" or { "type": "function", "name" }, got ${show(raw)}`);
}

/** text.format → chat's response_format, and the format the response echoes. */
function textFormat(f: Fields): { responseFormat: Json | undefined; echo: Json } {
  const text = f.object("text");
  if (text === undefined) return { responseFormat: undefined, echo: { type: "text" } };
  for (const k of Object.keys(text)) {
    if (k !== "format" && text[k] !== null && text[k] !== undefined) throw badRequest(`text.${k}`, `text.${k} is not supported by kvflash's /v1/responses`);
  }
  const format = text["format"];
  if (format === undefined || format === null) return { responseFormat: undefined, echo: { type: "text" } };
  if (!isObject(format)) throw badRequest("text.format", `text.format must be an object { type, … }, got ${show(format)}`);
  const type = format["type"];
  if (type === "text") return { responseFormat: undefined, echo: { type: "text" } };
  if (type === "json_object") return { responseFormat: { type: "json_object" }, echo: { type: "json_object" } };
  if (type !== "json_schema") throw badRequest("text.format.type", `text.format.type must be "text", "json_object" or "json_schema", got ${show(type)}`);
  const { name, schema, strict, description } = format;
  if (typeof name !== "string" || !/^[A-Za-z0-9_-]{1,64}$/.test(name)) throw badRequest("text.format.name", `text.format.name must be 1–64 letters, digits, _ or -, got ${show(name)}`);
  if (!isObject(schema)) throw badRequest("text.format.schema", `text.format.schema must be a JSON schema object, got ${show(schema)}`);
  return {
    responseFormat: { type: "json_schema", json_schema: { name, schema, ...(typeof strict === "boolean" ? { strict } : {}) } },
    echo: { type: "json_schema", name, schema, strict: typeof strict === "boolean" ? strict : null, ...(typeof description === "string" ? { description } : {}) },
  };
}

/** A chat-request field (as the chat parser names it) → the Responses field it came from. */
export function responsesParam(param: string, sources: readonly string[]): string {
  const message = /^messages\[(\d+)\]/.exec(param);
  if (message !== null) return sources[Number(message[1])] ?? "input";
  if (param === "messages") return "input";
  if (param === "max_tokens") return "max_output_tokens";
  const format = /^response_format(?:\.json_schema)?(\.schema.*)?$/.exec(param);
  if (format !== null) return `text.format${format[1] ?? ""}`;
  const tool = /^tools\[(\d+)\]\.function\.(.*)$/.exec(param);
  if (tool !== null) return `tools[${tool[1]}].${tool[2]}`;
  return param;
}

/** The chat parser's 400, renamed to the Responses field. */
function renamed(e: unknown, sources: readonly string[]): unknown {
  if (!(e instanceof HttpError) || e.param === null) return e;
  const param = responsesParam(e.param, sources);
  if (param === e.param) return e;
  return new HttpError(e.status, e.message.replaceAll(e.param, param), { type: e.type, param, code: e.code }, { ...e.headers });
}

/** The stored conversation previous_response_id continues (a 400 naming it when unknown or evicted). */
function previousHistory(id: string | undefined, store: ResponseStore): Json[] {
  if (id === undefined) return [];
  const prev = store.get(id);
  if (prev === undefined) {
    throw badRequest("previous_response_id", `previous_response_id ${show(id)} names no stored response (never stored, store: false, deleted, or evicted from the bounded store)`, "previous_response_not_found");
  }
  return prev.history as Json[];
}

export async function parseResponsesRequest(body: unknown, ctx: ServerContext, store: ResponseStore): Promise<ResponsesPlan> {
  const f = new Fields(body);
  refuseUnsupported(f.body);
  const instructions = f.string("instructions") ?? null;
  const previousId = f.string("previous_response_id");
  const history = previousHistory(previousId, store);
  if (!f.has("input")) throw badRequest("input", "input is required: a string or an array of input items");
  const input: Conversation = inputConversation(f.raw("input"), history);
  const lead: Conversation = instructions === null ? { messages: [], sources: [] } : { messages: [{ role: "system", content: instructions }], sources: ["instructions"] };
  const sources = [...lead.sources, ...history.map(() => "previous_response_id"), ...input.sources];
  const tools = functionTools(f.raw("tools"));
  const format = textFormat(f);
  const maxOutput = f.integer("max_output_tokens", { min: 1 });
  const echo: ResponseEcho = {
    instructions,
    max_output_tokens: maxOutput ?? null,
    metadata: metadata(f),
    parallel_tool_calls: f.boolean("parallel_tool_calls") ?? true,
    previous_response_id: previousId ?? null,
    store: f.boolean("store") ?? true,
    text: { format: format.echo },
    tool_choice: f.raw("tool_choice") ?? (tools === undefined ? "none" : "auto"),
    tools: tools?.echo ?? [],
    user: f.string("user") ?? null,
  };
  const messages = [...lead.messages, ...history, ...input.messages];
  if (messages.length > SHAPE_LIMITS.messages) {
    throw badRequest(
      previousId === undefined ? "input" : "previous_response_id",
      `the conversation has ${messages.length} messages${previousId === undefined ? "" : ` with those of previous_response_id ${show(previousId)}`}, more than the ${SHAPE_LIMITS.messages} one request may have`,
      "array_above_max_length",
    );
  }
  const chat: Json = {
    messages,
    stream: f.boolean("stream") ?? false,
    parallel_tool_calls: echo.parallel_tool_calls,
  };
  const copy = (from: string, to = from): void => {
    if (f.has(from)) chat[to] = f.raw(from);
  };
  ["model", "temperature", "top_p", "seed", "top_k", "min_p", "repetition_penalty"].forEach((n) => copy(n));
  copy("max_output_tokens", "max_tokens");
  if (tools !== undefined) chat["tools"] = tools.chat;
  if (f.has("tool_choice")) chat["tool_choice"] = toolChoice(f.raw("tool_choice"));
  if (format.responseFormat !== undefined) chat["response_format"] = format.responseFormat;
  let plan: GenerationPlan;
  try {
    plan = await parseChatRequest(chat, ctx);
  } catch (e) {
    throw renamed(e, sources);
  }
  if (plan.grammar !== null) plan.grammar.param = responsesParam(plan.grammar.param, sources);
  // The response's id is the plan's: its engine request and its log line carry it.
  plan.id = `resp_${randomUUID().replaceAll("-", "")}`;
  return { plan, echo, history: [...history, ...input.messages] };
}

/**
 * Bounds on the shape of an OpenAI request body (issue #32 item 2): how many
 * messages (or Responses input items), content parts, tool calls, tools, logit_bias entries, stop
 * strings and ids, structural tags and token ids one request may carry
 * (the grammar's own limits — schema depth, properties, enum sizes — are
 * structured/'s, checked before compiling). Work
 * on the HTTP thread, in a tokenizer worker and in the engine step grows with
 * these counts (a chat template walks every message; the sampler applies
 * every logit_bias entry at every step), so each is checked on the parsed
 * body before any of that work: by the tokenizer worker right after it
 * parses a big body (so a 10⁶-entry logit_bias is never cloned back to the
 * HTTP thread), by the HTTP thread for a small one. The same pure function
 * runs in both places, like prompt-text.ts.
 *
 * The limits follow OpenAI's API where it has one (128 tools; 128 tool calls
 * in a message, its `array_above_max_length`); the others are far beyond what
 * a real conversation sends and small enough that the work they bound stays
 * in milliseconds.
 */

export const SHAPE_LIMITS = {
  /** Chat messages in one request (a long agent transcript has hundreds). */
  messages: 2048,
  /** Content parts over all messages. */
  contentParts: 2048,
  /** Tool calls in one assistant message (OpenAI's limit). */
  toolCalls: 128,
  /** Tools in one request (OpenAI's limit). */
  tools: 128,
  /** logit_bias entries (the brief's figure for OpenAI's limit; each entry is applied at every sampling step). */
  logitBias: 300,
  /** Prompts in one /v1/completions list (each is an engine request; vLLM bounds the list too). */
  prompts: 128,
  /** Stop strings (each is searched for in every new piece of text). */
  stop: 64,
  /** Stop token ids. */
  stopTokenIds: 1024,
  /** Tags in a structural_tag (one per tool when tools are "auto"; the grammar limits count them the same way). */
  structuralTags: 128,
} as const;

/** A bound the body breaks: the field (as the routes name it) and what is wrong. */
export interface ShapeViolation {
  param: string;
  message: string;
}

export interface ShapeBounds {
  /** The most token ids one `tokens` list (/detokenize) or token-id prompt may have (the context length), or null for no bound. */
  maxTokenIds: number | null;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function tooMany(param: string, count: number, limit: number, what: string): ShapeViolation {
  return { param, message: `${param} has ${count} ${what}, more than the ${limit} one request may have` };
}

/** Tags (objects with a `begin`) in a structural tag, counted until `limit` is passed. */
function countTags(v: unknown, limit: number): number {
  let n = 0;
  const stack: unknown[] = [v];
  while (stack.length > 0 && n <= limit) {
    const x = stack.pop();
    if (Array.isArray(x)) stack.push(...x);
    else if (isObject(x)) {
      if (typeof x["begin"] === "string") n++;
      for (const child of Object.values(x)) if (typeof child === "object") stack.push(child);
    }
  }
  return n;
}

function structuralTag(v: unknown): unknown {
  if (typeof v !== "string") return v;
  try {
    return JSON.parse(v) as unknown;
  } catch {
    return null; // not JSON: the grammar check says so, naming the field
  }
}

/** Chat `messages`, or the Responses API's `input` items (`name`), bounded as messages are. */
function messagesViolation(messages: unknown[], name = "messages"): ShapeViolation | null {
  const L = SHAPE_LIMITS;
  if (messages.length > L.messages) return tooMany(name, messages.length, L.messages, name === "messages" ? "messages" : "items");
  let parts = 0;
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (!isObject(m)) continue;
    if (Array.isArray(m["content"])) parts += m["content"].length;
    if (parts > L.contentParts) return { param: `${name}[${i}].content`, message: `${name} carry more than ${L.contentParts} content parts in all (${parts} by ${name}[${i}])` };
    const calls = m["tool_calls"];
    if (Array.isArray(calls) && calls.length > L.toolCalls) return tooMany(`${name}[${i}].tool_calls`, calls.length, L.toolCalls, "tool calls");
  }
  return null;
}

const isIdList = (v: unknown): v is unknown[] => Array.isArray(v) && v.length > 0 && typeof v[0] === "number";

/** A /v1/completions prompt: at most SHAPE_LIMITS.prompts of them, token-id prompts within the context. */
function promptViolation(prompt: unknown, maxTokenIds: number | null): ShapeViolation | null {
  if (!Array.isArray(prompt)) return null;
  const list = isIdList(prompt) ? [prompt] : prompt;
  if (list.length > SHAPE_LIMITS.prompts) {
    return { param: "prompt", message: `prompt lists ${list.length} prompts, more than the ${SHAPE_LIMITS.prompts} one request may have; send them in several requests` };
  }
  if (maxTokenIds === null) return null;
  for (let i = 0; i < list.length; i++) {
    const p = list[i];
    if (isIdList(p) && p.length > maxTokenIds) {
      const param = list.length === 1 ? "prompt" : `prompt[${i}]`;
      return { param, message: `${param} has ${p.length} token ids, more than this model's context (max_model_len ${maxTokenIds}) holds` };
    }
  }
  return null;
}

/** The first bound `body` breaks, or null. Only counts: types and values are the routes' checks. */
export function findShapeViolation(body: unknown, bounds: ShapeBounds): ShapeViolation | null {
  if (!isObject(body)) return null;
  const L = SHAPE_LIMITS;
  const prompt = promptViolation(body["prompt"], bounds.maxTokenIds);
  if (prompt !== null) return prompt;
  const { messages, tools, logit_bias: logitBias, stop, stop_token_ids: stopIds, tokens, structured_outputs: so } = body;
  if (Array.isArray(messages)) {
    const v = messagesViolation(messages);
    if (v !== null) return v;
  }
  // The Responses API's input items (objects; an embeddings `input` list holds strings or token ids and is not counted here).
  const input = body["input"];
  if (Array.isArray(input) && isObject(input[0])) {
    const v = messagesViolation(input, "input");
    if (v !== null) return v;
  }
  if (Array.isArray(tools) && tools.length > L.tools) return tooMany("tools", tools.length, L.tools, "tools");
  if (isObject(logitBias)) {
    let n = 0;
    for (const _ in logitBias) if (++n > L.logitBias) break;
    if (n > L.logitBias) return tooMany("logit_bias", Object.keys(logitBias).length, L.logitBias, "entries");
  }
  if (Array.isArray(stop) && stop.length > L.stop) return tooMany("stop", stop.length, L.stop, "stop strings");
  if (Array.isArray(stopIds) && stopIds.length > L.stopTokenIds) return tooMany("stop_token_ids", stopIds.length, L.stopTokenIds, "token ids");
  if (Array.isArray(tokens) && bounds.maxTokenIds !== null && tokens.length > bounds.maxTokenIds) {
    return { param: "tokens", message: `tokens has ${tokens.length} token ids, more than this model's context (max_model_len ${bounds.maxTokenIds}) holds` };
  }
  if (isObject(so) && so["structural_tag"] !== undefined) {
    const n = countTags(structuralTag(so["structural_tag"]), L.structuralTags);
    if (n > L.structuralTags) return { param: "structured_outputs.structural_tag", message: `structured_outputs.structural_tag has more than ${L.structuralTags} tags, the most one request may have` };
  }
  return null;
}

/**
 * camelCase options (types.ts) → the OpenAI request body the server's routes
 * parse. Values pass as they are: the server checks each one and answers a
 * 400 naming the body field (`temperature`, `response_format.json_schema.schema`),
 * which llm.ts throws as an LLMError. Only the names are mapped here, from one
 * table, and a name that is not in it is an ArgumentError (a typo would
 * otherwise be ignored, as the server ignores unknown fields).
 */
import { ArgumentError, show } from "../errors.js";
import type { ResponseFormat } from "./types.js";

/** Option → body field, for the options both routes share. */
const SHARED: Readonly<Record<string, string>> = {
  maxTokens: "max_tokens",
  maxCompletionTokens: "max_completion_tokens",
  temperature: "temperature",
  topP: "top_p",
  topK: "top_k",
  minP: "min_p",
  repetitionPenalty: "repetition_penalty",
  presencePenalty: "presence_penalty",
  frequencyPenalty: "frequency_penalty",
  logitBias: "logit_bias",
  seed: "seed",
  stop: "stop",
  stopTokenIds: "stop_token_ids",
  ignoreEos: "ignore_eos",
  includeStopStrInOutput: "include_stop_str_in_output",
  skipSpecialTokens: "skip_special_tokens",
  n: "n",
  cacheSalt: "cache_salt",
  structuredOutputs: "structured_outputs",
  logprobs: "logprobs",
  streamOptions: "stream_options",
};

const CHAT: Readonly<Record<string, string>> = {
  ...SHARED,
  topLogprobs: "top_logprobs",
  responseFormat: "response_format",
  tools: "tools",
  toolChoice: "tool_choice",
  parallelToolCalls: "parallel_tool_calls",
  chatTemplateKwargs: "chat_template_kwargs",
  addGenerationPrompt: "add_generation_prompt",
  continueFinalMessage: "continue_final_message",
};

const COMPLETE: Readonly<Record<string, string>> = { ...SHARED, echo: "echo" };

/** Options that are not body fields. */
const LOCAL = new Set(["signal"]);

/** The body's response_format: OpenAI wraps a schema as { type, json_schema: { name, schema, strict } }. */
function responseFormatField(format: ResponseFormat): unknown {
  if (typeof format !== "object" || format === null || format.type !== "json_schema") return format;
  const { schema, name, strict } = format;
  return { type: "json_schema", json_schema: { name: name ?? "response", schema, ...(strict === undefined ? {} : { strict }) } };
}

/** stream_options with its two fields in snake_case; anything else goes as it is, for the server to refuse. */
function streamOptionsField(options: unknown): unknown {
  if (typeof options !== "object" || options === null) return options;
  const { includeUsage, continuousUsageStats, ...rest } = options as { includeUsage?: unknown; continuousUsageStats?: unknown };
  return { ...rest, ...(includeUsage === undefined ? {} : { include_usage: includeUsage }), ...(continuousUsageStats === undefined ? {} : { continuous_usage_stats: continuousUsageStats }) };
}

function toBody(kind: "chat" | "complete", options: object, base: Record<string, unknown>): Record<string, unknown> {
  const table = kind === "chat" ? CHAT : COMPLETE;
  const body = { ...base };
  for (const [key, value] of Object.entries(options)) {
    if (LOCAL.has(key) || value === undefined) continue;
    const field = Object.hasOwn(table, key) ? table[key]! : undefined;
    if (field === undefined) {
      throw new ArgumentError(`options.${key}`, `is not a ${kind}() option (got ${show(value)}); the options are ${[...Object.keys(table), ...LOCAL].join(", ")}`);
    }
    body[field] = key === "responseFormat" ? responseFormatField(value as ResponseFormat) : key === "streamOptions" ? streamOptionsField(value) : value;
  }
  return body;
}

/** The /v1/chat/completions body. */
export function chatBody(messages: unknown, options: object, stream: boolean): Record<string, unknown> {
  return toBody("chat", options, { messages, ...(stream ? { stream: true } : {}) });
}

/** The /v1/completions body. */
export function completeBody(prompt: unknown, options: object): Record<string, unknown> {
  return toBody("complete", options, { prompt });
}

/**
 * The high-level API's types (llm.ts): request options in camelCase, one for
 * each field the server's OpenAI routes take (server/openai-request.ts,
 * structured-request.ts, tool-calls.ts), and the results, which are the
 * server's response bodies (server/openai-response.ts) as they come, plus a
 * convenience `text` (and `parsed` for JSON output). The shapes are OpenAI's,
 * as the openai client types them; request-body.ts maps options to the body.
 */
import type { ChatMessage } from "../tokenizer/chat-template.js";

export type { ChatMessage };

/** A JSON Schema (draft 2020-12 subset the structured-output compiler takes). */
export type JsonSchema = Record<string, unknown>;

/** Structured output. `json_schema` takes the schema itself (the body's `json_schema` wrapper is built from name/strict). */
export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; schema: JsonSchema; name?: string; strict?: boolean };

/** An OpenAI function tool. */
export interface ToolDefinition {
  type: "function";
  function: { name: string; description?: string; parameters?: JsonSchema; strict?: boolean };
}

export type ToolChoice = "none" | "auto" | "required" | { type: "function"; function: { name: string } };

/** The sampling and output fields /v1/chat/completions and /v1/completions share (OpenAI's plus vLLM's extras). */
export interface SamplingOptions {
  /** Tokens to generate at most (max_tokens). */
  maxTokens?: number;
  /** OpenAI's newer name for maxTokens (wins over it). */
  maxCompletionTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  repetitionPenalty?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  /** Token id → bias added to its logit. */
  logitBias?: Record<string, number>;
  seed?: number;
  stop?: string | readonly string[];
  stopTokenIds?: readonly number[];
  ignoreEos?: boolean;
  includeStopStrInOutput?: boolean;
  skipSpecialTokens?: boolean;
  /** Choices to sample (each with seed + i when seeded). */
  n?: number;
  cacheSalt?: string;
  /** Regex, choice, grammar, JSON (vLLM's structured_outputs object, as the body takes it). */
  structuredOutputs?: Record<string, unknown>;
  /** stream() only: a last chunk with the usage, or usage on every chunk (the server refuses it without streaming). */
  streamOptions?: { includeUsage?: boolean; continuousUsageStats?: boolean };
  /** Cancels the request: its promise (or iteration) rejects with an AbortError and the engine frees its slot. */
  signal?: AbortSignal;
}

export interface ChatOptions extends SamplingOptions {
  /** Chat: true, or the number of top alternatives via topLogprobs. */
  logprobs?: boolean;
  topLogprobs?: number;
  responseFormat?: ResponseFormat;
  tools?: readonly ToolDefinition[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  /** Variables for the chat template (enable_thinking, …). */
  chatTemplateKwargs?: Record<string, unknown>;
  addGenerationPrompt?: boolean;
  continueFinalMessage?: boolean;
}

export interface CompleteOptions extends SamplingOptions {
  /** Completions: top alternatives per token (0: the chosen token's logprob only). */
  logprobs?: number;
  /** The prompt text leads the output. */
  echo?: boolean;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
}

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ChatCompletionMessage {
  role: "assistant";
  content: string | null;
  tool_calls?: ToolCall[];
}

/** OpenAI's chat.completion, as the server answers it. */
export interface ChatCompletion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: { index: number; message: ChatCompletionMessage; logprobs: unknown; finish_reason: string | null; stop_reason: string | number | null }[];
  usage: Usage;
}

/** chat()'s answer: the server's body, the first choice's text, and the parsed JSON (responseFormat json_*; null if the reply was cut before its JSON ended). */
export interface ChatResult extends ChatCompletion {
  text: string;
  parsed?: unknown;
}

/** OpenAI's chat.completion.chunk, as the server streams it. */
export interface ChatCompletionChunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: {
    index: number;
    delta: { role?: "assistant"; content?: string; tool_calls?: { index: number; id?: string; type?: "function"; function: { name?: string; arguments: string } }[] };
    logprobs: unknown;
    finish_reason: string | null;
    stop_reason?: string | number | null;
  }[];
  usage?: Usage | null;
}

/** One streamed chunk with its new content as `text` ("" for role, tool-call and finishing chunks). */
export interface ChatDelta extends ChatCompletionChunk {
  text: string;
}

/** OpenAI's text_completion. */
export interface Completion {
  id: string;
  object: "text_completion";
  created: number;
  model: string;
  choices: { index: number; text: string; logprobs: unknown; finish_reason: string | null; stop_reason: string | number | null }[];
  usage: Usage;
}

export interface CompleteResult extends Completion {
  text: string;
}

/** What LLM.load reports: bytes downloaded from the hub, then bytes of weights loaded by the engine. */
export interface LoadProgressEvent {
  phase: "download" | "load";
  done: number;
  total: number;
}

/** llm.embed's options (POST /v1/embeddings). */
export interface EmbedOptions {
  /** Matryoshka length, for a model that allows it (else the server's 400). */
  dimensions?: number;
  /** Keep at most this many tokens of each input (-1: the model's limit); default: a longer input is an error. */
  truncatePromptTokens?: number;
  signal?: AbortSignal;
}

/** llm.rerank's options. */
export interface RerankOptions {
  /** Keep the best n results (default: all). */
  topN?: number;
  /**
   * Cut each query–document pair to at most this many tokens (-1: the model's
   * limit), the longer text losing tokens first (the tokenizer's longest_first,
   * as vLLM's truncate_prompt_tokens); default: a pair beyond the context is an error.
   */
  truncatePromptTokens?: number;
  /** false: a cross-encoder's raw logit instead of its activated score (vLLM's use_activation); an embedding model's cosine is unchanged. Default true. */
  useActivation?: boolean;
  signal?: AbortSignal;
}

/** llm.rerank's answer: POST /v1/rerank's body, best result first. */
export interface RerankResult {
  id: string;
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
  /** `index` into the documents; relevance_score: a cross-encoder's sigmoid score, or an embedding model's cosine. */
  results: { index: number; document: { text: string }; relevance_score: number }[];
}

/** llm.embed's answer: one f32 vector per input, in order. */
export interface EmbedResult {
  embeddings: Float32Array[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

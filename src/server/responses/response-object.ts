/**
 * The Responses API's Response object (OpenAI's `object: "response"`, the
 * shape openai-node's `Response` type gives): status, output items, usage in
 * input/output tokens, incomplete_details when max_output_tokens cut the
 * reply, error when the engine failed, and the request's settings echoed.
 *
 *   status  in_progress (the stream's first events) → completed | incomplete | failed
 */
import type { ChoiceState } from "../openai-response.js";
import type { OutputItem } from "./output.js";
import type { ResponsesPlan } from "./request.js";

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export function responseUsage(state: ChoiceState): ResponseUsage {
  return {
    input_tokens: state.numPromptTokens,
    input_tokens_details: { cached_tokens: state.numCachedTokens },
    output_tokens: state.numOutputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: state.numPromptTokens + state.numOutputTokens,
  };
}

/** The status a finished reply earns: "length" (max_output_tokens or the context) is incomplete. */
export function finalStatus(finishReason: string | null, failed: boolean): ResponseStatus {
  if (failed) return "failed";
  return finishReason === "length" ? "incomplete" : "completed";
}

export interface ResponseState {
  id: string;
  createdAt: number;
  status: ResponseStatus;
  output: readonly OutputItem[];
  usage: ResponseUsage | null;
  /** The engine's message when status is "failed". */
  error: string | null;
}

export function responseObject(r: ResponsesPlan, s: ResponseState) {
  const params = r.plan.prompts[0]!.params;
  return {
    id: s.id,
    object: "response" as const,
    created_at: s.createdAt,
    status: s.status,
    ...(s.status === "in_progress" ? {} : { completed_at: Math.floor(Date.now() / 1000) }),
    background: false,
    error: s.error === null ? null : { code: "server_error", message: s.error },
    incomplete_details: s.status === "incomplete" ? { reason: "max_output_tokens" } : null,
    model: r.plan.model,
    output: s.output,
    temperature: params.temperature,
    top_p: params.topP,
    reasoning: null,
    truncation: "disabled",
    usage: s.usage,
    ...r.echo,
  };
}

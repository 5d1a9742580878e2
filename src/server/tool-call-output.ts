/**
 * A chat reply with tools → OpenAI's message.tool_calls, whole or streamed.
 * Streaming re-parses the text so far on each output (tool-parsers.ts holds
 * back what may still be markup) and sends what is new: content deltas, then
 * per call a first delta with its index, id and name (arguments ""), then its
 * argument fragments. The fragments concatenate to the non-streamed
 * `arguments`. A call cut short (max_tokens) is a call with the arguments it
 * has, as OpenAI gives it, streamed or not, never text in `content`.
 * finish_reason is "tool_calls" when the reply made calls and stopped on its
 * own, except for a named tool_choice, where OpenAI answers "stop" (vLLM
 * aligned with it the same way).
 */
import type { ToolPlan } from "./tool-calls.js";
import { toolCallId } from "./tool-calls.js";
import { parseToolOutput } from "./tool-parsers.js";

export interface ToolCallJson {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type ToolCallDelta = { index: number; id?: string; type?: "function"; function: { name?: string; arguments: string } };

/** One streamed delta: new content or tool-call pieces. */
export type ChatDelta = { content: string } | { tool_calls: ToolCallDelta[] };

function finishReasonWithCalls(plan: ToolPlan, reason: string | null, calls: number): string | null {
  return reason === "stop" && calls > 0 && typeof plan.choice !== "object" ? "tool_calls" : reason;
}

/** The non-streamed message and finish reason of a finished reply. */
export function toolCallMessage(plan: ToolPlan, text: string, finishReason: string | null) {
  const parsed = parseToolOutput(plan.parser, text, true, plan.tools);
  const toolCalls: ToolCallJson[] = parsed.calls.map((c) => ({ id: toolCallId(plan.parser), type: "function", function: { name: c.name, arguments: c.arguments } }));
  const content = toolCalls.length > 0 && parsed.content.trim() === "" ? null : parsed.content;
  return {
    message: { role: "assistant" as const, content, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) },
    finishReason: finishReasonWithCalls(plan, finishReason, toolCalls.length),
  };
}

/** One streamed choice's tool-call state. */
export class ToolCallStream {
  readonly #plan: ToolPlan;
  #contentSent = 0;
  readonly #calls: { id: string; argsSent: number }[] = [];

  constructor(plan: ToolPlan) {
    this.#plan = plan;
  }

  /** The deltas that bring the client up to `text` (the whole reply so far); `final` once it is complete. */
  push(text: string, final: boolean): ChatDelta[] {
    const parsed = parseToolOutput(this.#plan.parser, text, final, this.#plan.tools);
    const out: ChatDelta[] = [];
    if (parsed.content.length > this.#contentSent) {
      out.push({ content: parsed.content.slice(this.#contentSent) });
      this.#contentSent = parsed.content.length;
    }
    parsed.calls.forEach((c, index) => {
      let sent = this.#calls[index];
      if (sent === undefined) {
        sent = { id: toolCallId(this.#plan.parser), argsSent: 0 };
        this.#calls.push(sent);
        out.push({ tool_calls: [{ index, id: sent.id, type: "function", function: { name: c.name, arguments: "" } }] });
      }
      if (c.arguments.length > sent.argsSent) {
        out.push({ tool_calls: [{ index, function: { arguments: c.arguments.slice(sent.argsSent) } }] });
        sent.argsSent = c.arguments.length;
      }
    });
    return out;
  }

  finishReason(reason: string | null): string | null {
    return finishReasonWithCalls(this.#plan, reason, this.#calls.length);
  }
}

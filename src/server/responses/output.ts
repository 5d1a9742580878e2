/**
 * A reply → the Responses API's output items, and, as they form, the typed
 * stream events OpenAI sends for them (its documented order):
 *
 *   message        response.output_item.added {item, status in_progress, content []}
 *                  response.content_part.added {part: output_text ""}
 *                  response.output_text.delta …
 *                  response.output_text.done, response.content_part.done, response.output_item.done
 *   function_call  response.output_item.added {item: arguments ""}
 *                  response.function_call_arguments.delta …
 *                  response.function_call_arguments.done, response.output_item.done
 *
 * One builder serves both answers: a stream feeds it each output's pieces,
 * a non-streamed response feeds it the finished reply once with no listener,
 * so the two give the same items. The pieces come from the reply's text, or,
 * with tools, from tool-call-output.ts's ToolCallStream (content, then per
 * call its start and argument fragments). With tools, whitespace before
 * anything else is held back until text follows, so a reply that is only
 * calls has no message item of blank text; without tools, text goes out as it comes.
 */
import { randomUUID } from "node:crypto";
import type { ChatDelta } from "../tool-call-output.js";

export interface OutputText {
  type: "output_text";
  text: string;
  annotations: never[];
  logprobs: never[];
}

export interface MessageItem {
  type: "message";
  id: string;
  status: ItemStatus;
  role: "assistant";
  content: OutputText[];
}

export interface FunctionCallItem {
  type: "function_call";
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: ItemStatus;
}

export type ItemStatus = "in_progress" | "completed" | "incomplete";
export type OutputItem = MessageItem | FunctionCallItem;

/** Receives each event: its type and its fields (sequence_number is the stream's to add). */
export type EventSink = (type: string, fields: Record<string, unknown>) => void;

const itemId = (prefix: string): string => `${prefix}_${randomUUID().replaceAll("-", "")}`;

const textPart = (text: string): OutputText => ({ type: "output_text", text, annotations: [], logprobs: [] });

export class OutputBuilder {
  readonly items: OutputItem[] = [];
  readonly #emit: EventSink;
  #open: OutputItem | null = null;
  /** With tools: leading whitespace not yet sent, which opens a message only once text follows. */
  #pending = "";
  readonly #holdWhitespace: boolean;

  /** `tools`: the reply may make calls (hold back whitespace before them). */
  constructor(tools: boolean, emit: EventSink = () => {}) {
    this.#holdWhitespace = tools;
    this.#emit = emit;
  }

  /** Feeds one ToolCallStream delta. */
  delta(d: ChatDelta): void {
    if ("content" in d) {
      this.text(d.content);
      return;
    }
    for (const call of d.tool_calls) {
      if (call.id !== undefined) this.#openCall(call.id, call.function.name ?? "");
      if (call.function.arguments !== "") this.#arguments(call.function.arguments);
    }
  }

  /** New reply text. */
  text(delta: string): void {
    if (delta === "") return;
    if (this.#open?.type !== "message") {
      if (this.#holdWhitespace && (this.#pending + delta).trim() === "") {
        this.#pending += delta;
        return;
      }
      delta = this.#pending + delta;
      this.#pending = "";
      this.#openMessage();
    }
    const item = this.#open as MessageItem;
    item.content[0]!.text += delta;
    this.#emit("response.output_text.delta", { item_id: item.id, output_index: this.items.length - 1, content_index: 0, delta, logprobs: [] });
  }

  /** Closes the open item (`incomplete` when the reply was cut short); a reply with no item at all gets an empty message. */
  finish(incomplete: boolean): void {
    if (this.items.length === 0) {
      const pending = this.#pending;
      this.#pending = "";
      this.#openMessage();
      this.text(pending);
    }
    this.#close(incomplete ? "incomplete" : "completed");
  }

  #openMessage(): void {
    this.#close("completed");
    const item: MessageItem = { type: "message", id: itemId("msg"), status: "in_progress", role: "assistant", content: [] };
    this.#add(item);
    item.content.push(textPart(""));
    this.#emit("response.content_part.added", { item_id: item.id, output_index: this.items.length - 1, content_index: 0, part: textPart("") });
  }

  #openCall(callId: string, name: string): void {
    this.#close("completed");
    this.#pending = "";
    this.#add({ type: "function_call", id: itemId("fc"), call_id: callId, name, arguments: "", status: "in_progress" });
  }

  #arguments(delta: string): void {
    const item = this.#open;
    if (item?.type !== "function_call") throw new Error("tool-call arguments came before the call's start");
    item.arguments += delta;
    this.#emit("response.function_call_arguments.delta", { item_id: item.id, output_index: this.items.length - 1, delta });
  }

  #add(item: OutputItem): void {
    this.items.push(item);
    this.#open = item;
    this.#emit("response.output_item.added", { output_index: this.items.length - 1, item: structuredClone(item) });
  }

  #close(status: ItemStatus): void {
    const item = this.#open;
    if (item === null) return;
    this.#open = null;
    item.status = status;
    const at = { item_id: item.id, output_index: this.items.length - 1 };
    if (item.type === "message") {
      const text = item.content[0]!.text;
      this.#emit("response.output_text.done", { ...at, content_index: 0, text, logprobs: [] });
      this.#emit("response.content_part.done", { ...at, content_index: 0, part: textPart(text) });
    } else {
      this.#emit("response.function_call_arguments.done", { ...at, name: item.name, arguments: item.arguments });
    }
    this.#emit("response.output_item.done", { output_index: at.output_index, item: structuredClone(item) });
  }
}

/** The output as one assistant chat message, for the conversation a follow-up continues. */
export function assistantMessage(items: readonly OutputItem[]): Record<string, unknown> {
  const text = items.flatMap((i) => (i.type === "message" ? [i.content[0]!.text] : [])).join("");
  const calls = items.flatMap((i) => (i.type === "function_call" ? [{ id: i.call_id, type: "function", function: { name: i.name, arguments: i.arguments } }] : []));
  return { role: "assistant", content: text, ...(calls.length > 0 ? { tool_calls: calls } : {}) };
}

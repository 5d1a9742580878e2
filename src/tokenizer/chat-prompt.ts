/**
 * A chat request's prompt text, as the tokenizer worker builds it (issue #32
 * item 2: a chat template walks every message, ~20–70 µs each here, so it
 * runs off the HTTP thread): the messages rendered with the model's chat
 * template (transformers' apply_chat_template, tokenize=False) and, for
 * continue_final_message, cut where the final message's content ends
 * (transformers' rule). A failure names the request field at fault.
 */
import type { ChatMessage } from "./chat-template.js";
import type { Tokenizer } from "./tokenizer.js";

/** What the HTTP thread sends: plain data (structured-clone safe). */
export interface ChatPromptJob {
  messages: unknown[];
  /** Rendered instead when `messages` cannot be (the generic tool format on a template with no system role). */
  fallbackMessages?: unknown[];
  addGenerationPrompt: boolean;
  /** chat_template_kwargs. */
  variables: Record<string, unknown>;
  /** The tools as the request gave them, or undefined. */
  tools: unknown[] | undefined;
  continueFinal: boolean;
}

/** A prompt that cannot be built: the request field at fault and why. */
export class ChatPromptError extends Error {
  readonly param: string;
  constructor(param: string, message: string) {
    super(message);
    this.name = "ChatPromptError";
    this.param = param;
  }
}

export function chatPromptText(tokenizer: Tokenizer, job: ChatPromptJob): string {
  const render = (messages: unknown[]): string =>
    tokenizer.applyChatTemplate(messages as ChatMessage[], {
      addGenerationPrompt: job.addGenerationPrompt,
      variables: job.variables,
      ...(job.tools === undefined ? {} : { tools: job.tools }),
    });
  let text: string;
  let rendered = job.messages;
  try {
    try {
      text = render(rendered);
    } catch (e) {
      if (job.fallbackMessages === undefined) throw e;
      rendered = job.fallbackMessages;
      text = render(rendered);
    }
  } catch (e) {
    throw new ChatPromptError("messages", `the chat template cannot render these messages: ${(e as Error).message}`);
  }
  return job.continueFinal ? cutAfterFinalMessage(text, rendered.at(-1) as ChatMessage) : text;
}

/** continue_final_message: the rendered text ends where the final message's content ends. */
function cutAfterFinalMessage(text: string, final: ChatMessage): string {
  const content = typeof final.content === "string" ? final.content : (final.content ?? []).map((p) => p.text ?? "").join("\n");
  const at = text.lastIndexOf(content.trim());
  if (content.trim() === "" || at < 0) throw new ChatPromptError("continue_final_message", "the final message's content cannot be found in the rendered chat template");
  return text.slice(0, at + content.trim().length);
}

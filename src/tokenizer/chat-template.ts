/**
 * Chat templates: the Jinja program a model's tokenizer_config.json carries to
 * turn a conversation into the prompt text the model was trained on, run with
 * @huggingface/jinja under transformers' apply_chat_template semantics: the
 * template sees `messages`, `add_generation_prompt`, `tools`, `documents`,
 * the special tokens (`bos_token`, `eos_token`, …) and any extra variables
 * (e.g. Qwen3's `enable_thinking`), and may call `raise_exception(msg)`. A
 * tokenizer compiles its templates once, at load (ChatTemplate), so one that
 * does not parse fails the load rather than every chat request.
 *
 * Every render runs under a time and size bound (bounded-render.ts), and the
 * load renders a sample conversation under it: a template that loops, or
 * grows a value without bound, fails the load naming where it came from, and
 * one that does so only for some conversations fails that request alone.
 */
import { Template } from "@huggingface/jinja";
import { ArgumentError, show } from "../errors.js";
import { RENDER_LIMITS, RenderLimitError, type RenderLimits, renderBounded } from "./bounded-render.js";

/** An OpenAI-style content part; only text parts can be rendered into a text prompt. */
export interface ChatContentPart {
  type: string;
  text?: string;
  [key: string]: unknown;
}

export interface ChatMessage {
  role: string;
  /** Text, or OpenAI-style parts (text parts are joined with "\n", as vLLM does for string-content templates). */
  content?: string | readonly ChatContentPart[] | null;
  /** Extra fields (tool_calls, name, reasoning_content, …) are passed to the template as they are. */
  [key: string]: unknown;
}

export interface ChatTemplateOptions {
  /** End with the header that starts the assistant's turn. Default true (vLLM's chat endpoint default). */
  addGenerationPrompt?: boolean;
  /** Tool (function) definitions, JSON-schema style, for templates that render them. */
  tools?: readonly unknown[];
  /** Retrieval documents, for templates that render them. */
  documents?: readonly unknown[];
  /** Which named template to use when tokenizer_config has several. Default "default" ("tool_use" when tools are given and it exists). */
  templateName?: string;
  /** More template variables, e.g. `{ enable_thinking: false }`. */
  variables?: Readonly<Record<string, unknown>>;
}

/**
 * A chat template compiled once, when the tokenizer loads, so a template that
 * does not parse fails the load (naming `origin`, e.g. the file it came from)
 * rather than every chat request later.
 */
export class ChatTemplate {
  readonly source: string;
  readonly #program: Template;

  readonly #limits: RenderLimits;

  constructor(source: string, origin = "chat_template", limits: RenderLimits = RENDER_LIMITS) {
    try {
      this.#program = new Template(source);
    } catch (e) {
      throw new ArgumentError(origin, `does not parse as Jinja: ${(e as Error).message}`);
    }
    this.source = source;
    this.#limits = limits;
    this.#checkRender(origin);
  }

  /**
   * Renders SAMPLE_CONVERSATION under the bound: past it, the load fails. The
   * template's own errors (raise_exception on roles it does not accept, a
   * variable the sample lacks) are not the template's fault here and are ignored.
   */
  #checkRender(origin: string): void {
    try {
      renderBounded(this.#program, { messages: SAMPLE_CONVERSATION, add_generation_prompt: true, bos_token: "<s>", eos_token: "</s>" }, this.#limits);
    } catch (e) {
      if (e instanceof RenderLimitError) throw new ArgumentError(origin, `${e.message} on a four-message sample conversation: the template loops or grows without bound`);
    }
  }

  /**
   * Renders the template for `messages`. `specialTokens` holds the tokenizer's
   * special_tokens_map (bos_token, eos_token, …). Errors raised by the template
   * (raise_exception) come back as an ArgumentError on `messages`.
   */
  render(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}, specialTokens: Readonly<Record<string, unknown>> = {}): string {
    const context: Record<string, unknown> = {
      ...specialTokens,
      ...(options.variables ?? {}),
      messages: normalizeMessages(messages),
      add_generation_prompt: options.addGenerationPrompt ?? true,
    };
    if (options.tools !== undefined) context["tools"] = options.tools;
    if (options.documents !== undefined) context["documents"] = options.documents;
    try {
      return renderBounded(this.#program, context, this.#limits);
    } catch (e) {
      if (e instanceof RenderLimitError) throw new ArgumentError("messages", `could not be rendered: the chat template ${e.message}`);
      throw new ArgumentError("messages", `were rejected by the chat template: ${(e as Error).message}`);
    }
  }
}

/** What the load renders every template with (the roles most templates accept, in the order they require). */
const SAMPLE_CONVERSATION: readonly ChatMessage[] = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "Hello! What is 2 + 2?" },
  { role: "assistant", content: "2 + 2 = 4." },
  { role: "user", content: "Thanks. And 3 + 3?" },
];

const compiled = new Map<string, ChatTemplate>();

function compile(template: string): ChatTemplate {
  let t = compiled.get(template);
  if (!t) {
    t = new ChatTemplate(template);
    if (compiled.size > 64) compiled.clear();
    compiled.set(template, t);
  }
  return t;
}

function normalizeMessages(messages: readonly ChatMessage[]): Record<string, unknown>[] {
  if (!Array.isArray(messages)) throw new ArgumentError("messages", `must be an array of { role, content }, got ${show(messages)}`);
  return messages.map((m, i) => {
    if (typeof m !== "object" || m === null || typeof m.role !== "string") {
      throw new ArgumentError(`messages[${i}]`, `must be an object with a string role, got ${show(m)}`);
    }
    const content = m.content;
    if (content === undefined || content === null || typeof content === "string") return { ...m };
    if (!Array.isArray(content)) throw new ArgumentError(`messages[${i}].content`, `must be a string, null or an array of parts, got ${show(content)}`);
    const texts = content.map((part, j) => {
      if (typeof part !== "object" || part === null || part.type !== "text" || typeof part.text !== "string") {
        throw new ArgumentError(`messages[${i}].content[${j}]`, `must be a text part { type: "text", text }, got ${show(part)}`);
      }
      return part.text;
    });
    return { ...m, content: texts.join("\n") };
  });
}

/** Renders template source `template` for `messages` (ChatTemplate.render, with the compiled template cached). */
export function renderChatTemplate(
  template: string,
  messages: readonly ChatMessage[],
  options: ChatTemplateOptions = {},
  specialTokens: Readonly<Record<string, unknown>> = {},
): string {
  return compile(template).render(messages, options, specialTokens);
}

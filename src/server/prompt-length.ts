/**
 * Prompt text → token ids without letting a long prompt stall the server.
 * A text of more characters than maxModelLen × the tokenizer's maxTokenChars
 * cannot fit the context, so it is refused with a 400 context_length_exceeded
 * before any tokenizing; any other text is tokenized in the tokenizer pool's
 * workers, which stop once the prompt is known not to fit (stopAfter). Chat
 * prompts are rendered there too.
 */
import { type ChatPromptJob, ChatPromptError } from "../tokenizer/chat-prompt.js";
import { JobTimeoutError } from "../tokenizer/tokenizer-pool.js";
import { type ServerContext, maxModelLen } from "./context.js";
import { HttpError, badRequest } from "./errors.js";

/** The engine's context length, or a 503 while the model loads. */
export function contextLimit(ctx: ServerContext): number {
  const limit = maxModelLen(ctx);
  if (limit === null) throw new HttpError(503, "the model is still loading");
  return limit;
}

/** Refuses `chars` characters of prompt text (at `param`) that no tokenization can fit into the context. */
export function refuseLongText(ctx: ServerContext, chars: number, param: string): void {
  const limit = contextLimit(ctx);
  const perToken = ctx.tokenizer.maxTokenChars;
  if (chars > limit * perToken) {
    throw badRequest(
      param,
      `This model's maximum context length is ${limit} tokens. However, your ${param} has ${chars} characters, more than ${limit} tokens of at most ${perToken} characters each can hold.`,
      "context_length_exceeded",
    );
  }
}

/**
 * Renders and encodes a chat prompt in the tokenizer pool (the chat template
 * never runs on the HTTP thread); a template that refuses the messages is a
 * 400 naming the field, more tokens than the context holds a 400 context_length_exceeded.
 */
export async function encodeChatPrompt(ctx: ServerContext, chat: ChatPromptJob, addSpecialTokens: boolean, signal?: AbortSignal): Promise<number[]> {
  const limit = contextLimit(ctx);
  let ids: number[];
  try {
    ids = await ctx.tokenizerPool.encodeChat(chat, { addSpecialTokens, stopAfter: limit, ...(signal === undefined ? {} : { signal }) });
  } catch (e) {
    if (e instanceof ChatPromptError) throw badRequest(e.param, e.message);
    if (e instanceof JobTimeoutError) throw badRequest("messages", `the prompt could not be tokenized: ${e.message}`, "tokenizer_timeout");
    throw e;
  }
  if (ids.length > limit) {
    throw badRequest("messages", `This model's maximum context length is ${limit} tokens. However, your messages has more than ${limit} tokens.`, "context_length_exceeded");
  }
  return ids;
}

/** Encodes a prompt in the tokenizer pool; more tokens than the context holds is a 400 context_length_exceeded. */
export async function encodePrompt(ctx: ServerContext, text: string, addSpecialTokens: boolean, param: string, signal?: AbortSignal): Promise<number[]> {
  refuseLongText(ctx, text.length, param);
  const limit = contextLimit(ctx);
  let ids: number[];
  try {
    ids = await ctx.tokenizerPool.encode(text, { addSpecialTokens, stopAfter: limit, ...(signal === undefined ? {} : { signal }) });
  } catch (e) {
    if (e instanceof JobTimeoutError) throw badRequest(param, `the ${param} could not be tokenized: ${e.message}`, "tokenizer_timeout");
    throw e;
  }
  if (ids.length > limit) {
    throw badRequest(param, `This model's maximum context length is ${limit} tokens. However, your ${param} has more than ${limit} tokens.`, "context_length_exceeded");
  }
  return ids;
}

/**
 * Engine outputs → OpenAI response bodies: `chat.completion` and
 * `text_completion` objects, their streaming chunks, usage, and logprobs in
 * each API's format (chat: `logprobs.content[]` with bytes and top_logprobs;
 * completions: parallel `tokens` / `token_logprobs` / `top_logprobs` /
 * `text_offset` arrays). vLLM's `stop_reason` rides along on each choice.
 */
import type { TokenLogprobs } from "../engine/engine.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import type { GenerationPlan } from "./openai-request.js";
import { type ChatDelta, toolCallMessage } from "./tool-call-output.js";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

/** What one choice produced, finished or so far. */
export interface ChoiceState {
  text: string;
  numPromptTokens: number;
  numOutputTokens: number;
  numCachedTokens: number;
  finishReason: string | null;
  stopReason: string | number | null;
  logprobs: TokenLogprobs[];
  /** The request's prompt this choice samples: n choices of one prompt count its tokens once. */
  group: number;
}

/** Usage of a request: each prompt once (its first choice's count), every choice's output. */
export function usageOf(choices: readonly ChoiceState[]): Usage {
  const seen = new Set<number>();
  let prompt = 0;
  let cached = 0;
  for (const c of choices) {
    if (seen.has(c.group)) continue;
    seen.add(c.group);
    prompt += c.numPromptTokens;
    cached += c.numCachedTokens;
  }
  const completion = choices.reduce((s, c) => s + c.numOutputTokens, 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion, prompt_tokens_details: { cached_tokens: cached } };
}

const tokenTexts = new WeakMap<Tokenizer, { anchor: number[]; head: string; texts: Map<number, string> }>();

/**
 * A token's text as it reads inside a text, leading space included: decoded
 * after an anchor token and cut after the anchor's text (SentencePiece drops
 * a word's space at the very start of a decode). Cached per tokenizer.
 */
export function tokenText(tokenizer: Tokenizer, id: number): string {
  if (id >= tokenizer.vocabSize) return "";
  let t = tokenTexts.get(tokenizer);
  if (t === undefined) {
    const anchor = tokenizer.encode("a", { addSpecialTokens: false }).slice(0, 1);
    t = { anchor, head: tokenizer.decode(anchor), texts: new Map() };
    tokenTexts.set(tokenizer, t);
  }
  let text = t.texts.get(id);
  if (text === undefined) {
    const both = tokenizer.decode([...t.anchor, id]);
    text = both.startsWith(t.head) ? both.slice(t.head.length) : tokenizer.decode([id]);
    t.texts.set(id, text);
  }
  return text;
}

export function chatLogprobs(tokenizer: Tokenizer, lps: readonly TokenLogprobs[]) {
  const entry = (token: number, logprob: number) => {
    const text = tokenText(tokenizer, token);
    return { token: text, logprob, bytes: [...Buffer.from(text, "utf8")] };
  };
  return { content: lps.map((lp) => ({ ...entry(lp.token, lp.logprob), top_logprobs: lp.top.map((t) => entry(t.token, t.logprob)) })) };
}

/** Completions logprobs; `offset` is the text length before these tokens (text_offset). */
export function completionLogprobs(tokenizer: Tokenizer, lps: readonly TokenLogprobs[], offset: number) {
  const tokens: string[] = [];
  const textOffset: number[] = [];
  for (const lp of lps) {
    const t = tokenText(tokenizer, lp.token);
    tokens.push(t);
    textOffset.push(offset);
    offset += t.length;
  }
  return {
    tokens,
    token_logprobs: lps.map((lp) => lp.logprob),
    top_logprobs: lps.map((lp) => {
      const top: Record<string, number> = {};
      for (const t of lp.top) top[tokenText(tokenizer, t.token)] = t.logprob;
      top[tokenText(tokenizer, lp.token)] = lp.logprob;
      return top;
    }),
    text_offset: textOffset,
  };
}

function logprobsOf(plan: GenerationPlan, tokenizer: Tokenizer, lps: readonly TokenLogprobs[], offset: number) {
  if (plan.logprobs === null) return null;
  return plan.kind === "chat" ? chatLogprobs(tokenizer, lps) : completionLogprobs(tokenizer, lps, offset);
}

/** One streaming chunk for choice `index`: new text, and the finish reason on the last one. */
export function chunk(
  plan: GenerationPlan,
  tokenizer: Tokenizer,
  index: number,
  delta: { text: string; role?: boolean; logprobs: readonly TokenLogprobs[]; offset: number; finishReason: string | null; stopReason: string | number | null },
  usage: Usage | null,
) {
  const logprobs = delta.logprobs.length > 0 ? logprobsOf(plan, tokenizer, delta.logprobs, delta.offset) : null;
  const finish = { finish_reason: delta.finishReason, ...(delta.finishReason !== null ? { stop_reason: delta.stopReason } : {}) };
  const choice =
    plan.kind === "chat"
      ? { index, delta: delta.role ? { role: "assistant", content: delta.text } : delta.text === "" && delta.finishReason !== null ? {} : { content: delta.text }, logprobs, ...finish }
      : { index, text: delta.text, logprobs, ...finish };
  return {
    id: plan.id,
    object: plan.kind === "chat" ? "chat.completion.chunk" : "text_completion",
    created: plan.created,
    model: plan.model,
    choices: [choice],
    ...(plan.includeUsage || plan.continuousUsage ? { usage } : {}),
  };
}

/** A chat chunk with a tool-calling delta (content or tool_calls), or the finishing one with an empty delta. */
export function deltaChunk(plan: GenerationPlan, index: number, delta: ChatDelta | Record<string, never>, finishReason: string | null, stopReason: string | number | null, usage: Usage | null) {
  return {
    id: plan.id,
    object: "chat.completion.chunk",
    created: plan.created,
    model: plan.model,
    choices: [{ index, delta, logprobs: null, finish_reason: finishReason, ...(finishReason !== null ? { stop_reason: stopReason } : {}) }],
    ...(plan.includeUsage || plan.continuousUsage ? { usage } : {}),
  };
}

/** The last chunk of a stream with stream_options.include_usage: no choices, the usage. */
export function usageChunk(plan: GenerationPlan, usage: Usage) {
  return {
    id: plan.id,
    object: plan.kind === "chat" ? "chat.completion.chunk" : "text_completion",
    created: plan.created,
    model: plan.model,
    choices: [],
    usage,
  };
}

/** The non-streaming response. */
export function fullResponse(plan: GenerationPlan, tokenizer: Tokenizer, choices: readonly ChoiceState[]) {
  return {
    id: plan.id,
    object: plan.kind === "chat" ? "chat.completion" : "text_completion",
    created: plan.created,
    model: plan.model,
    choices: choices.map((c, index) => {
      const logprobs = logprobsOf(plan, tokenizer, c.logprobs, plan.echo ? plan.prompts[index]!.text.length : 0);
      const finish = { finish_reason: c.finishReason, stop_reason: c.stopReason };
      if (plan.kind === "chat" && plan.tools !== null) {
        const t = toolCallMessage(plan.tools, c.text, c.finishReason);
        return { index, message: t.message, logprobs, ...finish, finish_reason: t.finishReason };
      }
      return plan.kind === "chat"
        ? { index, message: { role: "assistant", content: c.text }, logprobs, ...finish }
        : { index, text: c.text, logprobs, ...finish };
    }),
    usage: usageOf(choices),
  };
}

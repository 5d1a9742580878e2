/**
 * OpenAI request bodies → what the engine runs. `POST /v1/chat/completions`
 * and `POST /v1/completions` share the sampling fields (OpenAI's plus vLLM's
 * extras: top_k, min_p, repetition_penalty, stop_token_ids, ignore_eos,
 * include_stop_str_in_output, skip_special_tokens, cache_salt); chat renders
 * its messages with the model's chat template, completions take a prompt as
 * text or token ids (or a list of them: n choices each). n > 1 samples each
 * prompt n times, choice i with seed + i; the samples after the first wait
 * for its prefill and share its KV (EngineRequest.prefillAfter). Every field is
 * type-checked and a bad one is a 400 naming it; a prompt that does not fit
 * the context is a 400. Tools (chat only) are tool-calls.ts. Structured output
 * (response_format, structured_outputs, guided_*) is structured-request.ts.
 */
import { randomUUID } from "node:crypto";
import { ArgumentError, clip, show } from "../errors.js";
import { MAX_LOGPROBS, type ResolvedSamplingParams, type SamplingParams, resolveSamplingParams } from "../engine/sampling-params.js";
import { type ServerContext, maxModelLen } from "./context.js";
import { HttpError, badRequest } from "./errors.js";
import { Fields, isObject } from "./fields.js";
import { type GrammarRequest, parseGrammarFields } from "./structured-request.js";
import { genericToolMessages } from "./generic-tool-prompt.js";
import { type ToolPlan, parseToolFields, templateMessages } from "./tool-calls.js";
import { contentChars } from "../prompt-text.js";
import { SHAPE_LIMITS } from "../request-shape.js";
import { encodeChatPrompt, encodePrompt, refuseLongText } from "./prompt-length.js";

export interface PromptInput {
  tokenIds: number[];
  /** The prompt as text (for echo; "" for chat, whose prompt is rendered and encoded in a tokenizer worker). */
  text: string;
  params: ResolvedSamplingParams;
  /** Which prompt of the request this choice samples (usage counts each prompt once). */
  group: number;
  /** The choice whose prefill this one waits for and shares (n > 1), or null. */
  prefillAfter: number | null;
}

export interface GenerationPlan {
  kind: "chat" | "completion";
  /** chatcmpl-… or cmpl-…; choice i runs as engine request `${id}-${i}`. */
  id: string;
  /** The model name responses report. */
  model: string;
  created: number;
  /** One per choice: each prompt n times, in order (choice index = prompt index · n + sample). */
  prompts: PromptInput[];
  skipSpecialTokens: boolean;
  cacheSalt: string | undefined;
  stream: boolean;
  /** stream_options.include_usage: a last chunk with the usage. */
  includeUsage: boolean;
  /** stream_options.continuous_usage_stats (vLLM): usage on every chunk. */
  continuousUsage: boolean;
  /** Top-n alternatives per token (0: the chosen token's logprob only), or null for no logprobs. */
  logprobs: number | null;
  /** Completions: the prompt text leads the output. */
  echo: boolean;
  /** The output's grammar (every choice's), or null for free text. */
  grammar: GrammarRequest | null;
  /** Chat with tools (tool_choice other than "none"): the reply is parsed into tool calls. */
  tools: ToolPlan | null;
}

/**
 * Most prompts one /v1/completions request may list: each is its own engine
 * request, and a longer list would fill the waiting queue (1024 by default)
 * and starve other clients. vLLM bounds the list too (VLLM_MAX_COMPLETION_PROMPTS,
 * checked before any tokenizing); kvflash's bound is an eighth of its default queue.
 */
export const MAX_PROMPTS_PER_REQUEST = SHAPE_LIMITS.prompts;

/** Sampling parameter → the request field it came from (for error messages). */
const FIELD_OF: Record<string, string> = {
  temperature: "temperature",
  topK: "top_k",
  topP: "top_p",
  minP: "min_p",
  repetitionPenalty: "repetition_penalty",
  presencePenalty: "presence_penalty",
  frequencyPenalty: "frequency_penalty",
  logitBias: "logit_bias",
  seed: "seed",
  maxTokens: "max_tokens",
  stop: "stop",
  stopTokenIds: "stop_token_ids",
  ignoreEos: "ignore_eos",
  includeStopStrInOutput: "include_stop_str_in_output",
  logprobs: "logprobs",
};

function resolveModel(f: Fields, ctx: ServerContext): string {
  const model = f.string("model");
  if (model === undefined) return ctx.modelNames[0]!;
  if (!ctx.modelNames.includes(model)) {
    throw new HttpError(404, `The model \`${clip(model)}\` does not exist. This server serves ${ctx.modelNames.map((n) => `\`${n}\``).join(", ")}.`, {
      type: "invalid_request_error",
      param: "model",
      code: "model_not_found",
    });
  }
  return model;
}

/** Fields OpenAI defines that kvflash does not implement: a 400 rather than silently ignoring them. */
function refuseUnsupported(f: Fields): void {
  const n = f.integer("n", { min: 1, max: MAX_N }) ?? 1;
  const bestOf = f.integer("best_of", { min: 1 });
  if (bestOf !== undefined && bestOf !== n) throw badRequest("best_of", `best_of must equal n (${n}): kvflash returns every sample, got ${bestOf}`);
  const suffix = f.string("suffix");
  if (suffix !== undefined && suffix !== "") throw badRequest("suffix", "suffix is not supported");
}

/** The most samples per prompt (n). */
export const MAX_N = 128;

/**
 * The most choices (prompts × n) one request may have: each is an engine
 * request, and 128 prompts × n 128 (16384 of them) stalled every other
 * stream for ~12 s. The same bound as n alone and as the prompt list alone.
 */
export const MAX_CHOICES = 128;

/**
 * The most logprob entries a non-streamed response may hold: Σ over choices of
 * max_tokens × (top_logprobs + 1). The outputs are held until the last
 * token and the body is written from them (in slices: response-writer.ts),
 * ~75 bytes an entry in chat's format, so 2¹⁶ entries are ~5 MB; more is
 * refused with a pointer to stream: true, whose chunks are built and
 * forgotten a step at a time. vLLM bounds the factors (--max-logprobs 20, n);
 * n 128 × top_logprobs 20 × 900 tokens built a 60 MB body (/health 4.5 s,
 * RSS 1175 MiB).
 */
export const MAX_RESPONSE_LOGPROBS = 2 ** 16;

/** Refuses a non-streamed response of more than MAX_RESPONSE_LOGPROBS logprob entries (the choices are bounded before tokenizing). */
function checkResponseSize(prompts: readonly PromptInput[], n: number, stream: boolean, logprobs: number | null, logprobsParam: string): void {
  if (stream || logprobs === null) return;
  const entries = prompts.reduce((sum, p) => sum + p.params.maxTokens * (logprobs + 1), 0) * n;
  if (entries > MAX_RESPONSE_LOGPROBS) {
    throw badRequest(
      logprobsParam,
      `${logprobsParam} ${logprobs} with n ${n} and max_tokens up to ${Math.max(...prompts.map((p) => p.params.maxTokens))} asks for ${entries} logprob entries in one response, more than the ${MAX_RESPONSE_LOGPROBS} a non-streamed response may hold; send stream: true, lower max_tokens, n or ${logprobsParam}`,
    );
  }
}

/** Each prompt n times: sample i with seed + i (when seeded), waiting for sample 0's prefill. */
function sampleEach(prompts: PromptInput[], n: number): PromptInput[] {
  return prompts.flatMap((p, g) =>
    Array.from({ length: n }, (_, i) => ({
      ...p,
      params: i === 0 || p.params.seed === null ? p.params : { ...p.params, seed: p.params.seed + i },
      group: g,
      prefillAfter: i === 0 ? null : g * n,
    })),
  );
}

function streamOptions(f: Fields, stream: boolean): { includeUsage: boolean; continuousUsage: boolean } {
  const o = f.object("stream_options");
  if (o === undefined) return { includeUsage: false, continuousUsage: false };
  if (!stream) throw badRequest("stream_options", "stream_options is only allowed when stream is true");
  const sf = new Fields(o);
  const read = (name: string): boolean => {
    try {
      return sf.boolean(name) ?? false;
    } catch {
      throw badRequest(`stream_options.${name}`, `stream_options.${name} must be true or false, got ${show(o[name])}`);
    }
  };
  return { includeUsage: read("include_usage"), continuousUsage: read("continuous_usage_stats") };
}

/** The sampling fields, type-checked; maxTokens and logprobs are filled per prompt. */
function samplingFields(f: Fields): SamplingParams {
  const logitBias = f.object("logit_bias");
  if (logitBias !== undefined) {
    for (const [k, v] of Object.entries(logitBias)) {
      if (typeof v !== "number" || !Number.isFinite(v)) throw badRequest("logit_bias", `logit_bias[${JSON.stringify(k)}] must be a number, got ${show(v)}`);
    }
  }
  return {
    temperature: f.number("temperature"),
    topP: f.number("top_p"),
    topK: f.integer("top_k"),
    minP: f.number("min_p"),
    repetitionPenalty: f.number("repetition_penalty"),
    presencePenalty: f.number("presence_penalty"),
    frequencyPenalty: f.number("frequency_penalty"),
    logitBias: logitBias as Record<string, number> | undefined,
    seed: f.integer("seed"),
    stop: f.strings("stop"),
    stopTokenIds: f.integers("stop_token_ids"),
    ignoreEos: f.boolean("ignore_eos"),
    includeStopStrInOutput: f.boolean("include_stop_str_in_output"),
  } as SamplingParams;
}

/** resolveSamplingParams with its errors renamed to the request's fields. */
function resolveParams(params: SamplingParams, ctx: ServerContext): ResolvedSamplingParams {
  try {
    return resolveSamplingParams(params, ctx.vocabSize, ctx.generationDefaults);
  } catch (e) {
    if (!(e instanceof ArgumentError)) throw e;
    const head = e.argument.match(/^[A-Za-z]+/)?.[0] ?? "";
    const field = FIELD_OF[head] ?? e.argument;
    throw badRequest(field, `${field}${e.argument.slice(head.length)}${e.message.slice(e.argument.length)}`);
  }
}

/** Checks a tokenized prompt against the context and settles its max_tokens (vLLM's rules). */
function fitPrompt(tokenIds: number[], text: string, explicitMax: number | undefined, kind: GenerationPlan["kind"], base: SamplingParams, ctx: ServerContext, param: string): PromptInput {
  const limit = maxModelLen(ctx);
  if (limit === null) throw new HttpError(503, "the model is still loading");
  if (tokenIds.length === 0) throw badRequest(param, `${param} must not be empty`);
  if (tokenIds.length >= limit) {
    throw badRequest(param, `This model's maximum context length is ${limit} tokens. However, your ${kind === "chat" ? "messages resulted in" : "prompt has"} ${tokenIds.length} tokens, which leaves no room for a completion.`, "context_length_exceeded");
  }
  const room = limit - tokenIds.length;
  if (explicitMax !== undefined && explicitMax > room) {
    throw badRequest(
      "max_tokens",
      `max_tokens is too large: ${explicitMax}. This model's maximum context length is ${limit} tokens and your request has ${tokenIds.length} input tokens (${explicitMax} > ${limit} - ${tokenIds.length}).`,
      "context_length_exceeded",
    );
  }
  let maxTokens = explicitMax ?? (kind === "completion" ? 16 : room);
  if (explicitMax === undefined && ctx.generationDefaults.maxTokens !== undefined) maxTokens = Math.min(maxTokens, ctx.generationDefaults.maxTokens);
  return { tokenIds, text, params: resolveParams({ ...base, maxTokens: Math.min(maxTokens, room) }, ctx), group: 0, prefillAfter: null };
}

function commonPlan(f: Fields, ctx: ServerContext, kind: GenerationPlan["kind"]) {
  const model = resolveModel(f, ctx);
  refuseUnsupported(f);
  const stream = f.boolean("stream") ?? false;
  const cacheSalt = f.string("cache_salt");
  return {
    model,
    stream,
    ...streamOptions(f, stream),
    skipSpecialTokens: f.boolean("skip_special_tokens") ?? true,
    cacheSalt: cacheSalt === "" ? undefined : cacheSalt,
    explicitMax: f.integer("max_completion_tokens", { min: 1 }) ?? f.integer("max_tokens", { min: 1 }),
    id: `${kind === "chat" ? "chatcmpl" : "cmpl"}-${randomUUID().replaceAll("-", "")}`,
    grammar: parseGrammarFields(f),
    n: f.integer("n", { min: 1, max: MAX_N }) ?? 1,
    created: Math.floor(Date.now() / 1000),
  };
}

/** `signal`: the client left; its queued tokenizer job is dropped (tokenizer-pool.ts). */
export async function parseChatRequest(body: unknown, ctx: ServerContext, signal?: AbortSignal): Promise<GenerationPlan> {
  const f = new Fields(body);
  const c = commonPlan(f, ctx, "chat");
  const messages = f.raw("messages");
  if (!Array.isArray(messages) || messages.length === 0) throw badRequest("messages", `messages must be a non-empty array of { role, content }, got ${show(messages)}`);
  messages.forEach((m, i) => {
    if (!isObject(m) || typeof m["role"] !== "string") throw badRequest(`messages[${i}]`, `messages[${i}] must be an object with a string role, got ${show(m)}`);
    const content = m["content"];
    if (content !== undefined && content !== null && typeof content !== "string" && !Array.isArray(content)) {
      throw badRequest(`messages[${i}].content`, `messages[${i}].content must be a string or an array of content parts, got ${show(content)}`);
    }
  });
  const logprobsOn = f.boolean("logprobs") ?? false;
  const top = f.integer("top_logprobs", { min: 0, max: MAX_LOGPROBS });
  if (top !== undefined && !logprobsOn) throw badRequest("top_logprobs", "top_logprobs requires logprobs to be true");
  const continueFinal = f.boolean("continue_final_message") ?? false;
  const addGenerationPrompt = f.boolean("add_generation_prompt") ?? !continueFinal;
  if (continueFinal && addGenerationPrompt) throw badRequest("continue_final_message", "continue_final_message and add_generation_prompt cannot both be true");
  const variables = f.object("chat_template_kwargs") ?? {};
  refuseLongText(ctx, contentChars(messages), "messages");
  const tok = ctx.tokenizer;
  const tools = parseToolFields(f, (f.has("tools") ? tok.chatTemplates["tool_use"] : undefined) ?? tok.chatTemplate, ctx.toolCallParser);
  if (tools.grammar !== null && c.grammar !== null) {
    throw badRequest(c.grammar.param, `${c.grammar.param} cannot be combined with tools (tool_choice ${show(f.raw("tool_choice") ?? "auto")}); send tool_choice "none" for structured output`);
  }
  const plain = templateMessages(messages);
  const plan = tools.plan;
  // The generic tool format puts the tools in the system prompt; a template with no system role gets them at the start of the first user turn instead (the worker renders the fallback when the first fails).
  const generic = plan !== null && plan !== undefined && plan.parser === "generic" ? plan : undefined;
  const chat = {
    messages: generic === undefined ? plain : genericToolMessages(plain, generic, "system"),
    ...(generic === undefined ? {} : { fallbackMessages: genericToolMessages(plain, generic, "user") }),
    addGenerationPrompt,
    variables,
    tools: tools.templateTools,
    continueFinal,
  };
  const tokenIds = await encodeChatPrompt(ctx, chat, f.boolean("add_special_tokens") ?? false, signal);
  const base = { ...samplingFields(f), logprobs: logprobsOn ? (top ?? 0) : null };
  const prompt = fitPrompt(tokenIds, "", c.explicitMax, "chat", base, ctx, "messages");
  checkResponseSize([prompt], c.n, c.stream, base.logprobs, top === undefined ? "logprobs" : "top_logprobs");
  // mistral opens calls with its [TOOL_CALLS] special token: the parser must see it (vLLM's MistralToolParser.adjust_request).
  const skipSpecialTokens = plan?.parser === "mistral" ? false : c.skipSpecialTokens;
  return { kind: "chat", ...c, skipSpecialTokens, grammar: c.grammar ?? tools.grammar, prompts: sampleEach([prompt], c.n), logprobs: base.logprobs, echo: false, tools: plan };
}

/** `signal`: as parseChatRequest's. */
export async function parseCompletionRequest(body: unknown, ctx: ServerContext, signal?: AbortSignal): Promise<GenerationPlan> {
  const f = new Fields(body);
  const c = commonPlan(f, ctx, "completion");
  if (f.has("tools")) throw badRequest("tools", "tools are for /v1/chat/completions");
  const logprobs = f.integer("logprobs", { min: 0, max: MAX_LOGPROBS }) ?? null;
  const echo = f.boolean("echo") ?? false;
  const addSpecial = f.boolean("add_special_tokens") ?? true;
  const raw = f.raw("prompt");
  const isIds = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === "number");
  let items: (string | number[])[];
  if (typeof raw === "string" || isIds(raw)) items = [raw];
  else if (Array.isArray(raw) && raw.length > 0 && raw.every((p) => typeof p === "string" || isIds(p))) items = raw as (string | number[])[];
  else throw badRequest("prompt", `prompt must be a string, an array of token ids, or a non-empty array of either, got ${show(raw)}`);
  if (items.length > MAX_PROMPTS_PER_REQUEST) {
    throw badRequest("prompt", `prompt lists ${items.length} prompts, more than the ${MAX_PROMPTS_PER_REQUEST} one request may have; send them in several requests`);
  }
  if (items.length * c.n > MAX_CHOICES) {
    throw badRequest("n", `n is ${c.n} for ${items.length} prompts: ${items.length * c.n} choices, more than the ${MAX_CHOICES} one request may have; send the prompts in several requests`);
  }
  const base = { ...samplingFields(f), logprobs };
  const prompts = await Promise.all(items.map(async (p, i) => {
    const param = items.length === 1 ? "prompt" : `prompt[${i}]`;
    if (typeof p === "string") return fitPrompt(await encodePrompt(ctx, p, addSpecial, param, signal), p, c.explicitMax, "completion", base, ctx, param);
    p.forEach((t, j) => {
      if (!Number.isInteger(t) || t < 0 || t >= ctx.vocabSize) throw badRequest(param, `${param}[${j}] must be a token id in [0, ${ctx.vocabSize}), got ${show(t)}`);
    });
    return fitPrompt(p, echo ? decodeForEcho(ctx, p) : "", c.explicitMax, "completion", base, ctx, param);
  }));
  checkResponseSize(prompts, c.n, c.stream, logprobs, "logprobs");
  return { kind: "completion", ...c, prompts: sampleEach(prompts, c.n), logprobs, echo, tools: null };
}

/** Token-id prompts echo as their text; ids beyond the tokenizer (padded vocabularies) decode to nothing. */
function decodeForEcho(ctx: ServerContext, ids: number[]): string {
  return ctx.tokenizer.decode(ids.filter((t) => t < ctx.tokenizer.vocabSize));
}

/**
 * Runs a GenerationPlan on the engine and answers: an SSE stream of chunks
 * ending in `data: [DONE]` (stream: true), or one JSON response. Every choice
 * is its own engine request. A client that disconnects — before the engine
 * accepted the request or while it runs — has all of its requests aborted,
 * which frees their KV blocks at the next step boundary.
 */
import type { ServerResponse } from "node:http";
import { EngineRejectedError, type OutputStream } from "../../engine/engine-client.js";
import type { EngineOutput } from "../../engine/engine.js";
import { throwIfGone } from "../client-gone.js";
import type { ServerContext } from "../context.js";
import { HttpError } from "../errors.js";
import type { GenerationPlan } from "../openai-request.js";
import { type ChoiceState, chunk, deltaChunk, usageChunk, usageOf } from "../openai-response.js";
import { writeFullResponse } from "../response-writer.js";
import { ToolCallStream } from "../tool-call-output.js";
import { SseStream } from "../sse.js";
import { grammarRejection } from "../structured-request.js";
import { type RequestLogEntry, requestLogEntry } from "../request-log.js";

/** A plan's engine requests, admitted: their output streams (noted in the request's log entry) and how to stop them. */
export interface SubmittedPlan {
  streams: AsyncIterable<EngineOutput>[];
  /** Aborts every request of the plan. */
  abortAll(): void;
  /** True once the client went away (its requests are then aborted). */
  gone(): boolean;
}

/**
 * Submits every prompt of `plan` to the engine, all admitted together or a
 * 429 / 400 (a grammar the engine refuses is a 400 naming the request's
 * field). Resolves with null when the client left before the engine took
 * them; a client that leaves later has all of them aborted, which frees their
 * KV blocks at the next step boundary.
 */
export async function submitPlan(res: ServerResponse, ctx: ServerContext, plan: GenerationPlan, signal: AbortSignal): Promise<SubmittedPlan | null> {
  if (ctx.shuttingDown) throw new HttpError(503, "the server is shutting down");
  throwIfGone(signal); // a client that left during the earlier phases never reaches the engine
  const ids = plan.prompts.map((_, i) => `${plan.id}-${i}`);
  let gone = false;
  signal.addEventListener(
    "abort",
    () => {
      gone = true;
      for (const id of ids) ctx.engine.abort(id);
    },
    { once: true },
  );
  const arrivalTime = performance.timeOrigin + performance.now();
  let streams: OutputStream[];
  try {
    // All of the request's prompts are admitted together, or it gets one 429 / 400.
    streams = await ctx.engine.submitAll(
      plan.prompts.map((p, i) => ({
        requestId: ids[i]!,
        promptTokenIds: p.tokenIds,
        params: p.params,
        arrivalTime,
        skipSpecialTokens: plan.skipSpecialTokens,
        ...(plan.cacheSalt === undefined ? {} : { cacheSalt: plan.cacheSalt }),
        ...(plan.grammar === null ? {} : { grammar: plan.grammar.spec }),
        ...(p.prefillAfter === null ? {} : { prefillAfter: ids[p.prefillAfter]! }),
      })),
    );
  } catch (e) {
    if (gone) return null;
    if (e instanceof EngineRejectedError && e.reason === "invalid" && plan.grammar !== null && e.param?.startsWith("grammar") === true) {
      throw grammarRejection(plan.grammar, e.param, e.message);
    }
    throw e;
  }
  if (gone) {
    for (const id of ids) ctx.engine.abort(id);
    return null;
  }
  const entry = requestLogEntry(res);
  if (entry !== undefined) entry.id = plan.id;
  return {
    streams: entry === undefined ? streams : streams.map((s) => noteOutputs(s, entry)),
    abortAll: () => ids.forEach((id) => ctx.engine.abort(id)),
    gone: () => gone,
  };
}

export async function runGeneration(res: ServerResponse, ctx: ServerContext, plan: GenerationPlan, signal: AbortSignal): Promise<void> {
  const submitted = await submitPlan(res, ctx, plan, signal);
  if (submitted === null) return;
  const states: ChoiceState[] = plan.prompts.map((p) => ({
    text: plan.echo ? p.text : "",
    numPromptTokens: p.tokenIds.length,
    numOutputTokens: 0,
    numCachedTokens: 0,
    finishReason: null,
    stopReason: null,
    logprobs: [],
    group: p.group,
  }));
  const entry = requestLogEntry(res);
  try {
    if (plan.stream) await streamChoices(res, ctx, plan, submitted.streams, states, submitted.abortAll);
    else await collectChoices(res, ctx, plan, submitted.streams, states, submitted.abortAll, submitted.gone);
  } finally {
    if (entry !== undefined) {
      const usage = usageOf(states);
      entry.promptTokens = usage.prompt_tokens;
      entry.outputTokens = usage.completion_tokens;
    }
  }
}

/** The stream as it is, noting in the request's log entry when its first token came and why it failed. */
async function* noteOutputs(stream: OutputStream, entry: RequestLogEntry): AsyncGenerator<EngineOutput> {
  for await (const out of stream) {
    if (out.tokenIds.length > 0) entry.firstToken();
    if (out.finishReason === "error") entry.error ??= out.error ?? "generation failed";
    yield out;
  }
}

/** Adds an output to its choice; logprobs are kept only for a non-streamed response (a stream sends each step's and forgets them). */
export function applyOutput(state: ChoiceState, out: EngineOutput, keepLogprobs: boolean): void {
  state.text += out.text;
  state.numOutputTokens = out.numOutputTokens;
  state.numCachedTokens = out.numCachedTokens;
  if (out.numPromptTokens > 0) state.numPromptTokens = out.numPromptTokens;
  if (keepLogprobs && out.logprobs !== null) for (const lp of out.logprobs) state.logprobs.push(lp);
  state.finishReason = out.finishReason;
  state.stopReason = out.stopReason;
}

async function streamChoices(res: ServerResponse, ctx: ServerContext, plan: GenerationPlan, streams: AsyncIterable<EngineOutput>[], states: ChoiceState[], abortAll: () => void): Promise<void> {
  const sse = new SseStream(res);
  const tok = ctx.tokenizer;
  const first = (i: number) => (plan.kind === "chat" || plan.echo ? states[i]!.text : null);
  states.forEach((s, i) => {
    const text = first(i);
    if (text === null) return;
    sse.send(chunk(plan, tok, i, { text, role: plan.kind === "chat", logprobs: [], offset: 0, finishReason: null, stopReason: null }, plan.continuousUsage ? usageOf([s]) : null));
  });
  let error: string | null = null;
  const tools = plan.tools;
  await Promise.all(
    streams.map(async (stream, i) => {
      const state = states[i]!;
      const toolStream = tools === null ? null : new ToolCallStream(tools);
      for await (const out of stream) {
        const offset = state.text.length;
        applyOutput(state, out, false);
        if (out.finishReason === "error") {
          error ??= out.error ?? "generation failed";
          abortAll();
          continue;
        }
        if (toolStream !== null) {
          const usage = () => (plan.continuousUsage ? usageOf([state]) : null);
          for (const delta of toolStream.push(state.text, out.finishReason !== null)) sse.send(deltaChunk(plan, i, delta, null, null, usage()));
          if (out.finishReason !== null) sse.send(deltaChunk(plan, i, {}, toolStream.finishReason(out.finishReason), out.stopReason, usage()));
          await sse.drained();
          continue;
        }
        if (out.text === "" && out.finishReason === null && out.logprobs === null) continue;
        const finishReason = out.finishReason;
        sse.send(
          chunk(plan, tok, i, { text: out.text, logprobs: out.logprobs ?? [], offset, finishReason, stopReason: out.stopReason }, plan.continuousUsage ? usageOf([state]) : null),
        );
        // A slow reader: wait for its socket before reading the next output (outputs merge meanwhile).
        await sse.drained();
      }
    }),
  );
  if (error !== null) sse.send(new HttpError(500, error).toJSON());
  else if (plan.includeUsage) sse.send(usageChunk(plan, usageOf(states)));
  sse.end();
}

async function collectChoices(
  res: ServerResponse,
  ctx: ServerContext,
  plan: GenerationPlan,
  streams: AsyncIterable<EngineOutput>[],
  states: ChoiceState[],
  abortAll: () => void,
  gone: () => boolean,
): Promise<void> {
  let error: string | null = null;
  await Promise.all(
    streams.map(async (stream, i) => {
      for await (const out of stream) {
        applyOutput(states[i]!, out, true);
        if (out.finishReason === "error") {
          error ??= out.error ?? "generation failed";
          abortAll();
        }
      }
    }),
  );
  if (gone()) return;
  if (error !== null) throw new HttpError(500, error);
  await writeFullResponse(res, plan, ctx.tokenizer, states);
}

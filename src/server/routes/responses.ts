/**
 * The Responses API: POST /v1/responses, GET and DELETE /v1/responses/{id}
 * (vLLM's serving_responses, OpenAI's shapes). A request is parsed into the
 * chat plan it means (responses/request.ts) and runs on the engine as chat
 * requests do (run-generation.ts's submitPlan: one engine request, aborted
 * when the client leaves). The reply becomes output items
 * (responses/output.ts), streamed as typed events with sequence numbers:
 *
 *   response.created, response.in_progress, <the items' events>,
 *   response.completed | response.incomplete (max_output_tokens) | response.failed
 *
 * or answered as one Response object. A finished response is kept in the
 * bounded store (responses/store.ts) unless `store: false`.
 */
import type { ServerResponse } from "node:http";
import { bodyOptions, readJsonBody } from "../body.js";
import { whileConnected } from "../client-gone.js";
import type { Handler } from "../context.js";
import { HttpError, sendJson } from "../errors.js";
import type { ChoiceState } from "../openai-response.js";
import { requestLogEntry } from "../request-log.js";
import { SseStream } from "../sse.js";
import { checkRequestGrammar } from "../structured-request.js";
import { ToolCallStream } from "../tool-call-output.js";
import type { ToolPlan } from "../tool-calls.js";
import { type EventSink, OutputBuilder, assistantMessage } from "../responses/output.js";
import { parseResponsesRequest } from "../responses/request.js";
import { type ResponseState, finalStatus, responseObject, responseUsage } from "../responses/response-object.js";
import { requireReady } from "./openai.js";
import { type SubmittedPlan, applyOutput, submitPlan } from "./run-generation.js";

export const createResponse: Handler = async (req, res, ctx, signal) => {
  const body = await readJsonBody(req, bodyOptions(ctx, signal));
  requireReady(ctx);
  const r = await whileConnected(signal, parseResponsesRequest(body, ctx, ctx.responses));
  checkRequestGrammar(r.plan.grammar);
  const submitted = await submitPlan(res, ctx, r.plan, signal);
  if (submitted === null) return;
  const state: ResponseState = { id: r.plan.id, createdAt: Math.floor(Date.now() / 1000), status: "in_progress", output: [], usage: null, error: null };
  const sse = r.plan.stream ? new SseStream(res) : null;
  let sequence = 0;
  const emit: EventSink = (type, fields) => sse?.event(type, { type, sequence_number: sequence++, ...fields });
  emit("response.created", { response: responseObject(r, state) });
  emit("response.in_progress", { response: responseObject(r, state) });
  const reply = new Reply(r.plan.tools, sse === null ? undefined : emit);
  const choice = await follow(submitted, reply, sse, res, r.plan.prompts[0]!.tokenIds.length);
  if (submitted.gone()) return;
  state.error = choice.error ?? null;
  if (sse === null && state.error === null) reply.push(choice.text, true);
  state.status = finalStatus(choice.finishReason, state.error !== null);
  if (state.status !== "failed") reply.builder.finish(state.status === "incomplete");
  state.output = reply.builder.items;
  state.usage = responseUsage(choice);
  const response = responseObject(r, state);
  if (state.status !== "failed" && r.echo.store) ctx.responses.set(state.id, { response, history: [...r.history, assistantMessage(reply.builder.items)] });
  if (sse !== null) {
    emit(`response.${state.status}`, { response });
    sse.end(false);
  } else if (state.error !== null) throw new HttpError(500, state.error);
  else sendJson(res, 200, response);
};

/** The reply's text → output items: as it is, or through the tool-call parser. */
class Reply {
  readonly builder: OutputBuilder;
  readonly #tools: ToolCallStream | null;

  constructor(tools: ToolPlan | null, emit: EventSink | undefined) {
    this.#tools = tools === null ? null : new ToolCallStream(tools);
    this.builder = new OutputBuilder(tools !== null, emit);
  }

  /** Brings the items up to `text`, the whole reply so far (`newText` its latest piece); `final` once it is complete. */
  push(text: string, final: boolean, newText = text): void {
    if (this.#tools === null) this.builder.text(newText);
    else for (const d of this.#tools.push(text, final)) this.builder.delta(d);
  }
}

/**
 * Follows the engine's outputs to the end of the reply, feeding a streamed
 * reply's items as they come (a non-streamed one is parsed once, finished).
 * An engine error aborts the request and ends the reply (finishReason
 * "error", its message in `error`).
 */
async function follow(submitted: SubmittedPlan, reply: Reply, sse: SseStream | null, res: ServerResponse, numPromptTokens: number): Promise<ChoiceState & { error?: string }> {
  const choice: ChoiceState & { error?: string } = { text: "", numPromptTokens, numOutputTokens: 0, numCachedTokens: 0, finishReason: null, stopReason: null, logprobs: [], group: 0 };
  try {
    for await (const out of submitted.streams[0]!) {
      applyOutput(choice, out, false);
      if (out.finishReason === "error") {
        choice.error = out.error ?? "generation failed";
        submitted.abortAll();
        break;
      }
      if (sse !== null) {
        reply.push(choice.text, out.finishReason !== null, out.text);
        await sse.drained(); // a slow reader: outputs merge while its socket drains
      }
    }
  } catch (e) {
    submitted.abortAll();
    throw e;
  } finally {
    const entry = requestLogEntry(res);
    if (entry !== undefined) {
      entry.promptTokens = choice.numPromptTokens;
      entry.outputTokens = choice.numOutputTokens;
    }
  }
  return choice;
}

/** The {id} of /v1/responses/{id}. */
function responseId(req: { url?: string | undefined }): string {
  const raw = new URL(req.url ?? "/", "http://localhost").pathname.slice("/v1/responses/".length);
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

function notFound(id: string): HttpError {
  return new HttpError(404, `No response with id ${JSON.stringify(id)} is stored (store: false, deleted, or evicted from the bounded store).`, { param: "response_id", code: "not_found" });
}

export const retrieveResponse: Handler = (req, res, ctx) => {
  const id = responseId(req);
  const stored = ctx.responses.get(id);
  if (stored === undefined) throw notFound(id);
  sendJson(res, 200, stored.response);
};

export const deleteResponse: Handler = (req, res, ctx) => {
  const id = responseId(req);
  if (!ctx.responses.delete(id)) throw notFound(id);
  sendJson(res, 200, { id, object: "response", deleted: true });
};

/**
 * The OpenAI routes: POST /v1/chat/completions, POST /v1/completions,
 * GET /v1/models and GET /v1/models/{id} (the openai client's models.retrieve).
 */
import { bodyOptions, readJsonBody } from "../body.js";
import { whileConnected } from "../client-gone.js";
import { type Handler, type ServerContext, maxModelLen } from "../context.js";
import { HttpError, sendJson } from "../errors.js";
import { parseChatRequest, parseCompletionRequest } from "../openai-request.js";
import { checkRequestGrammar } from "../structured-request.js";
import { runGeneration } from "./run-generation.js";

/** A 503 unless the engine is ready and the server is not shutting down. */
export function requireReady(ctx: ServerContext): void {
  if (ctx.shuttingDown) throw new HttpError(503, "the server is shutting down");
  const s = ctx.engine.state;
  if (s.state === "loading") {
    const p = s.progress;
    throw new HttpError(503, `the model is still loading${p && p.total > 0 ? ` (${Math.floor((100 * p.done) / p.total)}%)` : ""}; see GET /health`);
  }
  if (s.state !== "ready") throw new HttpError(503, s.state === "failed" ? `the engine failed: ${s.message}` : "the engine is stopped");
}

export const chatCompletions: Handler = async (req, res, ctx, signal) => {
  const body = await readJsonBody(req, bodyOptions(ctx, signal));
  requireReady(ctx);
  const plan = await whileConnected(signal, parseChatRequest(body, ctx, signal));
  checkRequestGrammar(plan.grammar);
  await runGeneration(res, ctx, plan, signal);
};

export const completions: Handler = async (req, res, ctx, signal) => {
  const body = await readJsonBody(req, bodyOptions(ctx, signal));
  requireReady(ctx);
  const plan = await whileConnected(signal, parseCompletionRequest(body, ctx, signal));
  checkRequestGrammar(plan.grammar);
  await runGeneration(res, ctx, plan, signal);
};

function modelCard(ctx: ServerContext, id: string) {
  return { id, object: "model", created: ctx.created, owned_by: "kvflash", root: ctx.source.path, parent: null, max_model_len: maxModelLen(ctx) };
}

export const models: Handler = (_req, res, ctx) => {
  sendJson(res, 200, { object: "list", data: ctx.modelNames.map((id) => modelCard(ctx, id)) });
};

export const model: Handler = (req, res, ctx) => {
  const raw = new URL(req.url ?? "/", "http://localhost").pathname.slice("/v1/models/".length);
  let id: string;
  try {
    id = decodeURIComponent(raw);
  } catch {
    id = raw;
  }
  if (!ctx.modelNames.includes(id)) {
    throw new HttpError(404, `The model \`${id}\` does not exist. This server serves ${ctx.modelNames.map((n) => `\`${n}\``).join(", ")}.`, {
      type: "invalid_request_error",
      param: "model",
      code: "model_not_found",
    });
  }
  sendJson(res, 200, modelCard(ctx, id));
};

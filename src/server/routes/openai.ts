/**
 * The OpenAI routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models.
 */
import { bodyOptions, readJsonBody } from "../body.js";
import { type Handler, type ServerContext, maxModelLen } from "../context.js";
import { HttpError, sendJson } from "../errors.js";
import { parseChatRequest, parseCompletionRequest } from "../openai-request.js";
import { runGeneration } from "./generate.js";

function requireReady(ctx: ServerContext): void {
  if (ctx.shuttingDown) throw new HttpError(503, "the server is shutting down");
  const s = ctx.engine.state;
  if (s.state === "loading") {
    const p = s.progress;
    throw new HttpError(503, `the model is still loading${p && p.total > 0 ? ` (${Math.floor((100 * p.done) / p.total)}%)` : ""}; see GET /health`);
  }
  if (s.state !== "ready") throw new HttpError(503, s.state === "failed" ? `the engine failed: ${s.message}` : "the engine is stopped");
}

export const chatCompletions: Handler = async (req, res, ctx) => {
  const body = await readJsonBody(req, bodyOptions(ctx));
  requireReady(ctx);
  await runGeneration(req, res, ctx, await parseChatRequest(body, ctx));
};

export const completions: Handler = async (req, res, ctx) => {
  const body = await readJsonBody(req, bodyOptions(ctx));
  requireReady(ctx);
  await runGeneration(req, res, ctx, await parseCompletionRequest(body, ctx));
};

export const models: Handler = (_req, res, ctx) => {
  sendJson(res, 200, {
    object: "list",
    data: ctx.modelNames.map((id) => ({
      id,
      object: "model",
      created: ctx.created,
      owned_by: "kvflash",
      root: ctx.modelDir,
      parent: null,
      max_model_len: maxModelLen(ctx),
    })),
  });
};

/**
 * GET /health (llama.cpp's and vLLM's): 200 { status: "ok" } when the engine
 * runs; 503 with the load progress while the model loads, and 503 when the
 * engine failed or the server is shutting down.
 * GET /metrics: Prometheus text (metrics.ts).
 * GET /version: { version } of kvflash (vLLM's route and shape).
 */
import type { Handler, ServerContext } from "../context.js";
import { sendJson } from "../errors.js";
import { PROMETHEUS_CONTENT_TYPE, renderMetrics } from "../metrics.js";
import { packageVersion } from "../../package-version.js";

function loadFraction(ctx: ServerContext): number {
  const s = ctx.engine.state;
  if (s.state === "ready") return 1;
  if (s.state !== "loading" || s.progress === null || s.progress.total === 0) return 0;
  return s.progress.done / s.progress.total;
}

export const health: Handler = (_req, res, ctx) => {
  const s = ctx.engine.state;
  if (ctx.shuttingDown) return sendJson(res, 503, { status: "shutting_down" });
  switch (s.state) {
    case "ready":
      return sendJson(res, 200, { status: "ok" });
    case "loading":
      return sendJson(res, 503, {
        status: "loading",
        progress: loadFraction(ctx),
        bytes_loaded: s.progress?.done ?? 0,
        bytes_total: s.progress?.total ?? null,
      });
    case "failed":
      return sendJson(res, 503, { status: "error", message: s.message });
    case "stopped":
      return sendJson(res, 503, { status: "stopped" });
  }
};

export const metrics: Handler = async (_req, res, ctx) => {
  const s = ctx.engine.state;
  const cacheConfig = s.state === "ready" ? { blockSize: s.info.blockSize, numBlocks: s.info.numBlocks } : null;
  const text = renderMetrics({ modelName: ctx.modelNames[0]!, stats: await ctx.engine.stats(), loadProgress: loadFraction(ctx), cacheConfig });
  res.writeHead(200, { "content-type": PROMETHEUS_CONTENT_TYPE, "content-length": Buffer.byteLength(text) });
  res.end(text);
};

export const version: Handler = (_req, res) => sendJson(res, 200, { version: packageVersion() });

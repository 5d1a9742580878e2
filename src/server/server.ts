/**
 * The OpenAI-compatible HTTP server on Node's `http`: a route table, API-key
 * and CORS checks, and the one place that turns a thrown error into an
 * OpenAI-shaped answer. The engine runs in its worker (EngineClient) and
 * prompts are encoded in tokenizer workers (TokenizerPool); this thread only
 * parses, renders chat templates, streams and keeps count.
 *
 *   GET  /                       the web chat page (public/)
 *   GET  /health                 200 ok | 503 loading (with progress) | 503 failed / shutting down
 *   GET  /metrics                Prometheus text, vLLM's names
 *   GET  /version                { version } (vLLM's)
 *   GET  /v1/models
 *   GET  /v1/models/{id}
 *   POST /v1/chat/completions    stream: SSE chunks ending in data: [DONE]
 *   POST /v1/completions
 *   POST /v1/responses           the Responses API (routes/responses.ts); GET, DELETE /v1/responses/{id}
 *   POST /tokenize, /detokenize
 *   POST /v1/embeddings          an embedding model's vectors (routes/embeddings.ts)
 *   POST /v1/rerank, /rerank, /v2/rerank   documents ranked against a query (routes/score.ts)
 *   POST /v1/score, /score       text pairs scored (a cross-encoder, or an embedding model's cosine)
 */
import { timingSafeEqual } from "node:crypto";
import { type IncomingMessage, type Server, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { ServingEngine } from "../engine/serving-engine.js";
import type { SamplingParams } from "../engine/sampling-params.js";
import type { ModelSource } from "../sources/source.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import { TokenizerPool } from "../tokenizer/tokenizer-pool.js";
import type { Handler, ServerContext } from "./context.js";
import { clip } from "../errors.js";
import { ClientGoneError, HttpError, sendError, toHttpError } from "./errors.js";
import { LogLimiter } from "./log-limiter.js";
import { UNLOGGED_PATHS, logRequest } from "./request-log.js";
import { chatCompletions, completions, model, models } from "./routes/openai.js";
import { createResponse, deleteResponse, retrieveResponse } from "./routes/responses.js";
import { ResponseStore } from "./responses/store.js";
import { PUBLIC_FILES, staticFile } from "./routes/static.js";
import type { ToolParserName } from "./tool-parsers.js";
import { health, metrics, version } from "./routes/status.js";
import { detokenize, tokenize } from "./routes/tokenize.js";
import { embeddings, generativeOnly } from "./routes/embeddings.js";
import { rerank, score } from "./routes/score.js";

interface Route {
  method: "GET" | "POST" | "DELETE";
  handler: Handler;
  /** Needs the API key when one is set (vLLM guards /v1). */
  auth: boolean;
}

const ROUTES: Readonly<Record<string, Route>> = {
  ...Object.fromEntries(Object.keys(PUBLIC_FILES).map((path) => [path, { method: "GET", handler: staticFile, auth: false } satisfies Route])),
  "/health": { method: "GET", handler: health, auth: false },
  "/metrics": { method: "GET", handler: metrics, auth: false },
  "/version": { method: "GET", handler: version, auth: false },
  "/v1/models": { method: "GET", handler: models, auth: true },
  "/v1/chat/completions": { method: "POST", handler: generativeOnly(chatCompletions), auth: true },
  "/v1/completions": { method: "POST", handler: generativeOnly(completions), auth: true },
  "/v1/responses": { method: "POST", handler: generativeOnly(createResponse), auth: true },
  "/tokenize": { method: "POST", handler: tokenize, auth: true },
  "/detokenize": { method: "POST", handler: detokenize, auth: true },
  "/v1/embeddings": { method: "POST", handler: embeddings, auth: true },
  "/v1/rerank": { method: "POST", handler: rerank, auth: true },
  "/rerank": { method: "POST", handler: rerank, auth: true },
  "/v2/rerank": { method: "POST", handler: rerank, auth: true },
  "/v1/score": { method: "POST", handler: score, auth: true },
  "/score": { method: "POST", handler: score, auth: true },
};

/** GET /v1/models/{id} (the id may hold slashes, as "org/name" does). */
const MODEL_ROUTE: Route = { method: "GET", handler: model, auth: true };

/** GET and DELETE /v1/responses/{id}: a stored response. */
const RESPONSE_ROUTES = {
  GET: { method: "GET", handler: retrieveResponse, auth: true },
  DELETE: { method: "DELETE", handler: deleteResponse, auth: true },
} as const satisfies Record<string, Route>;

/** The methods the path of `route` takes (Allow, CORS): a stored response's path takes two. */
function allowedMethods(route: Route): string {
  return route === RESPONSE_ROUTES.GET || route === RESPONSE_ROUTES.DELETE ? "GET, DELETE" : route.method;
}

/** The route of a path with an id in it, or undefined; another method than the path takes gets its GET route (a 405). */
function idRoute(path: string, method: string | undefined): Route | undefined {
  if (/^\/v1\/models\/[^/]/.test(path)) return MODEL_ROUTE;
  if (/^\/v1\/responses\/[^/]+$/.test(path)) return method === "DELETE" ? RESPONSE_ROUTES.DELETE : RESPONSE_ROUTES.GET;
  return undefined;
}

export interface KvflashServerOptions {
  engine: ServingEngine;
  tokenizer: Tokenizer;
  /** Workers that encode prompts. Default: a pool over the source's tokenizer, closed by close(). */
  tokenizerPool?: TokenizerPool;
  modelNames: readonly string[];
  /** The served model, as resolved at the edge (sources/source.ts). */
  source: ModelSource;
  /** config.json's architecture: the tokenizer workers pick the same fallback chat template as `tokenizer` (they render chat prompts). */
  architecture?: string;
  vocabSize: number;
  generationDefaults?: SamplingParams;
  apiKey?: string | null;
  corsOrigin?: string | null;
  toolCallParser?: ToolParserName | null;
  /** Where the one line per request goes (request-log.ts), or null for none (vLLM's --disable-log-requests). Default null. */
  requestLog?: ((line: string) => void) | null;
}

export class KvflashServer {
  readonly http: Server;
  readonly context: ServerContext;
  /** Responses not yet finished. */
  readonly #active = new Set<ServerResponse>();
  readonly #clientLog = new LogLimiter();
  readonly #requestLog: ((line: string) => void) | null;
  /** Requests dispatched so far: the id of one that is not a generation is req-N. */
  #numRequests = 0;

  constructor(options: KvflashServerOptions) {
    if (options.modelNames.length === 0) throw new Error("modelNames must name the model at least once");
    this.context = {
      engine: options.engine,
      tokenizer: options.tokenizer,
      tokenizerPool: options.tokenizerPool ?? new TokenizerPool({ source: options.source, ...(options.architecture === undefined ? {} : { architecture: options.architecture }) }),
      modelNames: options.modelNames,
      source: options.source,
      vocabSize: options.vocabSize,
      generationDefaults: options.generationDefaults ?? {},
      apiKey: options.apiKey ?? null,
      corsOrigin: options.corsOrigin ?? null,
      toolCallParser: options.toolCallParser ?? null,
      responses: new ResponseStore(),
      created: Math.floor(Date.now() / 1000),
      shuttingDown: false,
    };
    this.#requestLog = options.requestLog ?? null;
    this.http = createServer((req, res) => {
      this.#active.add(res);
      // Fires once the client is gone before its answer was sent: every phase of the request (body, parse, render, tokenize, queue, run) drops its work.
      const gone = new AbortController();
      res.once("close", () => {
        this.#active.delete(res);
        if (!res.writableEnded) gone.abort(new ClientGoneError("the client went away before its answer was sent"));
      });
      void this.#dispatch(req, res, gone.signal);
    });
    this.http.keepAliveTimeout = 5000;
  }

  /** Listens on host:port (port 0: any free port); resolves with the bound address. */
  listen(port: number, host: string): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      this.http.once("error", reject);
      this.http.listen(port, host, () => {
        this.http.off("error", reject);
        resolve(this.http.address() as AddressInfo);
      });
    });
  }

  /**
   * Drains and stops: new requests and /health get 503 (the server keeps
   * listening, so clients see an answer rather than a refused connection,
   * and each answer closes its connection), in-flight generations get up to
   * `drainMs` to finish, then the engine stops — which ends whatever is left
   * with an error — and the listener and every connection close.
   */
  async close(drainMs = 0): Promise<void> {
    this.context.shuttingDown = true;
    this.http.closeIdleConnections();
    const deadline = Date.now() + drainMs;
    while (this.context.engine.numInFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await this.context.engine.shutdown();
    // The handlers now write their last bytes (an error event, [DONE]); give them a moment.
    const flushDeadline = Date.now() + 2000;
    while (this.#active.size > 0 && Date.now() < flushDeadline) await new Promise((r) => setTimeout(r, 10));
    const closed = new Promise<void>((resolve) => this.http.close(() => resolve()));
    this.http.closeAllConnections();
    await this.context.tokenizerPool.close();
    await closed;
  }

  async #dispatch(req: IncomingMessage, res: ServerResponse, signal: AbortSignal): Promise<void> {
    const id = `req-${++this.#numRequests}`;
    const path = requestPath(req.url ?? "/");
    const log = this.#requestLog === null || UNLOGGED_PATHS.has(path) ? null : logRequest(req, res, path, id, this.#requestLog);
    try {
      const ctx = this.context;
      if (ctx.shuttingDown) res.setHeader("connection", "close");
      if (ctx.corsOrigin !== null) {
        res.setHeader("access-control-allow-origin", ctx.corsOrigin);
        if (ctx.corsOrigin !== "*") res.setHeader("vary", "Origin");
      }
      const route = Object.hasOwn(ROUTES, path) ? ROUTES[path] : idRoute(path, req.method);
      if (req.method === "OPTIONS" && ctx.corsOrigin !== null && route !== undefined) {
        res.writeHead(204, {
          "access-control-allow-methods": `${allowedMethods(route)}, OPTIONS`,
          "access-control-allow-headers": "authorization, content-type",
          "access-control-max-age": "600",
        });
        res.end();
        return;
      }
      if (route === undefined) throw new HttpError(404, `no route for ${clip(String(req.method))} ${clip(path)}`);
      if (req.method !== route.method && !(route.method === "GET" && req.method === "HEAD")) {
        res.setHeader("allow", allowedMethods(route));
        throw new HttpError(405, `${path} takes ${allowedMethods(route)}, got ${req.method}`);
      }
      if (route.auth && ctx.apiKey !== null) this.#checkApiKey(req, ctx.apiKey);
      await route.handler(req, res, ctx, signal);
    } catch (e) {
      if (e instanceof ClientGoneError) {
        this.#clientLog.line("client-gone", `kvflash: ${req.method} ${clip(req.url ?? "")}: ${e.message}`);
        log?.skip(); // a request never read whole: counted by the rate-limited line above, not one line each
        res.destroy();
        return;
      }
      const error = toHttpError(e);
      if (log !== null) log.entry.error = error.message;
      if (error.status >= 500 && !(e instanceof HttpError)) process.stderr.write(`kvflash: ${req.method} ${req.url}: ${(e as Error).stack ?? String(e)}\n`);
      if (!res.headersSent) sendError(res, error);
      else res.end();
    } finally {
      log?.done();
    }
  }

  #checkApiKey(req: IncomingMessage, key: string): void {
    const header = req.headers.authorization ?? "";
    const given = Buffer.from(header.startsWith("Bearer ") ? header.slice(7) : "");
    const want = Buffer.from(key);
    if (given.length !== want.length || !timingSafeEqual(given, want)) {
      throw new HttpError(401, "Incorrect API key provided: send Authorization: Bearer <key>.", { code: "invalid_api_key" });
    }
  }
}

/**
 * The path of a request target, exactly as sent, without its query: no
 * normalisation, so "//x/v1/models", "/v1/../v1/models" or an absolute URL
 * match no route (a 404), as in vLLM's router.
 */
export function requestPath(url: string): string {
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
}

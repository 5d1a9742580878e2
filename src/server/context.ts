/**
 * What every route handler sees: the engine client, the tokenizer (the HTTP
 * thread has its own copy, for chat templates, validation and decoding; prompts
 * are encoded in the tokenizer pool's workers),
 * the served model's names and limits, and the server's settings.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { ServingEngine } from "../engine/serving-engine.js";
import type { SamplingParams } from "../engine/sampling-params.js";
import type { ModelSource } from "../sources/source.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import type { TokenizerPool } from "../tokenizer/tokenizer-pool.js";
import type { ToolParserName } from "./tool-parsers.js";
import type { ResponseStore } from "./responses/store.js";

export interface ServerContext {
  engine: ServingEngine;
  tokenizer: Tokenizer;
  /** Tokenizer workers: every prompt is encoded there, never on the HTTP thread (prompt-length.ts). */
  tokenizerPool: TokenizerPool;
  /** Names clients may use for the model; the first is the one responses report. */
  modelNames: readonly string[];
  /** The served model: a Hugging Face directory or a GGUF file (its path is reported as the model's root). */
  source: ModelSource;
  /** The model's vocabulary (logits per row): bounds logit_bias and stop_token_ids. */
  vocabSize: number;
  /** Request defaults from generation_config.json (vLLM's --generation-config auto). */
  generationDefaults: SamplingParams;
  /** Bearer token required on /v1 and the tokenizer routes, or null. */
  apiKey: string | null;
  /** Value of Access-Control-Allow-Origin, or null for no CORS. */
  corsOrigin: string | null;
  /** Tool-call parser (vLLM's --tool-call-parser), or null to pick one from the chat template. */
  toolCallParser: ToolParserName | null;
  /** Unix seconds the server started (the model's `created`). */
  created: number;
  /** Stored responses of POST /v1/responses (previous_response_id, GET /v1/responses/{id}). */
  responses: ResponseStore;
  /** Set by close(): new generation requests get 503. */
  shuttingDown: boolean;
}

/**
 * A route. `signal` aborts (with a ClientGoneError) once the client closed its
 * connection before the answer was sent: a handler checks it between phases
 * (clientGone.ts) and drops its work.
 */
export type Handler = (req: IncomingMessage, res: ServerResponse, ctx: ServerContext, signal: AbortSignal) => Promise<void> | void;

/** The engine's context length, once loaded. */
export function maxModelLen(ctx: ServerContext): number | null {
  const s = ctx.engine.state;
  return s.state === "ready" ? s.info.maxModelLen : null;
}

/**
 * Starting a server — `kvflash serve` as a function (`serve()`): takes the
 * model source resolved at the edge (or resolves a local path, once), starts the engine worker (the model loads in
 * it, from that source), reads the tokenizer and the model's metadata on this thread, and
 * listens at once, so /health answers 503 with the load progress until the
 * model is ready. The CLI, the tests and the serve benchmark all start
 * servers through here.
 */
import type { ToolParserName } from "./tool-parsers.js";
import { ArgumentError } from "../errors.js";
import { defaultModelDir } from "../model/default-model.js";
import { readModelMetadata } from "../model/model-metadata.js";
import { embeddingMetadata, isSentenceTransformersDir } from "./embedding-metadata.js";
import { checkPoolerConfig } from "../model/pooler-config.js";
import { type ModelSource, localModelSourceOf } from "../sources/source.js";
import { EngineClient } from "../engine/engine-client.js";
import { DataParallelEngine } from "../engine/data-parallel-engine.js";
import type { ServingEngine } from "../engine/serving-engine.js";
import type { EngineInfo, EngineSettings, EngineTask, EngineWorkerConfig } from "../engine/protocol.js";
import { type LoadSettings, resolveLoadConfig } from "../model/load-settings.js";
import { samplingDefaults } from "../engine/sampling-params.js";
import { resolveSpeculativeConfig } from "../engine/speculative-config.js";
import { KvflashServer } from "./server.js";
import { listenError } from "./listen-error.js";

/** The model loader the server uses unless told otherwise: the decoder over the model source. */
export const DEFAULT_LOADER = new URL("../model/default-loader.js", import.meta.url).href;

/** --task values: "embed" serves any decoder as an embedding model (vLLM's pooling runner); "score" a decoder as a yes/no reranker (Qwen3-Reranker). */
export const SERVE_TASKS = ["auto", "generate", "embed", "score"] as const;
export type ServeTask = (typeof SERVE_TASKS)[number];

/** serve()'s options: the engine's settings, the load settings (model/load-settings.ts: weights, KV cache, maxModelLen, device, threads, kernels; one declaration, one defaults table), and the server's own. */
export interface ServeOptions extends EngineSettings, LoadSettings {
  /**
   * What the model serves (vLLM's --task): "embed" runs a decoder as an
   * embedding model (last-token pooling, normalized, or its sentence-transformers
   * modules); "score" runs a decoder as a reranker from its yes/no logits
   * (Qwen3-Reranker; /v1/rerank and /v1/score); "auto" (default): embed for
   * an encoder, a cross-encoder or a sentence-transformers directory
   * (modules.json), else generate.
   */
  task?: ServeTask;
  /**
   * How a decoder served with task "embed" pools (vLLM's --pooler-config):
   * poolingType "mean" | "cls" | "last", normalize. Default: its directory's
   * sentence-transformers Pooling, else the last token, normalized.
   */
  poolerConfig?: { poolingType?: "mean" | "cls" | "last"; normalize?: boolean };
  /** The model, as resolveModelSource (sources/source.ts) gives it: a Hugging Face directory or a GGUF file, local or from the hub cache. */
  source?: ModelSource;
  /** Or a local path to one (a model directory or a .gguf file), resolved here as --model is. Default: the embedded default model (models/default). */
  modelDir?: string;
  /** Default 127.0.0.1 (loopback only). */
  host?: string;
  /** Default 8000; 0 picks a free port. */
  port?: number;
  /** Names clients may use (vLLM's --served-model-name). Default: modelDir, source.path, or "kvflash-default". */
  servedModelNames?: readonly string[];
  apiKey?: string | null;
  corsOrigin?: string | null;
  /** Tool-call parser (vLLM's --tool-call-parser). Default: the one the chat template is written for. */
  toolCallParser?: ToolParserName | null;
  /** Engines behind the one HTTP front, each with its own threads and KV cache (vLLM's --data-parallel-size). Default 1. */
  dataParallelSize?: number;
  /** URL of the model loader module (engine/loader-module.ts). Default DEFAULT_LOADER. */
  loader?: string;
  /** Loader-specific options. */
  loaderExtra?: Record<string, unknown>;
  /** The draft model of a draft_model speculativeConfig, resolved at the edge (a hub spec: cli/hub.ts). Default: its `model` as a local path. */
  draftSource?: ModelSource;
  /** Where the one line per request goes (server/request-log.ts); null or absent: none (vLLM's --disable-log-requests). */
  requestLog?: ((line: string) => void) | null;
}

export interface RunningServer {
  server: KvflashServer;
  engine: ServingEngine;
  /** http://host:port */
  url: string;
  /** The engine is loaded and takes requests. */
  ready: Promise<EngineInfo>;
  /** Drains for up to drainMs, then stops everything. */
  close(drainMs?: number): Promise<void>;
}

/**
 * What serve() starts its engine worker(s) with: the load settings resolved
 * here, once (resolveLoadConfig; a bad one throws before anything starts),
 * passed whole with the source; the engine's settings (a draft_model
 * speculativeConfig's draft resolved to its source, the draftSource given or
 * its `model` as a local path); the loader.
 */
export function engineWorkerConfig(options: ServeOptions, source: ModelSource, task: EngineTask = "generate"): EngineWorkerConfig {
  const load = resolveLoadConfig(options);
  const spec = options.speculativeConfig === undefined ? undefined : resolveSpeculativeConfig(options.speculativeConfig);
  if (options.draftSource !== undefined && spec?.method !== "draft_model") throw new ArgumentError("draftSource", `needs a draft_model speculativeConfig, got ${JSON.stringify(spec ?? null)}`);
  const draft = spec?.method === "draft_model" ? (options.draftSource ?? localModelSourceOf(spec.model, "speculativeConfig.model")) : undefined;
  return {
    loader: options.loader ?? DEFAULT_LOADER,
    load: { ...load, source, ...(options.loaderExtra === undefined ? {} : { loaderExtra: options.loaderExtra }) },
    engine: {
      ...(options.maxNumSeqs === undefined ? {} : { maxNumSeqs: options.maxNumSeqs }),
      ...(options.maxNumBatchedTokens === undefined ? {} : { maxNumBatchedTokens: options.maxNumBatchedTokens }),
      ...(options.maxWaitingRequests === undefined ? {} : { maxWaitingRequests: options.maxWaitingRequests }),
      ...(options.enablePrefixCaching === undefined ? {} : { enablePrefixCaching: options.enablePrefixCaching }),
      ...(spec === undefined ? {} : { speculativeConfig: spec }),
    },
    ...(draft === undefined ? {} : { draft }),
    ...(task === "generate" ? {} : { task }),
    ...(options.poolerConfig === undefined ? {} : { pooler: checkPoolerConfig(options.poolerConfig) }),
  };
}

export async function serve(options: ServeOptions = {}): Promise<RunningServer> {
  if (options.source !== undefined && options.modelDir !== undefined) throw new ArgumentError("modelDir", `and source both name the model: give one, got ${JSON.stringify(options.modelDir)} and ${JSON.stringify(options.source)}`);
  // Resolved once, here: everything below gets the typed source, never a path to guess from.
  const source: ModelSource = options.source ?? (options.modelDir !== undefined ? localModelSourceOf(options.modelDir, "modelDir") : { kind: "dir", path: defaultModelDir() });
  // What the HTTP thread needs: the vocabulary, request defaults and the tokenizer with its chat template (the weights are the engine worker's).
  // An encoder (a sentence-transformers directory) is served for embeddings; anything else is a decoder.
  const embedding = embeddingMetadata(source);
  const task = options.task ?? "auto";
  if (embedding !== null && task === "generate") throw new ArgumentError("task", `"generate" cannot run ${embedding.config.architecture}: it is an encoder (it serves ${embedding.crossEncoder ? "/v1/rerank and /v1/score" : "/v1/embeddings"}), got --task generate`);
  const pooling = embedding !== null || task === "embed" || task === "score" || (task === "auto" && isSentenceTransformersDir(source));
  if (options.poolerConfig !== undefined && (embedding !== null || !pooling || task === "score")) {
    throw new ArgumentError("poolerConfig", `applies to a decoder served as an embedding model (task "embed"), not to ${embedding !== null ? `the encoder ${embedding.config.architecture} (its pooling is its own files')` : `task ${JSON.stringify(task)}`}; got ${JSON.stringify(options.poolerConfig)}`);
  }
  const { config, generation, tokenizer } = embedding ?? readModelMetadata(source);
  const workerConfig = engineWorkerConfig(options, source, pooling ? (embedding === null && task === "score" ? "score" : "embed") : "generate");
  const dp = options.dataParallelSize ?? 1;
  const engine: ServingEngine = dp === 1 ? EngineClient.start(workerConfig) : DataParallelEngine.start(workerConfig, dp);
  const server = new KvflashServer({
    engine,
    tokenizer,
    modelNames: options.servedModelNames ?? [options.modelDir ?? options.source?.path ?? "kvflash-default"],
    source,
    architecture: config.architecture,
    vocabSize: config.vocabSize,
    generationDefaults: samplingDefaults(generation),
    apiKey: options.apiKey ?? null,
    corsOrigin: options.corsOrigin ?? null,
    toolCallParser: options.toolCallParser ?? null,
    requestLog: options.requestLog ?? null,
  });
  const bindPort = options.port ?? 8000;
  const bindHost = options.host ?? "127.0.0.1";
  let address;
  try {
    address = await server.listen(bindPort, bindHost);
  } catch (e) {
    // Nothing may keep the process alive after a failed listen: the engine worker and the tokenizer workers stop here.
    await Promise.all([engine.shutdown(), server.context.tokenizerPool.close()]);
    throw listenError(e as NodeJS.ErrnoException, bindHost, bindPort);
  }
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;
  return {
    server,
    engine,
    url: `http://${host}:${address.port}`,
    ready: engine.ready,
    close: (drainMs = 0) => server.close(drainMs),
  };
}

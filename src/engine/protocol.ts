/**
 * Messages between the HTTP thread (EngineClient) and the engine worker
 * (engine-worker.ts). Everything here is structured-clone data.
 *
 *   client → worker   add, abort, stats, embed, shutdown
 *   worker → client   progress* → ready | load_failed; then accepted | rejected per add,
 *                     outputs (one message per engine step), stats, fatal
 *   embedding models: embed → embedded | rejected
 */
import type { PoolerConfig } from "../model/pooler-config.js";
import type { EngineOutput, EngineRequest } from "./engine.js";
import type { EmbedOutput, EmbedRequest } from "./embed-engine.js";
import type { EngineMetricsSnapshot } from "./metrics.js";
import type { LoadProgressInfo, ModelLoadOptions } from "./loader-module.js";
import type { Int8DotLowering, Int8DotMode, KernelFlavor } from "../runtime/module.js";
import type { EngineSettings } from "./engine-settings.js";
import type { ModelSource } from "../sources/source.js";

export type { EngineSettings };

export interface EngineWorkerConfig {
  /** URL of a module exporting `loadEngineModel` (loader-module.ts). */
  loader: string;
  /** The model source and the load settings, resolved at the edge (threads and kernels make the worker's runtime). */
  load: ModelLoadOptions;
  engine: EngineSettings;
  /** The draft model of a draft_model speculativeConfig, loaded by the same loader on the CPU beside the target (with the target's load settings). */
  draft?: ModelSource;
  /**
   * "embed": a pooling model served by an EmbedEngine (an encoder or cross-encoder, or a decoder's
   * last-token embeddings); "score": the same engine, a decoder scoring pairs by its yes/no logits
   * (Qwen3-Reranker). Default "generate".
   */
  task?: EngineTask;
  /** How a decoder run with task "embed" pools (vLLM's --pooler-config), over its directory's pooling; checked at the edge. */
  pooler?: PoolerConfig;
}

export type EngineTask = "generate" | "embed" | "score";

/** What an embedding model gives, for /v1/embeddings. */
export interface EmbeddingInfo {
  /** Length of a vector. */
  dimensions: number;
  /** Matryoshka truncation: null = `dimensions` is refused; "any" = any length ≤ dimensions; else the listed ones. */
  matryoshka: null | "any" | number[];
  /** A cross-encoder (reranker): its "vector" is a pair's [score], for /v1/rerank and /v1/score, and it cannot embed. */
  crossEncoder: boolean;
  /** config.json's architecture, for the errors that name why a route refuses the model. */
  architecture: string;
  /** The model reads token type ids (BERT: a pair's segments 0…0 1…1); a decoder or XLM-R has none to read. */
  tokenTypes: boolean;
}

/** What the loaded engine is, for the server. */
export interface EngineInfo {
  maxModelLen: number;
  vocabSize: number;
  numBlocks: number;
  blockSize: number;
  maxNumSeqs: number;
  threads: number;
  /** Where the model lives, one line ("memory 0: embedding, layers 0–3, head, 70.1 MiB"), if the loader says. */
  placement?: string;
  /** The kernel flavor the engine's runtime runs (Runtime.kernels). */
  kernels: KernelFlavor;
  /** How the relaxed kernels take int8 dot products (Runtime.int8Dot). */
  int8Dot: Int8DotMode;
  /** How the relaxed int8 dot lowers here (Runtime.int8DotLowering; null on baseline). */
  int8DotLowering: Int8DotLowering | null;
  /** Seconds from the worker's start to ready. */
  loadSeconds: number;
  /** What the engine serves ("embed" for every pooling model, the yes/no scorer too). Absent: "generate". */
  task?: EngineTask;
  /** Present when task is "embed". */
  embedding?: EmbeddingInfo;
}

export type ToWorker =
  /** One client request's engine requests (a prompt list: one each), admitted to the waiting queue all together or not at all. */
  | { type: "add"; requests: EngineRequest[] }
  | { type: "abort"; requestId: string }
  | { type: "stats"; seq: number }
  /** One /v1/embeddings request (task "embed"): answered by one "embedded" or "rejected". */
  | { type: "embed"; request: EmbedRequest }
  | { type: "shutdown" };

export type FromWorker =
  | { type: "progress"; progress: LoadProgressInfo }
  | { type: "ready"; info: EngineInfo }
  /** `argument`: the setting an ArgumentError named (the message starts with it). */
  | { type: "load_failed"; message: string; argument?: string }
  | { type: "accepted"; requestId: string }
  | { type: "rejected"; requestId: string; reason: "queue_full" | "invalid"; message: string; param: string | null }
  | { type: "outputs"; outputs: EngineOutput[] }
  | { type: "stats"; seq: number; stats: EngineMetricsSnapshot }
  | { type: "embedded"; output: EmbedOutput }
  | { type: "fatal"; message: string };

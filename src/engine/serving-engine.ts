/**
 * What the server needs of an engine: the one in a worker (EngineClient), or
 * several behind one front (DataParallelEngine, `--data-parallel-size`). The
 * HTTP layer sees only this, as vLLM's API server sees its EngineClient
 * protocol whatever the number of engine cores behind it.
 */
import type { EngineOutput, EngineRequest } from "./engine.js";
import type { EmbedOutput, EmbedRequest } from "./embed-engine.js";
import type { EngineState, OutputStream } from "./engine-client.js";
import type { EngineMetricsSnapshot } from "./metrics.js";
import type { EngineInfo } from "./protocol.js";

export type { EngineOutput };

export interface ServingEngine {
  /** Resolves once every engine has loaded the model. */
  readonly ready: Promise<EngineInfo>;
  readonly state: EngineState;
  /** Requests submitted and not yet finished. */
  readonly numInFlight: number;
  /** Queues a request (see EngineClient.submit). */
  submit(request: EngineRequest): Promise<OutputStream>;
  /** Queues one client request's engine requests together, all admitted or none. */
  submitAll(requests: readonly EngineRequest[]): Promise<OutputStream[]>;
  /** Pools one request's token sequences on an embedding model (EngineClient.embed). */
  embed(request: EmbedRequest): Promise<EmbedOutput>;
  /** Cancels a request; unknown or finished ids are ignored. */
  abort(requestId: string): void;
  /** Counters and histograms (summed over the engines), or null when not running. */
  stats(): Promise<EngineMetricsSnapshot | null>;
  shutdown(): Promise<void>;
}

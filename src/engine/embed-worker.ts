/**
 * The engine worker's side of an embedding model (engine-worker.ts, task
 * "embed"): loads the encoder from the model source and sizes its
 * EmbedEngine from the engine settings. Pooling requests are many short
 * sequences, so the defaults batch wider than generation's: 256 sequences and
 * 8192 tokens a step (vLLM raises max_num_batched_tokens for pooling runners too).
 */
import { ArgumentError } from "../errors.js";
import { loadEncoderModel } from "../model/encoder/encoder-model.js";
import type { WeightFormat } from "../ops/weight.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt } from "../tensor/check.js";
import { EmbedEngine } from "./embed-engine.js";
import type { EngineInfo, EngineWorkerConfig } from "./protocol.js";

export const EMBED_MAX_NUM_SEQS = 256;
export const EMBED_MAX_NUM_BATCHED_TOKENS = 8192;

/** What a generation request to an embedding model is told. */
export const EMBEDDING_MODEL_MESSAGE = "the model is an embedding model: it serves POST /v1/embeddings, not text generation";

export function loadEmbedEngine(rt: Runtime, config: EngineWorkerConfig): { engine: EmbedEngine; info: Omit<EngineInfo, "loadSeconds"> } {
  const { source, weights, maxModelLen } = config.load;
  if (source.kind !== "dir") throw new ArgumentError("model", `an embedding model is read from a model directory, got ${source.kind} ${source.path}`);
  const format: WeightFormat | undefined = weights === "auto" ? undefined : weights;
  const model = loadEncoderModel(rt, source.path, { ...(format === undefined ? {} : { weights: format }), ...(maxModelLen === undefined ? {} : { maxModelLen }) });
  const e = config.engine;
  const maxNumSeqs = checkInt("maxNumSeqs", e.maxNumSeqs ?? EMBED_MAX_NUM_SEQS, { min: 1 });
  const engine = new EmbedEngine({
    model,
    maxNumSeqs,
    maxNumBatchedTokens: checkInt("maxNumBatchedTokens", e.maxNumBatchedTokens ?? EMBED_MAX_NUM_BATCHED_TOKENS, { min: 1 }),
    maxWaitingRequests: e.maxWaitingRequests === undefined ? Infinity : checkInt("maxWaitingRequests", e.maxWaitingRequests, { min: 0 }),
  });
  const { info } = model;
  const m = info.pooling.matryoshka;
  return {
    engine,
    info: {
      maxModelLen: info.maxModelLen,
      vocabSize: info.config.vocabSize,
      numBlocks: 0,
      blockSize: 0,
      maxNumSeqs,
      threads: rt.threads,
      kernels: rt.kernels,
      int8Dot: rt.int8Dot,
      int8DotLowering: rt.int8DotLowering,
      task: "embed",
      embedding: { dimensions: info.dimensions, matryoshka: m === null || m === "any" ? m : [...m], crossEncoder: info.crossEncoder, architecture: info.config.architecture },
    },
  };
}

/**
 * The engine worker's side of a pooling model (engine-worker.ts, task
 * "embed"): loads the model and sizes its EmbedEngine from the engine
 * settings.
 *
 *   encoder (BertModel, … *ForSequenceClassification,   model/encoder: its own loader
 *     or a "bert" / "nomic-bert" GGUF file)
 *   any decoder (`--task embed`, Qwen3-Embedding)        the worker's decoder loader, with a KV
 *                                                        cache of one step's tokens (DecoderEmbedder)
 *   a decoder with `--task score` (Qwen3-Reranker)       the same, scored by its yes/no logits (DecoderScorer)
 *
 * Pooling requests are many short sequences, so an encoder's defaults batch
 * wider than generation's: 256 sequences and 8192 tokens a step (vLLM raises
 * max_num_batched_tokens for pooling runners too). A decoder's are smaller
 * (64 sequences, 2048 tokens), since its step also needs a KV cache of that
 * many tokens; its inputs are capped at the token budget.
 */
import { join } from "node:path";
import { ArgumentError } from "../errors.js";
import { readJsonFile } from "../json-file.js";
import { Decoder } from "../model/decoder.js";
import { DecoderEmbedder, decoderEmbedBlocks } from "../model/decoder-embedder.js";
import { DecoderScorer, yesNoTokens } from "../model/decoder-scorer.js";
import { isEncoderModelSource, loadEncoderSource } from "../model/encoder/encoder-source.js";
import { type PoolingConfig, readPoolingConfig } from "../model/encoder/pooling-config.js";
import type { PoolingModel } from "../model/pooling-model.js";
import { applyPoolerConfig } from "../model/pooler-config.js";
import type { WeightFormat } from "../ops/weight.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt } from "../tensor/check.js";
import { EmbedEngine } from "./embed-engine.js";
import type { LoadProgressInfo, ModelLoaderModule } from "./loader-module.js";
import type { EngineInfo, EngineWorkerConfig } from "./protocol.js";

export const EMBED_MAX_NUM_SEQS = 256;
export const EMBED_MAX_NUM_BATCHED_TOKENS = 8192;
export const DECODER_EMBED_MAX_NUM_SEQS = 64;
export const DECODER_EMBED_MAX_NUM_BATCHED_TOKENS = 2048;

/** What a generation request to an embedding model is told. */
export const EMBEDDING_MODEL_MESSAGE = "the model is an embedding model: it serves POST /v1/embeddings, not text generation";

/** A decoder's pooling: sentence-transformers' modules if the directory has them, else vLLM's default (last token, normalized); the pooler config over either. */
function decoderPooling(config: EngineWorkerConfig): PoolingConfig {
  const { source } = config.load;
  const fallback = { mode: "last" as const, normalize: true };
  const own = source.kind !== "dir" ? { ...fallback, maxSeqLength: null, matryoshka: null } : readPoolingConfig(source.path, readJsonFile(join(source.path, "config.json")) as Record<string, unknown>, fallback);
  return applyPoolerConfig(own, config.pooler);
}

/** A decoder through the worker's loader module, wrapped as an embedder. */
async function loadDecoderEmbedder(rt: Runtime, config: EngineWorkerConfig, maxNumSeqs: number, budget: number, onProgress: (p: LoadProgressInfo) => void): Promise<PoolingModel> {
  const score = config.task === "score";
  const pooling: PoolingConfig = score ? { mode: "last", normalize: false, maxSeqLength: null, matryoshka: null } : decoderPooling(config);
  const blockSize = config.load.blockSize; // the load settings' (resolved at the edge, default 16)
  const loader = (await import(config.loader)) as Partial<ModelLoaderModule>;
  if (typeof loader.loadEngineModel !== "function") throw new ArgumentError("loader", `module ${config.loader} does not export a loadEngineModel function`);
  const { numBlocks: _n, kvCacheBytes: _k, ...load } = config.load;
  const model = await loader.loadEngineModel(rt, { ...load, blockSize, numBlocks: decoderEmbedBlocks(budget, maxNumSeqs, blockSize), maxNumSeqs, maxNumBatchedTokens: budget }, onProgress);
  if (!(model.runner instanceof Decoder)) {
    model.runner.dispose();
    throw new ArgumentError("task", `"embed" runs a decoder on the CPU runner (device cpu), got ${model.runner.constructor.name}`);
  }
  const c = model.runner.config;
  const maxModelLen = Math.min(model.runner.maxModelLen, budget, pooling.maxSeqLength ?? Infinity);
  if (score) {
    const { source } = config.load;
    const json = source.kind === "dir" ? (readJsonFile(join(source.path, "config.json")) as Record<string, unknown>) : {};
    try {
      const tokens = yesNoTokens(json, model.tokenizer, source.kind === "dir" ? join(source.path, "config.json") : source.path);
      return new DecoderScorer(model.runner, { maxModelLen, dimensions: 1, crossEncoder: true, pooling, config: { architecture: c.architecture, vocabSize: c.vocabSize, typeVocabSize: 1 } }, tokens);
    } catch (e) {
      model.runner.dispose();
      throw e;
    }
  }
  return new DecoderEmbedder(model.runner, {
    maxModelLen,
    dimensions: c.hiddenSize,
    crossEncoder: false,
    pooling,
    config: { architecture: c.architecture, vocabSize: c.vocabSize, typeVocabSize: 1 },
  });
}

export async function loadEmbedEngine(rt: Runtime, config: EngineWorkerConfig, onProgress: (p: LoadProgressInfo) => void = () => {}): Promise<{ engine: EmbedEngine; info: Omit<EngineInfo, "loadSeconds"> }> {
  const { source, weights, maxModelLen } = config.load;
  const encoder = isEncoderModelSource(source);
  const e = config.engine;
  const maxNumSeqs = checkInt("maxNumSeqs", e.maxNumSeqs ?? (encoder ? EMBED_MAX_NUM_SEQS : DECODER_EMBED_MAX_NUM_SEQS), { min: 1 });
  const maxNumBatchedTokens = checkInt("maxNumBatchedTokens", e.maxNumBatchedTokens ?? (encoder ? EMBED_MAX_NUM_BATCHED_TOKENS : DECODER_EMBED_MAX_NUM_BATCHED_TOKENS), { min: 1 });
  const format: WeightFormat | undefined = weights === "auto" ? undefined : weights;
  const model: PoolingModel = encoder
    ? loadEncoderSource(rt, source, { ...(format === undefined ? {} : { weights: format }), ...(maxModelLen === undefined ? {} : { maxModelLen }) })
    : await loadDecoderEmbedder(rt, config, maxNumSeqs, maxNumBatchedTokens, onProgress);
  const engine = new EmbedEngine({
    model,
    maxNumSeqs,
    maxNumBatchedTokens,
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
      embedding: { dimensions: info.dimensions, matryoshka: m === null || m === "any" ? m : [...m], crossEncoder: info.crossEncoder, architecture: info.config.architecture, tokenTypes: info.config.typeVocabSize > 1 },
    },
  };
}

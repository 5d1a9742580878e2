/**
 * What the embedding engine (engine/embed-engine.ts) needs from a pooling
 * model, whichever network computes it (ARCHITECTURE.md, "Pooling models share
 * the engine"): a BERT-family encoder (encoder/encoder-model.ts, with or
 * without a cross-encoder head) or a decoder run as an embedder
 * (decoder-embedder.ts, vLLM's pooling runner).
 *
 *   model.embedBatch({ tokens, cuSeqlens, tokenTypes? })   // → one f32 vector per sequence
 */
import type { EncoderBatch } from "./encoder/bert-encoder.js";
import type { PoolingConfig } from "./encoder/pooling-config.js";

export interface PoolingModelInfo {
  /** Longest input in tokens. */
  maxModelLen: number;
  /** Length of a vector (a cross-encoder's: its one score). */
  dimensions: number;
  /** A cross-encoder: its vector is a pair's [score]. */
  crossEncoder: boolean;
  pooling: PoolingConfig;
  config: {
    architecture: string;
    vocabSize: number;
    /** Token types the model takes (1: all 0, as a decoder). */
    typeVocabSize: number;
  };
}

export interface PoolingModel {
  readonly info: PoolingModelInfo;
  /** One vector per sequence of a ragged batch of whole sequences. */
  embedBatch(batch: EncoderBatch): Float32Array[];
  dispose(): void;
}

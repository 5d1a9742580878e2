/**
 * What the serving engine needs from a loaded model: run one step's ragged
 * batch (ForwardBatch) on the paged KV cache and hand back the logits of the
 * rows it asked for. The decoder implements it; the engine (src/engine) and
 * `kvflash generate` drive it; neither needs to know the architecture.
 */
import type { ModelConfig } from "./config.js";
import type { ForwardBatch } from "./forward-batch.js";

export interface KvCacheGeometry {
  /** Blocks in the paged KV cache; block ids in ForwardBatch.blockTable are < numBlocks. */
  numBlocks: number;
  /** Tokens per block. */
  blockSize: number;
}

export interface ModelRunner {
  readonly config: ModelConfig;
  /** Logits per row: config.vocabSize. */
  readonly vocabSize: number;
  /** Longest sequence (prompt + output) the runner accepts. */
  readonly maxModelLen: number;
  /** The KV cache the runner owns; the engine's KvCacheManager must use the same geometry. */
  readonly kvCache: KvCacheGeometry;
  /**
   * Runs one step: writes the K/V of every new token into its slot (per layer,
   * before that layer's attention) and returns the logits of the rows named by
   * batch.logitIndices: f32 [S, vocabSize], row-major, S = logitIndices.length.
   * The returned array is the caller's (a copy, valid after the next forward),
   * unless options.view allows a view of the runner's own buffer.
   *
   * A runner whose results come back asynchronously (the WebGPU runner reads
   * its logits back from the GPU) returns a Promise of them; the engine and
   * the offline loop await it. The CPU decoder returns the array itself, and
   * its callers stay synchronous (no await per step).
   */
  forward(batch: ForwardBatch, options?: ForwardOptions): Float32Array | Promise<Float32Array>;
  /** Frees the weights and the KV cache. */
  dispose(): void;
}

/** forward's options. */
export interface ForwardOptions {
  /**
   * The caller reads the logits before its next call to the runner, and may
   * write into them (the engine masks rows in place): the runner may return a
   * view of its own output buffer instead of a copy (the CPU decoder does). At
   * 16 rows of a 151 936-token vocabulary the copy is 9.7 MB a step, which
   * the collector then frees. A runner without a view returns its copy, as
   * does a wrapper that passes only the batch on.
   */
  view?: boolean;
}

const STEP_VIEW: ForwardOptions = Object.freeze({ view: true });

/** A step's logits for a caller that reads them before the runner's next call (ForwardOptions.view). */
export function stepLogits(runner: ModelRunner, batch: ForwardBatch): Float32Array | Promise<Float32Array> {
  return runner.forward(batch, STEP_VIEW);
}

/** A runner whose forward returns the logits themselves (the CPU decoder). */
export interface SyncModelRunner extends ModelRunner {
  forward(batch: ForwardBatch, options?: ForwardOptions): Float32Array;
}

/** What a step of the callers of `R` returns: T for a synchronous runner, else T or a Promise of it. */
export type StepResult<R extends ModelRunner, T> = R extends SyncModelRunner ? T : T | Promise<T>;

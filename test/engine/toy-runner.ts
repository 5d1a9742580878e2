// A model-free ModelRunner for engine tests over the toy paged "KV cache"
// (toy-model.ts: the entry at position p hashes the entry at p − 1, read
// through the block table, with token p, so it depends on the whole prefix as
// real K/V does). A logit row puts its peak on that hash mod
// the vocabulary over deterministic noise: greedy decoding follows the hash
// chain, sampling sees a real distribution. A wrong block table, slot mapping
// or prefix-cache hit changes the output; reading a slot never written throws.
//
// Fault injection for the engine's failure handling: a batch containing
// `failToken` makes forward throw; a row whose last token is `nanToken` gets
// NaN logits.
//
// A virtual clock for timing-dependent engine code (the measured draft cost,
// step-cost.ts): `clock` (ms) advances by `stepMs(tokens)` in every forward,
// tokens the batch's query tokens, so "how long a step took" is a function
// of the batch and tests stay deterministic.
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import type { KvCacheGeometry, ModelRunner } from "../../src/model/model-runner.js";
import type { ModelConfig } from "../../src/model/config.js";
import { ToyModel, mix, pick, toyGenerate } from "./toy-model.js";

const PEAK = 12;

export interface ToyRunnerOptions {
  config: ModelConfig;
  numBlocks: number;
  blockSize: number;
  maxModelLen?: number;
  failToken?: number;
  nanToken?: number;
  /** Virtual milliseconds a forward of `tokens` query tokens takes (advances `clock`). Default 1 + 0.2 (tokens − 1): a draft token at DRAFT_TOKEN_COST. */
  stepMs?: (tokens: number) => number;
}

export class ToyRunner implements ModelRunner {
  readonly config: ModelConfig;
  readonly vocabSize: number;
  readonly maxModelLen: number;
  readonly kvCache: KvCacheGeometry;
  readonly #cache: ToyModel;
  readonly #fail: number;
  readonly #nan: number;
  readonly #stepMs: (tokens: number) => number;
  forwards = 0;
  disposed = false;
  /** Virtual time, ms: the sum of stepMs over the forwards so far. */
  clock = 0;

  constructor(options: ToyRunnerOptions) {
    this.config = options.config;
    this.vocabSize = options.config.vocabSize;
    this.kvCache = { numBlocks: options.numBlocks, blockSize: options.blockSize };
    this.maxModelLen = options.maxModelLen ?? options.config.maxPositionEmbeddings;
    this.#cache = new ToyModel(options.numBlocks, options.blockSize);
    this.#fail = options.failToken ?? -1;
    this.#nan = options.nanToken ?? -1;
    this.#stepMs = options.stepMs ?? ((tokens) => 1 + 0.2 * (tokens - 1));
  }

  forward(batch: ForwardBatch): Float32Array {
    this.forwards++;
    this.clock += this.#stepMs(batch.tokens.length);
    if (batch.tokens.includes(this.#fail)) throw new Error(`toy runner: batch contains the fail token ${this.#fail}`);
    this.#cache.write(batch);
    const V = this.vocabSize;
    const out = new Float32Array(batch.logitIndices.length * V);
    batch.logitIndices.forEach((t, row) => {
      const h = this.#cache.entry(batch, t);
      const logits = out.subarray(row * V, (row + 1) * V);
      if (batch.tokens[t] === this.#nan) {
        logits.fill(NaN);
        return;
      }
      for (let i = 0; i < V; i++) logits[i] = (mix(h, i) >>> 20) / 1024; // noise in [0, 4)
      logits[pick(h, V)] = PEAK;
    });
    return out;
  }

  dispose(): void {
    this.disposed = true;
  }
}

/** What the toy runner generates greedily for `prompt` alone: `count` tokens (stopping at none). */
export function toyGreedy(prompt: readonly number[], count: number, vocabSize: number): number[] {
  return toyGenerate(prompt, count, vocabSize);
}

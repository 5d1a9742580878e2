// A model-free ModelRunner for engine tests: a paged "KV cache" of one number
// per slot, where the entry at position p is a hash of the entry at p − 1
// (read through the sequence's block table) and token p, so it depends on the
// whole prefix as real K/V does. A logit row puts its peak on that hash mod
// the vocabulary over deterministic noise: greedy decoding follows the hash
// chain, sampling sees a real distribution. A wrong block table, slot mapping
// or prefix-cache hit changes the output; reading a slot never written throws.
//
// Fault injection for the engine's failure handling: a batch containing
// `failToken` makes forward throw; a row whose last token is `nanToken` gets
// NaN logits.
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import type { KvCacheGeometry, ModelRunner } from "../../src/model/model-runner.js";
import type { ModelConfig } from "../../src/model/config.js";

const SEED = 2166136261;
const UNWRITTEN = -1;
const PEAK = 12;

export const mix = (prev: number, token: number): number => Math.imul((prev ^ (token + 1)) >>> 0, 16777619) >>> 0;

export interface ToyRunnerOptions {
  config: ModelConfig;
  numBlocks: number;
  blockSize: number;
  maxModelLen?: number;
  failToken?: number;
  nanToken?: number;
}

export class ToyRunner implements ModelRunner {
  readonly config: ModelConfig;
  readonly vocabSize: number;
  readonly maxModelLen: number;
  readonly kvCache: KvCacheGeometry;
  readonly slots: Float64Array; // [numBlocks · blockSize]
  readonly #fail: number;
  readonly #nan: number;
  forwards = 0;
  disposed = false;

  constructor(options: ToyRunnerOptions) {
    this.config = options.config;
    this.vocabSize = options.config.vocabSize;
    this.kvCache = { numBlocks: options.numBlocks, blockSize: options.blockSize };
    this.maxModelLen = options.maxModelLen ?? options.config.maxPositionEmbeddings;
    this.slots = new Float64Array(options.numBlocks * options.blockSize).fill(UNWRITTEN);
    this.#fail = options.failToken ?? -1;
    this.#nan = options.nanToken ?? -1;
  }

  forward(batch: ForwardBatch): Float32Array {
    this.forwards++;
    if (batch.tokens.includes(this.#fail)) throw new Error(`toy runner: batch contains the fail token ${this.#fail}`);
    const bs = this.kvCache.blockSize;
    const B = batch.seqLens.length;
    // Write every new token's entry first (all of them before any logits: the ForwardBatch ordering contract).
    for (let b = 0; b < B; b++) {
      const slotOf = (p: number): number => batch.blockTable[b * batch.maxBlocksPerSeq + Math.floor(p / bs)]! * bs + (p % bs);
      for (let t = batch.cuSeqlensQ[b]!; t < batch.cuSeqlensQ[b + 1]!; t++) {
        const p = batch.positions[t]!;
        const slot = batch.slotMapping[t]!;
        if (slot !== slotOf(p)) throw new Error(`slotMapping[${t}] = ${slot}, but the block table puts position ${p} at ${slotOf(p)}`);
        const prev = p === 0 ? SEED : this.slots[slotOf(p - 1)]!;
        if (prev === UNWRITTEN) throw new Error(`sequence ${b} reads position ${p - 1}, never written`);
        this.slots[slot] = mix(prev, batch.tokens[t]!);
      }
    }
    const V = this.vocabSize;
    const out = new Float32Array(batch.logitIndices.length * V);
    batch.logitIndices.forEach((t, row) => {
      const h = this.slots[batch.slotMapping[t]!]!;
      const logits = out.subarray(row * V, (row + 1) * V);
      if (batch.tokens[t] === this.#nan) {
        logits.fill(NaN);
        return;
      }
      for (let i = 0; i < V; i++) logits[i] = (mix(h, i) >>> 20) / 1024; // noise in [0, 4)
      logits[h % V] = PEAK;
    });
    return out;
  }

  dispose(): void {
    this.disposed = true;
  }
}

/** What the toy runner generates greedily for `prompt` alone: `count` tokens (stopping at none). */
export function toyGreedy(prompt: readonly number[], count: number, vocabSize: number): number[] {
  let h = SEED;
  for (const t of prompt) h = mix(h, t);
  const out: number[] = [];
  while (out.length < count) {
    const next = h % vocabSize;
    out.push(next);
    h = mix(h, next);
  }
  return out;
}

// A model-free stand-in for the decoder, for engine tests: a paged "KV cache"
// of one int per slot, where the entry at position p is a hash of the entry at
// p − 1 (read through the sequence's block table) and token p — so it depends
// on the whole prefix, as real K/V does. The next token is that hash mod the
// vocabulary. A wrong block table, slot mapping or prefix-cache hit reads
// another sequence's entries and changes the output; reading a slot never
// written throws.
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import { type Scheduler, type SchedulerOutput, buildForwardBatch } from "../../src/ops-entry.js";

export const VOCAB = 1000;
const SEED = 2166136261;
const UNWRITTEN = -1;

export const mix = (prev: number, token: number): number => Math.imul((prev ^ (token + 1)) >>> 0, 16777619) >>> 0;

/** The token a prefix hash picks: its bits folded first, so a power-of-two vocabulary (the default model's 4096) still sees the high bits. */
export const pick = (h: number, vocab: number): number => ((h ^ (h >>> 15)) >>> 0) % vocab;

export class ToyModel {
  readonly blockSize: number;
  readonly slots: Float64Array; // [numBlocks · blockSize], UNWRITTEN until written

  constructor(numBlocks: number, blockSize: number) {
    this.blockSize = blockSize;
    this.slots = new Float64Array(numBlocks * blockSize).fill(UNWRITTEN);
  }

  /** Writes every new token's entry and returns the next token of each logit row. */
  forward(batch: ForwardBatch): number[] {
    this.write(batch);
    return Array.from(batch.logitIndices, (t) => pick(this.entry(batch, t), VOCAB));
  }

  /** The entry (prefix hash) of batch token t, once written. */
  entry(batch: ForwardBatch, t: number): number {
    return this.slots[batch.slotMapping[t]!]!;
  }

  /** Writes every new token's entry, all before any is read for logits (the ForwardBatch ordering contract). */
  write(batch: ForwardBatch): void {
    const bs = this.blockSize;
    const B = batch.seqLens.length;
    const written = new Set<number>();
    for (let b = 0; b < B; b++) {
      const slotOf = (p: number): number => batch.blockTable[b * batch.maxBlocksPerSeq + Math.floor(p / bs)]! * bs + (p % bs);
      for (let t = batch.cuSeqlensQ[b]!; t < batch.cuSeqlensQ[b + 1]!; t++) {
        const p = batch.positions[t]!;
        const slot = batch.slotMapping[t]!;
        if (slot !== slotOf(p)) throw new Error(`slotMapping[${t}] = ${slot}, but the block table puts position ${p} at ${slotOf(p)}`);
        if (written.has(slot)) throw new Error(`slot ${slot} written twice in one step`);
        written.add(slot);
        const prev = p === 0 ? SEED : this.slots[slotOf(p - 1)]!;
        if (prev === UNWRITTEN) throw new Error(`sequence ${b} reads position ${p - 1} (slot ${slotOf(p - 1)}), never written`);
        this.slots[slot] = mix(prev, batch.tokens[t]!);
      }
    }
  }
}

/** What the toy model (or, greedily, a ToyRunner of `vocab`) generates for `prompt` run alone, without any cache: `count` tokens. */
export function toyGenerate(prompt: readonly number[], count: number, vocab = VOCAB): number[] {
  let h = SEED;
  for (const t of prompt) h = mix(h, t);
  const out: number[] = [];
  while (out.length < count) {
    const next = pick(h, vocab);
    out.push(next);
    h = mix(h, next);
  }
  return out;
}

/** Turns the toy's logit-row tokens into the map updateFromOutput takes (rows follow the sampling requests in batch order). */
export function sampledMap(output: SchedulerOutput<unknown>, rowTokens: readonly number[]): Map<string, number[]> {
  const ids = output.scheduled.filter((s) => s.sampling).map((s) => s.request.requestId);
  return new Map(ids.map((id, i) => [id, [rowTokens[i]!]]));
}

/** A deterministic generator for tests. */
export function rng(seed: number): () => number {
  return () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** One engine step with the toy model: schedule → build the batch → forward → update. */
export function runStep<P>(scheduler: Scheduler<P>, model: ToyModel) {
  const output = scheduler.schedule();
  const batch = buildForwardBatch(output, model.blockSize);
  const results = scheduler.updateFromOutput(sampledMap(output, model.forward(batch)));
  return { output, batch, results };
}

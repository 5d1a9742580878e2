/**
 * The step loop of an embedding model (ARCHITECTURE.md, "Pooling models share
 * the engine"): requests are lists of token sequences, each a ragged prefill
 * with no KV kept and a pooling step at the end. A step takes whole sequences
 * first come, first served, within the token budget (max_num_batched_tokens)
 * and max_num_seqs — always at least one, so a sequence longer than the budget
 * still runs alone — and answers each request once its last sequence is
 * pooled. A forward that throws fails the requests of its step alone; the
 * engine goes on (as Engine does for generation).
 *
 *   const engine = new EmbedEngine({ model, maxNumBatchedTokens: 2048, maxNumSeqs: 256, maxWaitingRequests: 1024 });
 *   engine.add({ requestId, sequences: [[101, 2023, 102], …] });
 *   engine.step();   // → EmbedOutput[] of the requests finished in this step
 */
import { ArgumentError, show } from "../errors.js";
import type { PoolingModel } from "../model/pooling-model.js";
import { EngineMetrics, type EngineMetricsSnapshot } from "./metrics.js";

export interface EmbedRequest {
  requestId: string;
  /** Token ids of each input (already truncated to the model's limit). */
  sequences: number[][];
  /** Token type ids of each input, as its tokenizer's pair template gives them (a cross-encoder's [CLS] q [SEP] d [SEP]: 0…0 1…1); default all 0. */
  tokenTypes?: number[][];
  /** A scoring head's raw logits instead of activated scores (vLLM's use_activation false); default false. */
  raw?: boolean;
}

export interface EmbedOutput {
  requestId: string;
  /** One pooled f32 vector per sequence, in order; null when the request failed. */
  embeddings: Float32Array[] | null;
  /** Tokens of all the sequences. */
  promptTokens: number;
  /** Why it failed (embeddings null). */
  error?: string;
}

export interface EmbedEngineOptions {
  model: PoolingModel;
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
  maxWaitingRequests: number;
}

interface Pending {
  request: EmbedRequest;
  vectors: (Float32Array | undefined)[];
  /** Sequences not yet scheduled: indices from `next` on. */
  next: number;
  /** Sequences pooled so far. */
  done: number;
  promptTokens: number;
  arrived: number;
}

export class EmbedEngine {
  readonly model: PoolingModel;
  readonly maxNumBatchedTokens: number;
  readonly maxNumSeqs: number;
  readonly maxWaitingRequests: number;
  readonly #queue: Pending[] = [];
  readonly #metrics = new EngineMetrics();

  constructor(options: EmbedEngineOptions) {
    this.model = options.model;
    this.maxNumBatchedTokens = options.maxNumBatchedTokens;
    this.maxNumSeqs = options.maxNumSeqs;
    this.maxWaitingRequests = options.maxWaitingRequests;
  }

  get hasUnfinishedRequests(): boolean {
    return this.#queue.length > 0;
  }

  /** Queues a request, or says the queue is full; a bad sequence throws an ArgumentError naming it. */
  add(request: EmbedRequest): "queue_full" | "added" {
    const { vocabSize } = this.model.info.config;
    const limit = this.model.info.maxModelLen;
    if (!Array.isArray(request.sequences) || request.sequences.length === 0) throw new ArgumentError("input", `must hold at least one input, got ${show(request.sequences)}`);
    request.sequences.forEach((s, i) => {
      if (s.length === 0) throw new ArgumentError(`input[${i}]`, "must not be empty (an empty input has no embedding)");
      if (s.length > limit) throw new ArgumentError(`input[${i}]`, `has ${s.length} tokens, more than the model's maximum context length ${limit}`);
      s.forEach((id, j) => {
        if (!Number.isInteger(id) || id < 0 || id >= vocabSize) throw new ArgumentError(`input[${i}][${j}]`, `must be a token id in [0, ${vocabSize}), got ${show(id)}`);
      });
    });
    const types = request.tokenTypes;
    if (types !== undefined) {
      const { typeVocabSize } = this.model.info.config;
      if (!Array.isArray(types) || types.length !== request.sequences.length) throw new ArgumentError("tokenTypes", `must hold one list per input (${request.sequences.length}), got ${show(types)}`);
      types.forEach((t, i) => {
        if (!Array.isArray(t) || t.length !== request.sequences[i]!.length) throw new ArgumentError(`tokenTypes[${i}]`, `must hold one type per token of input[${i}] (${request.sequences[i]!.length}), got ${show(t)}`);
        t.forEach((ty, j) => {
          if (!Number.isInteger(ty) || ty < 0 || ty >= typeVocabSize) throw new ArgumentError(`tokenTypes[${i}][${j}]`, `must be a token type in [0, ${typeVocabSize}), got ${show(ty)}`);
        });
      });
    }
    if (this.#queue.length >= this.maxWaitingRequests) return "queue_full";
    const promptTokens = request.sequences.reduce((n, s) => n + s.length, 0);
    this.#queue.push({ request, vectors: new Array(request.sequences.length), next: 0, done: 0, promptTokens, arrived: performance.now() });
    return "added";
  }

  /** Drops a queued request; true if it was there. */
  abort(requestId: string): boolean {
    const i = this.#queue.findIndex((p) => p.request.requestId === requestId);
    if (i < 0) return false;
    this.#queue.splice(i, 1);
    this.#metrics.requestSuccess.abort++;
    return true;
  }

  /** Runs one forward over the next sequences; returns the requests it finished (or failed). */
  step(): EmbedOutput[] {
    const picked: { p: Pending; index: number }[] = [];
    const tokens: number[] = [];
    const types: number[] = [];
    const cu = [0];
    const raw: boolean[] = [];
    for (const p of this.#queue) {
      while (p.next < p.request.sequences.length && picked.length < this.maxNumSeqs) {
        const s = p.request.sequences[p.next]!;
        if (picked.length > 0 && tokens.length + s.length > this.maxNumBatchedTokens) break;
        picked.push({ p, index: p.next++ });
        for (const id of s) tokens.push(id);
        const t = p.request.tokenTypes?.[p.next - 1];
        for (let j = 0; j < s.length; j++) types.push(t?.[j] ?? 0);
        cu.push(tokens.length);
        raw.push(p.request.raw === true);
      }
      if (p.next < p.request.sequences.length) break; // FIFO: a later request waits for this one's sequences
    }
    if (picked.length === 0) return [];
    const touched = new Set(picked.map((x) => x.p));
    let vectors: Float32Array[];
    try {
      vectors = this.model.embedBatch({ tokens, cuSeqlens: cu, tokenTypes: types, raw });
    } catch (e) {
      this.#metrics.numFailedForwards++;
      const message = `the forward failed: ${(e as Error).message}`;
      return [...touched].map((p) => this.#finish(p, message));
    }
    picked.forEach(({ p, index }, i) => {
      p.vectors[index] = vectors[i]!;
      p.done++;
    });
    return [...touched].filter((p) => p.done === p.request.sequences.length).map((p) => this.#finish(p, null));
  }

  stats(): EngineMetricsSnapshot {
    const m = this.#metrics;
    const running = this.#queue.filter((p) => p.next > 0).length;
    return {
      numRequestsRunning: running,
      numRequestsWaiting: this.#queue.length - running,
      kvCacheUsage: 0,
      numBlocks: 0,
      numFreeBlocks: 0,
      prefixCacheQueries: 0,
      prefixCacheHits: 0,
      numPreemptions: 0,
      promptTokens: m.promptTokens,
      generationTokens: 0,
      requestSuccess: { ...m.requestSuccess },
      numFailedForwards: m.numFailedForwards,
      timeToFirstToken: m.timeToFirstToken.snapshot(),
      interTokenLatency: m.interTokenLatency.snapshot(),
      e2eRequestLatency: m.e2eRequestLatency.snapshot(),
      specDecode: null,
    };
  }

  #finish(p: Pending, error: string | null): EmbedOutput {
    const i = this.#queue.indexOf(p);
    if (i >= 0) this.#queue.splice(i, 1);
    const m = this.#metrics;
    m.e2eRequestLatency.observe((performance.now() - p.arrived) / 1000);
    if (error !== null) {
      m.requestSuccess.error++;
      return { requestId: p.request.requestId, embeddings: null, promptTokens: p.promptTokens, error };
    }
    m.requestSuccess.stop++;
    m.promptTokens += p.promptTokens;
    return { requestId: p.request.requestId, embeddings: p.vectors as Float32Array[], promptTokens: p.promptTokens };
  }
}

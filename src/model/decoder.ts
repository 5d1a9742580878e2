/**
 * The decoder forward of Llama, Mistral, Qwen2 and Qwen3 over one engine
 * step's ragged batch (prefill chunks and decode tokens together) on the
 * paged KV cache — llama2.c's `forward()` for a batch of sequences:
 *
 *   x = embed(tokens)
 *   for each layer:
 *     qkv = rmsnorm(x) · Wqkvᵀ (+ bias)              q, k, v: column views of qkv
 *     q, k = rmsnorm_per_head(q), rmsnorm_per_head(k)  (Qwen3)
 *     q, k = rope(q, k, positions)
 *     cache[layer][slots] = k, v                       every new token, before attention
 *     att = pagedAttention(q, cache[layer])            causal, the layer's sliding window
 *     x = x + att · Woᵀ
 *     x = x + down(silu(gate(rmsnorm(x))) ⊙ up(rmsnorm(x)))
 *   logits = rmsnorm(x[logitIndices]) · Wlmᵀ           only the rows that are sampled
 *
 * Everything per step is prepared once before the layers run: the batch is
 * validated, token ids and slots are uploaded, RoPE's cos/sin table and the
 * attention plan (work split, block table in shared memory) are built, and the
 * activations are views into one preallocated block (step-buffers.ts). The
 * layer loop then only launches kernels.
 */
import { ArgumentError, show } from "../errors.js";
import { appendKv } from "../kv/append-kv.js";
import { pagedAttention, planPagedAttention } from "../kv/paged-attention.js";
import type { PagedKvCache } from "../kv/paged-kv-cache.js";
import { add } from "../ops/add.js";
import { embedding } from "../ops/embedding.js";
import { linear } from "../ops/linear.js";
import { addRmsNorm, rmsNorm } from "../ops/rmsnorm.js";
import { Rope, type RopeTable } from "../ops/rope.js";
import { swiglu } from "../ops/swiglu.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt } from "../tensor/check.js";
import { checkForwardBatch } from "./check-batch.js";
import type { ModelConfig } from "./config.js";
import type { DecoderWeights } from "./decoder-weights.js";
import type { ForwardBatch } from "./forward-batch.js";
import type { KvCacheGeometry, ModelRunner } from "./model-runner.js";
import { StepBuffers } from "./step-buffers.js";

export interface DecoderOptions {
  config: ModelConfig;
  /** The model's weights; the Decoder owns them from now on (dispose frees them). */
  weights: DecoderWeights;
  /** Paged KV cache with the config's layers, KV heads and head dim; owned by the Decoder likewise. */
  cache: PagedKvCache;
  /** Longest sequence accepted. Default: min(max_position_embeddings, the cache's slots). */
  maxModelLen?: number;
  /** Tokens per step the activations are allocated for up front (a larger step grows them once). Default 512. */
  maxBatchTokens?: number;
  /** Logit rows per step allocated up front (f32 [rows, vocab]). Default 16. */
  maxLogitRows?: number;
}

export class Decoder implements ModelRunner {
  readonly config: ModelConfig;
  readonly vocabSize: number;
  readonly maxModelLen: number;
  readonly kvCache: KvCacheGeometry;
  readonly weights: DecoderWeights;
  readonly cache: PagedKvCache;
  readonly #rt: Runtime;
  readonly #rope: Rope;
  readonly #buffers: StepBuffers;
  /** Per layer: the attention window [left, right] (sliding) or undefined (full causal). */
  readonly #windows: ([number, number] | undefined)[];
  #table: RopeTable | undefined;
  #disposed = false;

  constructor(rt: Runtime, options: DecoderOptions) {
    const { config, weights, cache } = options;
    const mismatch = (what: string, got: number, want: number) => {
      if (got !== want) throw new ArgumentError(`cache.${what}`, `must be the config's ${want}, got ${got}`);
    };
    mismatch("numLayers", cache.numLayers, config.numLayers);
    mismatch("numKvHeads", cache.numKvHeads, config.numKvHeads);
    mismatch("headDim", cache.headDim, config.headDim);
    if (weights.layers.length !== config.numLayers) throw new ArgumentError("weights", `must have the config's ${config.numLayers} layers, got ${weights.layers.length}`);
    const limit = Math.min(config.maxPositionEmbeddings, cache.numSlots);
    this.maxModelLen = options.maxModelLen === undefined ? limit : checkInt("maxModelLen", options.maxModelLen, { min: 1, max: limit });
    this.#rt = rt;
    this.config = config;
    this.vocabSize = config.vocabSize;
    this.kvCache = { numBlocks: cache.numBlocks, blockSize: cache.blockSize };
    this.weights = weights;
    this.cache = cache;
    this.#windows = config.layerWindows.map((w) => (w === null ? undefined : [w - 1, 0]));
    this.#rope = new Rope(rt, { headDim: config.headDim, theta: config.ropeTheta, scaling: config.ropeScaling });
    this.#buffers = new StepBuffers(
      rt,
      config,
      checkInt("maxBatchTokens", options.maxBatchTokens ?? 512, { min: 1 }),
      checkInt("maxLogitRows", options.maxLogitRows ?? 16, { min: 1 }),
    );
  }

  forward(batch: ForwardBatch): Float32Array {
    if (this.#disposed) throw new Error("Decoder used after dispose()");
    const rt = this.#rt;
    const c = this.config;
    const W = this.weights;
    const cache = this.cache;
    const eps = c.rmsNormEps;
    checkForwardBatch(batch, { vocabSize: c.vocabSize, maxModelLen: this.maxModelLen, numBlocks: cache.numBlocks, blockSize: cache.blockSize });

    // Per step, shared by every layer: the buffers, ids and slots, RoPE's table, the attention plan.
    const T = batch.tokens.length;
    const S = batch.logitIndices.length;
    const { ids, slots, x, xb, qkv, q, k, v, att, attRows, o, gateUp, gate, up, last, logits } = this.#buffers.views(T, S);
    ids.data().set(batch.tokens);
    slots.data().set(batch.slotMapping);
    const table = (this.#table = this.#rope.table(batch.positions, this.#table));
    const plan = planPagedAttention(rt, { cache, numHeads: c.numHeads, ...batch });
    try {
      embedding(rt, { weight: W.embedding, ids, out: x }); // x [T, h]
      rmsNorm(rt, { x, weight: W.layers[0]!.inputNorm, out: xb, eps }); // xb [T, h]
      for (let l = 0; l < c.numLayers; l++) {
        const w = W.layers[l]!;

        // Attention: x += o_proj(attention(rope(q), rope(k), v)).
        linear(rt, { x: xb, weight: w.qkv, out: qkv, bias: w.qkvBias ?? undefined }); // qkv [T, (H + 2·Hkv)·D]
        if (w.qNorm && w.kNorm) {
          rmsNorm(rt, { x: q, weight: w.qNorm, eps }); // per head, in place: q [T, H, D]
          rmsNorm(rt, { x: k, weight: w.kNorm, eps }); // k [T, Hkv, D]
        }
        this.#rope.apply({ q, k, table });
        appendKv(rt, { cache, layer: l, k, v, slotMapping: slots }); // every new token's K/V, before any attention reads
        pagedAttention(rt, { q, cache, layer: l, plan, causal: true, window: this.#windows[l], out: att }); // att [T, H, D]
        linear(rt, { x: attRows, weight: w.o, out: o, bias: w.oBias ?? undefined }); // o [T, h]
        addRmsNorm(rt, { x, delta: o, weight: w.postNorm, out: xb, eps }); // x += o; xb = rmsnorm(x)

        // MLP: x += down(silu(gate) ⊙ up).
        linear(rt, { x: xb, weight: w.gateUp, out: gateUp, bias: w.gateUpBias ?? undefined }); // gateUp [T, 2·I]
        swiglu(rt, { gate, up, out: gate }); // gate [T, I] ← silu(gate) ⊙ up
        linear(rt, { x: gate, weight: w.down, out: o, bias: w.downBias ?? undefined }); // o [T, h]
        if (l + 1 < c.numLayers) addRmsNorm(rt, { x, delta: o, weight: W.layers[l + 1]!.inputNorm, out: xb, eps }); // x += o; xb = next layer's rmsnorm(x)
        else add(rt, { a: x, b: o, out: x });
      }
      if (S === 0) return new Float32Array(0); // a prefill chunk that samples nothing

      // Final norm and LM head on the sampled rows only: last [S, h] ← x[logitIndices].
      const f32 = new Float32Array(rt.memory.buffer);
      for (let i = 0; i < S; i++) {
        const from = x.ptr / 4 + batch.logitIndices[i]! * c.hiddenSize;
        f32.copyWithin(last.ptr / 4 + i * c.hiddenSize, from, from + c.hiddenSize);
      }
      rmsNorm(rt, { x: last, weight: W.finalNorm, eps });
      linear(rt, { x: last, weight: W.lmHead, out: logits }); // logits [S, V]
      return new Float32Array(rt.memory.buffer, logits.ptr, S * c.vocabSize).slice();
    } finally {
      plan.dispose();
    }
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.weights.free();
    this.cache.dispose();
    this.#buffers.free();
    this.#table?.free();
    this.#rope.free();
  }

  toString(): string {
    const c = this.config;
    return `Decoder(${c.architecture}, ${c.numLayers} layers, hidden ${c.hiddenSize}, weights ${this.weights.format}, KV ${this.cache.dtype} ${show([this.kvCache.numBlocks, this.kvCache.blockSize])})`;
  }
}

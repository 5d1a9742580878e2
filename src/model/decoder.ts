/**
 * The decoder forward of Llama, Mistral, Qwen2, Qwen3, Gemma 2 and Gemma 3
 * over one engine step's ragged batch (prefill chunks and decode tokens
 * together) on the paged KV cache — llama2.c's `forward()` for a batch of
 * sequences:
 *
 *   x = embed(tokens) (· √hidden: Gemma)
 *   for each layer:
 *     qkv = rmsnorm(x) · Wqkvᵀ (+ bias)              q, k, v: column views of qkv
 *     q, k = rmsnorm_per_head(q), rmsnorm_per_head(k)  (Qwen3, Gemma 3)
 *     q, k = rope(q, k, positions)                     the layer's theta (Gemma 3: local 10k / global 1M);
 *                                                      Phi-3: partial, LongRoPE long factors iff maxModelLen > original
 *     cache[layer][slots] = k, v                       every new token, before attention
 *     att = pagedAttention(q, cache[layer])            causal, the layer's sliding window, scale, softcap
 *     x = x + post?(att · Woᵀ)                         post: Gemma's norm of each block's output
 *     x = x + post?(down(act(gate(rmsnorm(x))) ⊙ up(rmsnorm(x))))    act: silu, or tanh GELU (Gemma)
 *   logits = rmsnorm(x[logitIndices]) · Wlmᵀ           only the rows that are sampled (Gemma 2: softcapped)
 *
 * Everything per step is prepared once before the layers run: the batch is
 * validated, token ids and slots are uploaded, RoPE's cos/sin table and the
 * attention plan (work split, block table in shared memory) are built, and the
 * activations are views into one preallocated block (step-buffers.ts). The
 * layer loop then only launches kernels.
 *
 * A model too big for one wasm memory is placed across several (placement.ts,
 * as accelerate's device_map="auto"): each memory holds consecutive layers
 * with their weights and their own KV pool, and runs them as a stage with its
 * own activations, RoPE table and attention plan over the one block table.
 * The residual stream x [T, h] is copied once at each memory boundary; the
 * embedding and the head run in whichever memories hold them. A model that
 * fits in one memory is one stage: exactly the loop above.
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
import { scale } from "../ops/scale.js";
import { softcap } from "../ops/softcap.js";
import { geglu, swiglu } from "../ops/swiglu.js";
import type { AttentionPlan } from "../attention/plan.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt } from "../tensor/check.js";
import { copyTensor } from "../tensor/copy.js";
import { checkForwardBatch } from "./check-batch.js";
import type { LayerRope, ModelConfig } from "./config.js";
import type { DecoderWeights } from "./decoder-weights.js";
import type { ForwardBatch } from "./forward-batch.js";
import type { ForwardOptions, KvCacheGeometry, ModelRunner } from "./model-runner.js";
import { StepBuffers } from "./step-buffers.js";

export interface DecoderOptions {
  config: ModelConfig;
  /** The model's weights; the Decoder owns them from now on (dispose frees them). */
  weights: DecoderWeights;
  /**
   * Paged KV cache with the config's KV heads and head dim; owned by the Decoder likewise.
   * A model placed across memories gives one cache per memory, in layer order,
   * each holding the layers whose weights live in its memory (same blocks,
   * block size and dtype in all: one block table serves every layer).
   */
  cache: PagedKvCache | readonly PagedKvCache[];
  /** Longest sequence accepted: the memory plan's maxModelLen (resolved once, memory-plan.ts), ≤ the model's limit and the cache's slots. */
  maxModelLen: number;
  /** Tokens per step the activations are allocated for up front (a larger step grows them once). Default 512. */
  maxBatchTokens?: number;
  /** Logit rows per step allocated up front (f32 [rows, vocab]). Default 16. */
  maxLogitRows?: number;
}

/** Layers [from, to) that live in one memory, with what a step needs there. */
interface Stage {
  rt: Runtime;
  from: number;
  to: number;
  /** This memory's KV pool (its layers only); null in a memory holding only the embedding or the head. */
  cache: PagedKvCache | null;
  /** One Rope per distinct layer setting (ropeSettings), and this step's table of each. */
  ropes: Rope[];
  tables: (RopeTable | undefined)[];
  buffers: StepBuffers;
}

/** The distinct RoPE settings of the layers, and each layer's index into them (Gemma 3 has two), −1 for a NoPE layer (SmolLM3). */
function ropeSettings(config: ModelConfig): { settings: LayerRope[]; ofLayer: number[] } {
  const keys: string[] = [];
  const settings: LayerRope[] = [];
  const ofLayer = config.layerRope.map((r) => {
    if (r === null) return -1;
    const key = JSON.stringify(r);
    let i = keys.indexOf(key);
    if (i < 0) (i = keys.length), keys.push(key), settings.push(r);
    return i;
  });
  return { settings, ofLayer };
}

export class Decoder implements ModelRunner {
  readonly config: ModelConfig;
  readonly vocabSize: number;
  readonly maxModelLen: number;
  readonly kvCache: KvCacheGeometry;
  readonly weights: DecoderWeights;
  /** The first memory's KV cache (every memory's has the same blocks, block size and dtype). */
  readonly cache: PagedKvCache;
  /** Every memory's KV cache, in layer order. */
  readonly caches: readonly PagedKvCache[];
  /** The layer stages in order; the embedding's and the head's memories are #embed and #head (stages too). */
  readonly #stages: Stage[];
  readonly #embed: Stage;
  readonly #head: Stage;
  /** Per layer: the attention window [left, right] (sliding) or undefined (full causal). */
  readonly #windows: ([number, number] | undefined)[];
  /** Per layer: which of a stage's ropes it applies. */
  readonly #ropeOf: number[];
  #disposed = false;

  constructor(rt: Runtime, options: DecoderOptions) {
    const { config, weights } = options;
    const caches: readonly PagedKvCache[] = Array.isArray(options.cache) ? options.cache : [options.cache as PagedKvCache];
    if (caches.length === 0) throw new ArgumentError("cache", "must hold at least one PagedKvCache, got none");
    const first = caches[0]!;
    const mismatch = (what: string, got: number | string, want: number | string) => {
      if (got !== want) throw new ArgumentError(`cache.${what}`, `must be ${want}, got ${got}`);
    };
    mismatch("numLayers", caches.reduce((n, c) => n + c.numLayers, 0), config.numLayers);
    for (const c of caches) {
      mismatch("numKvHeads", c.numKvHeads, config.numKvHeads);
      mismatch("headDim", c.headDim, config.headDim);
      mismatch("numBlocks", c.numBlocks, first.numBlocks);
      mismatch("blockSize", c.blockSize, first.blockSize);
      mismatch("dtype", c.dtype, first.dtype);
    }
    if (weights.layers.length !== config.numLayers) throw new ArgumentError("weights", `must have the config's ${config.numLayers} layers, got ${weights.layers.length}`);
    this.maxModelLen = options.maxModelLen;
    this.config = config;
    this.vocabSize = config.vocabSize;
    this.kvCache = { numBlocks: first.numBlocks, blockSize: first.blockSize };
    this.weights = weights;
    this.cache = first;
    this.caches = caches;
    this.#windows = config.layerWindows.map((w) => (w === null ? undefined : [w - 1, 0]));
    const tokens = checkInt("maxBatchTokens", options.maxBatchTokens ?? 512, { min: 1 });
    const rows = checkInt("maxLogitRows", options.maxLogitRows ?? 16, { min: 1 });
    const { settings, ofLayer } = ropeSettings(config);
    this.#ropeOf = ofLayer;

    // One stage per memory: the layers whose weights and KV cache live there.
    const made: Stage[] = [];
    const stageIn = (memory: WebAssembly.Memory, from: number, to: number, cache: PagedKvCache | null): Stage => {
      const view = rt.of(memory);
      const ropes = settings.map((r) => new Rope(view, { headDim: config.headDim, rotaryDim: config.rotaryDim, theta: r.theta, scaling: r.scaling, maxPositions: this.maxModelLen }));
      const stage: Stage = { rt: view, from, to, cache, ropes, tables: ropes.map(() => undefined), buffers: new StepBuffers(view, config, tokens, rows) };
      made.push(stage);
      return stage;
    };
    try {
      this.#stages = [];
      let from = 0;
      for (const c of caches) {
        const to = from + c.numLayers;
        for (let l = from; l < to; l++) {
          const w = weights.layers[l]!;
          if (w.qkv.memory !== c.memory) throw new ArgumentError(`weights.layers[${l}]`, `must live in the memory of its KV cache (${String(c)}), got ${w.qkv.toString()}`);
        }
        this.#stages.push(stageIn(c.memory, from, to, c));
        from = to;
      }
      const existing = (memory: WebAssembly.Memory): Stage | undefined => made.find((s) => s.rt.memory === memory);
      this.#embed = existing(weights.embedding.memory) ?? stageIn(weights.embedding.memory, 0, 0, null);
      if (weights.finalNorm.memory !== weights.lmHead.memory) throw new ArgumentError("weights.finalNorm", `must live in the LM head's memory, got ${weights.finalNorm.toString()} and ${weights.lmHead.toString()}`);
      this.#head = existing(weights.lmHead.memory) ?? stageIn(weights.lmHead.memory, 0, 0, null);
    } catch (e) {
      for (const s of made) (s.buffers.free(), s.ropes.forEach((r) => r.free()));
      throw e;
    }
  }

  /** Memories the model spans (1 when it fits in one). */
  get memories(): number {
    return new Set([this.#embed, ...this.#stages, this.#head].map((s) => s.rt.index)).size;
  }

  /** The logits of batch.logitIndices: a copy, or with options.view a view of the head memory's logits buffer, valid until this decoder's next call. */
  forward(batch: ForwardBatch, options?: ForwardOptions): Float32Array {
    const logits = this.#run(batch, "logits");
    return options?.view === true ? logits : logits.slice();
  }

  /**
   * The same step, ending at the final norm: the hidden states of the rows
   * named by batch.logitIndices, f32 [S, hiddenSize] (a copy), what a pooling
   * model reads (decoder-embedder.ts: last-token embeddings). The K/V of the
   * step's tokens are written as by forward.
   */
  hiddenStates(batch: ForwardBatch): Float32Array {
    return this.#run(batch, "rows").slice();
  }

  /**
   * The same step, ending at the final norm for every token: f32 [T,
   * hiddenSize] (a copy), what mean pooling reads (vLLM's MEAN pooler over the
   * prompt's hidden states). batch.logitIndices is not read; no LM head runs.
   */
  allHiddenStates(batch: ForwardBatch): Float32Array {
    return this.#run(batch, "all").slice();
  }

  /**
   * "logits": the LM head on the logitIndices rows; "rows": their final-normed
   * hidden states; "all": every token's. Returns a view of the head memory's
   * step buffers (the callers above copy it).
   */
  #run(batch: ForwardBatch, out: "logits" | "rows" | "all"): Float32Array {
    if (this.#disposed) throw new Error("Decoder used after dispose()");
    const c = this.config;
    const W = this.weights;
    const eps = c.rmsNormEps;
    checkForwardBatch(batch, { vocabSize: c.vocabSize, maxModelLen: this.maxModelLen, numBlocks: this.cache.numBlocks, blockSize: this.cache.blockSize });

    // Per step, shared by every layer of a memory: the buffers, ids and slots, RoPE's table, the attention plan.
    const T = batch.tokens.length;
    const S = batch.logitIndices.length;
    const plans: AttentionPlan[] = [];
    try {
      for (const st of this.#stages) {
        const { slots } = st.buffers.views(T, S);
        slots.data().set(batch.slotMapping);
        st.tables = st.ropes.map((r, i) => r.table(batch.positions, st.tables[i]));
        plans.push(planPagedAttention(st.rt, { cache: st.cache!, numHeads: c.numHeads, ...batch }));
      }
      const e = this.#embed;
      const { ids, x: x0 } = e.buffers.views(T, S);
      ids.data().set(batch.tokens);
      embedding(e.rt, { weight: W.embedding, ids, out: x0 }); // x [T, h]
      if (c.embeddingScale !== 1) scale(e.rt, { x: x0, s: c.embeddingScale });
      let x = x0; // the residual stream, in the memory of the stage that last wrote it
      this.#stages.forEach((st, si) => {
        const rt = st.rt;
        const v = st.buffers.views(T, S);
        if (v.x.memory !== x.memory || v.x.ptr !== x.ptr) copyTensor(x, v.x); // once per memory boundary per step
        x = v.x;
        const { xb, qkv, q, k, att, attRows, o, gateUp, gate, up, slots } = v;
        const cache = st.cache!;
        const plan = plans[si]!;
        rmsNorm(rt, { x, weight: W.layers[st.from]!.inputNorm, out: xb, eps }); // xb [T, h]
        for (let l = st.from; l < st.to; l++) {
          const w = W.layers[l]!;

          // Attention: x += o_proj(attention(rope(q), rope(k), v)).
          linear(rt, { x: xb, weight: w.qkv, out: qkv, bias: w.qkvBias ?? undefined }); // qkv [T, (H + 2·Hkv)·D]
          if (w.qNorm && w.kNorm) {
            rmsNorm(rt, { x: q, weight: w.qNorm, eps }); // per head, in place: q [T, H, D]
            rmsNorm(rt, { x: k, weight: w.kNorm, eps }); // k [T, Hkv, D]
          }
          const r = this.#ropeOf[l]!;
          if (r >= 0) st.ropes[r]!.apply({ q, k, table: st.tables[r]! }); // SmolLM3's NoPE layers skip it
          appendKv(rt, { cache, layer: l - st.from, k, v: v.v, slotMapping: slots }); // every new token's K/V, before any attention reads
          pagedAttention(rt, { q, cache, layer: l - st.from, plan, causal: true, window: this.#windows[l], scale: c.attentionScale, softcap: c.attnLogitSoftcap, out: att }); // att [T, H, D]
          linear(rt, { x: attRows, weight: w.o, out: o, bias: w.oBias ?? undefined }); // o [T, h]
          if (w.attnOutNorm) rmsNorm(rt, { x: o, weight: w.attnOutNorm, eps }); // Gemma: o = rmsnorm(o), in place
          addRmsNorm(rt, { x, delta: o, weight: w.postNorm, out: xb, eps }); // x += o; xb = rmsnorm(x)

          // MLP: x += down(act(gate) ⊙ up).
          linear(rt, { x: xb, weight: w.gateUp, out: gateUp, bias: w.gateUpBias ?? undefined }); // gateUp [T, 2·I]
          (c.hiddenAct === "silu" ? swiglu : geglu)(rt, { gate, up, out: gate }); // gate [T, I] ← act(gate) ⊙ up
          linear(rt, { x: gate, weight: w.down, out: o, bias: w.downBias ?? undefined }); // o [T, h]
          if (w.mlpOutNorm) rmsNorm(rt, { x: o, weight: w.mlpOutNorm, eps }); // Gemma: o = rmsnorm(o), in place
          if (l + 1 < st.to) addRmsNorm(rt, { x, delta: o, weight: W.layers[l + 1]!.inputNorm, out: xb, eps }); // x += o; xb = next layer's rmsnorm(x)
          else add(rt, { a: x, b: o, out: x }); // the next memory (or the head) norms it: same kernel, same bits
        }
      });
      const hd = this.#head;
      if (out === "all") {
        // Final norm of all T rows into the head memory's xb [T, h] (free once the layers are done).
        const { xb } = hd.buffers.views(T, S);
        if (xb.memory === x.memory) rmsNorm(hd.rt, { x, weight: W.finalNorm, out: xb, eps });
        else (copyTensor(x, xb), rmsNorm(hd.rt, { x: xb, weight: W.finalNorm, eps }));
        return new Float32Array(hd.rt.memory.buffer, xb.ptr, T * c.hiddenSize);
      }
      if (S === 0) return new Float32Array(0); // a prefill chunk that samples nothing

      // Final norm and LM head on the sampled rows only: last [S, h] ← x[logitIndices] (from whichever memory holds x).
      const { last, logits } = hd.buffers.views(T, S);
      const from = new Float32Array(x.memory.buffer, x.ptr, T * c.hiddenSize);
      const to = new Float32Array(hd.rt.memory.buffer, last.ptr, S * c.hiddenSize);
      for (let i = 0; i < S; i++) {
        const r = batch.logitIndices[i]! * c.hiddenSize;
        to.set(from.subarray(r, r + c.hiddenSize), i * c.hiddenSize);
      }
      rmsNorm(hd.rt, { x: last, weight: W.finalNorm, eps });
      if (out === "rows") return new Float32Array(hd.rt.memory.buffer, last.ptr, S * c.hiddenSize);
      linear(hd.rt, { x: last, weight: W.lmHead, out: logits }); // logits [S, V]
      if (c.finalLogitSoftcap > 0) softcap(hd.rt, { x: logits, cap: c.finalLogitSoftcap });
      return new Float32Array(hd.rt.memory.buffer, logits.ptr, S * c.vocabSize);
    } finally {
      for (const p of plans) p.dispose();
    }
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.weights.free();
    for (const c of this.caches) c.dispose();
    for (const s of new Set([this.#embed, ...this.#stages, this.#head])) {
      s.buffers.free();
      for (const t of s.tables) t?.free();
      for (const r of s.ropes) r.free();
    }
  }

  toString(): string {
    const c = this.config;
    return `Decoder(${c.architecture}, ${c.numLayers} layers, hidden ${c.hiddenSize}, weights ${this.weights.format}, KV ${this.cache.dtype} ${show([this.kvCache.numBlocks, this.kvCache.blockSize])}, ${this.memories} ${this.memories === 1 ? "memory" : "memories"})`;
  }
}

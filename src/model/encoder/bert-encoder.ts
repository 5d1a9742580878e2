/**
 * The BERT encoder forward (transformers' BertModel, post-LN) over one step's
 * ragged batch of whole sequences — no KV cache, every token attends to every
 * token of its own sequence (the FlashAttention-2 prefill kernel, TND layout,
 * without the causal mask):
 *
 *   x = LayerNorm(word[id] + position[offset + t − start] + tokenType[type])     x [T, h]
 *                                      (offset: 0 for BERT, padding_idx + 1 for XLM-RoBERTa)
 *   for each layer:
 *     qkv = x · Wqkvᵀ + b                         qkv [T, 3h]; q, k, v column views [T, H, D]
 *     att = attention(q, k, v)                    per sequence, bidirectional
 *     x = LayerNorm(x + att · Woᵀ + bo)
 *     x = LayerNorm(x + GELU(x · Wupᵀ + bup) · Wdownᵀ + bdown)
 *
 * NomicBert: no position table; q and k are rotated (RoPE, rotate-half) by
 * each token's position in its sequence; the MLP is down(silu(gate) ⊙ up).
 *
 * The projections, attention, LayerNorms (ops/layernorm.ts, the residual add
 * fused) and GELU (ops/gelu.ts) run in wasm on the runtime's threads over all
 * T tokens of the step at once (the GEMMs' M = T); attention alone goes
 * sequence by sequence (cuSeqlens). The embedding sums run on this thread.
 * Activations are allocated once and grow with the largest step seen.
 */
import { ArgumentError, show } from "../../errors.js";
import { flashAttention } from "../../attention/flash-attention.js";
import { embedding } from "../../ops/embedding.js";
import { gelu } from "../../ops/gelu.js";
import { addLayerNorm, layerNorm } from "../../ops/layernorm.js";
import { linear } from "../../ops/linear.js";
import { Rope } from "../../ops/rope.js";
import { swiglu } from "../../ops/swiglu.js";
import type { Runtime } from "../../runtime/runtime.js";
import { Tensor } from "../../tensor/tensor.js";
import type { BertConfig } from "./bert-config.js";
import type { BertWeights } from "./bert-weights.js";

/** One step: whole sequences back to back. */
export interface EncoderBatch {
  /** Token ids, int32 [T]. */
  tokens: ArrayLike<number>;
  /** Sequence offsets [B + 1], 0 = cuSeqlens[0] < … < cuSeqlens[B] = T. */
  cuSeqlens: ArrayLike<number>;
  /** Token type ids [T] (segment A = 0, B = 1); default all 0. */
  tokenTypes?: ArrayLike<number>;
  /** Per sequence [B]: true = a scoring head's raw logit, no activation (vLLM's use_activation false); default activated. Embedding pooling ignores it. */
  raw?: ArrayLike<boolean>;
}

interface Buffers {
  capacity: number;
  /** [T, h] */ x: Tensor;
  /** [T, 3h] */ qkv: Tensor;
  /** [T, h] */ att: Tensor;
  /** [T, h] */ o: Tensor;
  /** [T, I] */ up: Tensor;
}

export class BertEncoder {
  readonly config: BertConfig;
  readonly weights: BertWeights;
  readonly #rt: Runtime;
  #buf: Buffers | null = null;
  /** RoPE (positions "rotary"), else null. */
  readonly #rope: Rope | null;
  #disposed = false;

  /** The encoder owns `weights` from now on (dispose frees them). */
  constructor(rt: Runtime, config: BertConfig, weights: BertWeights) {
    if (weights.layers.length !== config.numLayers) throw new ArgumentError("weights", `must have the config's ${config.numLayers} layers, got ${weights.layers.length}`);
    this.#rt = rt;
    this.config = config;
    this.weights = weights;
    this.#rope = config.positions === "rotary" ? new Rope(rt, { headDim: config.headDim, theta: config.ropeTheta }) : null;
  }

  /** Last hidden states f32 [T, h] (a fresh array) of a batch of whole sequences. */
  forward(batch: EncoderBatch): Float32Array {
    if (this.#disposed) throw new Error("BertEncoder used after dispose()");
    const c = this.config;
    const rt = this.#rt;
    const { T, cu } = this.#check(batch);
    if (T === 0) return new Float32Array(0);
    const h = c.hiddenSize;
    const b = this.#buffers(T);
    const view = (t: Tensor, cols: number): Tensor => new Tensor(rt.memory, t.ptr, "f32", [T, cols]);
    const x = view(b.x, h);
    const qkv = view(b.qkv, 3 * h);
    const att = view(b.att, h);
    const o = view(b.o, h);
    const swi = c.mlp === "swiglu";
    const up = view(b.up, swi ? 2 * c.intermediateSize : c.intermediateSize);
    const cols = (t: Tensor, from: number, n: number, stride: number): Tensor => new Tensor(rt.memory, t.ptr + from * 4, "f32", [T, n], [stride, 1]);
    const heads = (col: number): Tensor => new Tensor(rt.memory, qkv.ptr + col * 4, "f32", [T, c.numHeads, c.headDim], [3 * h, c.headDim, 1]);
    const f32 = (t: Tensor, n: number): Float32Array => new Float32Array(rt.memory.buffer, t.ptr, n);

    // Embeddings: word rows gathered in wasm, positions and token types added here, then LayerNorm.
    embedding(rt, { weight: this.weights.word, ids: Int32Array.from(batch.tokens), out: x });
    const xs = f32(x, T * h);
    const W = this.weights;
    const positions = new Int32Array(T); // each token's place in its sequence
    for (let s = 0; s + 1 < cu.length; s++) {
      for (let t = cu[s]!; t < cu[s + 1]!; t++) {
        positions[t] = t - cu[s]!;
        const pos = (positions[t]! + c.positionOffset) * h;
        const type = (batch.tokenTypes?.[t] ?? 0) * h;
        if (c.positions === "absolute") for (let i = 0; i < h; i++) xs[t * h + i] = xs[t * h + i]! + W.position[pos + i]! + W.tokenType[type + i]!;
        else for (let i = 0; i < h; i++) xs[t * h + i] = xs[t * h + i]! + W.tokenType[type + i]!;
      }
    }
    const eps = c.layerNormEps;
    layerNorm(rt, { x, ...W.embNorm, eps });

    const attOut = new Tensor(rt.memory, att.ptr, "f32", [T, c.numHeads, c.headDim]);
    const table = this.#rope?.table(positions);
    const bias = (t: Tensor | null): { bias?: Tensor } => (t === null ? {} : { bias: t });
    try {
      for (const w of W.layers) {
        linear(rt, { x, weight: w.qkv, out: qkv, ...bias(w.qkvBias) });
        if (table !== undefined) this.#rope!.apply({ q: heads(0), k: heads(h), table });
        flashAttention(rt, { q: heads(0), k: heads(h), v: heads(2 * h), layout: "TND", cuSeqlensQ: cu, cuSeqlensK: cu, causal: false, out: attOut });
        linear(rt, { x: att, weight: w.o, out: o, ...bias(w.oBias) });
        addLayerNorm(rt, { x, delta: o, ...w.attnNorm, eps });
        linear(rt, { x, weight: w.up, out: up, ...bias(w.upBias) });
        const I = c.intermediateSize;
        if (swi) {
          const gate = cols(up, 0, I, 2 * I); // [T, I] rows of stride 2I: gate ← silu(gate) ⊙ up
          swiglu(rt, { gate, up: cols(up, I, I, 2 * I), out: gate });
          linear(rt, { x: gate, weight: w.down, out: o });
        } else {
          gelu(rt, { x: up, form: c.gelu });
          linear(rt, { x: up, weight: w.down, out: o, ...bias(w.downBias) });
        }
        addLayerNorm(rt, { x, delta: o, ...w.outNorm, eps });
      }
    } finally {
      table?.free();
    }
    return f32(x, T * h).slice();
  }

  /** Frees the weights and the activations. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#freeBuffers();
    this.#rope?.free();
    this.weights.free();
  }

  #check(batch: EncoderBatch): { T: number; cu: Int32Array } {
    const c = this.config;
    const T = batch.tokens.length;
    const cu = Int32Array.from(batch.cuSeqlens);
    if (cu.length < 1 || cu[0] !== 0 || cu[cu.length - 1] !== T) throw new ArgumentError("cuSeqlens", `must run from 0 to the ${T} tokens, got ${show(Array.from(cu))}`);
    for (let s = 0; s + 1 < cu.length; s++) {
      const n = cu[s + 1]! - cu[s]!;
      if (n < 1) throw new ArgumentError(`cuSeqlens[${s + 1}]`, `must be > cuSeqlens[${s}] (an empty sequence has no embedding), got ${show(Array.from(cu))}`);
      if (n > c.maxTokens) throw new ArgumentError(`sequence ${s}`, `must have at most ${c.maxTokens} tokens (max_position_embeddings ${c.maxPositionEmbeddings}${c.positionOffset > 0 ? `, positions from ${c.positionOffset}` : ""}), got ${n}`);
    }
    for (let t = 0; t < T; t++) {
      const id = batch.tokens[t]!;
      if (!Number.isInteger(id) || id < 0 || id >= c.vocabSize) throw new ArgumentError(`tokens[${t}]`, `must be a token id in [0, ${c.vocabSize}), got ${show(id)}`);
    }
    if (batch.tokenTypes !== undefined) {
      if (batch.tokenTypes.length !== T) throw new ArgumentError("tokenTypes", `must have one type per token (${T}), got ${batch.tokenTypes.length}`);
      for (let t = 0; t < T; t++) {
        const ty = batch.tokenTypes[t]!;
        if (!Number.isInteger(ty) || ty < 0 || ty >= c.typeVocabSize) throw new ArgumentError(`tokenTypes[${t}]`, `must be in [0, ${c.typeVocabSize}), got ${show(ty)}`);
      }
    }
    return { T, cu };
  }

  /** Activations for at least T tokens (grown to the next power of two ≥ T). */
  #buffers(T: number): Buffers {
    if (this.#buf !== null && this.#buf.capacity >= T) return this.#buf;
    this.#freeBuffers();
    const c = this.config;
    const n = Math.max(16, 2 ** Math.ceil(Math.log2(T)));
    const made: Tensor[] = [];
    const alloc = (cols: number, what: string): Tensor => {
      const t = this.#rt.tensor("f32", [n, cols], `encoder ${what} [${n}, ${cols}]`);
      made.push(t);
      return t;
    };
    try {
      const h = c.hiddenSize;
      this.#buf = { capacity: n, x: alloc(h, "x"), qkv: alloc(3 * h, "qkv"), att: alloc(h, "att"), o: alloc(h, "o"), up: alloc(c.mlp === "swiglu" ? 2 * c.intermediateSize : c.intermediateSize, "up") };
    } catch (e) {
      for (const t of made) this.#rt.free(t);
      throw e;
    }
    return this.#buf;
  }

  #freeBuffers(): void {
    const b = this.#buf;
    if (b === null) return;
    this.#buf = null;
    for (const t of [b.x, b.qkv, b.att, b.o, b.up]) this.#rt.free(t);
  }
}

/**
 * The decoder's activations: every buffer one forward step writes, carved
 * out of one heap block sized for the largest step (llama2.c's
 * `malloc_run_state`). Nothing is allocated per layer; a step larger than any
 * before grows the block once. `views(T, S)` hands out the tensors of a step
 * with T new tokens and S logit rows.
 *
 * Shapes (h = hidden, H/Hkv = query/KV heads, D = head dim, I = MLP width,
 * V = vocabulary):
 *
 *   ids      int32 [T]               token ids (the embedding kernel reads them here)
 *   slots    int32 [T]               KV cache slot of each token (appendKv)
 *   x        f32 [T, h]              residual stream
 *   xb       f32 [T, h]              RMSNorm(x): input of qkv_proj and gate_up_proj
 *   qkv      f32 [T, (H + 2·Hkv)·D]  fused projection; q, k, v are column views of it
 *   att      f32 [T, H, D]           attention output, input of o_proj
 *   o        f32 [T, h]              o_proj and down_proj output, added into x
 *   gateUp   f32 [T, 2·I]            fused gate/up projection; gate, up are column views
 *   last     f32 [S, h]              final-norm rows of the tokens whose logits are wanted
 *   logits   f32 [S, V]
 */
import type { Runtime } from "../runtime/runtime.js";
import { Tensor } from "../tensor/tensor.js";
import type { ModelConfig } from "./config.js";

/** The tensors of one step, views into the block. */
export interface StepViews {
  ids: Tensor;
  slots: Tensor;
  x: Tensor;
  xb: Tensor;
  qkv: Tensor;
  /** [T, H, D] view of qkv (token stride (H + 2·Hkv)·D). */
  q: Tensor;
  /** [T, Hkv, D] views of qkv. */
  k: Tensor;
  v: Tensor;
  att: Tensor;
  /** att as [T, H·D]. */
  attRows: Tensor;
  o: Tensor;
  gateUp: Tensor;
  /** [T, I] views of gateUp (token stride 2·I). */
  gate: Tensor;
  up: Tensor;
  last: Tensor;
  logits: Tensor;
}

const align64 = (n: number): number => Math.ceil(n / 64) * 64;

/** Bytes of each buffer for T tokens and S rows, in block order. */
function layout(c: ModelConfig, T: number, S: number): number[] {
  const { hiddenSize: h, numHeads: H, numKvHeads: Hkv, headDim: D, intermediateSize: I, vocabSize: V } = c;
  return [T * 4, T * 4, T * h * 4, T * h * 4, T * (H + 2 * Hkv) * D * 4, T * H * D * 4, T * h * 4, T * 2 * I * 4, S * h * 4, S * V * 4].map(align64);
}

export class StepBuffers {
  readonly #rt: Runtime;
  readonly #c: ModelConfig;
  #ptr = 0;
  #tokens = 0;
  #rows = 0;
  /** The last step's views (decode steps repeat the same T and S). */
  #last: { T: number; S: number; ptr: number; views: StepViews } | null = null;

  constructor(rt: Runtime, config: ModelConfig, tokens: number, rows: number) {
    this.#rt = rt;
    this.#c = config;
    this.#reserve(tokens, rows);
  }

  /** Tokens and logit rows the block holds now. */
  get capacity(): { tokens: number; rows: number } {
    return { tokens: this.#tokens, rows: this.#rows };
  }

  /** Bytes of the block for `tokens` tokens and `rows` logit rows. */
  static bytes(config: ModelConfig, tokens: number, rows: number): number {
    return layout(config, tokens, rows).reduce((a, b) => a + b, 0);
  }

  #layout(T: number, S: number): number[] {
    return layout(this.#c, T, S);
  }

  #reserve(tokens: number, rows: number): void {
    const bytes = this.#layout(tokens, rows).reduce((a, b) => a + b, 0);
    const ptr = this.#rt.heap.alloc(bytes, `decoder activations (${tokens} tokens, ${rows} logit rows)`);
    if (this.#ptr) this.#rt.heap.free(this.#ptr);
    this.#ptr = ptr;
    this.#tokens = tokens;
    this.#rows = rows;
  }

  /** The views for a step of T tokens and S logit rows, growing the block first if it is too small. */
  views(T: number, S: number): StepViews {
    if (T > this.#tokens || S > this.#rows) this.#reserve(Math.max(T, this.#tokens), Math.max(S, this.#rows));
    const cached = this.#last;
    if (cached && cached.T === T && cached.S === S && cached.ptr === this.#ptr) return cached.views;
    const { hiddenSize: h, numHeads: H, numKvHeads: Hkv, headDim: D, intermediateSize: I, vocabSize: V } = this.#c;
    const mem = this.#rt.memory;
    // Buffers sit at their capacity offsets, so a step's views never move within the block.
    const sizes = this.#layout(this.#tokens, this.#rows);
    const at: number[] = [];
    sizes.reduce((p, size) => (at.push(p), p + size), this.#ptr);
    const [ids, slots, x, xb, qkv, att, o, gateUp, last, logits] = at as [number, number, number, number, number, number, number, number, number, number];
    const qkvW = (H + 2 * Hkv) * D;
    const views: StepViews = {
      ids: new Tensor(mem, ids, "int32", [T]),
      slots: new Tensor(mem, slots, "int32", [T]),
      x: new Tensor(mem, x, "f32", [T, h]),
      xb: new Tensor(mem, xb, "f32", [T, h]),
      qkv: new Tensor(mem, qkv, "f32", [T, qkvW]),
      q: new Tensor(mem, qkv, "f32", [T, H, D], [qkvW, D, 1]),
      k: new Tensor(mem, qkv + H * D * 4, "f32", [T, Hkv, D], [qkvW, D, 1]),
      v: new Tensor(mem, qkv + (H + Hkv) * D * 4, "f32", [T, Hkv, D], [qkvW, D, 1]),
      att: new Tensor(mem, att, "f32", [T, H, D]),
      attRows: new Tensor(mem, att, "f32", [T, H * D]),
      o: new Tensor(mem, o, "f32", [T, h]),
      gateUp: new Tensor(mem, gateUp, "f32", [T, 2 * I]),
      gate: new Tensor(mem, gateUp, "f32", [T, I], [2 * I, 1]),
      up: new Tensor(mem, gateUp + I * 4, "f32", [T, I], [2 * I, 1]),
      last: new Tensor(mem, last, "f32", [S, h]),
      logits: new Tensor(mem, logits, "f32", [S, V]),
    };
    this.#last = { T, S, ptr: this.#ptr, views };
    return views;
  }

  free(): void {
    if (this.#ptr) this.#rt.heap.free(this.#ptr);
    this.#ptr = 0;
    this.#last = null;
  }
}

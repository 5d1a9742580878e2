/**
 * The decoder forward in float64, written to be read: one sequence, every
 * position at once, plain arrays, no cache, no batching, no kernels — the
 * oracle the wasm Decoder is tested against (llm.c keeps its naive matmul for
 * the same reason). Small models only: it does O(T² + T·params) float64 work
 * in JavaScript.
 *
 * Weights are the checkpoint's tensors by their Hugging Face names (decoded
 * to numbers), so the same oracle checks f32 checkpoints, and quantized
 * formats through their dequantized values.
 *
 * Gemma 2/3 follow transformers' modeling_gemma2/3: embedding · √hidden,
 * RMSNorm by (1 + w), post-norms on the attention and MLP outputs, GeGLU
 * with tanh GELU, scores · query_pre_attn_scalar^−½ then softcapped (Gemma 2),
 * the local/global RoPE theta of each layer (Gemma 3), softcapped logits.
 * Phi-3 follows modeling_phi3: q, k, v and gate, up are row blocks of the
 * fused qkv_proj and gate_up_proj; RoPE rotates the first rotaryDim dims of
 * each head; LongRoPE takes its long factors when the sequence is longer
 * than original_max_position_embeddings (transformers' longrope update).
 */
import { ArgumentError } from "../errors.js";
import { linearReference } from "../ops/reference/linear.js";
import { rmsNormReference } from "../ops/reference/rmsnorm.js";
import { ropeReference } from "../ops/reference/rope.js";
import { softcapReference } from "../ops/reference/softcap.js";
import { gegluReference, swigluReference } from "../ops/reference/swiglu.js";
import { ropeAttentionFactor, ropeInvFreq } from "../ops/rope.js";
import type { ModelConfig } from "./config.js";

/** name → values (row-major, the checkpoint's shape). */
export type ReferenceWeights = ReadonlyMap<string, ArrayLike<number>>;

export interface ReferenceOptions {
  /**
   * The sequence length LongRoPE's choice of factors sees: long iff it exceeds
   * original_max_position_embeddings. Default T (transformers' per-forward
   * rule); the Decoder decides once by its maxModelLen (llama.cpp's rule by
   * context size), so pass that to reproduce it.
   */
  ropeMaxPositions?: number;
  /**
   * "logits" (default): [T, V]. "hidden": the final-normed hidden states
   * float64 [T, h] that the LM head would read (transformers'
   * last_hidden_state of the base model: what a pooling model embeds).
   */
  output?: "logits" | "hidden";
}

/**
 * Logits of every position of one sequence: float64 [T, V] (row t predicts
 * token t + 1), for tokens at positions 0 … T − 1; or, with output "hidden",
 * the final-normed hidden states [T, h].
 */
export function referenceForward(config: ModelConfig, weights: ReferenceWeights, tokens: readonly number[], options: ReferenceOptions = {}): Float64Array {
  const { hiddenSize: h, numHeads: H, numKvHeads: Hkv, headDim: D, intermediateSize: I, vocabSize: V, rmsNormEps: eps } = config;
  const G = H / Hkv; // query heads per KV head
  const T = tokens.length;
  /** Rows of a fused checkpoint matrix: q/k/v of qkv_proj, gate/up of gate_up_proj (Phi-3), by the split name. */
  const fused = (name: string): ArrayLike<number> | undefined => {
    const m = /^(.*)\.(self_attn\.(q|k|v)|mlp\.(gate|up))_proj\.weight$/.exec(name);
    if (!m) return undefined;
    const qkv = m[3] !== undefined;
    const all = weights.get(`${m[1]}.${qkv ? "self_attn.qkv_proj" : "mlp.gate_up_proj"}.weight`);
    if (!all) return undefined;
    const bounds = qkv ? { q: [0, H * D], k: [H * D, (H + Hkv) * D], v: [(H + Hkv) * D, (H + 2 * Hkv) * D] }[m[3]!]! : { gate: [0, I], up: [I, 2 * I] }[m[4]!]!;
    return Array.prototype.slice.call(all, bounds[0]! * h, bounds[1]! * h) as number[];
  };
  const w = (name: string): ArrayLike<number> => {
    const v = weights.get(name) ?? fused(name);
    if (!v) throw new ArgumentError("weights", `lack ${name}`);
    return v;
  };
  const linear = (x: ArrayLike<number>, name: string, rows: number, cols: number, bias: boolean): Float64Array =>
    linearReference(x, w(`${name}.weight`), { tokens: T, rows, cols }, bias ? w(`${name}.bias`) : undefined);
  const positions = Array.from({ length: T }, (_, t) => t);
  const rope = (x: Float64Array, heads: number, l: number) => {
    const layer = config.layerRope[l]!;
    if (layer === null) return x; // SmolLM3's NoPE layers
    const { theta, scaling } = layer;
    const R = config.rotaryDim;
    const invFreq = ropeInvFreq({ headDim: D, rotaryDim: R, theta, scaling, maxPositions: options.ropeMaxPositions ?? T });
    const out = ropeReference(x, positions, Float32Array.from(invFreq), { tokens: T, heads, headDim: D, rotaryDim: R });
    const m = ropeAttentionFactor(scaling); // LongRoPE: cos, sin × m, so the rotated dims × m
    if (m !== 1) for (let i = 0; i < out.length; i++) if (i % D < R) out[i]! *= m;
    return out;
  };
  /** RMSNorm of `rows` rows of `cols` by the named weight, as (normOffset + w): Gemma's (1 + w). */
  const norm = (x: ArrayLike<number>, name: string, rows: number, cols: number) => {
    const weight = Float64Array.from(w(name), (v) => v + config.normOffset);
    return rmsNormReference(x, weight, rows, cols, eps);
  };
  const act = config.hiddenAct === "silu" ? swigluReference : gegluReference;

  // x [T, h]: the embedding rows (Gemma: times √hidden).
  const embed = w("model.embed_tokens.weight");
  const x = new Float64Array(T * h);
  tokens.forEach((id, t) => {
    for (let i = 0; i < h; i++) x[t * h + i] = embed[id * h + i]! * config.embeddingScale;
  });

  for (let l = 0; l < config.numLayers; l++) {
    const p = `model.layers.${l}`;
    // Attention block.
    const xb = norm(x, `${p}.input_layernorm.weight`, T, h); //                              [T, h]
    let q = linear(xb, `${p}.self_attn.q_proj`, H * D, h, config.qkvBias); //                   [T, H·D]
    let k = linear(xb, `${p}.self_attn.k_proj`, Hkv * D, h, config.qkvBias); //                 [T, Hkv·D]
    const v = linear(xb, `${p}.self_attn.v_proj`, Hkv * D, h, config.qkvBias); //               [T, Hkv·D]
    if (config.qkNorm) {
      q = norm(q, `${p}.self_attn.q_norm.weight`, T * H, D); //                              per head
      k = norm(k, `${p}.self_attn.k_norm.weight`, T * Hkv, D);
    }
    q = rope(q, H, l);
    k = rope(k, Hkv, l);
    const cap = config.attnLogitSoftcap;
    const window = config.layerWindows[l] ?? Infinity; // token t sees keys j with t − window < j ≤ t
    const att = new Float64Array(T * H * D); //                                                  [T, H·D]
    for (let t = 0; t < T; t++) {
      for (let head = 0; head < H; head++) {
        const kvh = Math.floor(head / G);
        const first = Math.max(0, t - window + 1);
        const scores: number[] = [];
        for (let j = first; j <= t; j++) {
          let s = 0;
          for (let d = 0; d < D; d++) s += q[(t * H + head) * D + d]! * k[(j * Hkv + kvh) * D + d]!;
          s *= config.attentionScale;
          scores.push(cap > 0 ? cap * Math.tanh(s / cap) : s);
        }
        const max = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - max));
        const sum = e.reduce((a, b) => a + b, 0);
        for (let j = first; j <= t; j++) {
          const pj = e[j - first]! / sum;
          for (let d = 0; d < D; d++) att[(t * H + head) * D + d]! += pj * v[(j * Hkv + kvh) * D + d]!;
        }
      }
    }
    let o = linear(att, `${p}.self_attn.o_proj`, h, H * D, config.oProjBias); //                 [T, h]
    if (config.sandwichNorms) o = norm(o, `${p}.post_attention_layernorm.weight`, T, h);
    for (let i = 0; i < T * h; i++) x[i]! += o[i]!;

    // MLP block.
    const xb2 = norm(x, `${p}.${config.sandwichNorms ? "pre_feedforward_layernorm" : "post_attention_layernorm"}.weight`, T, h);
    const gate = linear(xb2, `${p}.mlp.gate_proj`, I, h, config.mlpBias); //                     [T, I]
    const up = linear(xb2, `${p}.mlp.up_proj`, I, h, config.mlpBias); //                         [T, I]
    let down = linear(act(gate, up), `${p}.mlp.down_proj`, h, I, config.mlpBias); //             [T, h]
    if (config.sandwichNorms) down = norm(down, `${p}.post_feedforward_layernorm.weight`, T, h);
    for (let i = 0; i < T * h; i++) x[i]! += down[i]!;
  }

  const xf = norm(x, "model.norm.weight", T, h);
  if (options.output === "hidden") return xf;
  const head = config.tieWordEmbeddings ? embed : w("lm_head.weight");
  const logits = linearReference(xf, head, { tokens: T, rows: V, cols: h }); //                    [T, V]
  return config.finalLogitSoftcap > 0 ? softcapReference(logits, config.finalLogitSoftcap) : logits;
}

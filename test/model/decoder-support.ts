// Helpers for the decoder tests (not a test file of its own): hand-built
// ForwardBatches over a simple block allocator, the float64 oracle's weights
// from a model directory, and error measures.
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import { type DecoderWeights } from "../../src/model/decoder-weights.js";
import { type ModelConfig, type Runtime, type Tensor, type Weight, dequantizeWeight, loadModelDir } from "../../src/ops-entry.js";
import { type ReferenceWeights } from "../../src/testing/index.js";

/** One sequence's part of a step: its blocks, where its new tokens start, the tokens, and which logits to return. */
export interface SeqStep {
  blocks: readonly number[];
  /** Position of the first new token (= tokens already in the cache). */
  start: number;
  tokens: readonly number[];
  /** "last": the last new token's row (a sampling step), "all": every new token's, "none". Default "last". */
  logits?: "last" | "all" | "none";
}

/** The ForwardBatch of sequences `seqs` (rows in order; logit rows in order). */
export function makeBatch(seqs: readonly SeqStep[], blockSize: number): ForwardBatch {
  const T = seqs.reduce((n, s) => n + s.tokens.length, 0);
  const M = Math.max(1, ...seqs.map((s) => s.blocks.length));
  const tokens = new Int32Array(T);
  const positions = new Int32Array(T);
  const slotMapping = new Int32Array(T);
  const cuSeqlensQ = new Int32Array(seqs.length + 1);
  const seqLens = new Int32Array(seqs.length);
  const blockTable = new Int32Array(seqs.length * M);
  const logitIndices: number[] = [];
  let t = 0;
  seqs.forEach((s, b) => {
    s.tokens.forEach((id, j) => {
      const p = s.start + j;
      tokens[t] = id;
      positions[t] = p;
      slotMapping[t] = s.blocks[Math.floor(p / blockSize)]! * blockSize + (p % blockSize);
      const mode = s.logits ?? "last";
      if (mode === "all" || (mode === "last" && j === s.tokens.length - 1)) logitIndices.push(t);
      t++;
    });
    cuSeqlensQ[b + 1] = t;
    seqLens[b] = s.start + s.tokens.length;
    s.blocks.forEach((id, i) => (blockTable[b * M + i] = id));
  });
  return { tokens, positions, cuSeqlensQ, seqLens, blockTable, maxBlocksPerSeq: M, slotMapping, logitIndices: Int32Array.from(logitIndices) };
}

/** Hands out block ids 0, 1, 2, … */
export class Blocks {
  #next = 0;
  constructor(readonly blockSize: number) {}
  /** Enough blocks for `tokens` tokens. */
  take(tokens: number): number[] {
    const n = Math.ceil(tokens / this.blockSize);
    return Array.from({ length: n }, () => this.#next++);
  }
}

/** The checkpoint's tensors of a model directory as float64 values, by name. */
export function referenceWeights(rt: Runtime, dir: string): ReferenceWeights {
  const m = loadModelDir(rt, dir, { progress: false });
  const out = new Map([...m.tensors].map(([name, t]) => [name, Float64Array.from(t.toFloat32())]));
  m.free();
  return out;
}

/** Row `r` of a row-major [rows, cols] array. */
export function row(a: ArrayLike<number>, r: number, cols: number): Float64Array {
  return Float64Array.from({ length: cols }, (_, i) => a[r * cols + i]!);
}

/** max |a − b| / max |b|: the error relative to the row's scale (NaN anywhere gives Infinity). */
export function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`lengths differ: ${a.length} vs ${b.length}`);
  let err = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(a[i]! - b[i]!);
    if (!(d <= Infinity)) return Infinity;
    err = Math.max(err, d);
    scale = Math.max(scale, Math.abs(b[i]!));
  }
  return err / scale;
}

/** Index of the largest value. */
export function argmaxOf(a: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i]! > a[best]!) best = i;
  return best;
}

/**
 * The values a DecoderWeights multiplies by, as checkpoint-named float64
 * arrays: fused matrices split back into q/k/v and gate/up, quantized ones
 * dequantized. The reference forward over these isolates the kernels' error
 * from the format's rounding of the weights.
 */
export function dequantizedWeights(rt: Runtime, w: DecoderWeights, config: ModelConfig): ReferenceWeights {
  const out = new Map<string, Float64Array>();
  const matrix = (weight: Weight): Float64Array => {
    const t = dequantizeWeight(rt, { weight });
    const v = Float64Array.from(t.toFloat32());
    rt.free(t);
    return v;
  };
  const f64 = (t: Tensor): Float64Array => Float64Array.from(t.toFloat32());
  /** A norm weight as the checkpoint stores it: the loaded one holds w + normOffset (Gemma's 1 + w). */
  const norm = (t: Tensor): Float64Array => Float64Array.from(t.toFloat32(), (v) => v - config.normOffset);
  /** Rows [from, to) of a [rows, cols] matrix. */
  const rows = (m: Float64Array, cols: number, from: number, to: number) => m.slice(from * cols, to * cols);
  const { hiddenSize: h, numHeads: H, numKvHeads: Hkv, headDim: D, intermediateSize: I } = config;
  out.set("model.embed_tokens.weight", matrix(w.embedding));
  if (!config.tieWordEmbeddings) out.set("lm_head.weight", matrix(w.lmHead));
  out.set("model.norm.weight", norm(w.finalNorm));
  w.layers.forEach((l, i) => {
    const p = `model.layers.${i}`;
    const qkv = matrix(l.qkv);
    out.set(`${p}.self_attn.q_proj.weight`, rows(qkv, h, 0, H * D));
    out.set(`${p}.self_attn.k_proj.weight`, rows(qkv, h, H * D, (H + Hkv) * D));
    out.set(`${p}.self_attn.v_proj.weight`, rows(qkv, h, (H + Hkv) * D, (H + 2 * Hkv) * D));
    if (l.qkvBias) {
      const b = f64(l.qkvBias);
      out.set(`${p}.self_attn.q_proj.bias`, b.slice(0, H * D));
      out.set(`${p}.self_attn.k_proj.bias`, b.slice(H * D, (H + Hkv) * D));
      out.set(`${p}.self_attn.v_proj.bias`, b.slice((H + Hkv) * D));
    }
    if (l.qNorm) out.set(`${p}.self_attn.q_norm.weight`, norm(l.qNorm));
    if (l.kNorm) out.set(`${p}.self_attn.k_norm.weight`, norm(l.kNorm));
    out.set(`${p}.self_attn.o_proj.weight`, matrix(l.o));
    if (l.oBias) out.set(`${p}.self_attn.o_proj.bias`, f64(l.oBias));
    out.set(`${p}.input_layernorm.weight`, norm(l.inputNorm));
    if (l.attnOutNorm && l.mlpOutNorm) {
      out.set(`${p}.post_attention_layernorm.weight`, norm(l.attnOutNorm));
      out.set(`${p}.pre_feedforward_layernorm.weight`, norm(l.postNorm));
      out.set(`${p}.post_feedforward_layernorm.weight`, norm(l.mlpOutNorm));
    } else out.set(`${p}.post_attention_layernorm.weight`, norm(l.postNorm));
    const gateUp = matrix(l.gateUp);
    out.set(`${p}.mlp.gate_proj.weight`, rows(gateUp, h, 0, I));
    out.set(`${p}.mlp.up_proj.weight`, rows(gateUp, h, I, 2 * I));
    if (l.gateUpBias) {
      const b = f64(l.gateUpBias);
      out.set(`${p}.mlp.gate_proj.bias`, b.slice(0, I));
      out.set(`${p}.mlp.up_proj.bias`, b.slice(I));
    }
    out.set(`${p}.mlp.down_proj.weight`, matrix(l.down));
    if (l.downBias) out.set(`${p}.mlp.down_proj.bias`, f64(l.downBias));
  });
  return out;
}

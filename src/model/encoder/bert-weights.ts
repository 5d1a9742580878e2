/**
 * A BERT or (XLM-)RoBERTa checkpoint's tensors (transformers' BertModel names,
 * which RobertaModel shares, with or without the "bert." / "roberta." prefix
 * of the *ForMaskedLM classes, LayerNorm as
 * weight/bias or the old gamma/beta) → the encoder's weights: the projections
 * as Weights (q, k, v fused into one [3h, h] matrix, as vLLM's
 * QKVParallelLinear), their biases as f32 tensors in the runtime's memory, and
 * the small tables the host side reads (positions, token types, LayerNorms) as
 * f32 arrays. Every name and shape is checked before a byte is read.
 *
 *   embeddings.{word,position,token_type}_embeddings.weight   [V, h] [P, h] [types, h]
 *   embeddings.LayerNorm.{weight,bias}                        [h]
 *   encoder.layer.N.attention.self.{query,key,value}.{weight,bias}   [h, h] [h]
 *   encoder.layer.N.attention.output.dense.{weight,bias}            [h, h] [h]
 *   encoder.layer.N.attention.output.LayerNorm.{weight,bias}        [h]
 *   encoder.layer.N.intermediate.dense.{weight,bias}                [I, h] [I]
 *   encoder.layer.N.output.dense.{weight,bias}                      [h, I] [h]
 *   encoder.layer.N.output.LayerNorm.{weight,bias}                  [h]
 *
 * NomicBertModel's names (no position table, no projection biases, SwiGLU):
 *
 *   embeddings.{word,token_type}_embeddings.weight, emb_ln.{weight,bias}
 *   encoder.layers.N.attn.Wqkv.weight [3h, h]   .attn.out_proj.weight [h, h]
 *   encoder.layers.N.mlp.fc11.weight [I, h] (up)  .mlp.fc12.weight [I, h] (gate)  .mlp.fc2.weight [h, I]
 *   encoder.layers.N.norm1.{weight,bias}  .norm2.{weight,bias}     (after attention, after the MLP)
 */
import { ArgumentError, show } from "../../errors.js";
import { type Weight, type WeightFormat, createWeight } from "../../ops/weight.js";
import type { Runtime } from "../../runtime/runtime.js";
import { decodeValue } from "../../tensor/codec.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { BertConfig } from "./bert-config.js";

/** A LayerNorm's scale and shift, f32 [h] each, in the runtime's memory (ops/layernorm.ts). */
export interface LayerNormWeights {
  weight: Tensor;
  bias: Tensor;
}

export interface BertLayerWeights {
  /** [3h, h]: rows q, then k, then v. */
  qkv: Weight;
  /** f32 [3h], or null (NomicBert). */
  qkvBias: Tensor | null;
  o: Weight;
  oBias: Tensor | null;
  attnNorm: LayerNormWeights;
  /** [I, h] (GELU MLP), or [2I, h]: gate rows, then up rows (SwiGLU). */
  up: Weight;
  upBias: Tensor | null;
  /** [h, I]. */
  down: Weight;
  downBias: Tensor | null;
  outNorm: LayerNormWeights;
}

export interface BertWeights {
  format: WeightFormat;
  /** [V, h]. */
  word: Weight;
  /** f32 [P · h]; empty with rotary positions. */
  position: Float32Array;
  /** f32 [types · h]. */
  tokenType: Float32Array;
  embNorm: LayerNormWeights;
  layers: BertLayerWeights[];
  free(): void;
}

/** "bert." / "roberta." in checkpoints saved from a *ForMaskedLM or *ForSequenceClassification class, else "". */
export function weightPrefix(present: ReadonlySet<string>): string {
  return ["bert.", "roberta."].find((p) => present.has(`${p}embeddings.word_embeddings.weight`)) ?? "";
}

/** NomicBertModel's checkpoint names and shapes. */
function nomicWeightNames(c: BertConfig): Map<string, readonly number[]> {
  const h = c.hiddenSize;
  const I = c.intermediateSize;
  const out = new Map<string, readonly number[]>([
    ["embeddings.word_embeddings.weight", [c.vocabSize, h]],
    ["embeddings.token_type_embeddings.weight", [c.typeVocabSize, h]],
    ["emb_ln.weight", [h]],
    ["emb_ln.bias", [h]],
  ]);
  for (let l = 0; l < c.numLayers; l++) {
    const p = `encoder.layers.${l}.`;
    out.set(`${p}attn.Wqkv.weight`, [3 * h, h]);
    out.set(`${p}attn.out_proj.weight`, [h, h]);
    out.set(`${p}mlp.fc11.weight`, [I, h]);
    out.set(`${p}mlp.fc12.weight`, [I, h]);
    out.set(`${p}mlp.fc2.weight`, [h, I]);
    for (const n of ["norm1", "norm2"]) for (const k of ["weight", "bias"]) out.set(`${p}${n}.${k}`, [h]);
  }
  return out;
}

/** The checkpoint names the encoder reads, each with its expected shape. */
export function bertWeightNames(c: BertConfig, present: ReadonlySet<string>): Map<string, readonly number[]> {
  if (c.architecture === "NomicBertModel") return nomicWeightNames(c);
  const prefix = weightPrefix(present);
  const h = c.hiddenSize;
  const ln = (base: string): [string, number[]][] => {
    const old = present.has(`${prefix}${base}.gamma`);
    return [[`${prefix}${base}.${old ? "gamma" : "weight"}`, [h]], [`${prefix}${base}.${old ? "beta" : "bias"}`, [h]]];
  };
  const out = new Map<string, readonly number[]>([
    [`${prefix}embeddings.word_embeddings.weight`, [c.vocabSize, h]],
    [`${prefix}embeddings.position_embeddings.weight`, [c.maxPositionEmbeddings, h]],
    [`${prefix}embeddings.token_type_embeddings.weight`, [c.typeVocabSize, h]],
    ...ln("embeddings.LayerNorm"),
  ]);
  for (let l = 0; l < c.numLayers; l++) {
    const p = `${prefix}encoder.layer.${l}.`;
    for (const n of ["query", "key", "value"]) {
      out.set(`${p}attention.self.${n}.weight`, [h, h]);
      out.set(`${p}attention.self.${n}.bias`, [h]);
    }
    out.set(`${p}attention.output.dense.weight`, [h, h]);
    out.set(`${p}attention.output.dense.bias`, [h]);
    for (const [n, s] of ln(`encoder.layer.${l}.attention.output.LayerNorm`)) out.set(n, s);
    out.set(`${p}intermediate.dense.weight`, [c.intermediateSize, h]);
    out.set(`${p}intermediate.dense.bias`, [c.intermediateSize]);
    out.set(`${p}output.dense.weight`, [h, c.intermediateSize]);
    out.set(`${p}output.dense.bias`, [h]);
    for (const [n, s] of ln(`encoder.layer.${l}.output.LayerNorm`)) out.set(n, s);
  }
  return out;
}

/** Checks that every name of `wanted` is in `shapes` with its shape; `where` names the checkpoint. */
export function checkBertShapes(wanted: ReadonlyMap<string, readonly number[]>, shapes: ReadonlyMap<string, readonly number[]>, where: string): void {
  for (const [name, shape] of wanted) {
    const got = shapes.get(name);
    if (got === undefined) throw new ArgumentError(where, `has no tensor ${show(name)} (a BERT encoder needs it)`);
    if (got.length !== shape.length || got.some((d, i) => d !== shape[i])) throw new ArgumentError(`${where} ${name}`, `must have shape ${show(shape)} from config.json, got ${show(got)}`);
  }
}

/** A loaded tensor's elements as f32 on the host (f32, f16 or bf16 in the file). */
function hostF32(t: Tensor): Float32Array {
  const data = t.data();
  if (t.dtype === "f32") return Float32Array.from(data as Float32Array);
  const out = new Float32Array(t.numel);
  for (let i = 0; i < out.length; i++) out[i] = decodeValue(t.dtype, data[i]!);
  return out;
}

/**
 * Builds the encoder's weights from loaded checkpoint tensors (name → tensor
 * in rt's memory, as loadSafetensors gives them, checked by bertWeightNames).
 * The loaded tensors stay the caller's (free them after).
 */
export function buildBertWeights(rt: Runtime, c: BertConfig, tensors: ReadonlyMap<string, Tensor>, format: WeightFormat = "f32"): BertWeights {
  const names = bertWeightNames(c, new Set(tensors.keys()));
  checkBertShapes(names, new Map([...tensors].map(([n, t]) => [n, t.shape])), "checkpoint");
  const prefix = weightPrefix(new Set(tensors.keys()));
  const get = (name: string): Tensor => tensors.get(prefix + name) ?? tensors.get(`${prefix}${name.replace(/\.weight$/, ".gamma").replace(/\.bias$/, ".beta")}`)!;
  const owned: (Weight | Tensor)[] = [];
  const weight = (parts: string[]): Weight => {
    const w = createWeight(rt, { source: parts.map(get), format, label: `${parts[0]} (${format})` });
    owned.push(w);
    return w;
  };
  const bias = (parts: string[]): Tensor => {
    const host = parts.map((p) => hostF32(get(p)));
    const t = rt.tensor("f32", [host.reduce((n, a) => n + a.length, 0)], `${parts[0]}`);
    owned.push(t);
    let at = 0;
    const dst = t.data() as Float32Array;
    for (const a of host) (dst.set(a, at), (at += a.length));
    return t;
  };
  const norm = (base: string): LayerNormWeights => ({ weight: bias([`${base}.weight`]), bias: bias([`${base}.bias`]) });
  try {
    if (c.architecture === "NomicBertModel") {
      const layers: BertLayerWeights[] = [];
      for (let l = 0; l < c.numLayers; l++) {
        const p = `encoder.layers.${l}.`;
        layers.push({
          qkv: weight([`${p}attn.Wqkv.weight`]),
          qkvBias: null,
          o: weight([`${p}attn.out_proj.weight`]),
          oBias: null,
          attnNorm: norm(`${p}norm1`),
          up: weight([`${p}mlp.fc12.weight`, `${p}mlp.fc11.weight`]), // [gate; up]
          upBias: null,
          down: weight([`${p}mlp.fc2.weight`]),
          downBias: null,
          outNorm: norm(`${p}norm2`),
        });
      }
      const free = (): void => {
        for (const o of owned.splice(0)) "free" in o ? o.free() : rt.free(o);
      };
      return { format, word: weight(["embeddings.word_embeddings.weight"]), position: new Float32Array(0), tokenType: hostF32(get("embeddings.token_type_embeddings.weight")), embNorm: norm("emb_ln"), layers, free };
    }
    const layers: BertLayerWeights[] = [];
    for (let l = 0; l < c.numLayers; l++) {
      const p = `encoder.layer.${l}.`;
      const qkv = ["query", "key", "value"].map((n) => `${p}attention.self.${n}`);
      layers.push({
        qkv: weight(qkv.map((n) => `${n}.weight`)),
        qkvBias: bias(qkv.map((n) => `${n}.bias`)),
        o: weight([`${p}attention.output.dense.weight`]),
        oBias: bias([`${p}attention.output.dense.bias`]),
        attnNorm: norm(`${p}attention.output.LayerNorm`),
        up: weight([`${p}intermediate.dense.weight`]),
        upBias: bias([`${p}intermediate.dense.bias`]),
        down: weight([`${p}output.dense.weight`]),
        downBias: bias([`${p}output.dense.bias`]),
        outNorm: norm(`${p}output.LayerNorm`),
      });
    }
    return {
      format,
      word: weight(["embeddings.word_embeddings.weight"]),
      position: hostF32(get("embeddings.position_embeddings.weight")),
      tokenType: hostF32(get("embeddings.token_type_embeddings.weight")),
      embNorm: norm("embeddings.LayerNorm"),
      layers,
      free: () => {
        for (const o of owned.splice(0)) "free" in o ? o.free() : rt.free(o);
      },
    };
  } catch (e) {
    for (const o of owned.splice(0)) "free" in o ? o.free() : rt.free(o);
    throw e;
  }
}

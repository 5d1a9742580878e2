/**
 * The classification head of a cross-encoder (a reranker): transformers'
 * BertForSequenceClassification and (XLM-)RobertaForSequenceClassification
 * on top of the BERT encoder (bert-encoder.ts), read from config.json and the
 * checkpoint, run on the host over each sequence's first token ([CLS] / <s>):
 *
 *   BERT      p = tanh(W_pool · h[CLS] + b_pool)       bert.pooler.dense       [h, h]
 *             logits = W_cls · p + b_cls                classifier              [L, h]
 *   RoBERTa   p = tanh(W_dense · h[<s>] + b_dense)     classifier.dense        [h, h]
 *             logits = W_out · p + b_out                classifier.out_proj     [L, h]
 *             (RobertaClassificationHead; dropout is the identity at inference)
 *
 * Both are dense + tanh + a linear layer, so one head serves both with its
 * own tensor names. The score is the one logit through the activation
 * sentence-transformers' CrossEncoder and vLLM apply with num_labels 1:
 * sigmoid, or what config.json names (sentence_transformers.activation_fn, or
 * the older sbert_ce_default_activation_function). Only num_labels 1 is
 * served: a relevance score is one number.
 */
import { ArgumentError, show } from "../../errors.js";
import { decodeValue } from "../../tensor/codec.js";
import type { Tensor } from "../../tensor/tensor.js";

/** Architectures whose checkpoints carry this head. */
export const CROSS_ENCODER_ARCHITECTURES = ["BertForSequenceClassification", "XLMRobertaForSequenceClassification", "RobertaForSequenceClassification"] as const;

export type ScoreActivation = "sigmoid" | "identity";

export interface ClassifierConfig {
  /** "bert": pooler + classifier; "roberta": RobertaClassificationHead. */
  kind: "bert" | "roberta";
  /** Always 1 (a relevance score). */
  numLabels: 1;
  activation: ScoreActivation;
}

const ACTIVATIONS: Readonly<Record<string, ScoreActivation>> = {
  "torch.nn.modules.activation.Sigmoid": "sigmoid",
  "torch.nn.Sigmoid": "sigmoid",
  "torch.nn.modules.linear.Identity": "identity",
  "torch.nn.Identity": "identity",
};

/** True if config.json names a cross-encoder architecture. */
export function isCrossEncoderArchitecture(architecture: string): boolean {
  return (CROSS_ENCODER_ARCHITECTURES as readonly string[]).includes(architecture);
}

/** The head's settings from config.json (j), for `architecture` (one of CROSS_ENCODER_ARCHITECTURES); `source` names the file. */
export function parseClassifierConfig(j: Record<string, unknown>, architecture: string, source: string): ClassifierConfig {
  const id2label = j["id2label"];
  const fromLabels = typeof id2label === "object" && id2label !== null ? Object.keys(id2label).length : undefined;
  const numLabels = j["num_labels"] ?? fromLabels ?? 2;
  if (numLabels !== 1) {
    throw new ArgumentError(`${source} id2label`, `must hold one label (num_labels 1: a cross-encoder's relevance score, as vLLM and sentence-transformers' CrossEncoder score), got ${show(numLabels)} labels`);
  }
  const st = j["sentence_transformers"];
  const key = typeof st === "object" && st !== null && "activation_fn" in st ? "sentence_transformers.activation_fn" : "sbert_ce_default_activation_function";
  const named = key === "sbert_ce_default_activation_function" ? j[key] : (st as Record<string, unknown>)["activation_fn"];
  let activation: ScoreActivation = "sigmoid";
  if (named !== undefined && named !== null) {
    const a = typeof named === "string" ? ACTIVATIONS[named] : undefined;
    if (a === undefined) throw new ArgumentError(`${source} ${key}`, `must be one of ${Object.keys(ACTIVATIONS).join(", ")}, got ${show(named)}`);
    activation = a;
  }
  return { kind: architecture.includes("Roberta") ? "roberta" : "bert", numLabels: 1, activation };
}

/** The head's checkpoint names with their shapes (`prefix`: "bert." in a BertForSequenceClassification checkpoint). */
export function classifierWeightNames(c: ClassifierConfig, h: number, prefix: string): Map<string, readonly number[]> {
  const [dense, out] = c.kind === "bert" ? [`${prefix}pooler.dense`, "classifier"] : ["classifier.dense", "classifier.out_proj"];
  return new Map<string, readonly number[]>([
    [`${dense}.weight`, [h, h]],
    [`${dense}.bias`, [h]],
    [`${out}.weight`, [c.numLabels, h]],
    [`${out}.bias`, [c.numLabels]],
  ]);
}

function hostF64(t: Tensor): Float64Array {
  const data = t.data();
  const out = new Float64Array(t.numel);
  for (let i = 0; i < out.length; i++) out[i] = t.dtype === "f32" ? (data[i] as number) : decodeValue(t.dtype, data[i]!);
  return out;
}

export class SequenceClassifier {
  readonly config: ClassifierConfig;
  readonly #h: number;
  /** [h, h], [h], [L, h], [L] as f64 on the host. */
  readonly #dense: Float64Array;
  readonly #denseBias: Float64Array;
  readonly #out: Float64Array;
  readonly #outBias: Float64Array;

  /** `tensors`: the loaded checkpoint (the names of classifierWeightNames, shapes checked there); copied, so the caller frees them. */
  constructor(config: ClassifierConfig, h: number, tensors: ReadonlyMap<string, Tensor>, prefix: string) {
    this.config = config;
    this.#h = h;
    const names = [...classifierWeightNames(config, h, prefix)];
    const get = (i: number): Float64Array => {
      const [name, shape] = names[i]!;
      const t = tensors.get(name);
      if (t === undefined) throw new ArgumentError("checkpoint", `has no tensor ${show(name)} (the ${config.kind === "bert" ? "BertForSequenceClassification" : "RobertaClassificationHead"} head needs it)`);
      if (t.shape.length !== shape.length || t.shape.some((d, k) => d !== shape[k])) throw new ArgumentError(`checkpoint ${name}`, `must have shape ${show(shape)}, got ${show(t.shape)}`);
      return hostF64(t);
    };
    this.#dense = get(0);
    this.#denseBias = get(1);
    this.#out = get(2);
    this.#outBias = get(3);
  }

  /** The activated score of each sequence (its raw logits where raw[b]): hidden f32 [T, h], cuSeqlens [B + 1] → f32 [B, numLabels] as B vectors. */
  score(hidden: Float32Array, cuSeqlens: ArrayLike<number>, raw?: ArrayLike<boolean>): Float32Array[] {
    const h = this.#h;
    const L = this.config.numLabels;
    const out: Float32Array[] = [];
    const p = new Float64Array(h);
    for (let b = 0; b + 1 < cuSeqlens.length; b++) {
      const row = cuSeqlens[b]! * h; // the first token: [CLS] / <s>
      for (let i = 0; i < h; i++) {
        let s = this.#denseBias[i]!;
        for (let k = 0; k < h; k++) s += this.#dense[i * h + k]! * hidden[row + k]!;
        p[i] = Math.tanh(s);
      }
      const v = new Float32Array(L);
      for (let l = 0; l < L; l++) {
        let s = this.#outBias[l]!;
        for (let k = 0; k < h; k++) s += this.#out[l * h + k]! * p[k]!;
        v[l] = this.config.activation === "sigmoid" && raw?.[b] !== true ? 1 / (1 + Math.exp(-s)) : s;
      }
      out.push(v);
    }
    return out;
  }
}

/**
 * The classification head of a GGUF reranker: what llama.cpp's
 * convert_hf_to_gguf.py writes from XLMRobertaForSequenceClassification
 * (bge-reranker-base / -large / -v2-m3: arch "bert", the Unigram "t5"
 * vocabulary) → the ClassifierConfig the safetensors path's head
 * (sequence-classifier.ts) runs. gguf-py's tensor_mapping.py names
 * RobertaClassificationHead's layers
 *
 *   cls.weight [h, h], cls.bias [h]                    classifier.dense     (MODEL_TENSOR.CLS)
 *   cls.output.weight [L, h], cls.output.bias [L]      classifier.out_proj  (MODEL_TENSOR.CLS_OUT)
 *   {arch}.classifier.output_labels                    id2label's L names (llama.cpp's n_cls_out, default 1)
 *
 * and llama-graph.cpp's build_pooling for LLAMA_POOLING_TYPE_RANK computes,
 * on each sequence's first token, out(tanh(cls · h[<s>] + cls_b)) + out_b:
 * RobertaClassificationHead without its dropouts. The converter writes no
 * pooling_type for a reranker (llama-server runs it with --reranking, i.e.
 * pooling rank); the head's tensors make a file a reranker here, and a
 * pooling_type of 4 (rank) or 2 (cls), or none, goes with them.
 *
 * Refused, naming the tensor or key:
 *  - cls.output without cls. The converter drops a
 *    BertForSequenceClassification's pooler (bert.pooler.dense, BertModel.filter_tensors)
 *    and writes its `classifier` as cls.output, so llama.cpp scores
 *    W·h[CLS] + b where transformers scores W·tanh(W_pool·h[CLS] + b_pool) + b:
 *    such a file cannot give the checkpoint's scores.
 *  - cls without cls.output (llama.cpp would answer tanh(·) as the score).
 *  - more than one label, as the safetensors path refuses them: a relevance
 *    score is one number.
 *  - rank pooling without a head, and mean / last / none pooling with one.
 *
 * GGUF carries no sentence-transformers activation_fn: the score is the
 * sigmoid of the logit, vLLM's and sentence-transformers' CrossEncoder
 * default for one label (use_activation false gives the raw logit, which is
 * what llama-server's /v1/rerank answers).
 */
import { ArgumentError, show } from "../../errors.js";
import type { GgufTensorInfo } from "../../sources/gguf/reader.js";
import { type GgufMetadata, isString } from "../../sources/gguf/metadata.js";
import type { ClassifierConfig } from "./sequence-classifier.js";

/** The head's GGUF names → the transformers names sequence-classifier.ts reads (kind "roberta"). */
export const GGUF_CLASSIFIER_TENSORS: Readonly<Record<string, string>> = { cls: "classifier.dense", "cls.output": "classifier.out_proj" };

/** llama.h's LLAMA_POOLING_TYPE_RANK and LLAMA_POOLING_TYPE_CLS. */
const RANK = 4;
const CLS = 2;

/**
 * The head of a bert-arch GGUF file, or null when it has none (an embedding
 * model). `tensors`: HF name → GGUF tensor (gguf-bert-config.ts's
 * ggufEncoderTensors); `path` names the file in errors.
 */
export function ggufClassifierConfig(meta: GgufMetadata, arch: string, tensors: ReadonlyMap<string, GgufTensorInfo>, path: string): ClassifierConfig | null {
  const dense = tensors.get("classifier.dense.weight");
  const out = tensors.get("classifier.out_proj.weight");
  const poolKey = `${arch}.pooling_type`;
  const pooling = meta.has(poolKey) ? meta.int(poolKey, undefined, 0) : null;
  if (dense === undefined && out === undefined) {
    if (pooling === RANK) throw meta.error(poolKey, "is 4 (rank), but the file has no classification head (cls.weight and cls.output.weight, a reranker's RobertaClassificationHead)");
    return null;
  }
  if (dense === undefined) {
    throw new ArgumentError(path, "has cls.output.weight but no cls.weight: llama.cpp's converter drops a BertForSequenceClassification's pooler (bert.pooler.dense), so this file cannot give the checkpoint's scores (transformers applies tanh(pooler) before the classifier); serve the model's safetensors directory");
  }
  if (out === undefined) throw new ArgumentError(path, "has cls.weight but no cls.output.weight (the classification head's out_proj, which gives the score)");
  if (pooling !== null && pooling !== RANK && pooling !== CLS) {
    throw meta.error(poolKey, `must be 4 (rank), 2 (cls) or absent in a reranker (a file with a classification head scores the first token), got ${pooling}`);
  }
  const labels = meta.array(`${arch}.classifier.output_labels`, "a string", isString);
  const rows = out.shape[0];
  if (labels !== null && labels.length !== rows) throw meta.error(`${arch}.classifier.output_labels`, `must name one label per row of cls.output.weight (${show(out.shape)}), got ${labels.length}: ${show(labels)}`);
  if (out.shape.length !== 2 || rows !== 1) {
    throw new ArgumentError(`${path} cls.output.weight`, `must have one row (one label: a reranker's relevance score, as vLLM and sentence-transformers' CrossEncoder score), got shape ${show(out.shape)}`);
  }
  return { kind: "roberta", numLabels: 1, activation: "sigmoid" };
}

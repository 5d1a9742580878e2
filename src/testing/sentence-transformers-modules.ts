/**
 * Writes the sentence-transformers files of an embedding model directory
 * (what SentenceTransformer.save writes beside the Transformer's own files),
 * for tiny fixtures of any network (writeTinyBert, or a writeTinyModel
 * decoder made a Qwen3-Embedding-style model):
 *
 *   modules.json                 Transformer, Pooling (1_Pooling), [Normalize (2_Normalize)]
 *   1_Pooling/config.json        one pooling_mode_* on
 *   sentence_bert_config.json    max_seq_length
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { PoolingMode } from "../model/encoder/pooling-config.js";

export interface SentenceTransformersModulesOptions {
  /** Pooled vector length (1_Pooling's word_embedding_dimension). */
  dimension: number;
  pooling: PoolingMode;
  /** Write a Normalize module. */
  normalize: boolean;
  maxSeqLength: number;
}

export function writeSentenceTransformersModules(dir: string, options: SentenceTransformersModulesOptions): void {
  const json = (path: string, value: unknown): void => writeFileSync(join(dir, path), `${JSON.stringify(value, null, 2)}\n`);
  const { pooling: mode, normalize } = options;
  json("modules.json", [
    { idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" },
    { idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" },
    ...(normalize ? [{ idx: 2, name: "2", path: "2_Normalize", type: "sentence_transformers.models.Normalize" }] : []),
  ]);
  mkdirSync(join(dir, "1_Pooling"), { recursive: true });
  json("1_Pooling/config.json", {
    word_embedding_dimension: options.dimension,
    pooling_mode_cls_token: mode === "cls",
    pooling_mode_mean_tokens: mode === "mean",
    pooling_mode_max_tokens: false,
    pooling_mode_mean_sqrt_len_tokens: false,
    pooling_mode_weightedmean_tokens: false,
    pooling_mode_lasttoken: mode === "last",
    include_prompt: true,
  });
  if (normalize) mkdirSync(join(dir, "2_Normalize"), { recursive: true });
  json("sentence_bert_config.json", { max_seq_length: options.maxSeqLength, do_lower_case: false });
}

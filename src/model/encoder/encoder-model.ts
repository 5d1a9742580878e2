/**
 * An embedding model directory (a sentence-transformers repo such as
 * all-MiniLM-L6-v2, or a bare BertModel) → a running embedder: the BERT
 * encoder (bert-encoder.ts), its WordPiece tokenizer (tokenizer.json through
 * the same Tokenizer as the decoders), and the pooling it ships
 * (pooling-config.ts). The engine worker builds it (encoder-loader.ts); the
 * HTTP thread reads the same metadata without the weights (readEncoderInfo).
 * A cross-encoder (*ForSequenceClassification, a reranker) is the same
 * encoder with a classification head (sequence-classifier.ts): its "vector"
 * is the activated score of the pair, [numLabels] = [1], as vLLM's classify
 * pooler gives it.
 *
 *   const model = loadEncoderModel(rt, dir);
 *   model.embed([[101, 7592, 102], …]);     // one pooled f32 vector per sequence (a cross-encoder: [score])
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ArgumentError } from "../../errors.js";
import { readJsonFile } from "../../json-file.js";
import type { WeightFormat } from "../../ops/weight.js";
import type { Runtime } from "../../runtime/runtime.js";
import { Tokenizer } from "../../tokenizer/tokenizer.js";
import type { ModelSource } from "../../sources/source.js";
import { SINGLE_WEIGHTS_FILE } from "../model-dir.js";
import { freeTensors, loadSafetensors, readSafetensorsHeader } from "../../sources/safetensors.js";
import { type BertConfig, isBertConfig, parseBertConfig } from "./bert-config.js";
import { BertEncoder, type EncoderBatch } from "./bert-encoder.js";
import { bertWeightNames, buildBertWeights, checkBertShapes, weightPrefix } from "./bert-weights.js";
import { type PoolingConfig, readPoolingConfig } from "./pooling-config.js";
import { poolSequences } from "./pooling.js";
import { SequenceClassifier, classifierWeightNames } from "./sequence-classifier.js";

export interface EncoderInfo {
  dir: string;
  config: BertConfig;
  pooling: PoolingConfig;
  /** Longest input in tokens: sentence_bert_config's max_seq_length, else what the positions allow (capped by the caller's maxModelLen). */
  maxModelLen: number;
  /** Length of a pooled vector (hidden size; a cross-encoder's: its one score). */
  dimensions: number;
  /** A cross-encoder (a classification head scores a pair), not an embedding model. */
  crossEncoder: boolean;
}

/** True if the source is a model directory whose config.json names an encoder this package serves. */
export function isEncoderSource(source: ModelSource): boolean {
  if (source.kind !== "dir") return false;
  const path = join(source.path, "config.json");
  return existsSync(path) && isBertConfig(readJsonFile(path));
}

/** config.json, pooling and length limit of an encoder directory; reads no weights. */
export function readEncoderInfo(dir: string, maxModelLen?: number): EncoderInfo {
  const configPath = join(dir, "config.json");
  const json = readJsonFile(configPath);
  const config = parseBertConfig(json, configPath);
  // A cross-encoder pools its first token into the head; sentence-transformers' modules are an embedding model's.
  const pooling: PoolingConfig = config.classifier !== null ? { mode: "cls", normalize: false, maxSeqLength: null, matryoshka: null } : readPoolingConfig(dir, json as Record<string, unknown>);
  const limit = Math.min(pooling.maxSeqLength ?? config.maxTokens, config.maxTokens);
  if (maxModelLen !== undefined && (!Number.isInteger(maxModelLen) || maxModelLen < 1)) throw new ArgumentError("maxModelLen", `must be a positive integer, got ${maxModelLen}`);
  return { dir, config, pooling, maxModelLen: Math.min(limit, maxModelLen ?? limit), dimensions: config.classifier?.numLabels ?? config.hiddenSize, crossEncoder: config.classifier !== null };
}

/** The encoder's tokenizer (tokenizer.json, WordPiece for BERT). */
export function encoderTokenizer(dir: string): Tokenizer {
  return Tokenizer.fromDir(dir);
}

export class EncoderModel {
  readonly info: EncoderInfo;
  readonly encoder: BertEncoder;
  /** A cross-encoder's head, else null. */
  readonly classifier: SequenceClassifier | null;

  constructor(info: EncoderInfo, encoder: BertEncoder, classifier: SequenceClassifier | null = null) {
    if ((classifier !== null) !== info.crossEncoder) throw new ArgumentError("classifier", `must be given exactly for a cross-encoder (${info.config.architecture})`);
    this.info = info;
    this.encoder = encoder;
    this.classifier = classifier;
  }

  /** One pooled (and, if the model says so, normalized) vector per sequence of `batch`; a cross-encoder's: [score]. */
  embedBatch(batch: EncoderBatch): Float32Array[] {
    const hidden = this.encoder.forward(batch);
    if (this.classifier !== null) return this.classifier.score(hidden, batch.cuSeqlens, batch.raw);
    const { mode, normalize } = this.info.pooling;
    return poolSequences(hidden, this.info.dimensions, batch.cuSeqlens, mode, normalize);
  }

  /** One vector per token-id sequence, all in one forward (`tokenTypes`: one list per sequence, as a pair's encoding gives them). */
  embed(sequences: readonly (readonly number[])[], tokenTypes?: readonly (readonly number[])[]): Float32Array[] {
    const cu = [0];
    for (const s of sequences) cu.push(cu[cu.length - 1]! + s.length);
    return this.embedBatch({ tokens: sequences.flat(), cuSeqlens: cu, ...(tokenTypes === undefined ? {} : { tokenTypes: tokenTypes.flat() }) });
  }

  dispose(): void {
    this.encoder.dispose();
  }
}

export interface LoadEncoderOptions {
  /** Compute format of the projections. Default "f32". */
  weights?: WeightFormat;
  /** Cap on the input length. */
  maxModelLen?: number;
}

/** Loads an encoder directory's weights (model.safetensors) into rt's memory. */
export function loadEncoderModel(rt: Runtime, dir: string, options: LoadEncoderOptions = {}): EncoderModel {
  const info = readEncoderInfo(dir, options.maxModelLen);
  const file = join(dir, SINGLE_WEIGHTS_FILE);
  if (!existsSync(file)) throw new ArgumentError(dir, `has no ${SINGLE_WEIGHTS_FILE} (an encoder is read from one safetensors file)`);
  const header = readSafetensorsHeader(file);
  const shapes = new Map(header.tensors.map((t) => [t.name, t.shape]));
  const names = bertWeightNames(info.config, new Set(shapes.keys()));
  const head = info.config.classifier;
  const headNames = head === null ? new Map<string, readonly number[]>() : classifierWeightNames(head, info.config.hiddenSize, weightPrefix(new Set(shapes.keys())));
  checkBertShapes(new Map([...names, ...headNames]), shapes, file);
  const tensors = loadSafetensors(rt, file, { names: [...names.keys(), ...headNames.keys()] });
  try {
    const classifier = head === null ? null : new SequenceClassifier(head, info.config.hiddenSize, tensors, weightPrefix(new Set(shapes.keys())));
    const weights = buildBertWeights(rt, info.config, tensors, options.weights ?? "f32");
    return new EncoderModel(info, new BertEncoder(rt, info.config, weights), classifier);
  } finally {
    freeTensors(rt, tensors);
  }
}

/**
 * A BERT-family GGUF file (arch "bert" or "nomic-bert", as llama.cpp's
 * converter writes all-MiniLM, bge, e5, gte and nomic-embed-text) → the same
 * EncoderModel the safetensors directory gives (encoder-model.ts): the config
 * and pooling from the metadata (gguf-bert-config.ts), the WordPiece or
 * Unigram tokenizer from the vocabulary (gguf-encoder-tokenizer.ts), and the tensors, decoded
 * to f32 (any GGUF type, dequantize.ts) under their transformers names, into
 * the weight builder the safetensors path uses (bert-weights.ts). A
 * reranker's classification head (cls, cls.output: gguf-classifier.ts) goes
 * to the safetensors path's head (sequence-classifier.ts), and its "vector"
 * is the pair's score. Every tensor's presence and shape is checked, naming
 * the GGUF tensor, before a weight byte is read.
 *
 *   const info = readGgufEncoderInfo(path);           // metadata only
 *   const model = loadGgufEncoderModel(rt, path);     // → model.embed([[101, 7592, 102]])
 *   reranker.embed([pair.ids]);                        // → [[score]] (sigmoid of the head's logit)
 */
import { closeSync, openSync, readSync } from "node:fs";
import { ArgumentError, show } from "../../errors.js";
import type { Runtime } from "../../runtime/runtime.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { Tokenizer } from "../../tokenizer/tokenizer.js";
import { dequantize } from "../../tensor/ggml-dequantize.js";
import { GgufMetadata } from "../../sources/gguf/metadata.js";
import { type GgufHeader, type GgufTensorInfo, readGgufHeader } from "../../sources/gguf/reader.js";
import { BertEncoder } from "./bert-encoder.js";
import { bertWeightNames, buildBertWeights } from "./bert-weights.js";
import { type EncoderInfo, EncoderModel, type LoadEncoderOptions } from "./encoder-model.js";
import { SequenceClassifier, classifierWeightNames } from "./sequence-classifier.js";
import { ggufEncoderPooling, ggufEncoderTensorName, ggufEncoderTensors, parseGgufBertConfig } from "./gguf-bert-config.js";
import { ggufEncoderTokenizerOf } from "./gguf-encoder-tokenizer.js";

interface GgufEncoderFile {
  info: EncoderInfo;
  header: GgufHeader;
  /** HF name → GGUF tensor, for the tensors the encoder reads. */
  tensors: Map<string, GgufTensorInfo>;
}

/** HF name ↔ GGUF name of the tensors the encoder reads, each checked by shape. */
function checkedTensors(header: GgufHeader, info: EncoderInfo, arch: string): Map<string, GgufTensorInfo> {
  const all = ggufEncoderTensors(header, arch);
  const head = info.config.classifier;
  const wanted = new Map([...bertWeightNames(info.config, new Set(all.keys())), ...(head === null ? [] : classifierWeightNames(head, info.config.hiddenSize, ""))]);
  const out = new Map<string, GgufTensorInfo>();
  for (const [hf, shape] of wanted) {
    const t = all.get(hf);
    if (t === undefined) throw new ArgumentError(header.path, `has no tensor ${show(ggufEncoderTensorName(hf, arch))} (a ${arch} encoder of ${info.config.numLayers} layers needs it)`);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) throw new ArgumentError(`${header.path} ${t.name}`, `must have shape ${show(shape)} from the metadata, got ${show(t.shape)}`);
    out.set(hf, t);
  }
  return out;
}

function openEncoderFile(path: string, maxModelLen?: number): GgufEncoderFile {
  const header = readGgufHeader(path);
  const meta = new GgufMetadata(header.metadata, path);
  const arch = meta.string("general.architecture") ?? "";
  const config = parseGgufBertConfig(header, ggufEncoderTensors(header, arch));
  const head = config.classifier;
  // A reranker's head reads the first token, unnormalized (as encoder-model.ts's cross-encoders).
  const pooling = { ...(head === null ? ggufEncoderPooling(meta, arch) : { mode: "cls" as const, normalize: false }), maxSeqLength: null, matryoshka: null };
  if (maxModelLen !== undefined && (!Number.isInteger(maxModelLen) || maxModelLen < 1)) throw new ArgumentError("maxModelLen", `must be a positive integer, got ${maxModelLen}`);
  const dimensions = head === null ? config.hiddenSize : head.numLabels;
  const info: EncoderInfo = { dir: path, config, pooling, maxModelLen: Math.min(config.maxTokens, maxModelLen ?? config.maxTokens), dimensions, crossEncoder: head !== null };
  return { info, header, tensors: checkedTensors(header, info, arch) };
}

/** Config, pooling and length limit of an encoder GGUF file; reads no weights. */
export function readGgufEncoderInfo(path: string, maxModelLen?: number): EncoderInfo {
  return openEncoderFile(path, maxModelLen).info;
}

/** The tokenizer of an encoder GGUF file (WordPiece, or XLM-R's Unigram). */
export function ggufEncoderTokenizer(path: string): Tokenizer {
  return ggufEncoderTokenizerOf(new GgufMetadata(readGgufHeader(path).metadata, path));
}

/** One GGUF tensor decoded to f32 in rt's memory. */
function readTensor(rt: Runtime, fd: number, path: string, t: GgufTensorInfo): Tensor {
  const bytes = new Uint8Array(t.end - t.begin);
  for (let done = 0; done < bytes.length; ) {
    const n = readSync(fd, bytes, done, bytes.length - done, t.begin + done);
    if (n === 0) throw new ArgumentError(path, `ended early inside tensor ${show(t.name)} (file truncated?)`);
    done += n;
  }
  const out = rt.tensor("f32", t.shape, t.name);
  try {
    dequantize(t.type, bytes, t.numel, out.data() as Float32Array);
  } catch (e) {
    rt.free(out);
    throw e;
  }
  return out;
}

/** Loads an encoder GGUF file's weights into rt's memory (projections in options.weights' format, default f32). */
export function loadGgufEncoderModel(rt: Runtime, path: string, options: LoadEncoderOptions = {}): EncoderModel {
  const { info, tensors } = openEncoderFile(path, options.maxModelLen);
  const loaded = new Map<string, Tensor>();
  const fd = openSync(path, "r");
  try {
    for (const [hf, t] of tensors) loaded.set(hf, readTensor(rt, fd, path, t));
    const head = info.config.classifier;
    const classifier = head === null ? null : new SequenceClassifier(head, info.config.hiddenSize, loaded, "");
    const weights = buildBertWeights(rt, info.config, loaded, options.weights ?? "f32");
    return new EncoderModel(info, new BertEncoder(rt, info.config, weights), classifier);
  } finally {
    closeSync(fd);
    for (const t of loaded.values()) rt.free(t);
  }
}

/**
 * A GGUF file as a model source, the GGUF counterpart of model-dir.ts:
 *
 *   openGgufModel(path)        metadata → ModelConfig, Tokenizer, stop ids; every
 *                              tensor mapped to its HF name and checked by shape
 *                              against the config (weight-names.ts); reads no weights
 *   ggufTensorSource(rt, m)    a TensorSource (decoder-weights.ts): tensors by HF
 *                              name, decoded to f32 in the runtime's memory,
 *                              Q/K rows un-permuted for `llama`
 *   resolveGgufWeights         --weights for a GGUF file: "auto" keeps Q8_0, Q5_0, IQ4_NL,
 *                              IQ4_XS and Q2_K … Q6_K as they are (ops/ggml-weight.ts) and
 *                              converts the other types to the nearest format;
 *                              f32 | bf16 | q8 | q4 convert every matrix
 *   ggufWeightSizes            the bytes each part's matrices take, for the memory plan
 *
 * Tensors are read a few MiB of whole rows at a time and decoded straight into
 * their f32 tensor (tensor/ggml-dequantize.ts), so no JS buffer larger than one chunk is
 * ever held. The loader (loader.ts) reads a ModelSource of kind "gguf"
 * (sources/source.ts) through here.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { ArgumentError, show } from "../../errors.js";
import { GgmlMatrix, isGgmlNativeType, stackRuns } from "../../ops/ggml-weight.js";
import { GGML_NATIVE, type GgmlNativeType } from "../../ops/ggml-weight.js";
import { WEIGHT_FORMATS, type WeightFormat, weightBytes } from "../../ops/weight.js";
import type { Runtime } from "../../runtime/runtime.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { Tokenizer } from "../../tokenizer/tokenizer.js";
import type { ModelConfig } from "../config.js";
import { type TensorSource, weightGroups } from "../decoder-weights.js";
import type { WeightSizes } from "../memory-plan.js";
import { EMPTY_GENERATION_CONFIG, type GenerationConfig } from "../generation-config.js";
import type { LoadProgress } from "../../sources/progress.js";
import { checkWeights } from "../weight-names.js";
import { fallbackFor } from "../chat-template-fallback.js";
import { parseGgufConfig } from "./config.js";
import { dequantize } from "../../tensor/ggml-dequantize.js";
import { GgufMetadata } from "../../sources/gguf/metadata.js";
import { type GgufHeader, type GgufTensorInfo, isGgufFile, readGgufHeader } from "../../sources/gguf/reader.js";
import { hfTensorName, isIgnorableGgufTensor, permutedHeads, unpermuteRows } from "../../sources/gguf/tensor-names.js";
import { LLAMA_CPP_EOG_TEXTS, ggufTokenizer } from "../../sources/gguf/tokenizer.js";

export interface GgufModel {
  path: string;
  header: GgufHeader;
  config: ModelConfig;
  tokenizer: Tokenizer;
  /** No generation_config in a GGUF file: the stop and BOS ids only. */
  generation: GenerationConfig;
  /** eos ∪ eot ∪ eom token ids of the metadata. */
  eosTokenIds: number[];
  /** HF name → the GGUF tensor holding it, for every tensor the decoder reads. */
  tensors: Map<string, GgufTensorInfo>;
  /** Bytes of those tensors in the file. */
  weightBytes: number;
}

/**
 * True for a path to a file (not a directory) named *.gguf or starting with the
 * GGUF magic (as sources/source.ts decides): a .gguf file that is not GGUF then gets the
 * reader's "is not a GGUF file" error rather than a model-directory one.
 */
export function isGgufPath(path: string): boolean {
  try {
    return statSync(path).isFile() && (path.toLowerCase().endsWith(".gguf") || isGgufFile(path));
  } catch {
    return false;
  }
}

function readF32Tensor(path: string, t: GgufTensorInfo): Float32Array {
  const bytes = new Uint8Array(t.end - t.begin);
  const fd = openSync(path, "r");
  try {
    readRange(fd, bytes, t.begin, path);
  } finally {
    closeSync(fd);
  }
  const out = new Float32Array(t.numel);
  dequantize(t.type, bytes, t.numel, out);
  return out;
}

function readRange(fd: number, into: Uint8Array, position: number, path: string): void {
  for (let done = 0; done < into.length; ) {
    const n = readSync(fd, into, done, into.length - done, position + done);
    if (n === 0) throw new ArgumentError(path, `ended early: wanted bytes [${position}, ${position + into.length}) (file truncated while reading?)`);
    done += n;
  }
}

/** Reads a GGUF file's metadata and tensor index into a checked model description. Loads no weights. */
export function openGgufModel(path: string): GgufModel {
  const header = readGgufHeader(path);
  const config = parseGgufConfig(header, { readTensor: (t) => readF32Tensor(path, t) }); // reads rope_freqs once its shape is checked
  const tensors = new Map<string, GgufTensorInfo>();
  const unknown: string[] = [];
  const arch = String(header.metadata.get("general.architecture"));
  for (const t of header.tensors) {
    if (isIgnorableGgufTensor(t.name)) continue;
    const hf = hfTensorName(t.name, arch);
    if (hf === null) unknown.push(t.name);
    else tensors.set(hf, t);
  }
  if (unknown.length > 0) {
    throw new ArgumentError(path, `has tensors that are not part of ${config.architecture} as llama.cpp names it: ${unknown.slice(0, 8).join(", ")}${unknown.length > 8 ? `, … (${unknown.length})` : ""}`);
  }
  const specs = checkWeights(config, new Map([...tensors].map(([name, t]) => [name, t.shape])), path);
  const meta = new GgufMetadata(header.metadata, path);
  const tokenizer = ggufTokenizer(meta, fallbackFor(config.architecture));
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new ArgumentError(path, `token_embd.weight has ${config.vocabSize} rows, fewer than the tokenizer's ${tokenizer.vocabSize} tokens`);
  }
  const stops = ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"].map((k) => meta.optionalInt(k));
  // llama.cpp also stops on every end-of-generation-looking token of the vocabulary (tokenizer.ts LLAMA_CPP_EOG_TEXTS).
  const eog = [...LLAMA_CPP_EOG_TEXTS].map((t) => tokenizer.tokenToId(t)).filter((x): x is number => x !== undefined);
  const eosTokenIds = [...new Set([...stops.filter((x): x is number => x !== null), ...eog])];
  const weightBytes = specs.reduce((s, spec) => s + (tensors.get(spec.name)!.end - tensors.get(spec.name)!.begin), 0);
  const generation = { ...EMPTY_GENERATION_CONFIG, bosTokenId: config.bosTokenId, eosTokenIds };
  return { path, header, config, tokenizer, generation, eosTokenIds, tensors, weightBytes };
}

/** Compute format of each file type that is not kept natively, under "auto": the nearest format that loses nothing the kernels could keep. */
const AUTO_FORMAT: Readonly<Record<string, WeightFormat>> = {
  F32: "f32",
  F16: "f32", // f16 → bf16 would drop 3 mantissa bits
  BF16: "bf16",
  Q4_0: "q4", // kvflash q4 is Q4_0 with an f32 scale: the same codes
  Q8_0: "q8", // kvflash q8 is Q8_0 with an f32 scale: the same codes
  Q4_1: "q8",
  Q5_0: "q8",
  Q5_1: "q8",
  Q4_K: "q8",
  Q5_K: "q8",
  Q6_K: "q8",
};
const WIDTH: Readonly<Record<WeightFormat, number>> = { q4: 0, q8: 1, bf16: 2, f32: 3 };

/** How a GGUF model's matrices load. */
export interface GgufWeights {
  /** The format every matrix that is not kept natively is converted to. */
  format: WeightFormat;
  /** Whether Q8_0, Q5_0, IQ4_NL, IQ4_XS and Q2_K … Q6_K matrices stay as they are (GGML_NATIVE): true under "auto". */
  native: boolean;
}

/** A matrix the decoder multiplies by (not a norm or bias vector). */
function isMatrix(t: GgufTensorInfo): boolean {
  return t.shape.length === 2;
}

/**
 * Resolves --weights for a GGUF model: f32 | bf16 | q8 | q4 convert every
 * matrix. "auto" keeps the GGML_NATIVE types (Q8_0, Q5_0, IQ4_NL, IQ4_XS, Q2_K … Q6_K) natively (llama.cpp's
 * own values, no requantizing) and converts the others to the widest of the
 * formats their types map to (AUTO_FORMAT): Q4_0 → q4 keeps llama.cpp's
 * codes, the other quantized types become q8 (|e| ≤ d/2 of a 32-value block
 * over the decoded values), F32 and F16 → f32, BF16 → bf16.
 */
export function resolveGgufWeights(value: string | undefined, model: GgufModel): GgufWeights {
  const v = value ?? "auto";
  if (v !== "auto") {
    if (!(WEIGHT_FORMATS as readonly string[]).includes(v)) {
      throw new ArgumentError("weights", `must be one of ${[...WEIGHT_FORMATS, "auto"].map((f) => JSON.stringify(f)).join(" | ")}, got ${show(value)}`);
    }
    return { format: v as WeightFormat, native: false };
  }
  let best: WeightFormat | null = null;
  for (const t of model.tensors.values()) {
    if (!isMatrix(t) || isGgmlNativeType(t.type.name)) continue;
    const f = AUTO_FORMAT[t.type.name]!;
    if (best === null || WIDTH[f] > WIDTH[best]) best = f;
  }
  return { format: best ?? "q8", native: true };
}

/** The format "auto" converts a GGUF model's non-native matrices to (resolveGgufWeights().format). */
export function resolveGgufWeightFormat(value: string | undefined, model: GgufModel): WeightFormat {
  return resolveGgufWeights(value, model).format;
}

/** The native ggml type a tensor keeps under `w`, or null when it is decoded and converted. */
function nativeType(t: GgufTensorInfo, w: GgufWeights): GgmlNativeType | null {
  return w.native && isMatrix(t) && isGgmlNativeType(t.type.name) ? t.type.name : null;
}

/**
 * The bytes of the matrices of each load group as buildDecoderWeights will
 * make them (native types at their packed size, fused parts stacked the same
 * way), for the memory plan.
 */
export function ggufWeightSizes(model: GgufModel, w: GgufWeights): WeightSizes {
  const bytesOf = (names: readonly string[]): number => {
    const ts = names.map((n) => model.tensors.get(n)!);
    const runs = stackRuns(ts, (t) => ({ native: nativeType(t, w), rows: t.shape[0]! }));
    return runs.reduce((sum, run) => {
      const n = nativeType(run[0]!, w);
      const rows = run.reduce((r, t) => r + t.shape[0]!, 0);
      return sum + weightBytes(n ? GGML_NATIVE[n].format : w.format, rows, run[0]!.shape[1]!);
    }, 0);
  };
  const groups = weightGroups(model.config);
  const layer = (g: readonly string[], suffixes: readonly string[][]): number =>
    suffixes.reduce((s, parts) => s + bytesOf(parts.map((p) => g.find((n) => n.endsWith(p))!)), 0);
  const fused = model.config.fusedProjections;
  const layers = groups.slice(1, -1).map((g) =>
    layer(g, [fused ? ["qkv_proj.weight"] : ["q_proj.weight", "k_proj.weight", "v_proj.weight"], ["o_proj.weight"], fused ? ["gate_up_proj.weight"] : ["gate_proj.weight", "up_proj.weight"], ["down_proj.weight"]]),
  );
  return {
    embedding: bytesOf(["model.embed_tokens.weight"]),
    layers,
    lmHead: model.config.tieWordEmbeddings ? 0 : bytesOf(["lm_head.weight"]),
  };
}

/** Bytes of raw tensor data decoded per read: whole rows, about 4 MiB. */
const CHUNK_BYTES = 4 << 20;

/**
 * A TensorSource over a GGUF model: each named tensor becomes an f32 tensor
 * [rows, cols] in the memory of the runtime the group is placed in (the caller frees it), decoded chunk by chunk,
 * or — a matrix of a type `weights` keeps natively — its raw ggml rows as a
 * GgmlMatrix (uint8 [rows, rowBytes]); llama's Q/K rows put back in Hugging
 * Face order either way (whole rows move, so raw blocks move as they are).
 */
export function ggufTensorSource(model: GgufModel, progress?: LoadProgress, onProgress?: (done: number, total: number) => void, weights?: GgufWeights): TensorSource {
  const arch = model.header.metadata.get("general.architecture");
  const permuted = arch === "llama" || arch === "smollm3"; // LlamaModel.permute (SmolLM3Model inherits it)
  return (names, rt: Runtime) => {
    const out = new Map<string, Tensor | GgmlMatrix>();
    const fd = openSync(model.path, "r");
    try {
      for (const name of [...names].sort((a, b) => model.tensors.get(a)!.begin - model.tensors.get(b)!.begin)) {
        const t = model.tensors.get(name);
        if (!t) throw new ArgumentError("names", `includes ${show(name)}, which ${model.path} does not hold`);
        const cols = t.ne[0]!;
        const rows = t.numel / cols;
        const rowBytes = (cols / t.type.blockSize) * t.type.typeSize;
        const native = weights ? nativeType(t, weights) : null;
        if (native !== null) {
          const raw = rt.tensor("uint8", [rows, rowBytes], `weight ${name} (${t.type.name} blocks)`);
          out.set(name, new GgmlMatrix(native, raw, rows, cols));
          const chunk = new Uint8Array(Math.min(t.end - t.begin, CHUNK_BYTES));
          for (let at = 0; at < rows * rowBytes; at += chunk.length) {
            const bytes = chunk.subarray(0, Math.min(chunk.length, rows * rowBytes - at));
            readRange(fd, bytes, t.begin + at, model.path);
            new Uint8Array(rt.memory.buffer, raw.ptr + at, bytes.length).set(bytes);
            progress?.add(bytes.length);
          }
          const heads = permuted ? permutedHeads(name, model.config.numHeads, model.config.numKvHeads) : null;
          if (heads !== null) unpermuteRows(new Uint8Array(rt.memory.buffer, raw.ptr, rows * rowBytes), heads, rowBytes);
          continue;
        }
        const tensor = rt.tensor("f32", t.shape, `weight ${name} (${t.type.name} → f32)`);
        out.set(name, tensor);
        const rowsPerChunk = Math.max(1, Math.floor(CHUNK_BYTES / rowBytes));
        const buf = new Uint8Array(Math.min(rows, rowsPerChunk) * rowBytes);
        for (let r = 0; r < rows; r += rowsPerChunk) {
          const n = Math.min(rowsPerChunk, rows - r);
          const bytes = buf.subarray(0, n * rowBytes);
          readRange(fd, bytes, t.begin + r * rowBytes, model.path);
          dequantize(t.type, bytes, n * cols, new Float32Array(rt.memory.buffer, tensor.ptr + r * cols * 4, n * cols));
          progress?.add(bytes.length);
        }
        const heads = permuted ? permutedHeads(name, model.config.numHeads, model.config.numKvHeads) : null;
        if (heads !== null) unpermuteRows(new Float32Array(rt.memory.buffer, tensor.ptr, t.numel), heads, t.shape.length === 1 ? 1 : cols);
      }
    } catch (e) {
      for (const t of out.values()) rt.free(t instanceof GgmlMatrix ? t.bytes : t);
      throw e;
    } finally {
      closeSync(fd);
    }
    if (progress) onProgress?.(progress.done, progress.total);
    return out;
  };
}

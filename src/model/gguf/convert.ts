/**
 * A Hugging Face model directory → a GGUF file, as llama.cpp's
 * convert_hf_to_gguf.py + llama-quantize would make it, for tests and
 * benchmarks: the architecture's metadata (gguf-py key names), the tokenizer
 * (sources/gguf/tokenizer-to-gguf.ts), every tensor under llama.cpp's name (q/k rows
 * permuted for `llama` and `smollm3`), matrices quantized to the chosen type and norms and
 * biases kept in F32.
 *
 * "Q4_K_M" is llama-quantize's mix: Q4_K, with attn_v, ffn_down and the
 * output matrix in Q6_K. A matrix whose rows are not whole blocks of its type
 * falls back as llama.cpp does (Q2_K, Q3_K, IQ4_XS → IQ4_NL, Q4_K → Q5_0,
 * Q5_K → Q5_1, Q6_K → Q8_0, and 32-blocks → F16).
 */
import { closeSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { readJsonFile } from "../../json-file.js";
import { ArgumentError } from "../../errors.js";
import type { ModelConfig } from "../config.js";
import { readModelDirInfo } from "../model-dir.js";
import { readSafetensorsHeader } from "../../sources/safetensors.js";
import { llama3Factors } from "./config.js";
import { GGML_TYPES, type GgmlTypeName } from "../../tensor/ggml-types.js";
import { dequantize } from "../../tensor/ggml-dequantize.js";
import { quantize } from "../../sources/gguf/quantize.js";
import { ggufTensorName, permuteRows, permutedHeads } from "../../sources/gguf/tensor-names.js";
import { hfTokenizerToGguf } from "../../sources/gguf/tokenizer-to-gguf.js";
import { type GgufTyped, type GgufWriteTensor, gguf, writeGguf } from "../../sources/gguf/writer.js";

export type GgufQuantMix = GgmlTypeName | "Q4_K_M";

const ARCH_NAME: Readonly<Record<string, string>> = { LlamaForCausalLM: "llama", MistralForCausalLM: "llama", Qwen2ForCausalLM: "qwen2", Qwen3ForCausalLM: "qwen3", Phi3ForCausalLM: "phi3", SmolLM3ForCausalLM: "smollm3", Gemma2ForCausalLM: "gemma2", Gemma3ForCausalLM: "gemma3" };

function ggufName(hf: string, arch: string): string {
  const name = ggufTensorName(hf, arch);
  if (name === null) throw new ArgumentError("tensor", `has no llama.cpp name: ${hf}`);
  return name;
}

const FALLBACK: Readonly<Partial<Record<GgmlTypeName, GgmlTypeName>>> = { Q2_K: "IQ4_NL", Q3_K: "IQ4_NL", IQ4_XS: "IQ4_NL", IQ4_NL: "F16", Q4_K: "Q5_0", Q5_K: "Q5_1", Q6_K: "Q8_0", Q4_0: "F16", Q4_1: "F16", Q5_0: "F16", Q5_1: "F16", Q8_0: "F16" };

/** The type a matrix gets under `mix`, after llama.cpp's fallback for rows that are not whole blocks. */
export function matrixType(ggufTensor: string, cols: number, mix: GgufQuantMix): GgmlTypeName {
  let t: GgmlTypeName = mix === "Q4_K_M" ? (/attn_v\.weight$|ffn_down\.weight$|^output\.weight$/.test(ggufTensor) ? "Q6_K" : "Q4_K") : mix;
  while (cols % GGML_TYPES[t].blockSize !== 0) t = FALLBACK[t] ?? "F32";
  return t;
}

/** The architecture metadata of a config under gguf-py's key names. */
export function ggufArchMetadata(config: ModelConfig): Record<string, GgufTyped> {
  const arch = ARCH_NAME[config.architecture]!;
  const k = (key: string) => `${arch}.${key}`;
  const meta: Record<string, GgufTyped> = {
    "general.architecture": gguf.str(arch),
    [k("context_length")]: gguf.u32(config.maxPositionEmbeddings),
    [k("embedding_length")]: gguf.u32(config.hiddenSize),
    [k("feed_forward_length")]: gguf.u32(config.intermediateSize),
    [k("block_count")]: gguf.u32(config.numLayers),
    [k("attention.head_count")]: gguf.u32(config.numHeads),
    [k("attention.head_count_kv")]: gguf.u32(config.numKvHeads),
    [k("attention.key_length")]: gguf.u32(config.headDim),
    [k("attention.value_length")]: gguf.u32(config.headDim),
    [k("attention.layer_norm_rms_epsilon")]: gguf.f32(config.rmsNormEps),
    [k("rope.freq_base")]: gguf.f32(config.ropeTheta),
    [k("rope.dimension_count")]: gguf.u32(config.rotaryDim),
  };
  if (arch === "smollm3" && config.layerRope.some((r, i) => (r === null) !== ((i + 1) % 4 === 0))) {
    throw new ArgumentError("config.layerRope", `must skip RoPE on every 4th layer exactly (llama.cpp's smollm3 has no key for its NoPE layers), got NoPE on layers ${JSON.stringify(config.layerRope.flatMap((r, i) => (r === null ? [i] : [])))}`);
  }
  if (config.ropeScaling.type === "longrope") {
    // Phi3MiniModel.set_gguf_parameters / generate_extra_tensors (the factors are tensors: convertModelDirToGguf).
    meta[k("rope.scaling.attn_factor")] = gguf.f32(config.ropeScaling.attentionFactor);
    meta[k("rope.scaling.original_context_length")] = gguf.u32(config.ropeScaling.originalMaxPositionEmbeddings);
  }
  if (config.ropeScaling.type === "linear") {
    meta[k("rope.scaling.type")] = gguf.str("linear");
    meta[k("rope.scaling.factor")] = gguf.f32(config.ropeScaling.factor);
  }
  const window = config.layerWindows.find((w) => w !== null);
  if (window !== null && window !== undefined) meta[k("attention.sliding_window")] = gguf.u32(window);
  if (arch === "gemma2" || arch === "gemma3") {
    // convert_hf_to_gguf's Gemma2Model / Gemma3Model keys (its pattern is llama.cpp's default: 2 / 6).
    if (config.attnLogitSoftcap > 0) meta[k("attn_logit_softcapping")] = gguf.f32(config.attnLogitSoftcap);
    if (config.finalLogitSoftcap > 0) meta[k("final_logit_softcapping")] = gguf.f32(config.finalLogitSoftcap);
    const local = config.layerRope[config.layerWindows.indexOf(window ?? null)];
    if (arch === "gemma3" && local && window !== undefined) meta[k("rope.freq_base_swa")] = gguf.f32(local.theta);
    const full = config.layerRope[config.layerWindows.indexOf(null)];
    if (full) meta[k("rope.freq_base")] = gguf.f32(full.theta);
    const pattern = slidingPattern(config.layerWindows);
    if (pattern === null) throw new ArgumentError("config.layerWindows", `follow no llama.cpp sliding_window_pattern (layer i slides iff i % n < n − 1), got ${JSON.stringify(config.layerWindows)}`);
    if (window !== undefined && pattern !== (arch === "gemma2" ? 2 : 6)) meta[k("attention.sliding_window_pattern")] = gguf.u32(pattern);
  }
  return meta;
}

/** The smallest n with: layer i slides iff i % n < n − 1 (llama.cpp's set_swa_pattern), or null. */
function slidingPattern(windows: readonly (number | null)[]): number | null {
  for (let n = 1; n <= windows.length + 1; n++) if (windows.every((w, i) => (w !== null) === (i % n < n - 1))) return n;
  return windows.every((w) => w === null) ? 1 : null;
}

function readValues(file: string, begin: number, end: number, dtype: string): Float32Array {
  const bytes = new Uint8Array(end - begin);
  const fd = openSync(file, "r");
  try {
    for (let done = 0; done < bytes.length; ) {
      const n = readSync(fd, bytes, done, bytes.length - done, begin + done);
      if (n === 0) throw new ArgumentError(file, `ended early: wanted bytes [${begin}, ${end})`);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
  const type = GGML_TYPES[dtype === "f32" ? "F32" : dtype === "f16" ? "F16" : "BF16"];
  const out = new Float32Array(bytes.length / type.typeSize);
  dequantize(type, bytes, out.length, out);
  return out;
}

export interface ConvertToGgufOptions {
  /** Type of the matrices (the embedding and LM head included). */
  type: GgufQuantMix;
  /** tokenizer.ggml.pre for byte-level BPE tokenizers. Default "llama-bpe" for llama, "qwen2" for qwen2/qwen3. */
  pre?: string;
}

/** Converts a model directory to a GGUF file at `out`. Returns the GGUF type of each tensor. */
export function convertModelDirToGguf(dir: string, out: string, options: ConvertToGgufOptions): Map<string, GgmlTypeName> {
  const info = readModelDirInfo(dir);
  const { config } = info;
  const arch = ARCH_NAME[config.architecture]!;
  const tokenizerJson = readJsonFile(join(dir, "tokenizer.json")) as Record<string, unknown>;
  const tokenizerConfig = readJsonFile(join(dir, "tokenizer_config.json")) as Record<string, unknown>;
  const metadata = { ...ggufArchMetadata(config), ...hfTokenizerToGguf(tokenizerJson, tokenizerConfig, { pre: options.pre ?? (arch === "llama" ? "llama-bpe" : "qwen2"), vocabSize: config.vocabSize }) };
  const headers = new Map(info.weightFiles.map((f) => [f, readSafetensorsHeader(f)]));
  const types = new Map<string, GgmlTypeName>();
  const gemma = arch === "gemma2" || arch === "gemma3";
  const tensors: GgufWriteTensor[] = info.weights.map((w) => {
    const name = ggufName(w.name, arch);
    const dtype = headers.get(w.file)!.tensors.find((t) => t.name === w.name)!.dtype;
    const values = readValues(w.file, w.begin, w.end, dtype);
    const cols = w.shape[w.shape.length - 1]!;
    const heads = arch === "llama" || arch === "smollm3" ? permutedHeads(w.name, config.numHeads, config.numKvHeads) : null;
    if (heads !== null) permuteRows(values, heads, w.shape.length === 1 ? 1 : cols);
    if (gemma && w.name.endsWith("norm.weight")) for (let i = 0; i < values.length; i++) values[i]! += 1; // Gemma2Model.modify_tensors: (1 + w) stored
    const type = w.shape.length === 2 && !name.includes("norm") ? matrixType(name, cols, options.type) : "F32";
    types.set(name, type);
    return { name, type, shape: w.shape, data: quantize(type, values, cols) };
  });
  if (config.ropeScaling.type === "llama3") {
    // convert_hf_to_gguf stores Llama 3.1's RoPE scaling as per-frequency divisors.
    const factors = Float32Array.from(llama3Factors(config.ropeTheta, config.headDim, config.ropeScaling));
    tensors.push({ name: "rope_freqs.weight", type: "F32", shape: [factors.length], data: quantize("F32", factors, factors.length) });
  }
  if (config.ropeScaling.type === "longrope") {
    for (const [name, f] of [["rope_factors_long.weight", config.ropeScaling.longFactor], ["rope_factors_short.weight", config.ropeScaling.shortFactor]] as const) {
      const factors = Float32Array.from(f);
      tensors.push({ name, type: "F32", shape: [factors.length], data: quantize("F32", factors, factors.length) });
    }
  }
  writeGguf(out, { metadata, tensors });
  return types;
}

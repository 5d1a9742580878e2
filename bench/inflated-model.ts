/**
 * A weight-bound model for the `spec` bench made from trained weights at hand:
 * the default model (hidden 256, 4 layers, 4 query / 2 KV heads of 64, MLP 704)
 * widened and deepened to Qwen2.5-0.5B's layer shapes (hidden 896, 24 layers,
 * 14 query / 2 KV heads of 64, MLP 4864) by function-preserving transformations,
 * Net2Net's idea (Chen, Goodfellow & Shlens 2016, "Net2Net: Accelerating
 * Learning via Knowledge Transfer") in its simplest exact variant, zero padding.
 * The architecture stays Llama's (no q/k/v biases) and the vocabulary the
 * source's (4096), so this is "Qwen2.5-0.5B's layer shapes", not Qwen2.5-0.5B.
 *
 * With h → H hidden, n → N query heads (KV heads and head_dim kept), I → I'
 * MLP, L → L' layers, every matrix row-major [out, in]:
 *
 *   embed_tokens [V, h]   → [V, H]     rows padded with zeros: the residual
 *                                       stream's dims ≥ h are 0 and stay 0,
 *                                       since every o_proj / down_proj row ≥ h is 0
 *   q_proj [n·D, h]       → [N·D, H]   source head s at target head t(s), other heads' rows 0:
 *                                       a zero query scores 0 everywhere, a uniform
 *                                       average of V that o_proj's zero columns drop
 *   k_proj, v_proj [kv·D, h] → [kv·D, H]
 *   o_proj [h, n·D]       → [H, N·D]   source head s's columns at head t(s)
 *   gate/up [I, h]        → [I', H]    (silu(0)·0 = 0 in the extra units)
 *   down [h, I]           → [H, I']
 *   norm weights [h]      → [H]        w·√(h/H), and rms_norm_eps ε·h/H: the mean
 *                                       square over H dims is h/H of the one over h, so
 *                                       x / √(ms_H + ε·h/H) · w√(h/H) = x / √(ms_h + ε) · w
 *
 * GQA maps query head t to KV head ⌊t / (N/kv)⌋ (ARCHITECTURE.md), so source
 * head s (KV head ⌊s / g⌋, g = n/kv) goes to t(s) = ⌊s/g⌋·(N/kv) + s mod g:
 * for 4 → 14 heads over 2 KV heads, heads 0, 1 → 0, 1 and 2, 3 → 7, 8.
 * Source layer j sits at ⌊j·L'/L⌋ (0, 6, 12, 18); every other layer is a
 * residual identity: the q/k/v, norms and gate/up of the trained layer before
 * it (real attention and MLP work on real activations) with o_proj and
 * down_proj all zero, so it adds nothing and costs what a layer costs.
 *
 * Matrices keep the source's dtype and values bit for bit; norms are written
 * as f32. Under `--weights q8` (blocks of 32 along the input dim) an all-zero
 * block quantizes to zero and, since h, I and D are multiples of 32, every
 * trained block is one of the source's own blocks with its own scale.
 * Bench-only: the product never builds models.
 */
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ArgumentError, show } from "../src/errors.js";
import { decodeValue } from "../src/tensor/codec.js";
import { readSafetensorsHeader, type SafetensorsEntry } from "../src/sources/safetensors.js";
import { type TensorToWrite, writeSafetensors } from "../src/sources/safetensors-writer.js";
import { QWEN25_05B_CONFIG_JSON } from "../src/testing/index.js";

/** The widths and depth to grow to; KV heads, head_dim and the vocabulary stay the source's. */
export interface InflateTarget {
  hiddenSize: number;
  numAttentionHeads: number;
  intermediateSize: number;
  numHiddenLayers: number;
}

/** Qwen2.5-0.5B's layer shapes (its config.json): hidden 896, 14 query heads (of 64, over its 2 KV heads), MLP 4864, 24 layers. */
export const QWEN25_05B_LAYER_SHAPES: Readonly<InflateTarget> = Object.freeze({
  hiddenSize: QWEN25_05B_CONFIG_JSON["hidden_size"] as number,
  numAttentionHeads: QWEN25_05B_CONFIG_JSON["num_attention_heads"] as number,
  intermediateSize: QWEN25_05B_CONFIG_JSON["intermediate_size"] as number,
  numHiddenLayers: QWEN25_05B_CONFIG_JSON["num_hidden_layers"] as number,
});

export interface InflatedModel {
  /** The written Hugging Face directory (config.json, model.safetensors, the source's other .json files). */
  dir: string;
  /** Parameters of the written checkpoint (the tied embedding once). */
  params: number;
  /** Target layer index of each source layer. */
  trainedLayers: number[];
  /** Target query head index of each source query head. */
  trainedHeads: number[];
}

/** Source shapes read from its config.json. */
interface Shapes {
  h: number;
  n: number;
  kv: number;
  d: number;
  inter: number;
  layers: number;
  vocab: number;
}

function int(config: Readonly<Record<string, unknown>>, key: string): number {
  const v = config[key];
  if (typeof v !== "number" || !Number.isInteger(v) || v <= 0) throw new ArgumentError(`config.json ${key}`, `must be a positive integer, got ${show(v)}`);
  return v;
}

/** The source's shapes, checked for what the padding needs: a Llama without biases. */
function sourceShapes(config: Readonly<Record<string, unknown>>): Shapes {
  const arch = (config["architectures"] as unknown[] | undefined)?.[0];
  if (arch !== "LlamaForCausalLM") throw new ArgumentError("config.json architectures", `must be ["LlamaForCausalLM"] (inflation pads a Llama), got ${show(config["architectures"])}`);
  for (const k of ["attention_bias", "mlp_bias"]) if (config[k] === true) throw new ArgumentError(`config.json ${k}`, "must be false: biases are not padded");
  const h = int(config, "hidden_size");
  const n = int(config, "num_attention_heads");
  return { h, n, kv: int(config, "num_key_value_heads"), d: config["head_dim"] === undefined ? h / n : int(config, "head_dim"), inter: int(config, "intermediate_size"), layers: int(config, "num_hidden_layers"), vocab: int(config, "vocab_size") };
}

/** Checks the target against the source: nothing shrinks, and each KV group has room for the source's heads. */
function checkTarget(s: Shapes, t: InflateTarget): void {
  const grow = (name: keyof InflateTarget, from: number) => {
    const v = t[name];
    if (!Number.isInteger(v) || v < from) throw new ArgumentError(`target.${name}`, `must be an integer ≥ the source's ${from}, got ${show(v)}`);
  };
  grow("hiddenSize", s.h);
  grow("numAttentionHeads", s.n);
  grow("intermediateSize", s.inter);
  grow("numHiddenLayers", s.layers);
  if (t.numAttentionHeads % s.kv !== 0) throw new ArgumentError("target.numAttentionHeads", `must be a multiple of the ${s.kv} KV heads, got ${t.numAttentionHeads}`);
}

/** Target query head of source head s: the same KV group, the same place in it. */
export function inflatedHead(s: number, sourceHeads: number, targetHeads: number, kvHeads: number): number {
  const g = sourceHeads / kvHeads;
  return Math.floor(s / g) * (targetHeads / kvHeads) + (s % g);
}

/**
 * Copies a row-major [rows, cols] matrix into a zero [rowsOut, colsOut] one:
 * source row r to row rowAt(r), its column run [c, c + run) to colAt(c) (runs of
 * `run` columns stay together: a head's D columns).
 */
function pad(src: Uint8Array, el: number, rows: number, cols: number, rowsOut: number, colsOut: number, rowAt: (r: number) => number, colAt: (c: number) => number = (c) => c, run = cols): Uint8Array {
  const out = new Uint8Array(rowsOut * colsOut * el);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c += run) {
      const from = (r * cols + c) * el;
      out.set(src.subarray(from, from + run * el), (rowAt(r) * colsOut + colAt(c)) * el);
    }
  }
  return out;
}

/** The inflated model's config.json: the source's, with the target's widths and depth, head_dim kept and rms_norm_eps scaled by h/H. */
export function inflatedConfig(config: Readonly<Record<string, unknown>>, target: InflateTarget = QWEN25_05B_LAYER_SHAPES): Record<string, unknown> {
  const s = sourceShapes(config);
  checkTarget(s, target);
  const eps = typeof config["rms_norm_eps"] === "number" ? config["rms_norm_eps"] : 1e-6;
  const { hiddenSize: H, numAttentionHeads: N, intermediateSize: I, numHiddenLayers: L } = target;
  return { ...config, hidden_size: H, num_attention_heads: N, intermediate_size: I, num_hidden_layers: L, head_dim: s.d, rms_norm_eps: (eps * s.h) / H };
}

/**
 * Writes the source model directory `dir` (a Llama; one model.safetensors)
 * widened and deepened to `target` (default: Qwen2.5-0.5B's layer shapes) into
 * a fresh temporary directory, and returns it. Memory: the source's layers
 * padded once (identity layers share their arrays and one zero buffer).
 */
export function inflatedModelDir(dir: string, target: InflateTarget = QWEN25_05B_LAYER_SHAPES): InflatedModel {
  const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
  const s = sourceShapes(config);
  checkTarget(s, target);
  const { hiddenSize: H, numAttentionHeads: N, intermediateSize: I, numHiddenLayers: L } = target;
  const header = readSafetensorsHeader(join(dir, "model.safetensors"));
  const file = readFileSync(header.path);
  const entries = new Map<string, SafetensorsEntry>(header.tensors.map((e) => [e.name, e]));
  const get = (name: string): { e: SafetensorsEntry; bytes: Uint8Array; el: number } => {
    const e = entries.get(name);
    if (!e) throw new ArgumentError(header.path, `has no tensor ${name}`);
    return { e, bytes: file.subarray(e.begin, e.end), el: e.dtype === "f32" ? 4 : 2 };
  };
  const heads = Array.from({ length: s.n }, (_, i) => inflatedHead(i, s.n, N, s.kv));
  const headRow = (r: number) => heads[Math.floor(r / s.d)]! * s.d + (r % s.d);
  const headCol = (c: number) => heads[Math.floor(c / s.d)]! * s.d;
  const same = (r: number) => r;
  const padded = (name: string, rowsOut: number, colsOut: number, rowAt = same, colAt?: (c: number) => number, run?: number): TensorToWrite => {
    const { e, bytes, el } = get(name);
    const [rows, cols] = e.shape as [number, number];
    return { name, dtype: e.dtype, shape: [rowsOut, colsOut], data: pad(bytes, el, rows, cols, rowsOut, colsOut, rowAt, colAt, run) };
  };
  /** A norm weight w·√(h/H) as f32 [H] (zeros past h: those residual dims are always 0). */
  const norm = (name: string): TensorToWrite => {
    const { e, bytes } = get(name);
    const out = new Float32Array(H);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const scale = Math.sqrt(s.h / H);
    for (let i = 0; i < s.h; i++) out[i] = scale * (e.dtype === "f32" ? view.getFloat32(i * 4, true) : decodeValue(e.dtype, view.getUint16(i * 2, true)));
    return { name, dtype: "f32", shape: [H], data: new Uint8Array(out.buffer) };
  };

  const tensors: TensorToWrite[] = [padded("model.embed_tokens.weight", s.vocab, H)];
  const trainedLayers = Array.from({ length: s.layers }, (_, j) => Math.floor((j * L) / s.layers));
  const zeros = new Uint8Array(H * Math.max(N * s.d, I) * 4);
  let from: Map<string, TensorToWrite> | null = null;
  for (let l = 0; l < L; l++) {
    const j = trainedLayers.indexOf(l);
    const p = `model.layers.${l}.`;
    if (j >= 0) {
      const q = `model.layers.${j}.`;
      const t = [
        norm(`${q}input_layernorm.weight`),
        padded(`${q}self_attn.q_proj.weight`, N * s.d, H, headRow),
        padded(`${q}self_attn.k_proj.weight`, s.kv * s.d, H),
        padded(`${q}self_attn.v_proj.weight`, s.kv * s.d, H),
        padded(`${q}self_attn.o_proj.weight`, H, N * s.d, same, headCol, s.d),
        norm(`${q}post_attention_layernorm.weight`),
        padded(`${q}mlp.gate_proj.weight`, I, H),
        padded(`${q}mlp.up_proj.weight`, I, H),
        padded(`${q}mlp.down_proj.weight`, H, I),
      ];
      from = new Map(t.map((x) => [x.name.slice(q.length), x]));
      for (const x of t) tensors.push({ ...x, name: p + x.name.slice(q.length) });
      continue;
    }
    // A residual identity: the trained layer before it, with o_proj and down_proj zero.
    for (const [suffix, x] of from!) {
      const zero = suffix === "self_attn.o_proj.weight" || suffix === "mlp.down_proj.weight";
      tensors.push({ ...x, name: p + suffix, data: zero ? zeros.subarray(0, x.data.length) : x.data });
    }
  }
  tensors.push(norm("model.norm.weight"));
  if (config["tie_word_embeddings"] !== true) tensors.push(padded("lm_head.weight", s.vocab, H));

  const out = mkdtempSync(join(tmpdir(), "kvflash-inflated-"));
  for (const f of readdirSync(dir)) if (f.endsWith(".json") && f !== "config.json") copyFileSync(join(dir, f), join(out, f));
  writeFileSync(join(out, "config.json"), JSON.stringify(inflatedConfig(config, target), null, 1));
  writeSafetensors(join(out, "model.safetensors"), tensors, { format: "pt" });
  const params = tensors.reduce((n, t) => n + t.shape.reduce((a, b) => a * b, 1), 0);
  return { dir: out, params, trainedLayers, trainedHeads: heads };
}

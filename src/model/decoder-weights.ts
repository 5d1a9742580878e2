/**
 * A decoder's weights in their compute format, converted once at load:
 * every matrix becomes a packed `Weight` (f32 | bf16 | q8 | q4, see
 * ops/weight.ts), with q/k/v fused into one QKV matrix and gate/up into one
 * gate_up matrix (vLLM's QKVParallelLinear and MergedColumnParallelLinear:
 * one GEMV reads both, one activation quantization serves both); norm
 * weights and biases become f32 tensors.
 *
 * The checkpoint's tensors (file dtype) come from a `TensorSource` one group
 * at a time — the embedding, then each layer, then the final norm and LM
 * head — and each group is freed as soon as it is converted, so loading
 * needs the converted model plus one layer of the checkpoint, never both
 * whole models (a bf16 checkpoint converted to q8 peaks at ≈ 0.56 + 1 layer,
 * not 1.56 × the q8 size).
 */
import { ArgumentError } from "../errors.js";
import { GgmlMatrix, createGgmlWeight, stackRuns } from "../ops/ggml-weight.js";
import { type StorageFormat, type Weight, type WeightFormat, WEIGHT_FORMATS, createWeight, stackWeights } from "../ops/weight.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkOneOf } from "../tensor/check.js";
import { convert } from "../tensor/convert.js";
import { Tensor } from "../tensor/tensor.js";
import type { ModelConfig } from "./config.js";
import { expectedWeights } from "./weight-names.js";

/** One decoder layer. Shapes: hidden = h, H query heads, Hkv KV heads, head dim D, MLP width I. */
export interface LayerWeights {
  /** f32 [h]: input_layernorm. */
  inputNorm: Tensor;
  /** [(H + 2·Hkv)·D, h]: q_proj, k_proj, v_proj stacked along rows. */
  qkv: Weight;
  /** f32 [(H + 2·Hkv)·D], or null (Qwen2 and Llama with attention_bias have it). */
  qkvBias: Tensor | null;
  /** f32 [D]: Qwen3's per-head RMSNorm of q and of k, or null. */
  qNorm: Tensor | null;
  kNorm: Tensor | null;
  /** [h, H·D]: o_proj. */
  o: Weight;
  /** f32 [h], or null. */
  oBias: Tensor | null;
  /** f32 [h]: the MLP input's norm: post_attention_layernorm (pre_feedforward_layernorm with sandwichNorms). */
  postNorm: Tensor;
  /** f32 [h]: Gemma's norm of the attention output (post_attention_layernorm), or null. */
  attnOutNorm: Tensor | null;
  /** f32 [h]: Gemma's norm of the MLP output (post_feedforward_layernorm), or null. */
  mlpOutNorm: Tensor | null;
  /** [2·I, h]: gate_proj, up_proj stacked along rows. */
  gateUp: Weight;
  /** f32 [2·I], or null (Llama mlp_bias). */
  gateUpBias: Tensor | null;
  /** [h, I]: down_proj. */
  down: Weight;
  downBias: Tensor | null;
}

/**
 * Hands out checkpoint tensors (f32, f16 or bf16, contiguous, in the memory
 * of `rt`, the view of the memory the group is placed in) by name, one group
 * at a time, or for a matrix kept in its ggml type (a GGUF under "auto") its
 * raw blocks as a GgmlMatrix. The decoder weights free them after conversion.
 */
export type TensorSource = (names: readonly string[], rt: Runtime) => Map<string, Tensor | GgmlMatrix>;

/** A checkpoint tensor as the source hands it out. */
type Source = Tensor | GgmlMatrix;

/** The memory of each load group (see weightGroups): embedding, every layer, then the final norm and LM head. */
export interface GroupMemories {
  embedding: number;
  layers: readonly number[];
  head: number;
}

export interface BuildWeightsOptions {
  config: ModelConfig;
  /** Compute format of every matrix (the embedding and LM head included). */
  format: WeightFormat;
  source: TensorSource;
  /** Where each group goes (placement.ts). Default: every group in `rt`'s memory. */
  placement?: GroupMemories;
  /** Called after each group (embedding, layer 0 … L − 1, final) is converted. */
  onGroup?: (done: number, total: number) => void;
}

export class DecoderWeights {
  /** The format of the matrices (with native ggml weights: the one holding the most bytes). */
  readonly format: StorageFormat;
  /** [V, h]: embed_tokens, read one row per token. */
  readonly embedding: Weight;
  readonly layers: readonly LayerWeights[];
  /** f32 [h]: model.norm. */
  readonly finalNorm: Tensor;
  /** [V, h]: lm_head, or the embedding itself when tied. */
  readonly lmHead: Weight;
  readonly #rt: Runtime;
  #freed = false;

  /** @internal use buildDecoderWeights() */
  constructor(rt: Runtime, format: StorageFormat, embedding: Weight, layers: LayerWeights[], finalNorm: Tensor, lmHead: Weight) {
    this.#rt = rt;
    this.format = format;
    this.embedding = embedding;
    this.layers = layers;
    this.finalNorm = finalNorm;
    this.lmHead = lmHead;
  }

  /**
   * Bytes one decode step reads from the weights: every layer's four
   * matrices and the LM head (the embedding row, norms and biases are noise).
   * Decode is bound by this over the memory bandwidth.
   */
  get bytesPerToken(): number {
    let n = this.lmHead.byteLength;
    for (const w of this.layers) n += w.qkv.byteLength + w.o.byteLength + w.gateUp.byteLength + w.down.byteLength;
    return n;
  }

  /** Bytes of every matrix held (the tied embedding once). */
  get bytes(): number {
    const tied = this.lmHead === this.embedding;
    return this.bytesPerToken + (tied ? 0 : this.embedding.byteLength);
  }

  get freed(): boolean {
    return this.#freed;
  }

  free(): void {
    if (this.#freed) return;
    this.#freed = true;
    const rt = this.#rt;
    const free = (t: Tensor): void => rt.of(t.memory).free(t);
    this.embedding.free();
    if (this.lmHead !== this.embedding) this.lmHead.free();
    free(this.finalNorm);
    for (const w of this.layers) {
      for (const m of [w.qkv, w.o, w.gateUp, w.down]) m.free();
      for (const t of [w.inputNorm, w.postNorm, w.attnOutNorm, w.mlpOutNorm, w.qkvBias, w.qNorm, w.kNorm, w.oBias, w.gateUpBias, w.downBias]) if (t) free(t);
    }
  }
}

/** The checkpoint names of each load group, in load order: the embedding, every layer, then the final norm and LM head. */
export function weightGroups(config: ModelConfig): string[][] {
  const names = expectedWeights(config).map((s) => s.name);
  const groups: string[][] = [["model.embed_tokens.weight"]];
  for (let l = 0; l < config.numLayers; l++) groups.push(names.filter((n) => n.startsWith(`model.layers.${l}.`)));
  groups.push(names.filter((n) => n === "model.norm.weight" || n === "lm_head.weight"));
  return groups;
}

/** One f32 tensor holding `parts` end to end (fused biases; a norm weight when given one part). */
function f32Concat(rt: Runtime, parts: readonly Tensor[], label: string): Tensor {
  const n = parts.reduce((s, t) => s + t.numel, 0);
  const out = rt.tensor("f32", [n], label);
  let offset = 0;
  for (const t of parts) {
    convert(rt, t, new Tensor(rt.memory, out.ptr + offset * 4, "f32", [t.numel]));
    offset += t.numel;
  }
  return out;
}

/**
 * Converts a checkpoint into DecoderWeights, group by group (see weightGroups).
 * On failure everything converted so far is freed.
 */
export function buildDecoderWeights(rt: Runtime, options: BuildWeightsOptions): DecoderWeights {
  const { config } = options;
  const format = checkOneOf("format", options.format, WEIGHT_FORMATS);
  const groups = weightGroups(config);
  const p = options.placement;
  if (p && p.layers.length !== config.numLayers) throw new ArgumentError("placement.layers", `must give a memory for each of the ${config.numLayers} layers, got ${p.layers.length}`);
  /** The memory view of each group (added to the runtime as the placement asks). */
  const memoryOf = (g: number): Runtime => {
    if (!p) return rt;
    return rt.memoryAt(g === 0 ? p.embedding : g <= config.numLayers ? p.layers[g - 1]! : p.head);
  };
  let r = rt; // the current group's memory
  const made: { free(): void }[] = []; // for cleanup on failure
  const keep = <T extends Weight | Tensor>(x: T): T => {
    const owner = r;
    made.push(x instanceof Tensor ? { free: () => owner.free(x) } : x);
    return x;
  };
  const bytesOf = new Map<StorageFormat, number>(); // matrix bytes per format, for `format` below
  /** One Weight of the parts stacked along rows: float sources converted to `format`, ggml matrices kept (ggml-weight.ts). */
  const weight = (source: Source | Source[], label: string): Weight => {
    const runs = stackRuns(Array.isArray(source) ? source : [source], (p) => ({ native: p instanceof GgmlMatrix ? p.type : null, rows: p instanceof GgmlMatrix ? p.rows : p.shape[0]! }));
    const parts: Weight[] = [];
    try {
      for (const run of runs) {
        if (run[0] instanceof GgmlMatrix) parts.push(createGgmlWeight(r, { source: run as GgmlMatrix[], label: `${label} ${run[0].format}` }));
        else parts.push(createWeight(r, { source: run as Tensor[], format, label: `${label} ${format}` }));
      }
    } catch (e) {
      for (const p of parts) p.free();
      throw e;
    }
    for (const p of parts) bytesOf.set(p.format, (bytesOf.get(p.format) ?? 0) + p.byteLength);
    return keep(stackWeights(r, parts));
  };
  const f32 = (parts: Tensor[], label: string): Tensor => keep(f32Concat(r, parts, label));
  /** A norm weight as the kernels use it: w + normOffset (Gemma's (1 + w), folded in once at load). */
  const norm = (t: Tensor, label: string): Tensor => {
    const out = f32([t], label);
    if (config.normOffset !== 0) {
      const v = out.data() as Float32Array;
      for (let i = 0; i < v.length; i++) v[i]! += config.normOffset;
    }
    return out;
  };

  /** Takes group g from the source into its memory, checks it has every name, runs `build`, frees the group. */
  const withGroup = <T>(g: number, build: (get: (name: string) => Source, tensor: (name: string) => Tensor) => T): T => {
    r = memoryOf(g);
    const tensors = options.source(groups[g]!, r);
    try {
      const get = (name: string): Source => {
        const t = tensors.get(name);
        if (!t) throw new ArgumentError("source", `did not provide tensor ${name}`);
        return t;
      };
      const tensor = (name: string): Tensor => {
        const t = get(name);
        if (t instanceof GgmlMatrix) throw new ArgumentError("source", `provided ${name} as ${t.type} blocks; it must be a float tensor`);
        return t;
      };
      const out = build(get, tensor);
      options.onGroup?.(g + 1, groups.length);
      return out;
    } finally {
      for (const t of tensors.values()) r.free(t instanceof GgmlMatrix ? t.bytes : t);
    }
  };

  try {
    const embedding = withGroup(0, (get) => weight(get("model.embed_tokens.weight"), "embed_tokens"));
    const layers: LayerWeights[] = [];
    for (let l = 0; l < config.numLayers; l++) {
      layers.push(
        withGroup(1 + l, (get, tensor) => {
          const p = `model.layers.${l}`;
          const attn = (m: string) => get(`${p}.self_attn.${m}.weight`);
          const mlp = (m: string) => get(`${p}.mlp.${m}.weight`);
          const vec = (m: string) => tensor(`${p}.${m}`);
          return {
            inputNorm: norm(vec("input_layernorm.weight"), `layer ${l} input_layernorm`),
            qkv: weight(config.fusedProjections ? attn("qkv_proj") : [attn("q_proj"), attn("k_proj"), attn("v_proj")], `layer ${l} qkv_proj`),
            qkvBias: config.qkvBias ? f32([vec("self_attn.q_proj.bias"), vec("self_attn.k_proj.bias"), vec("self_attn.v_proj.bias")], `layer ${l} qkv bias`) : null,
            qNorm: config.qkNorm ? norm(vec("self_attn.q_norm.weight"), `layer ${l} q_norm`) : null,
            kNorm: config.qkNorm ? norm(vec("self_attn.k_norm.weight"), `layer ${l} k_norm`) : null,
            o: weight(attn("o_proj"), `layer ${l} o_proj`),
            oBias: config.oProjBias ? f32([vec("self_attn.o_proj.bias")], `layer ${l} o_proj bias`) : null,
            postNorm: config.sandwichNorms ? norm(vec("pre_feedforward_layernorm.weight"), `layer ${l} pre_feedforward_layernorm`) : norm(vec("post_attention_layernorm.weight"), `layer ${l} post_attention_layernorm`),
            attnOutNorm: config.sandwichNorms ? norm(vec("post_attention_layernorm.weight"), `layer ${l} post_attention_layernorm`) : null,
            mlpOutNorm: config.sandwichNorms ? norm(vec("post_feedforward_layernorm.weight"), `layer ${l} post_feedforward_layernorm`) : null,
            gateUp: weight(config.fusedProjections ? mlp("gate_up_proj") : [mlp("gate_proj"), mlp("up_proj")], `layer ${l} gate_up_proj`),
            gateUpBias: config.mlpBias ? f32([vec("mlp.gate_proj.bias"), vec("mlp.up_proj.bias")], `layer ${l} gate_up bias`) : null,
            down: weight(mlp("down_proj"), `layer ${l} down_proj`),
            downBias: config.mlpBias ? f32([vec("mlp.down_proj.bias")], `layer ${l} down_proj bias`) : null,
          };
        }),
      );
    }
    const { finalNorm, lmHead } = withGroup(config.numLayers + 1, (get, tensor) => ({
      finalNorm: norm(tensor("model.norm.weight"), "model.norm"),
      lmHead: config.tieWordEmbeddings ? embedding : weight(get("lm_head.weight"), "lm_head"),
    }));
    const held = [...bytesOf].sort((a, b) => b[1] - a[1])[0]![0];
    return new DecoderWeights(rt, held, embedding, layers, finalNorm, lmHead);
  } catch (e) {
    for (const m of made) m.free();
    throw e;
  }
}

/**
 * The tensors a checkpoint of a ModelConfig must hold, under their Hugging Face
 * names and shapes (PyTorch nn.Linear layout: weight [out_features, in_features]),
 * and the check of a checkpoint's tensor list against them.
 */
import { ArgumentError } from "../errors.js";
import type { ModelConfig } from "./config.js";

export interface WeightSpec {
  name: string;
  shape: number[];
}

/**
 * Every tensor the decoder reads, in checkpoint order: the embedding, each
 * layer's norms, projections and optional biases / q-k norms, the final norm,
 * and lm_head.weight unless the embeddings are tied.
 *
 *   model.embed_tokens.weight                     [V, hidden]
 *   model.layers.N.input_layernorm.weight         [hidden]
 *   model.layers.N.self_attn.q_proj.weight        [H·D, hidden]    (.bias [H·D] if qkvBias)
 *   model.layers.N.self_attn.k_proj.weight        [Hkv·D, hidden]  (.bias [Hkv·D] if qkvBias)
 *   model.layers.N.self_attn.v_proj.weight        [Hkv·D, hidden]  (.bias [Hkv·D] if qkvBias)
 *   model.layers.N.self_attn.qkv_proj.weight      [(H + 2·Hkv)·D, hidden]  (fusedProjections: q, k, v stacked)
 *   model.layers.N.self_attn.o_proj.weight        [hidden, H·D]    (.bias [hidden] if oProjBias)
 *   model.layers.N.self_attn.q_norm.weight        [D]              (qkNorm)
 *   model.layers.N.self_attn.k_norm.weight        [D]              (qkNorm)
 *   model.layers.N.post_attention_layernorm.weight [hidden]        (Gemma: the attention output's norm)
 *   model.layers.N.pre_feedforward_layernorm.weight [hidden]       (sandwichNorms: the MLP input's norm)
 *   model.layers.N.post_feedforward_layernorm.weight [hidden]      (sandwichNorms: the MLP output's norm)
 *   model.layers.N.mlp.gate_proj.weight           [inter, hidden]  (.bias [inter] if mlpBias)
 *   model.layers.N.mlp.up_proj.weight             [inter, hidden]  (.bias [inter] if mlpBias)
 *   model.layers.N.mlp.gate_up_proj.weight        [2·inter, hidden] (fusedProjections: gate, up stacked)
 *   model.layers.N.mlp.down_proj.weight           [hidden, inter]  (.bias [hidden] if mlpBias)
 *   model.norm.weight                             [hidden]
 *   lm_head.weight                                [V, hidden]      (unless tieWordEmbeddings)
 */
export function expectedWeights(config: ModelConfig): WeightSpec[] {
  const { hiddenSize: h, intermediateSize: inter, numHeads, numKvHeads, headDim: d, vocabSize: v } = config;
  const out: WeightSpec[] = [{ name: "model.embed_tokens.weight", shape: [v, h] }];
  const linear = (name: string, outDim: number, inDim: number, bias: boolean): void => {
    out.push({ name: `${name}.weight`, shape: [outDim, inDim] });
    if (bias) out.push({ name: `${name}.bias`, shape: [outDim] });
  };
  for (let l = 0; l < config.numLayers; l++) {
    const p = `model.layers.${l}`;
    out.push({ name: `${p}.input_layernorm.weight`, shape: [h] });
    if (config.fusedProjections) linear(`${p}.self_attn.qkv_proj`, (numHeads + 2 * numKvHeads) * d, h, config.qkvBias);
    else {
      linear(`${p}.self_attn.q_proj`, numHeads * d, h, config.qkvBias);
      linear(`${p}.self_attn.k_proj`, numKvHeads * d, h, config.qkvBias);
      linear(`${p}.self_attn.v_proj`, numKvHeads * d, h, config.qkvBias);
    }
    linear(`${p}.self_attn.o_proj`, h, numHeads * d, config.oProjBias);
    if (config.qkNorm) {
      out.push({ name: `${p}.self_attn.q_norm.weight`, shape: [d] });
      out.push({ name: `${p}.self_attn.k_norm.weight`, shape: [d] });
    }
    out.push({ name: `${p}.post_attention_layernorm.weight`, shape: [h] });
    if (config.sandwichNorms) {
      out.push({ name: `${p}.pre_feedforward_layernorm.weight`, shape: [h] });
      out.push({ name: `${p}.post_feedforward_layernorm.weight`, shape: [h] });
    }
    if (config.fusedProjections) linear(`${p}.mlp.gate_up_proj`, 2 * inter, h, config.mlpBias);
    else {
      linear(`${p}.mlp.gate_proj`, inter, h, config.mlpBias);
      linear(`${p}.mlp.up_proj`, inter, h, config.mlpBias);
    }
    linear(`${p}.mlp.down_proj`, h, inter, config.mlpBias);
  }
  out.push({ name: "model.norm.weight", shape: [h] });
  if (!config.tieWordEmbeddings) out.push({ name: "lm_head.weight", shape: [v, h] });
  return out;
}

/**
 * Tensors a checkpoint may carry that the decoder does not read: old Llama
 * exports store RoPE's inv_freq buffer, and some tied checkpoints still
 * store lm_head.weight (equal to the embedding, as vLLM assumes).
 */
export function isIgnorableWeight(name: string, config: ModelConfig): boolean {
  if (/^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$/.test(name)) return true;
  return config.tieWordEmbeddings && name === "lm_head.weight";
}

/**
 * Checks a checkpoint's tensors (name → shape) against the config and returns
 * the specs to load (expectedWeights order). Throws one ArgumentError listing the
 * problems: `missing tensor X`, `tensor X has shape [a, b], expected [c, d]`,
 * `unexpected tensor X` (a checkpoint for a different config).
 */
export function checkWeights(config: ModelConfig, available: ReadonlyMap<string, readonly number[]>, source = "checkpoint"): WeightSpec[] {
  const expected = expectedWeights(config);
  const problems: string[] = [];
  for (const spec of expected) {
    const shape = available.get(spec.name);
    if (!shape) problems.push(`missing tensor ${spec.name} (shape [${spec.shape.join(", ")}])`);
    else if (shape.length !== spec.shape.length || shape.some((dim, i) => dim !== spec.shape[i])) {
      problems.push(`tensor ${spec.name} has shape [${shape.join(", ")}], expected [${spec.shape.join(", ")}]`);
    }
  }
  const known = new Set(expected.map((s) => s.name));
  for (const name of available.keys()) {
    if (!known.has(name) && !isIgnorableWeight(name, config)) problems.push(`unexpected tensor ${name} (not part of ${config.architecture} with this config)`);
  }
  if (problems.length > 0) {
    const head = problems.slice(0, 8).join("; ");
    const more = problems.length > 8 ? `; … and ${problems.length - 8} more` : "";
    throw new ArgumentError(source, `does not match config.json (${problems.length} problem${problems.length > 1 ? "s" : ""}): ${head}${more}`);
  }
  return expected;
}

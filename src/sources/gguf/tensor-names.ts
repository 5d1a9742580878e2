/**
 * llama.cpp's tensor names (gguf-py `constants.py` / `tensor_mapping.py`) ↔
 * the Hugging Face names the decoder reads (model/weight-names.ts), and the undoing
 * of the Q/K row permutation llama.cpp's converter applies to `llama`
 * checkpoints.
 *
 * convert_hf_to_gguf.py `LlamaModel.permute` reorders the rows of q_proj (per
 * query head) and k_proj (per KV head) from the HF layout, where a head's
 * rotary pairs are (i, i + D/2), to the interleaved layout llama.cpp's
 * "normal" RoPE rotates, pairs (2i, 2i + 1):
 *
 *   gguf row h·D + 2i + s  =  hf row h·D + s·D/2 + i      (s ∈ {0, 1}, i < D/2)
 *
 * qwen2 and qwen3 use NEOX RoPE (HF's pairing) and are stored unpermuted;
 * so are gemma2 and gemma3 (convert_hf_to_gguf's Gemma2Model / Gemma3Model
 * do not permute), whose four norms a layer map as:
 *
 *   attn_norm → input_layernorm          post_attention_norm → post_attention_layernorm
 *   ffn_norm  → pre_feedforward_layernorm  post_ffw_norm      → post_feedforward_layernorm
 */
import { ArgumentError } from "../../errors.js";

const GLOBAL: Readonly<Record<string, string>> = {
  "token_embd.weight": "model.embed_tokens.weight",
  "output_norm.weight": "model.norm.weight",
  "output.weight": "lm_head.weight",
};

const LAYER: Readonly<Record<string, string>> = {
  "attn_norm.weight": "input_layernorm.weight",
  "attn_q.weight": "self_attn.q_proj.weight",
  "attn_q.bias": "self_attn.q_proj.bias",
  "attn_k.weight": "self_attn.k_proj.weight",
  "attn_k.bias": "self_attn.k_proj.bias",
  "attn_v.weight": "self_attn.v_proj.weight",
  "attn_v.bias": "self_attn.v_proj.bias",
  "attn_output.weight": "self_attn.o_proj.weight",
  "attn_output.bias": "self_attn.o_proj.bias",
  "attn_q_norm.weight": "self_attn.q_norm.weight",
  "attn_k_norm.weight": "self_attn.k_norm.weight",
  "ffn_norm.weight": "post_attention_layernorm.weight",
  "ffn_gate.weight": "mlp.gate_proj.weight",
  "ffn_gate.bias": "mlp.gate_proj.bias",
  "ffn_up.weight": "mlp.up_proj.weight",
  "ffn_up.bias": "mlp.up_proj.bias",
  "ffn_down.weight": "mlp.down_proj.weight",
  "ffn_down.bias": "mlp.down_proj.bias",
};

/** GGUF tensors the decoder does not read as weights (rope_freqs and Phi-3's rope_factors_* are read by the config; attn_rot_embd is RoPE's inv_freq). */
export function isIgnorableGgufTensor(name: string): boolean {
  return name === "rope_freqs.weight" || name === "rope_factors_short.weight" || name === "rope_factors_long.weight" || /^blk\.\d+\.attn_rot_embd(\.weight)?$/.test(name);
}

/** Gemma's sandwich norms (gemma2, gemma3): the names that differ from LAYER's. */
const GEMMA_LAYER: Readonly<Record<string, string>> = {
  ...LAYER,
  "ffn_norm.weight": "pre_feedforward_layernorm.weight",
  "post_attention_norm.weight": "post_attention_layernorm.weight",
  "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
};

/** Phi-3's fused projections (phi3): attn_qkv is q, k, v stacked; ffn_up is gate and up stacked (no ffn_gate). */
const PHI3_LAYER: Readonly<Record<string, string>> = {
  ...LAYER,
  "attn_qkv.weight": "self_attn.qkv_proj.weight",
  "ffn_up.weight": "mlp.gate_up_proj.weight",
};

/** The layer-tensor names of a GGUF architecture (general.architecture). */
function layerNames(arch: string): Readonly<Record<string, string>> {
  return arch === "gemma2" || arch === "gemma3" ? GEMMA_LAYER : arch === "phi3" ? PHI3_LAYER : LAYER;
}

/** The Hugging Face name of a GGUF tensor of architecture `arch`, or null if llama.cpp's name is not one the decoder family uses. */
export function hfTensorName(ggufName: string, arch: string): string | null {
  const global = GLOBAL[ggufName];
  if (global) return global;
  const m = /^blk\.(\d+)\.(.+)$/.exec(ggufName);
  if (!m) return null;
  const rest = layerNames(arch)[m[2]!];
  return rest ? `model.layers.${Number(m[1])}.${rest}` : null;
}

/** Which permuted head count a HF name's rows carry under the `llama` converter: H for q, Hkv for k, else null. */
export function permutedHeads(hfName: string, numHeads: number, numKvHeads: number): number | null {
  if (/\.self_attn\.q_proj\.(weight|bias)$/.test(hfName)) return numHeads;
  if (/\.self_attn\.k_proj\.(weight|bias)$/.test(hfName)) return numKvHeads;
  return null;
}

/**
 * Undoes LlamaModel.permute in place on a row-major [heads·D, cols] matrix
 * (cols = 1 for a bias): row h·D + 2i + s moves to h·D + s·D/2 + i.
 */
export function unpermuteRows(data: Float32Array | Uint8Array, heads: number, cols: number): void {
  const rows = data.length / cols;
  if (!Number.isInteger(rows) || rows % heads !== 0 || (rows / heads) % 2 !== 0) {
    throw new ArgumentError("data", `must hold ${heads} heads of an even number of rows of ${cols} values, got ${data.length} values`);
  }
  moveHeadRows(data, heads, cols, true);
}

/** The inverse of unpermuteRows (what llama.cpp's converter does), for writing test files. */
export function permuteRows(data: Float32Array, heads: number, cols: number): void {
  moveHeadRows(data, heads, cols, false);
}

/** Within each head of D rows: row 2i + s ↔ row s·D/2 + i; `toHalves` picks the direction (llama.cpp's order → HF's). */
function moveHeadRows(data: Float32Array | Uint8Array, heads: number, cols: number, toHalves: boolean): void {
  const d = data.length / cols / heads;
  const head = data.slice(0, d * cols);
  for (let h = 0; h < heads; h++) {
    const base = h * d * cols;
    head.set(data.subarray(base, base + d * cols));
    for (let i = 0; i < d / 2; i++) {
      for (let s = 0; s < 2; s++) {
        const interleaved = 2 * i + s;
        const halves = s * (d / 2) + i;
        const [from, to] = toHalves ? [interleaved, halves] : [halves, interleaved];
        data.set(head.subarray(from * cols, (from + 1) * cols), base + to * cols);
      }
    }
  }
}

/** The GGUF name of a Hugging Face tensor under `arch` (the inverse of hfTensorName), or null. */
export function ggufTensorName(hfName: string, arch: string): string | null {
  for (const [gguf, hf] of Object.entries(GLOBAL)) if (hf === hfName) return gguf;
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hfName);
  if (!m) return null;
  const entry = Object.entries(layerNames(arch)).find(([, hf]) => hf === m[2]);
  return entry ? `blk.${Number(m[1])}.${entry[0]}` : null;
}

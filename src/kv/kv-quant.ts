/**
 * How a paged KV cache stores its values (ARCHITECTURE.md, "Attention semantics"):
 *
 *   f32 | f16 | bf16      stored as is (rounded to nearest even)
 *   int8, per-channel     x = (q + offset) · scale, scale/offset [Hkv, D] given by the
 *                         caller (IFA's antiquant_scale / antiquant_offset)
 *   int8, per-token       x = q · scale, one scale per (token, KV head) computed on
 *                         write from the absolute maximum: scale = max|x| / 127
 *   fp8e4m3 | fp8e5m2     x = fp8(q) · scale, one scale per tensor (vLLM's k_scale /
 *                         v_scale); writes saturate (OCP saturation mode)
 *
 * The mode codes are the ABI of assembly/kv/*.ts.
 */
export type KvCacheDType = "f32" | "f16" | "bf16" | "int8" | "fp8e4m3" | "fp8e5m2";
export const KV_CACHE_DTYPES: readonly KvCacheDType[] = ["f32", "f16", "bf16", "int8", "fp8e4m3", "fp8e5m2"];
/**
 * What a user may ask for (--kv-dtype, loadModel's kvDtype): a cache dtype, "auto"
 * (the checkpoint's), or vLLM's spellings "fp8" (= "fp8_e4m3") and "fp8_e5m2".
 */
export type KvDtypeSetting = KvCacheDType | "auto" | "fp8" | "fp8_e4m3" | "fp8_e5m2";
export const KV_DTYPE_SETTINGS: readonly KvDtypeSetting[] = [...KV_CACHE_DTYPES, "auto", "fp8", "fp8_e4m3", "fp8_e5m2"];

export type KvQuantMode = "none" | "per-tensor" | "per-channel" | "per-token";

export const KV_QUANT_CODE: Readonly<Record<KvQuantMode, number>> = {
  none: 0,
  "per-tensor": 1,
  "per-channel": 2,
  "per-token": 3,
};

/** int8 with caller-given per-channel scales (and optional offsets). */
export interface Int8PerChannel {
  mode: "per-channel";
  /** f32 [Hkv, D] shared by every layer, or [numLayers, Hkv, D]. */
  kScale: ArrayLike<number>;
  vScale: ArrayLike<number>;
  /** Optional, same shape as the scales; default 0. */
  kOffset?: ArrayLike<number>;
  vOffset?: ArrayLike<number>;
}

/** int8 with one symmetric scale per (token, KV head), computed on write. */
export interface Int8PerToken {
  mode: "per-token";
}

export type Int8Scaling = Int8PerChannel | Int8PerToken;

/** fp8 per-tensor scales: one number for every layer, or one per layer. Default 1. */
export interface Fp8Scales {
  kScale?: number | readonly number[];
  vScale?: number | readonly number[];
}

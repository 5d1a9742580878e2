/**
 * The KV cache's storage settings (kv/, below paged-kv-cache.ts and the
 * kernels that read them): dtypes, int8 and fp8 scalings, and the one
 * check of a per-channel setting.
 */
import { ArgumentError, show } from "../errors.js";

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

/** One layer's per-channel parameters, f32 [Hkv, D] each. */
export interface Int8ChannelParams {
  kScale: Float32Array;
  vScale: Float32Array;
  kOffset: Float32Array;
  vOffset: Float32Array;
}

/**
 * Checks an Int8PerChannel setting and returns each layer's scales and
 * offsets f32 [Hkv, D] (a value list of Hkv·D is every layer's, one of
 * numLayers·Hkv·D layer by layer; offsets default 0). Scales must be finite
 * and > 0, offsets finite; errors name the argument (`int8.kScale[i]`). The
 * one reading of the setting, shared by the CPU's PagedKvCache and the
 * WebGPU ModelRunner's cache.
 */
export function int8ChannelParams(int8: Int8PerChannel, numLayers: number, hkv: number, d: number): Int8ChannelParams[] {
  const channels = hkv * d;
  const param = (name: keyof Int8ChannelParams, values: ArrayLike<number> | undefined, layer: number, fallback: number): Float32Array => {
    const out = new Float32Array(channels).fill(fallback);
    if (values === undefined) return out;
    if (values.length !== channels && values.length !== numLayers * channels) {
      throw new ArgumentError(`int8.${name}`, `must have Hkv·D = ${channels} or numLayers·Hkv·D = ${numLayers * channels} values, got ${values.length}`);
    }
    const base = values.length === channels ? 0 : layer * channels;
    for (let i = 0; i < channels; i++) {
      const x = values[base + i]!;
      if (!Number.isFinite(x) || (name.endsWith("Scale") && x <= 0)) {
        throw new ArgumentError(`int8.${name}[${base + i}]`, `must be a finite${name.endsWith("Scale") ? " positive" : ""} number, got ${show(x)}`);
      }
      out[i] = x;
    }
    return out;
  };
  return Array.from({ length: numLayers }, (_, l) => ({
    kScale: param("kScale", int8.kScale, l, 1),
    vScale: param("vScale", int8.vScale, l, 1),
    kOffset: param("kOffset", int8.kOffset, l, 0),
    vOffset: param("vOffset", int8.vOffset, l, 0),
  }));
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

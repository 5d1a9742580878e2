/**
 * The one place K/V storage decodes to f32 in WGSL (as llama.cpp's Vulkan
 * shaders keep dequantization in one shared include). K and V are bound as
 * array<u32> whatever their dtype, so one binding layout serves every dtype
 * and no adapter feature is needed: f16 decodes by its bits (f16-bits.ts,
 * exact, subnormals kept; shader-f16 is not required), bf16 is the high half of an f32.
 * Element e of the tensor is at (word, half) = (e >> 1, e & 1) for 2-byte
 * dtypes, little-endian as the wasm memory stores it.
 *
 * The paged cache also stores the CPU cache's 1-byte dtypes (kv-quant.ts, as
 * the ModelRunner's loader makes them): element e at (word, byte) =
 * (e >> 2, e & 3), and
 *   int8      x = q · scale, the per-token scale (one per slot and KV head,
 *             max|x| / 127) f32 [numSlots, Hkv] stored after the codes in
 *             the same buffer, from word P.kvScaleOff (so no binding changes)
 *   int8, per-channel (code 6)  x = (q + offset) · scale, the static scale
 *             and offset of the element's channel (KV head, dim) given once
 *             (kv-quant.ts Int8PerChannel): scale f32 [Hkv, D] from word
 *             P.kvScaleOff, then offset f32 [Hkv, D], in the same buffer
 *   fp8e4m3   x = e4m3(q)  (per-tensor scale 1, as loadModel makes the cache)
 *   fp8e5m2   x = e5m2(q), the top byte of an f16
 */
import type { DType } from "../../tensor/dtype.js";
import { f16ToF32 } from "./f16-bits.js";

export type GpuKvDtype = Extract<DType, "f32" | "f16" | "bf16">;
export const GPU_KV_DTYPES: readonly GpuKvDtype[] = ["f32", "f16", "bf16"];

/** KV_DTYPE codes of the kernels' `kvDtype` parameter. */
export const GPU_KV_DTYPE_CODE: Readonly<Record<GpuKvDtype, number>> = { f32: 0, f16: 1, bf16: 2 };

/** What the paged cache of the WebGPU ModelRunner stores: the float dtypes and the 1-byte ones. */
export type GpuCacheDtype = GpuKvDtype | "int8" | "fp8e4m3" | "fp8e5m2";
export const GPU_CACHE_DTYPES: readonly GpuCacheDtype[] = [...GPU_KV_DTYPES, "int8", "fp8e4m3", "fp8e5m2"];
export const GPU_CACHE_DTYPE_CODE: Readonly<Record<GpuCacheDtype, number>> = { ...GPU_KV_DTYPE_CODE, int8: 3, fp8e4m3: 4, fp8e5m2: 5 };

/** How an int8 cache scales (kv-quant.ts): per (token, KV head) computed on write, or per channel given once. */
export type GpuInt8Mode = "per-token" | "per-channel";

/** The kernels' kvDtype / dtype code of a cache: GPU_CACHE_DTYPE_CODE, and 6 for int8 with per-channel scales. */
export function cacheCode(dtype: GpuCacheDtype, int8Mode: GpuInt8Mode = "per-token"): number {
  return dtype === "int8" && int8Mode === "per-channel" ? 6 : GPU_CACHE_DTYPE_CODE[dtype];
}

/**
 * One layer's K (or V) buffer of a paged cache [numSlots, Hkv, D] in `dtype`:
 * the codes, then from word `scaleOff` (int8) the per-token scales f32
 * [numSlots, Hkv], or (int8 per-channel) the scales then the offsets f32
 * [Hkv, D]. Bytes are a multiple of 4.
 */
export function cacheLayout(numSlots: number, hkv: number, d: number, dtype: GpuCacheDtype, int8Mode: GpuInt8Mode = "per-token"): { bytes: number; scaleOff: number } {
  const elemBytes = dtype === "f32" ? 4 : dtype === "f16" || dtype === "bf16" ? 2 : 1;
  const dataBytes = Math.ceil((numSlots * hkv * d * elemBytes) / 4) * 4;
  const scaleBytes = dtype !== "int8" ? 0 : int8Mode === "per-channel" ? 2 * hkv * d * 4 : numSlots * hkv * 4;
  return { bytes: dataBytes + scaleBytes, scaleOff: dataBytes / 4 };
}

/** WGSL: fp8 e4m3 (E4M3FN: bias 7, no Inf, S.1111.111 NaN) byte → f32, exact, with no subnormal f32 on the way. */
export const FP8_E4M3_DECODE_WGSL = `fn fp8e4m3(byte: u32) -> f32 {
  let em = byte & 0x7fu;
  if (em == 0x7fu) { return bitcast<f32>(0x7f800000u | (em << 20u)); }
  let ex = em >> 3u;
  let m = f32(em & 7u);
  var x = m * 0.001953125;                                       // subnormal: m · 2^-9
  if (ex != 0u) { x = ldexp(8.0 + m, i32(ex) - 10); }            // (1 + m/8) · 2^(ex − 7)
  return select(x, -x, (byte & 0x80u) != 0u);
}
`;

/**
 * WGSL \`fn <name>(e: u32) -> f32\` reading element e of \`buffer\`, decoded by
 * the dtype code \`P.kvDtype\` (a uniform branch: one pipeline serves every
 * dtype, which keeps shader compiles few — each costs seconds on SwiftShader).
 */
/**
 * As kvLoadFn, for a paged cache [numSlots, Hkv, D] that may hold the 1-byte
 * dtypes too: needs \`P.D\`, \`P.Hkv\`, \`P.kvScaleOff\` and fp8e4m3()
 * (FP8_E4M3_DECODE_WGSL) in scope. Element e belongs to row e / D = slot · Hkv
 * + h, the index of its per-token scale, and to channel e % (Hkv · D) = h · D
 * + i, the index of its per-channel scale and offset (so e counts from the
 * buffer's first code: the caller's kOff / vOff are 0).
 */
export function cacheLoadFn(name: string, buffer: string): string {
  return kvLoadFn(name, buffer).replace(BYTE_MARK, `  if (P.kvDtype >= 3u) {
    let byte = (${buffer}[e >> 2u] >> (8u * (e & 3u))) & 0xffu;
    let q = f32(bitcast<i32>(byte << 24u) >> 24u);
    if (P.kvDtype == 3u) { return q * bitcast<f32>(${buffer}[P.kvScaleOff + e / P.D]); }
    if (P.kvDtype == 6u) {
      let c = P.kvScaleOff + e % (P.Hkv * P.D);
      return (q + bitcast<f32>(${buffer}[c + P.Hkv * P.D])) * bitcast<f32>(${buffer}[c]);
    }
    if (P.kvDtype == 4u) { return fp8e4m3(byte); }
    return ${f16ToF32("byte << 8u")};
  }`);
}

const BYTE_MARK = "  // (1-byte dtypes: cacheLoadFn)";

export function kvLoadFn(name: string, buffer: string): string {
  return `fn ${name}(e: u32) -> f32 {
  if (P.kvDtype == 0u) { return bitcast<f32>(${buffer}[e]); }
${BYTE_MARK}
  let w = ${buffer}[e >> 1u];
  if (P.kvDtype == 1u) { return ${f16ToF32("(w >> ((e & 1u) << 4u)) & 0xffffu")}; }
  return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (e & 1u) == 1u));
}
`;
}

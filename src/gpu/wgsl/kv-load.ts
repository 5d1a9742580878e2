/**
 * The one place K/V storage decodes to f32 in WGSL (as llama.cpp's Vulkan
 * shaders keep dequantization in one shared include). K and V are bound as
 * array<u32> whatever their dtype, so one binding layout serves every dtype
 * and no adapter feature is needed: f16 goes through unpack2x16float (core
 * WGSL; shader-f16 is not required), bf16 is the high half of an f32.
 * Element e of the tensor is at (word, half) = (e >> 1, e & 1) for 2-byte
 * dtypes, little-endian as the wasm memory stores it.
 */
import type { DType } from "../../tensor/dtype.js";

export type GpuKvDtype = Extract<DType, "f32" | "f16" | "bf16">;
export const GPU_KV_DTYPES: readonly GpuKvDtype[] = ["f32", "f16", "bf16"];

/** KV_DTYPE codes of the kernels' `kvDtype` parameter. */
export const GPU_KV_DTYPE_CODE: Readonly<Record<GpuKvDtype, number>> = { f32: 0, f16: 1, bf16: 2 };

/**
 * WGSL \`fn <name>(e: u32) -> f32\` reading element e of \`buffer\`, decoded by
 * the dtype code \`P.kvDtype\` (a uniform branch: one pipeline serves every
 * dtype, which keeps shader compiles few — each costs seconds on SwiftShader).
 */
export function kvLoadFn(name: string, buffer: string): string {
  return `fn ${name}(e: u32) -> f32 {
  if (P.kvDtype == 0u) { return bitcast<f32>(${buffer}[e]); }
  let w = ${buffer}[e >> 1u];
  if (P.kvDtype == 1u) { return unpack2x16float(w)[e & 1u]; }
  return bitcast<f32>(select(w << 16u, w & 0xffff0000u, (e & 1u) == 1u));
}
`;
}

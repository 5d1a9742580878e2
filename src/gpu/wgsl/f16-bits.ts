/**
 * f16 → f32 in WGSL by the bits, as an expression (no function: the kernels
 * that use it are assembled from several generators, and WGSL forbids a
 * function defined twice). Exact for every one of the 65536 codes:
 *
 *   a = h & 0x7fff
 *   normal     a in [0x0400, 0x7c00)  bits (a << 13) + (112 << 23)   (exponent rebased 15 → 127)
 *   ±inf, NaN  a ≥ 0x7c00             bits (a << 13) | 0x7f800000    (payload kept)
 *   subnormal  a < 0x0400             f32(a) · 2⁻²⁴                   (exact, and a normal f32)
 *   sign       bit 15 → bit 31
 *
 * No f32 subnormal appears on the way, so a GPU that flushes them cannot
 * change the result; unpack2x16float may flush f16 subnormals (as the
 * K-quant scales' f16Value in quant-blocks.ts notes). Exactness is the
 * reason, not speed: on an NVIDIA H200 through Dawn (2026-11-27) the decode
 * attention over an f16 cache ran as fast as with unpack2x16float (82 and
 * 84 µs at 4096 keys), and the f16 GEMV (no runner weights are f16: they
 * go up as f32, bf16, q8 or ggml blocks) ran at 0.19 of the copy bandwidth
 * where unpack2x16float's ran at 0.33 (BENCHMARKS.md, webgpu).
 */

/** The f32 of the f16 code in the low 16 bits of `h` (a u32 WGSL expression with nothing above bit 15; evaluated more than once). */
export function f16ToF32(h: string): string {
  const a = `((${h}) & 0x7fffu)`;
  return `bitcast<f32>(select(select((${a} << 13u) + 0x38000000u, (${a} << 13u) | 0x7f800000u, ${a} >= 0x7c00u), bitcast<u32>(f32(${a}) * 5.9604644775390625e-8), ${a} < 0x400u) | (((${h}) & 0x8000u) << 16u))`;
}

/** The two f32s of a u32 word of two f16 codes (low half first), as a vec2<f32> expression; `w` a simple name (evaluated more than once). */
export function f16PairToF32(w: string): string {
  return `vec2<f32>(${f16ToF32(`${w} & 0xffffu`)}, ${f16ToF32(`${w} >> 16u`)})`;
}

// The kernel flavor, chosen at compile time: build/kernels.wasm (SIMD128) and
// build/kernels-relaxed.wasm (asconfig.json target "relaxed": relaxed SIMD
// enabled) compile the same sources; ASC_FEATURE_RELAXED_SIMD picks each
// helper's body and the other is never compiled. Kernels that differ by flavor
// call these helpers (or test RELAXED for a different loop), so every flavor
// difference is listed here or next to a `RELAXED` test.
//
// Determinism: each helper does the same arithmetic wherever it is called, so
// within one flavor a token's output does not depend on its batch or thread
// count. Across flavors results differ by rounding (FMA rounds once).

/** True in build/kernels-relaxed.wasm. */
export const RELAXED: bool = ASC_FEATURE_RELAXED_SIMD;

// The q8 / q4 kernels' integer dot products, one per runtime (LinearArgs.dot,
// ActArgs.dot; src/runtime/module.ts Int8DotMode). Each gives the same exact
// int32 sums, so a flavor's outputs do not depend on the mode.

/** int16 activation codes and i32x4.dot_i16x8_s: the baseline flavor's, and the relaxed flavor's on x64 without AVX-VNNI ("i16"). */
export const DOT_I16: i32 = 0;
/** Relaxed: int8 activation codes and the relaxed int8 dot on |w|, the weight's sign moved onto the codes ("i7", dotI8U7). */
export const DOT_I7: i32 = 1;
/** Relaxed: activation codes + 128 and the relaxed int8 dot read unsigned, where it lowers to AVX-VNNI vpdpbusd ("u8", dotI8U8). */
export const DOT_U8: i32 = 2;

/** Whether a q8 / q4 kernel in this mode takes int8 activation codes (the relaxed dot), not int16. */
@inline export function int8Codes(mode: i32): bool {
  return RELAXED && mode != DOT_I16;
}

/** acc + a·b on f32x4: one fused multiply-add (relaxed_madd, single rounding where the CPU has FMA), else mul then add. */
@inline export function fmadd(a: v128, b: v128, acc: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return f32x4.relaxed_madd(a, b, acc);
  return f32x4.add(acc, f32x4.mul(a, b));
}

/**
 * acc + the int8 dot products of a (i8x16, any sign) with b (i8x16 whose bytes
 * are all in [0, 127]): lane i += Σ_k a[4i + k] · b[4i + k]. With b's top bits
 * clear, the relaxed int8 dot is exact on every CPU (x86's pmaddubsw sums two
 * products of at most 127 · 128 in int16 without saturating). V8 emits one
 * vpdpbusd for it on CPUs with AVX-VNNI. V8 11.3 (Node 20 with
 * --experimental-wasm-relaxed-simd) miscompiles it (2·dot, accumulator
 * dropped), so src/runtime/module.ts offers this flavor only on V8 ≥ 11.4.
 */
@inline export function dotI8U7(a: v128, b: v128, acc: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, acc);
  // Exact by widening: pairs (2i, 2i + 1) of lo and hi, then adjacent pairs summed.
  const lo = i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(a), i16x8.extend_low_i8x16_u(b));
  const hi = i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(a), i16x8.extend_high_i8x16_u(b));
  return i32x4.add(acc, i32x4.add(i32x4.shuffle(lo, hi, 0, 2, 4, 6), i32x4.shuffle(lo, hi, 1, 3, 5, 7)));
}

/**
 * The int8 products of a (i8x16, any sign) and b (bytes in [0, 127]) summed in
 * adjacent pairs, as i16x8: lane j = a[2j]·b[2j] + a[2j + 1]·b[2j + 1]. The
 * caller keeps every lane below 2^15 in magnitude, also after it adds such
 * results in int16 (then i32x4.extadd_pairwise_i16x8_s gives dotI8U7's row
 * sums). On x64 this is one pmaddubsw: the form for CPUs where the relaxed
 * i32x4 dot is pmaddubsw + pmaddwd + paddd behind two instructions V8 spends
 * rebuilding pmaddwd's ones at each use (src/runtime/module.ts
 * Int8DotLowering "saturating"). The baseline body widens to int16, exact.
 */
@inline export function dotI8U7Pairs(a: v128, b: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i16x8.relaxed_dot_i8x16_i7x16_s(a, b);
  const even = i16x8.mul(i16x8.shr_s(i16x8.shl(a, 8), 8), v128.and(b, i16x8.splat(0xff)));
  return i16x8.add(even, i16x8.mul(i16x8.shr_s(a, 8), i16x8.shr_u(b, 8)));
}

/**
 * acc + Σ_k a[4i + k] · b[4i + k] per lane with b read as exact unsigned 8 bits
 * (a: i8x16, any sign; b: u8x16, any byte). Call it only in the "u8" int8-dot
 * mode (src/runtime/module.ts probeInt8Dot): where V8 lowers the relaxed int8
 * dot to AVX-VNNI vpdpbusd (V8 ≥ 13 on such CPUs), which reads b unsigned and
 * sums in int32 without saturating. Elsewhere the relaxed op reads b's top bit
 * as a sign (ARM sdot) or saturates int16 pair sums (pmaddubsw), and the
 * kernels take their "i7" path (dotI8U7). The baseline body widens b unsigned,
 * exact too, though the baseline kernels never take the u8 path.
 */
@inline export function dotI8U8(a: v128, b: v128, acc: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) return i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, acc);
  return dotI8U7(a, b, acc);
}

// The throughput of i32x4.dot_i16x8_s (pmaddwd on x64) in this V8 on this CPU:
// 16 dots and 16 adds an iteration in 8 independent accumulator chains, no loads,
// the same dot-and-add pairs the int16 q8 kernels issue (assembly/linalg/gemm.ts
// gemmQ8Rows8I16). Compiled by tools/int16-dot-bound/measure.mjs, not by the build.
export function dots(n: i32, seed: i32): i32 {
  const a = i16x8.splat(<i16>seed), b = i16x8.splat(<i16>(seed + 1)), c = i16x8.splat(<i16>(seed + 2)), d = i16x8.splat(<i16>(seed + 3));
  let s0 = i32x4.splat(0), s1 = i32x4.splat(0), s2 = i32x4.splat(0), s3 = i32x4.splat(0);
  let s4 = i32x4.splat(0), s5 = i32x4.splat(0), s6 = i32x4.splat(0), s7 = i32x4.splat(0);
  for (let i = 0; i < n; i++) {
    s0 = i32x4.add(i32x4.add(s0, i32x4.dot_i16x8_s(a, b)), i32x4.dot_i16x8_s(c, d));
    s1 = i32x4.add(i32x4.add(s1, i32x4.dot_i16x8_s(a, c)), i32x4.dot_i16x8_s(b, d));
    s2 = i32x4.add(i32x4.add(s2, i32x4.dot_i16x8_s(a, d)), i32x4.dot_i16x8_s(b, c));
    s3 = i32x4.add(i32x4.add(s3, i32x4.dot_i16x8_s(b, b)), i32x4.dot_i16x8_s(c, c));
    s4 = i32x4.add(i32x4.add(s4, i32x4.dot_i16x8_s(d, d)), i32x4.dot_i16x8_s(a, a));
    s5 = i32x4.add(i32x4.add(s5, i32x4.dot_i16x8_s(d, a)), i32x4.dot_i16x8_s(c, b));
    s6 = i32x4.add(i32x4.add(s6, i32x4.dot_i16x8_s(c, a)), i32x4.dot_i16x8_s(d, b));
    s7 = i32x4.add(i32x4.add(s7, i32x4.dot_i16x8_s(b, a)), i32x4.dot_i16x8_s(d, c));
  }
  const t = i32x4.add(i32x4.add(i32x4.add(s0, s1), i32x4.add(s2, s3)), i32x4.add(i32x4.add(s4, s5), i32x4.add(s6, s7)));
  return i32x4.extract_lane(t, 0) + i32x4.extract_lane(t, 3);
}

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

// The same 16 dots and 16 adds with their operands loaded as a q8 tile step
// loads them, from a few KB kept in L1 (fill() writes them; weights at 4096,
// activation codes at 12288):
//   tileStep   gemm.ts gemmQ8I16Rows8's step: both halves' two column pairs (4
//              weight loads) × 4 tokens (2 splats each: 8 vbroadcastss);
//   tileStep16 16 rows × 2 tokens, two one-pair steps: 8 weight loads, 4 splats.
const PROBE_W: usize = 4096;
const PROBE_X: usize = 12288;

export function fill(): void {
  for (let i: usize = 0; i < 16384; i += 2) store<i16>(PROBE_W + i, <i16>((i * 7) & 63));
}

export function tileStep(n: i32): i32 {
  let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
  let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0);
  for (let i = 0; i < n; i++) {
    const w = PROBE_W + (<usize>(i & 63) << 5);
    const x0 = PROBE_X + (<usize>(i & 63) << 3), x1 = x0 + 512, x2 = x1 + 512, x3 = x2 + 512;
    const al = v128.load(w), ah = v128.load(w, 16), bl = v128.load(w, 2048), bh = v128.load(w, 2064);
    let p = v128.load32_splat(x0), q = v128.load32_splat(x0, 4);
    a0 = i32x4.add(i32x4.add(a0, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
    b0 = i32x4.add(i32x4.add(b0, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
    p = v128.load32_splat(x1);
    q = v128.load32_splat(x1, 4);
    a1 = i32x4.add(i32x4.add(a1, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
    b1 = i32x4.add(i32x4.add(b1, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
    p = v128.load32_splat(x2);
    q = v128.load32_splat(x2, 4);
    a2 = i32x4.add(i32x4.add(a2, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
    b2 = i32x4.add(i32x4.add(b2, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
    p = v128.load32_splat(x3);
    q = v128.load32_splat(x3, 4);
    a3 = i32x4.add(i32x4.add(a3, i32x4.dot_i16x8_s(al, p)), i32x4.dot_i16x8_s(ah, q));
    b3 = i32x4.add(i32x4.add(b3, i32x4.dot_i16x8_s(bl, p)), i32x4.dot_i16x8_s(bh, q));
  }
  const t = i32x4.add(i32x4.add(i32x4.add(a0, a1), i32x4.add(a2, a3)), i32x4.add(i32x4.add(b0, b1), i32x4.add(b2, b3)));
  return i32x4.extract_lane(t, 0) + i32x4.extract_lane(t, 3);
}

export function tileStep16(n: i32): i32 {
  let a0 = i32x4.splat(0), a1 = i32x4.splat(0), b0 = i32x4.splat(0), b1 = i32x4.splat(0);
  let c0 = i32x4.splat(0), c1 = i32x4.splat(0), d0 = i32x4.splat(0), d1 = i32x4.splat(0);
  for (let i = 0; i < n; i++) {
    const w = PROBE_W + (<usize>(i & 63) << 5);
    const x0 = PROBE_X + (<usize>(i & 63) << 3), x1 = x0 + 512;
    for (let s: usize = 0; s < 32; s += 16) {
      const wa = v128.load(w + s), wb = v128.load(w + s, 2048), wc = v128.load(w + s, 4096), wd = v128.load(w + s, 6144);
      let p = v128.load32_splat(x0 + (s >> 2));
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(wa, p));
      b0 = i32x4.add(b0, i32x4.dot_i16x8_s(wb, p));
      c0 = i32x4.add(c0, i32x4.dot_i16x8_s(wc, p));
      d0 = i32x4.add(d0, i32x4.dot_i16x8_s(wd, p));
      p = v128.load32_splat(x1 + (s >> 2));
      a1 = i32x4.add(a1, i32x4.dot_i16x8_s(wa, p));
      b1 = i32x4.add(b1, i32x4.dot_i16x8_s(wb, p));
      c1 = i32x4.add(c1, i32x4.dot_i16x8_s(wc, p));
      d1 = i32x4.add(d1, i32x4.dot_i16x8_s(wd, p));
    }
  }
  const t = i32x4.add(i32x4.add(i32x4.add(a0, a1), i32x4.add(b0, b1)), i32x4.add(i32x4.add(c0, c1), i32x4.add(d0, d1)));
  return i32x4.extract_lane(t, 0) + i32x4.extract_lane(t, 3);
}

// gemm.ts gemmQ8I16Rows8ByPair's step (the baseline flavor's prefill tile): both halves × 4 tokens, one column pair a step (2 weight loads, 4 splats), two steps an iteration.
export function tileStepByPair(n: i32): i32 {
  let a0 = i32x4.splat(0), a1 = i32x4.splat(0), a2 = i32x4.splat(0), a3 = i32x4.splat(0);
  let b0 = i32x4.splat(0), b1 = i32x4.splat(0), b2 = i32x4.splat(0), b3 = i32x4.splat(0);
  for (let i = 0; i < n; i++) {
    const w = PROBE_W + (<usize>(i & 63) << 5);
    const x0 = PROBE_X + (<usize>(i & 63) << 3), x1 = x0 + 512, x2 = x1 + 512, x3 = x2 + 512;
    for (let s: usize = 0; s < 32; s += 16) {
      const wa = v128.load(w + s), wb = v128.load(w + s, 2048);
      let p = v128.load32_splat(x0 + (s >> 2));
      a0 = i32x4.add(a0, i32x4.dot_i16x8_s(wa, p));
      b0 = i32x4.add(b0, i32x4.dot_i16x8_s(wb, p));
      p = v128.load32_splat(x1 + (s >> 2));
      a1 = i32x4.add(a1, i32x4.dot_i16x8_s(wa, p));
      b1 = i32x4.add(b1, i32x4.dot_i16x8_s(wb, p));
      p = v128.load32_splat(x2 + (s >> 2));
      a2 = i32x4.add(a2, i32x4.dot_i16x8_s(wa, p));
      b2 = i32x4.add(b2, i32x4.dot_i16x8_s(wb, p));
      p = v128.load32_splat(x3 + (s >> 2));
      a3 = i32x4.add(a3, i32x4.dot_i16x8_s(wa, p));
      b3 = i32x4.add(b3, i32x4.dot_i16x8_s(wb, p));
    }
  }
  const t = i32x4.add(i32x4.add(i32x4.add(a0, a1), i32x4.add(a2, a3)), i32x4.add(i32x4.add(b0, b1), i32x4.add(b2, b3)));
  return i32x4.extract_lane(t, 0) + i32x4.extract_lane(t, 3);
}

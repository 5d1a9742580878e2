// SwiGLU's activation (Shazeer 2020, "GLU Variants Improve Transformer"):
//   out = silu(gate) ⊙ up,  silu(x) = x / (1 + e^(−x))
// with a vectorized e^x: Cody–Waite range reduction x = n·ln2 + r and a
// degree-6 polynomial for e^r (Cephes expf coefficients, as in sse_mathfun),
// 2^n built in the exponent bits; ≤ 2 ulp on [−87.3, 88.3].

const LOG2E: f32 = 1.44269504088896341;
const LN2_HI: f32 = 0.693359375;
const LN2_LO: f32 = -2.12194440e-4;

/**
 * e^x for four lanes. Inputs are clamped to [−87.3, 88.8]: below, the result
 * stays at 1.2e−38 (silu only adds it to 1); from 88.38 up, 2^n overflows and
 * the result is +Inf, where e^x is within a factor 1.5 of f32's largest.
 */
@inline function expf4(x: v128): v128 {
  x = f32x4.min(f32x4.max(x, f32x4.splat(-87.3)), f32x4.splat(88.8));
  const n = f32x4.nearest(f32x4.mul(x, f32x4.splat(LOG2E)));
  let r = f32x4.sub(x, f32x4.mul(n, f32x4.splat(LN2_HI)));
  r = f32x4.sub(r, f32x4.mul(n, f32x4.splat(LN2_LO)));
  let y = f32x4.splat(1.9875691500e-4);
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(1.3981999507e-3));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(8.3334519073e-3));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(4.1665795894e-2));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(1.6666665459e-1));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(5.0000001201e-1));
  y = f32x4.add(f32x4.add(f32x4.mul(f32x4.mul(y, r), r), r), f32x4.splat(1));
  const pow2n = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(n), i32x4.splat(127)), 23);
  return f32x4.mul(y, pow2n);
}

@inline function silu4(g: v128): v128 {
  return f32x4.div(g, f32x4.add(f32x4.splat(1), expf4(f32x4.neg(g))));
}

@unmanaged class SwigluArgs {
  /** f32 [T, n] views, rows *Stride bytes apart. */
  gate: usize;
  gateStride: i32;
  up: usize;
  upStride: i32;
  out: usize;
  outStride: i32;
  n: i32;
  /** Columns per work item (a multiple of 4); item = row · chunksPerRow + chunk. */
  chunk: i32;
  chunksPerRow: i32;
}

export function task_swiglu(item: i32, tid: i32, args: usize): void {
  const a = changetype<SwigluArgs>(args);
  const row = item / a.chunksPerRow;
  const c0 = (item - row * a.chunksPerRow) * a.chunk;
  const c1 = min(a.n, c0 + a.chunk);
  const g = a.gate + <usize>row * <usize>a.gateStride;
  const u = a.up + <usize>row * <usize>a.upStride;
  const o = a.out + <usize>row * <usize>a.outStride;
  let i = c0;
  for (; i + 4 <= c1; i += 4) {
    const b = <usize>i << 2;
    v128.store(o + b, f32x4.mul(silu4(v128.load(g + b)), v128.load(u + b)));
  }
  if (i < c1) {
    // Tail: the last 1–3 columns, one lane each.
    for (; i < c1; i++) {
      const b = <usize>i << 2;
      const s = silu4(f32x4.splat(load<f32>(g + b)));
      store<f32>(o + b, f32x4.extract_lane(s, 0) * load<f32>(u + b));
    }
  }
}

// RMSNorm (Zhang & Sennrich 2019), as Llama / Qwen compute it in f32:
//   out = w ⊙ (x · 1/sqrt(mean(x²) + eps))
// over rows of any length D, one row per work-item step (also Qwen3's per-head
// q/k norm on [T·H, D]). Optionally fused with the residual add before it
// (vLLM's fused_add_rms_norm): x ← x + delta, then out = norm(x).

import { load4AsF32, loadAsF32 } from "../tensor/dtype";

@unmanaged class RmsNormArgs {
  /**
   * f32 rows of length D; row r at (r / inner)·xOuter + (r % inner)·xInner
   * bytes (a [T, H, D] view's tokens and heads). Updated in place when delta ≠ 0.
   */
  x: usize;
  xInner: i32;
  xOuter: i32;
  /** f32 rows added to x first (same addressing), or 0. */
  delta: usize;
  deltaInner: i32;
  deltaOuter: i32;
  /** f32 result rows (may be x or delta itself). */
  out: usize;
  outInner: i32;
  outOuter: i32;
  inner: i32;
  /** [D] of dtype weightDt (f32 | f16 | bf16). */
  weight: usize;
  weightDt: i32;
  d: i32;
  rows: i32;
  rowsPerItem: i32;
  eps: f32;
}

@inline function rowAddress(base: usize, r: i32, inner: i32, innerStride: i32, outerStride: i32): usize {
  const o = r / inner;
  return base + <usize>o * <usize>outerStride + <usize>(r - o * inner) * <usize>innerStride;
}

export function task_rmsnorm(item: i32, tid: i32, args: usize): void {
  const a = changetype<RmsNormArgs>(args);
  const r0 = item * a.rowsPerItem;
  const r1 = min(a.rows, r0 + a.rowsPerItem);
  const d = a.d;
  const d4 = d & ~3;
  for (let r = r0; r < r1; r++) {
    const x = rowAddress(a.x, r, a.inner, a.xInner, a.xOuter);
    const out = rowAddress(a.out, r, a.inner, a.outInner, a.outOuter);
    if (a.delta) {
      const dl = rowAddress(a.delta, r, a.inner, a.deltaInner, a.deltaOuter);
      let i = 0;
      for (; i < d4; i += 4) {
        const o = <usize>i << 2;
        v128.store(x + o, f32x4.add(v128.load(x + o), v128.load(dl + o)));
      }
      for (; i < d; i++) store<f32>(x + (<usize>i << 2), load<f32>(x + (<usize>i << 2)) + load<f32>(dl + (<usize>i << 2)));
    }
    // Sum of squares: two f32x4 accumulators, then the tail.
    let s0 = f32x4.splat(0), s1 = f32x4.splat(0);
    let i = 0;
    for (; i + 8 <= d; i += 8) {
      const v = v128.load(x + (<usize>i << 2)), u = v128.load(x + (<usize>i << 2), 16);
      s0 = f32x4.add(s0, f32x4.mul(v, v));
      s1 = f32x4.add(s1, f32x4.mul(u, u));
    }
    for (; i < d4; i += 4) {
      const v = v128.load(x + (<usize>i << 2));
      s0 = f32x4.add(s0, f32x4.mul(v, v));
    }
    s0 = f32x4.add(s0, s1);
    let ss = (f32x4.extract_lane(s0, 0) + f32x4.extract_lane(s0, 1)) + (f32x4.extract_lane(s0, 2) + f32x4.extract_lane(s0, 3));
    for (; i < d; i++) {
      const v = load<f32>(x + (<usize>i << 2));
      ss += v * v;
    }
    const inv = <f32>(1 / Math.sqrt(<f64>(ss / <f32>d + a.eps)));
    const vinv = f32x4.splat(inv);
    i = 0;
    for (; i < d4; i += 4) {
      const o = <usize>i << 2;
      v128.store(out + o, f32x4.mul(load4AsF32(a.weightDt, a.weight, <usize>i), f32x4.mul(v128.load(x + o), vinv)));
    }
    for (; i < d; i++) {
      const o = <usize>i << 2;
      store<f32>(out + o, loadAsF32(a.weightDt, a.weight, <usize>i) * (load<f32>(x + o) * inv));
    }
  }
}

// LayerNorm (Ba et al. 2016) as torch.nn.LayerNorm computes it, fused with
// post-LN BERT's residual add (transformers' BertSelfOutput / BertOutput:
// LayerNorm(hidden + input)):
//   s = x + delta (delta optional),  out = (s − mean(s)) / sqrt(var(s) + eps) ⊙ w + b
// with the biased variance and eps inside the square root. Rows of any length
// D, one row at a time, RMSNorm's work split (rmsnorm.ts): a work item is a
// run of rowsPerItem rows. Two passes over s for the statistics (mean, then
// the sum of squared deviations: no E[s²] − mean² cancellation), a third
// writes out; s is recomputed from x and delta each pass rather than stored,
// so x and delta are only read (out may be either of them: every element is
// read before its own store, and a row's reads all precede its stores).

@unmanaged class LayerNormArgs {
  /** f32 [rows, D], rows xStride bytes apart. */
  x: usize;
  xStride: i32;
  /** f32 [rows, D] added to x, rows deltaStride bytes apart, or 0. */
  delta: usize;
  deltaStride: i32;
  /** f32 [rows, D] result, rows outStride bytes apart (may be x or delta). */
  out: usize;
  outStride: i32;
  /** f32 [D] gain and bias. */
  weight: usize;
  bias: usize;
  d: i32;
  rows: i32;
  rowsPerItem: i32;
  eps: f32;
}

/** s[i..i+4) = x + delta (delta = 0: x alone). */
@inline function sum4(x: usize, dl: usize, o: usize): v128 {
  return dl ? f32x4.add(v128.load(x + o), v128.load(dl + o)) : v128.load(x + o);
}

@inline function sum1(x: usize, dl: usize, o: usize): f32 {
  return dl ? load<f32>(x + o) + load<f32>(dl + o) : load<f32>(x + o);
}

@inline function lanes(v: v128): f32 {
  return (f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1)) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

/** mean(s) of one row: two f32x4 accumulators, then the tail. */
@inline function rowMean(x: usize, dl: usize, d: i32): f32 {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0);
  let i = 0;
  for (; i + 8 <= d; i += 8) {
    const o = <usize>i << 2;
    a0 = f32x4.add(a0, sum4(x, dl, o));
    a1 = f32x4.add(a1, sum4(x, dl, o + 16));
  }
  for (; i + 4 <= d; i += 4) a0 = f32x4.add(a0, sum4(x, dl, <usize>i << 2));
  let s = lanes(f32x4.add(a0, a1));
  for (; i < d; i++) s += sum1(x, dl, <usize>i << 2);
  return s / <f32>d;
}

/** Σ (s − mean)² of one row. */
@inline function rowSquares(x: usize, dl: usize, d: i32, mean: f32): f32 {
  const m = f32x4.splat(mean);
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0);
  let i = 0;
  for (; i + 8 <= d; i += 8) {
    const o = <usize>i << 2;
    const u = f32x4.sub(sum4(x, dl, o), m), v = f32x4.sub(sum4(x, dl, o + 16), m);
    a0 = f32x4.add(a0, f32x4.mul(u, u));
    a1 = f32x4.add(a1, f32x4.mul(v, v));
  }
  for (; i + 4 <= d; i += 4) {
    const u = f32x4.sub(sum4(x, dl, <usize>i << 2), m);
    a0 = f32x4.add(a0, f32x4.mul(u, u));
  }
  let s = lanes(f32x4.add(a0, a1));
  for (; i < d; i++) {
    const u = sum1(x, dl, <usize>i << 2) - mean;
    s += u * u;
  }
  return s;
}

export function task_layernorm(item: i32, tid: i32, args: usize): void {
  const a = changetype<LayerNormArgs>(args);
  const r0 = item * a.rowsPerItem;
  const r1 = min(a.rows, r0 + a.rowsPerItem);
  const d = a.d;
  const w = a.weight, b = a.bias;
  for (let r = r0; r < r1; r++) {
    const x = a.x + <usize>r * <usize>a.xStride;
    const dl = a.delta ? a.delta + <usize>r * <usize>a.deltaStride : 0;
    const out = a.out + <usize>r * <usize>a.outStride;
    const mean = rowMean(x, dl, d);
    const inv = <f32>(1 / Math.sqrt(<f64>(rowSquares(x, dl, d, mean) / <f32>d + a.eps)));
    const m = f32x4.splat(mean), vinv = f32x4.splat(inv);
    let i = 0;
    for (; i + 4 <= d; i += 4) {
      const o = <usize>i << 2;
      const n = f32x4.mul(f32x4.sub(sum4(x, dl, o), m), vinv);
      v128.store(out + o, f32x4.add(f32x4.mul(n, v128.load(w + o)), v128.load(b + o)));
    }
    for (; i < d; i++) {
      const o = <usize>i << 2;
      store<f32>(out + o, (sum1(x, dl, o) - mean) * inv * load<f32>(w + o) + load<f32>(b + o));
    }
  }
}

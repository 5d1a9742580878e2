// Rotary position embedding (Su et al. 2021, RoFormer) in Hugging Face's
// rotate-half convention: dimension i pairs with i + R/2 (R = rotary dims,
// the first R of each head; the rest pass through):
//   out[i]       = x[i] · cos θ_i − x[i + R/2] · sin θ_i
//   out[i + R/2] = x[i + R/2] · cos θ_i + x[i] · sin θ_i
// θ_i = f32(position) · inv_freq[i] rounded to f32, as transformers and vLLM
// compute it; cos/sin are then evaluated accurately (f64) into a per-step table
// [T, R/2] that every layer reuses.

@unmanaged class RopeTableArgs {
  /** int32 [T] positions. */
  positions: usize;
  /** f32 [R/2] inverse frequencies. */
  invFreq: usize;
  half: i32;
  /** f32 [T, R/2] each. */
  cos: usize;
  sin: usize;
}

/** Item t fills row t of the cos/sin tables. */
export function task_rope_table(item: i32, tid: i32, args: usize): void {
  const a = changetype<RopeTableArgs>(args);
  const pos = <f32>load<i32>(a.positions + (<usize>item << 2));
  const row = <usize>item * <usize>a.half << 2;
  for (let i = 0; i < a.half; i++) {
    const o = <usize>i << 2;
    const theta = <f64>(pos * load<f32>(a.invFreq + o));
    store<f32>(a.cos + row + o, <f32>Math.cos(theta));
    store<f32>(a.sin + row + o, <f32>Math.sin(theta));
  }
}

@unmanaged class RopeArgs {
  /** f32 [T, heads, D] views: tokens tokenStride bytes apart, heads D apart. */
  q: usize;
  qTokenStride: i32;
  qHeads: i32;
  k: usize;
  kTokenStride: i32;
  kHeads: i32;
  headDim: i32;
  half: i32;
  /** f32 [T, half] tables from task_rope_table. */
  cos: usize;
  sin: usize;
}

@inline function rotate(p: usize, c: usize, s: usize, half: i32): void {
  const h = <usize>half << 2;
  let i = 0;
  for (; i + 4 <= half; i += 4) {
    const o = <usize>i << 2;
    const x1 = v128.load(p + o), x2 = v128.load(p + o + h);
    const cv = v128.load(c + o), sv = v128.load(s + o);
    v128.store(p + o, f32x4.sub(f32x4.mul(x1, cv), f32x4.mul(x2, sv)));
    v128.store(p + o + h, f32x4.add(f32x4.mul(x2, cv), f32x4.mul(x1, sv)));
  }
  for (; i < half; i++) {
    const o = <usize>i << 2;
    const x1 = load<f32>(p + o), x2 = load<f32>(p + o + h);
    const cv = load<f32>(c + o), sv = load<f32>(s + o);
    store<f32>(p + o, x1 * cv - x2 * sv);
    store<f32>(p + o + h, x2 * cv + x1 * sv);
  }
}

/** Item t rotates every q and k head of token t in place. */
export function task_rope(item: i32, tid: i32, args: usize): void {
  const a = changetype<RopeArgs>(args);
  const row = <usize>item * <usize>a.half << 2;
  const c = a.cos + row, s = a.sin + row;
  const headBytes = <usize>a.headDim << 2;
  let p = a.q + <usize>item * <usize>a.qTokenStride;
  for (let h = 0; h < a.qHeads; h++, p += headBytes) rotate(p, c, s, a.half);
  if (a.k) {
    p = a.k + <usize>item * <usize>a.kTokenStride;
    for (let h = 0; h < a.kHeads; h++, p += headBytes) rotate(p, c, s, a.half);
  }
}

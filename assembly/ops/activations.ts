// The gated MLP activations (Shazeer 2020, "GLU Variants Improve Transformer"):
//   SwiGLU (Llama, Qwen, Phi-3):  out = silu(gate) ⊙ up,  silu(x) = x / (1 + e^(−x))
//   GeGLU (Gemma, tanh GELU):     out = gelu(gate) ⊙ up,
//     gelu(x) = ½x(1 + tanh(u)) = x / (1 + e^(−2u)),  u = √(2/π)·(x + 0.044715·x³)
//   (PyTorch's gelu(approximate="tanh"), transformers' gelu_pytorch_tanh)
// with a vectorized e^x: Cody–Waite range reduction x = n·ln2 + r and a
// degree-6 polynomial for e^r (Cephes expf coefficients, as in sse_mathfun),
// 2^n built in the exponent bits; ≤ 2 ulp on [−87.3, 88.3].

const LOG2E: f32 = 1.44269504088896341;
const LN2_HI: f32 = 0.693359375;
const LN2_LO: f32 = -2.12194440e-4;

/**
 * The constants of expf4At as 16-byte rows: a kernel passes this
 * address and each use is one load, where V8 13 (Node 24) rebuilds a splat
 * constant at every use inside a loop (three instructions;
 * tools/v128-const-audit.mjs). Same arithmetic, same bits as with splats.
 */
const SILU_CONSTS: usize = memory.data<f32>([
  -87.3, -87.3, -87.3, -87.3,
  88.8, 88.8, 88.8, 88.8,
  LOG2E, LOG2E, LOG2E, LOG2E,
  LN2_HI, LN2_HI, LN2_HI, LN2_HI,
  LN2_LO, LN2_LO, LN2_LO, LN2_LO,
  1.9875691500e-4, 1.9875691500e-4, 1.9875691500e-4, 1.9875691500e-4,
  1.3981999507e-3, 1.3981999507e-3, 1.3981999507e-3, 1.3981999507e-3,
  8.3334519073e-3, 8.3334519073e-3, 8.3334519073e-3, 8.3334519073e-3,
  4.1665795894e-2, 4.1665795894e-2, 4.1665795894e-2, 4.1665795894e-2,
  1.6666665459e-1, 1.6666665459e-1, 1.6666665459e-1, 1.6666665459e-1,
  5.0000001201e-1, 5.0000001201e-1, 5.0000001201e-1, 5.0000001201e-1,
  1, 1, 1, 1,
  reinterpret<f32>(127), reinterpret<f32>(127), reinterpret<f32>(127), reinterpret<f32>(127),
], 16);

/**
 * e^x for four lanes, constants from SILU_CONSTS at c. Inputs are clamped to
 * [−87.3, 88.8]: below, the result stays at 1.2e−38 (silu only adds it to 1);
 * from 88.38 up, 2^n overflows and the result is +Inf, where e^x is within a
 * factor 1.5 of f32's largest.
 */
@inline function expf4At(x: v128, c: usize): v128 {
  x = f32x4.min(f32x4.max(x, v128.load(c)), v128.load(c, 16));
  const n = f32x4.nearest(f32x4.mul(x, v128.load(c, 32)));
  let r = f32x4.sub(x, f32x4.mul(n, v128.load(c, 48)));
  r = f32x4.sub(r, f32x4.mul(n, v128.load(c, 64)));
  let y = v128.load(c, 80);
  y = f32x4.add(f32x4.mul(y, r), v128.load(c, 96));
  y = f32x4.add(f32x4.mul(y, r), v128.load(c, 112));
  y = f32x4.add(f32x4.mul(y, r), v128.load(c, 128));
  y = f32x4.add(f32x4.mul(y, r), v128.load(c, 144));
  y = f32x4.add(f32x4.mul(y, r), v128.load(c, 160));
  y = f32x4.add(f32x4.add(f32x4.mul(f32x4.mul(y, r), r), r), v128.load(c, 176));
  const pow2n = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(n), v128.load(c, 192)), 23);
  return f32x4.mul(y, pow2n);
}

@inline function silu4(g: v128, c: usize): v128 {
  return f32x4.div(g, f32x4.add(v128.load(c, 176), expf4At(f32x4.neg(g), c)));
}

/** √(2/π)·2 and 0.044715 for gelu4 (splat once per call, outside the loops). */
const GELU_2K: f32 = 1.5957691216057308;
const GELU_C: f32 = 0.044715;

/** gelu_tanh for four lanes: x / (1 + e^(−2u)); e^ clamps keep ±∞ inputs at x and −0. */
@inline function gelu4(g: v128, c: usize, k2: v128, k3: v128): v128 {
  const g2 = f32x4.mul(g, g);
  const u2 = f32x4.mul(f32x4.mul(g, k2), f32x4.add(v128.load(c, 176), f32x4.mul(k3, g2))); // 2u = 2√(2/π)·x·(1 + 0.044715·x²)
  return f32x4.div(g, f32x4.add(v128.load(c, 176), expf4At(f32x4.neg(u2), c)));
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
  gatedChunk(false, item, args);
}

/** GeGLU with tanh GELU (Gemma): out = gelu_tanh(gate) ⊙ up, the SwiGLU layout and work split (SwigluArgs). */
export function task_geglu(item: i32, tid: i32, args: usize): void {
  gatedChunk(true, item, args);
}

/** act(g) for four lanes: gelu_tanh (gelu = true) or silu. */
@inline function act4(gelu: bool, g: v128, c: usize, k2: v128, k3: v128): v128 {
  return gelu ? gelu4(g, c, k2, k3) : silu4(g, c);
}

/** One work item of task_swiglu / task_geglu: out = act(gate) ⊙ up over one row's chunk of columns. */
@inline function gatedChunk(gelu: bool, item: i32, args: usize): void {
  const a = changetype<SwigluArgs>(args);
  const row = item / a.chunksPerRow;
  const c0 = (item - row * a.chunksPerRow) * a.chunk;
  const c1 = min(a.n, c0 + a.chunk);
  const g = a.gate + <usize>row * <usize>a.gateStride;
  const u = a.up + <usize>row * <usize>a.upStride;
  const o = a.out + <usize>row * <usize>a.outStride;
  const c = SILU_CONSTS;
  const k2 = f32x4.splat(GELU_2K);
  const k3 = f32x4.splat(GELU_C);
  let i = c0;
  // Four vectors an iteration: four independent chains of the activation's ~25
  // dependent operations (the exp's Horner steps, the division), which the core overlaps.
  for (; i + 16 <= c1; i += 16) {
    const b = <usize>i << 2;
    const s0 = act4(gelu, v128.load(g + b), c, k2, k3);
    const s1 = act4(gelu, v128.load(g + b, 16), c, k2, k3);
    const s2 = act4(gelu, v128.load(g + b, 32), c, k2, k3);
    const s3 = act4(gelu, v128.load(g + b, 48), c, k2, k3);
    v128.store(o + b, f32x4.mul(s0, v128.load(u + b)));
    v128.store(o + b, f32x4.mul(s1, v128.load(u + b, 16)), 16);
    v128.store(o + b, f32x4.mul(s2, v128.load(u + b, 32)), 32);
    v128.store(o + b, f32x4.mul(s3, v128.load(u + b, 48)), 48);
  }
  for (; i + 4 <= c1; i += 4) {
    const b = <usize>i << 2;
    v128.store(o + b, f32x4.mul(act4(gelu, v128.load(g + b), c, k2, k3), v128.load(u + b)));
  }
  // Tail: the last 1–3 columns, one lane each.
  for (; i < c1; i++) {
    const b = <usize>i << 2;
    const s = act4(gelu, f32x4.splat(load<f32>(g + b)), c, k2, k3);
    store<f32>(o + b, f32x4.extract_lane(s, 0) * load<f32>(u + b));
  }
}

/** Softcap (Gemma 2 final logits): x ← cap · tanh(x / cap), in place on n contiguous f32. */
@unmanaged class SoftcapArgs {
  x: usize;
  n: i32;
  /** Elements per work item (a multiple of 4). */
  chunk: i32;
  cap: f32;
}

/**
 * tanh for four lanes: sign(y)·(1 − t)/(1 + t), t = e^(−2|y|), and for |y| <
 * 1/16, where 1 − t cancels, the series y − y³/3 + 2y⁵/15 − 17y⁷/315 (error
 * < 62/2835·y⁹ ≤ 3e−12·|y|).
 */
@inline function tanh4(y: v128, c: usize): v128 {
  const ay = f32x4.abs(y);
  const t = expf4At(f32x4.mul(ay, f32x4.splat(-2)), c);
  const one = v128.load(c, 176);
  const big = f32x4.div(f32x4.sub(one, t), f32x4.add(one, t));
  const y2 = f32x4.mul(ay, ay);
  let p = f32x4.splat(<f32>(-17.0 / 315.0));
  p = f32x4.add(f32x4.mul(p, y2), f32x4.splat(<f32>(2.0 / 15.0)));
  p = f32x4.add(f32x4.mul(p, y2), f32x4.splat(<f32>(-1.0 / 3.0)));
  const small = f32x4.add(ay, f32x4.mul(f32x4.mul(p, y2), ay));
  const r = v128.bitselect(small, big, f32x4.lt(ay, f32x4.splat(0.0625)));
  return v128.or(r, v128.and(y, i32x4.splat(0x80000000))); // sign of y
}

export function task_softcap(item: i32, tid: i32, args: usize): void {
  const a = changetype<SoftcapArgs>(args);
  const i0 = item * a.chunk;
  const i1 = min(a.n, i0 + a.chunk);
  const c = SILU_CONSTS;
  const inv = f32x4.splat(<f32>1 / a.cap);
  const cap = f32x4.splat(a.cap);
  let i = i0;
  for (; i + 4 <= i1; i += 4) {
    const p = a.x + (<usize>i << 2);
    v128.store(p, f32x4.mul(cap, tanh4(f32x4.mul(v128.load(p), inv), c)));
  }
  for (; i < i1; i++) {
    const p = a.x + (<usize>i << 2);
    store<f32>(p, f32x4.extract_lane(f32x4.mul(cap, tanh4(f32x4.splat(load<f32>(p) * (<f32>1 / a.cap)), c)), 0));
  }
}

/**
 * The coefficients of erfc4 as 16-byte rows, highest first: Numerical
 * Recipes' erfcc (Press et al., 2nd ed., §6.2; fractional error < 1.2e−7
 * everywhere), 1 + 0.5z's 0.5, and √½.
 */
const ERFC_CONSTS: usize = memory.data<f32>([
  0.17087277, 0.17087277, 0.17087277, 0.17087277,
  -0.82215223, -0.82215223, -0.82215223, -0.82215223,
  1.48851587, 1.48851587, 1.48851587, 1.48851587,
  -1.13520398, -1.13520398, -1.13520398, -1.13520398,
  0.27886807, 0.27886807, 0.27886807, 0.27886807,
  -0.18628806, -0.18628806, -0.18628806, -0.18628806,
  0.09678418, 0.09678418, 0.09678418, 0.09678418,
  0.37409196, 0.37409196, 0.37409196, 0.37409196,
  1.00002368, 1.00002368, 1.00002368, 1.00002368,
  -1.26551223, -1.26551223, -1.26551223, -1.26551223,
  0.5, 0.5, 0.5, 0.5,
  0.70710678118654752, 0.70710678118654752, 0.70710678118654752, 0.70710678118654752,
], 16);

/**
 * erfc(z) for z ≥ 0, four lanes: t = 1/(1 + z/2), erfc = t·e^(−z² + P(t)),
 * P of degree 9 (ERFC_CONSTS, Horner). Relative error 1.2e−7 of the
 * formula, plus e^'s 2 ulp, plus the rounding of −z² in e^'s argument
 * (½ ulp of z², so ≈ z²·2⁻²⁴ relative: 1.7e−5 at z = 8.5, where erfc is 1e−33).
 */
@inline function erfc4(z: v128, c: usize, e: usize): v128 {
  const one = v128.load(c, 176);
  const t = f32x4.div(one, f32x4.add(one, f32x4.mul(z, v128.load(e, 160))));
  let p = v128.load(e);
  p = f32x4.add(f32x4.mul(p, t), v128.load(e, 16));
  p = f32x4.add(f32x4.mul(p, t), v128.load(e, 32));
  p = f32x4.add(f32x4.mul(p, t), v128.load(e, 48));
  p = f32x4.add(f32x4.mul(p, t), v128.load(e, 64));
  p = f32x4.add(f32x4.mul(p, t), v128.load(e, 80));
  p = f32x4.add(f32x4.mul(p, t), v128.load(e, 96));
  p = f32x4.add(f32x4.mul(p, t), v128.load(e, 112));
  p = f32x4.add(f32x4.mul(p, t), v128.load(e, 128));
  p = f32x4.add(f32x4.mul(p, t), v128.load(e, 144));
  return f32x4.mul(t, expf4At(f32x4.sub(p, f32x4.mul(z, z)), c));
}

/**
 * Exact GELU, x·Φ(x) = x·½·erfc(−x/√2) (BERT's "gelu", PyTorch's
 * gelu(approximate="none")), as x·h for x < 0 and x·(1 − h) for x ≥ 0, h =
 * ½·erfc(|x|/√2): no 1 + erf cancellation in the negative tail.
 */
@inline function geluErf4(x: v128, c: usize, e: usize): v128 {
  const h = f32x4.mul(v128.load(e, 160), erfc4(f32x4.mul(f32x4.abs(x), v128.load(e, 176)), c, e));
  const phi = v128.bitselect(f32x4.sub(v128.load(c, 176), h), h, f32x4.ge(x, f32x4.splat(0)));
  return f32x4.mul(x, phi);
}

/** GELU in place on n contiguous f32 (BERT's MLP, after the up projection's bias). */
@unmanaged class GeluArgs {
  x: usize;
  n: i32;
  /** Elements per work item (a multiple of 4). */
  chunk: i32;
  /** 0: exact (erf), 1: tanh approximation (gelu4). */
  tanh: i32;
}

const GELU_ERF: i32 = 0;
const GELU_TANH: i32 = 1;

@inline function gelu(tanhForm: bool, i0: i32, i1: i32, x: usize): void {
  const c = SILU_CONSTS, e = ERFC_CONSTS;
  const k2 = f32x4.splat(GELU_2K);
  const k3 = f32x4.splat(GELU_C);
  let i = i0;
  for (; i + 4 <= i1; i += 4) {
    const p = x + (<usize>i << 2);
    v128.store(p, tanhForm ? gelu4(v128.load(p), c, k2, k3) : geluErf4(v128.load(p), c, e));
  }
  for (; i < i1; i++) {
    const p = x + (<usize>i << 2);
    const v = f32x4.splat(load<f32>(p));
    store<f32>(p, f32x4.extract_lane(tanhForm ? gelu4(v, c, k2, k3) : geluErf4(v, c, e), 0));
  }
}

export function task_gelu(item: i32, tid: i32, args: usize): void {
  const a = changetype<GeluArgs>(args);
  const i0 = item * a.chunk;
  const i1 = min(a.n, i0 + a.chunk);
  if (a.tanh == GELU_TANH) gelu(true, i0, i1, a.x);
  else gelu(false, i0, i1, a.x);
}

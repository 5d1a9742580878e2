// exp on f32x4 for softmax arguments (x ≤ 0, including −Infinity).
//
// Cephes expf: x = n·ln2 + r with n = round(x / ln2) (by the 1.5·2^23 magic-add
// rounding, which also yields n's integer bits), ln2 split in two for an exact
// reduction, e^r by a degree-6 polynomial on |r| ≤ ln2/2 (≈ 1 ulp), times 2^n
// built in the exponent field. Arguments below −87 (where 2^n leaves the
// normal range) return exactly 0, so −Infinity scores give probability 0.

const LOG2E: f32 = 1.44269504088896341;
const LN2_HI: f32 = 0.693359375;
const LN2_LO: f32 = -2.12194440e-4;
const MAGIC: f32 = 12582912.0; // 1.5 · 2^23
const MAGIC_BITS: i32 = 0x4b400000;
const P0: f32 = 1.9875691500e-4;
const P1: f32 = 1.3981999507e-3;
const P2: f32 = 8.3334519073e-3;
const P3: f32 = 4.1665795894e-2;
const P4: f32 = 1.6666665459e-1;
const P5: f32 = 5.0000001201e-1;
const LOWEST: f32 = -87.0;

/**
 * expNeg4's constants as 16-byte rows (the row offsets are the EXP_* below).
 * A kernel whose loop calls expNeg4 passes this address (expNeg4At): V8 13
 * (Node 24) rebuilds a v128 constant at every use inside a loop (three
 * instructions; tools/v128-const-audit.mjs), a load from here is one.
 */
export const EXP_CONSTS: usize = memory.data<f32>([
  LOWEST, LOWEST, LOWEST, LOWEST,
  LOG2E, LOG2E, LOG2E, LOG2E,
  MAGIC, MAGIC, MAGIC, MAGIC,
  LN2_HI, LN2_HI, LN2_HI, LN2_HI,
  LN2_LO, LN2_LO, LN2_LO, LN2_LO,
  P0, P0, P0, P0,
  P1, P1, P1, P1,
  P2, P2, P2, P2,
  P3, P3, P3, P3,
  P4, P4, P4, P4,
  P5, P5, P5, P5,
  1, 1, 1, 1,
  // MAGIC's bits − 127, as f32 bits: (t − MAGIC_BITS) + 127 in one subtraction.
  reinterpret<f32>(MAGIC_BITS - 127), reinterpret<f32>(MAGIC_BITS - 127), reinterpret<f32>(MAGIC_BITS - 127), reinterpret<f32>(MAGIC_BITS - 127),
], 16);

/** e^x per lane for x ≤ 0 (x > 0 is not handled); −Infinity and x < −87 give 0. Constants from EXP_CONSTS at c. */
@inline export function expNeg4At(x: v128, c: usize): v128 {
  const keep = f32x4.ge(x, v128.load(c));
  const xc = f32x4.pmax(x, v128.load(c));
  const t = f32x4.add(f32x4.mul(xc, v128.load(c, 16)), v128.load(c, 32));
  const nf = f32x4.sub(t, v128.load(c, 32));
  const r = f32x4.sub(f32x4.sub(xc, f32x4.mul(nf, v128.load(c, 48))), f32x4.mul(nf, v128.load(c, 64)));
  let p = f32x4.add(f32x4.mul(v128.load(c, 80), r), v128.load(c, 96));
  p = f32x4.add(f32x4.mul(p, r), v128.load(c, 112));
  p = f32x4.add(f32x4.mul(p, r), v128.load(c, 128));
  p = f32x4.add(f32x4.mul(p, r), v128.load(c, 144));
  p = f32x4.add(f32x4.mul(p, r), v128.load(c, 160));
  const r2 = f32x4.mul(r, r);
  p = f32x4.add(f32x4.add(f32x4.mul(p, r2), r), v128.load(c, 176));
  // 2^n in the exponent field: n + 127 = t's bits − (MAGIC's bits − 127).
  const pow2n = i32x4.shl(i32x4.sub(t, v128.load(c, 192)), 23);
  return v128.and(f32x4.mul(p, pow2n), keep);
}

/** e^x per lane for x ≤ 0 (x > 0 is not handled); −Infinity and x < −87 give 0. */
@inline export function expNeg4(x: v128): v128 {
  return expNeg4At(x, EXP_CONSTS);
}

/** Scalar twin of expNeg4 (same rounding): e^x for x ≤ 0, 0 below −87. */
@inline export function expNeg(x: f32): f32 {
  return f32x4.extract_lane(expNeg4(f32x4.splat(x)), 0);
}

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

/** e^x per lane for x ≤ 0 (x > 0 is not handled); −Infinity and x < −87 give 0. */
@inline export function expNeg4(x: v128): v128 {
  const keep = f32x4.ge(x, f32x4.splat(LOWEST));
  const xc = f32x4.pmax(x, f32x4.splat(LOWEST));
  const t = f32x4.add(f32x4.mul(xc, f32x4.splat(LOG2E)), f32x4.splat(MAGIC));
  const nf = f32x4.sub(t, f32x4.splat(MAGIC));
  const ni = i32x4.sub(t, i32x4.splat(MAGIC_BITS));
  const r = f32x4.sub(f32x4.sub(xc, f32x4.mul(nf, f32x4.splat(LN2_HI))), f32x4.mul(nf, f32x4.splat(LN2_LO)));
  let p = f32x4.add(f32x4.mul(f32x4.splat(P0), r), f32x4.splat(P1));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(P2));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(P3));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(P4));
  p = f32x4.add(f32x4.mul(p, r), f32x4.splat(P5));
  const r2 = f32x4.mul(r, r);
  p = f32x4.add(f32x4.add(f32x4.mul(p, r2), r), f32x4.splat(1));
  const pow2n = i32x4.shl(i32x4.add(ni, i32x4.splat(127)), 23);
  return v128.and(f32x4.mul(p, pow2n), keep);
}

/** Scalar twin of expNeg4 (same rounding): e^x for x ≤ 0, 0 below −87. */
@inline export function expNeg(x: f32): f32 {
  return f32x4.extract_lane(expNeg4(f32x4.splat(x)), 0);
}

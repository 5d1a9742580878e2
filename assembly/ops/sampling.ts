// The sampler's passes over a vocabulary of logits (src/engine/sampler-kernels.ts
// drives them; src/engine/sampler.ts is their float64 JavaScript twin). Each is
// one O(V) scan that plain JavaScript pays ~1–11 ns an element for (a compare,
// or a Math.exp), called directly on the calling thread (one row, no fork–join).
//
//   x: f32 [n] scores; ids: i32 [n]; w: f32 [n] weights; bucketOf: u16 [n];
//   bucketMass: f64 [buckets]; work: f64 [n]; heap: f32 [k]. Byte addresses.
//
// Weights are e^((l − max)/T) by the softmax's exp (attention/exp.ts, ≈ 1 ulp
// in f32; no FMA, so both kernel flavors give the same bits); masses add in f64.

import { EXP_CONSTS, expNeg4At } from "../attention/exp";

/** Largest of x[0, n), NaN if any element is NaN, −Infinity when n = 0. */
export function sample_max(x: usize, n: i32): f32 {
  let m0 = f32x4.splat(-Infinity), m1 = m0, m2 = m0, m3 = m0;
  let bad = i32x4.splat(0);
  let i = 0;
  for (; i + 16 <= n; i += 16) {
    const p = x + (<usize>i << 2);
    const a = v128.load(p), b = v128.load(p, 16), c = v128.load(p, 32), d = v128.load(p, 48);
    m0 = f32x4.pmax(m0, a);
    m1 = f32x4.pmax(m1, b);
    m2 = f32x4.pmax(m2, c);
    m3 = f32x4.pmax(m3, d);
    bad = v128.or(bad, v128.or(v128.or(f32x4.ne(a, a), f32x4.ne(b, b)), v128.or(f32x4.ne(c, c), f32x4.ne(d, d))));
  }
  for (; i + 4 <= n; i += 4) {
    const a = v128.load(x + (<usize>i << 2));
    m0 = f32x4.pmax(m0, a);
    bad = v128.or(bad, f32x4.ne(a, a));
  }
  if (v128.any_true(bad)) return NaN;
  const m = f32x4.pmax(f32x4.pmax(m0, m1), f32x4.pmax(m2, m3));
  let best = max(max(f32x4.extract_lane(m, 0), f32x4.extract_lane(m, 1)), max(f32x4.extract_lane(m, 2), f32x4.extract_lane(m, 3)));
  for (; i < n; i++) {
    const v = load<f32>(x + (<usize>i << 2));
    if (v != v) return NaN;
    if (v > best) best = v;
  }
  return best;
}

/** The first index i with x[i] ≥ v, or n when there is none. */
export function sample_first_ge(x: usize, n: i32, v: f32): i32 {
  const vv = f32x4.splat(v);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const bits = i32x4.bitmask(f32x4.ge(v128.load(x + (<usize>i << 2)), vv));
    if (bits != 0) return i + ctz(bits);
  }
  for (; i < n; i++) if (load<f32>(x + (<usize>i << 2)) >= v) return i;
  return n;
}

/** Inserts v into the f32 min-heap heap[0, size) (size < capacity). */
@inline function heapPush(heap: usize, size: i32, v: f32): void {
  let j = size;
  while (j > 0) {
    const parent = (j - 1) >> 1;
    const pv = load<f32>(heap + (<usize>parent << 2));
    if (pv <= v) break;
    store<f32>(heap + (<usize>j << 2), pv);
    j = parent;
  }
  store<f32>(heap + (<usize>j << 2), v);
}

/** Replaces the root of the full min-heap heap[0, k) by v (v > root) and sifts it down. */
@inline function heapReplaceRoot(heap: usize, k: i32, v: f32): void {
  let j = 0;
  for (;;) {
    const l = 2 * j + 1;
    if (l >= k) break;
    let c = l;
    let cv = load<f32>(heap + (<usize>l << 2));
    if (l + 1 < k) {
      const rv = load<f32>(heap + (<usize>(l + 1) << 2));
      if (rv < cv) {
        c = l + 1;
        cv = rv;
      }
    }
    if (cv >= v) break;
    store<f32>(heap + (<usize>j << 2), cv);
    j = c;
  }
  store<f32>(heap + (<usize>j << 2), v);
}

/** Offers v to the full min-heap heap[0, k) whose root is `root`; returns the root after. */
@inline function heapOffer(heap: usize, k: i32, root: f32, v: f32): f32 {
  if (v <= root) return root;
  heapReplaceRoot(heap, k, v);
  return load<f32>(heap);
}

/**
 * The k-th largest of the x[i] ≥ floor (k ≥ 1), or −Infinity when fewer than
 * k are: one pass with a size-k min-heap in heap (f32 [k]). Once the heap is
 * full, a vector of four whose lanes are all ≤ its root costs one compare.
 */
export function sample_kth_largest(x: usize, n: i32, k: i32, floor: f32, heap: usize): f32 {
  let size = 0;
  let i = 0;
  for (; i < n && size < k; i++) {
    const v = load<f32>(x + (<usize>i << 2));
    if (v >= floor) heapPush(heap, size++, v);
  }
  if (size < k) return -Infinity;
  let root = load<f32>(heap);
  for (; i + 4 <= n; i += 4) {
    const p = x + (<usize>i << 2);
    if (!v128.any_true(f32x4.gt(v128.load(p), f32x4.splat(root)))) continue;
    for (let l = 0; l < 4; l++) root = heapOffer(heap, k, root, load<f32>(p + (<usize>l << 2)));
  }
  for (; i < n; i++) root = heapOffer(heap, k, root, load<f32>(x + (<usize>i << 2)));
  return root;
}

/** e^x for x ≤ 0 (expNeg4At's steps), on four vectors at once: dst[0, 16) ← e^src[0, 16); returns the four summed in f64. */
@inline function expNeg16(src: usize, dst: usize, sub: v128, mul: v128, c: usize): v128 {
  // Four independent chains step by step: one exp is ~20 dependent operations,
  // and written one after another they stall on latency (2 ns an element, not 0.5).
  const lo = v128.load(c);
  const x0 = f32x4.mul(f32x4.sub(v128.load(src), sub), mul);
  const x1 = f32x4.mul(f32x4.sub(v128.load(src, 16), sub), mul);
  const x2 = f32x4.mul(f32x4.sub(v128.load(src, 32), sub), mul);
  const x3 = f32x4.mul(f32x4.sub(v128.load(src, 48), sub), mul);
  const k0 = f32x4.ge(x0, lo), k1 = f32x4.ge(x1, lo), k2 = f32x4.ge(x2, lo), k3 = f32x4.ge(x3, lo);
  const c0 = f32x4.pmax(x0, lo), c1 = f32x4.pmax(x1, lo), c2 = f32x4.pmax(x2, lo), c3 = f32x4.pmax(x3, lo);
  const log2e = v128.load(c, 16), magic = v128.load(c, 32);
  const t0 = f32x4.add(f32x4.mul(c0, log2e), magic), t1 = f32x4.add(f32x4.mul(c1, log2e), magic);
  const t2 = f32x4.add(f32x4.mul(c2, log2e), magic), t3 = f32x4.add(f32x4.mul(c3, log2e), magic);
  const n0 = f32x4.sub(t0, magic), n1 = f32x4.sub(t1, magic), n2 = f32x4.sub(t2, magic), n3 = f32x4.sub(t3, magic);
  const hi = v128.load(c, 48), lo2 = v128.load(c, 64);
  const r0 = f32x4.sub(f32x4.sub(c0, f32x4.mul(n0, hi)), f32x4.mul(n0, lo2));
  const r1 = f32x4.sub(f32x4.sub(c1, f32x4.mul(n1, hi)), f32x4.mul(n1, lo2));
  const r2 = f32x4.sub(f32x4.sub(c2, f32x4.mul(n2, hi)), f32x4.mul(n2, lo2));
  const r3 = f32x4.sub(f32x4.sub(c3, f32x4.mul(n3, hi)), f32x4.mul(n3, lo2));
  const q0 = v128.load(c, 80), q1 = v128.load(c, 96);
  let p0 = f32x4.add(f32x4.mul(q0, r0), q1), p1 = f32x4.add(f32x4.mul(q0, r1), q1);
  let p2 = f32x4.add(f32x4.mul(q0, r2), q1), p3 = f32x4.add(f32x4.mul(q0, r3), q1);
  for (let o: usize = 112; o <= 160; o += 16) {
    const q = v128.load(c + o);
    p0 = f32x4.add(f32x4.mul(p0, r0), q);
    p1 = f32x4.add(f32x4.mul(p1, r1), q);
    p2 = f32x4.add(f32x4.mul(p2, r2), q);
    p3 = f32x4.add(f32x4.mul(p3, r3), q);
  }
  const one = v128.load(c, 176);
  p0 = f32x4.add(f32x4.add(f32x4.mul(p0, f32x4.mul(r0, r0)), r0), one);
  p1 = f32x4.add(f32x4.add(f32x4.mul(p1, f32x4.mul(r1, r1)), r1), one);
  p2 = f32x4.add(f32x4.add(f32x4.mul(p2, f32x4.mul(r2, r2)), r2), one);
  p3 = f32x4.add(f32x4.add(f32x4.mul(p3, f32x4.mul(r3, r3)), r3), one);
  const bias = v128.load(c, 192);
  const e0 = v128.and(f32x4.mul(p0, i32x4.shl(i32x4.sub(t0, bias), 23)), k0);
  const e1 = v128.and(f32x4.mul(p1, i32x4.shl(i32x4.sub(t1, bias), 23)), k1);
  const e2 = v128.and(f32x4.mul(p2, i32x4.shl(i32x4.sub(t2, bias), 23)), k2);
  const e3 = v128.and(f32x4.mul(p3, i32x4.shl(i32x4.sub(t3, bias), 23)), k3);
  v128.store(dst, e0);
  v128.store(dst, e1, 16);
  v128.store(dst, e2, 32);
  v128.store(dst, e3, 48);
  const s01 = f64x2.add(f64x2.add(f64x2.promote_low_f32x4(e0), f64x2.promote_low_f32x4(highHalf(e0))), f64x2.add(f64x2.promote_low_f32x4(e1), f64x2.promote_low_f32x4(highHalf(e1))));
  const s23 = f64x2.add(f64x2.add(f64x2.promote_low_f32x4(e2), f64x2.promote_low_f32x4(highHalf(e2))), f64x2.add(f64x2.promote_low_f32x4(e3), f64x2.promote_low_f32x4(highHalf(e3))));
  return f64x2.add(s01, s23);
}

/** Lanes 2, 3 of a f32x4 moved to lanes 0, 1 (for f64x2.promote_low_f32x4). */
@inline function highHalf(v: v128): v128 {
  return i8x16.shuffle(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
}

/**
 * dst[j] = e^((src[j] − sub) · mul) for j < n (the exponent ≤ 0; below −87
 * gives 0), dst = src allowed; returns Σ dst in f64.
 */
function expScaled(src: usize, dst: usize, n: i32, sub: f32, mul: f32): f64 {
  const c = EXP_CONSTS;
  const sv = f32x4.splat(sub), mv = f32x4.splat(mul);
  let acc = f64x2.splat(0);
  let j = 0;
  for (; j + 16 <= n; j += 16) acc = f64x2.add(acc, expNeg16(src + (<usize>j << 2), dst + (<usize>j << 2), sv, mv, c));
  let sum = f64x2.extract_lane(acc, 0) + f64x2.extract_lane(acc, 1);
  for (; j < n; j++) {
    const e = f32x4.extract_lane(expNeg4At(f32x4.mul(f32x4.splat(load<f32>(src + (<usize>j << 2)) - sub), mv), c), 0);
    store<f32>(dst + (<usize>j << 2), e);
    sum += <f64>e;
  }
  return sum;
}

/**
 * The candidates x[i] ≥ floor, in id order: ids[j] = i and w[j] = e^((x[i] −
 * max)·invT) (max ≥ every x[i], so the exponent is ≤ 0). Unless bucketOf is 0,
 * also each one's top-p bucket bucketOf[j] = min(buckets − 1, ⌊(x[i] − floor)
 * · scale⌋) (monotone in x[i]) with bucketMass[b] = Σ w of bucket b. Returns
 * the count; out (f64) gets Σ w. Two passes: the compaction (ids, x[i] into w,
 * buckets), then the weights in place.
 */
export function sample_candidates(x: usize, n: i32, floor: f32, maxv: f32, invT: f32, ids: usize, w: usize, bucketOf: usize, bucketMass: usize, scale: f32, buckets: i32, out: usize): i32 {
  const fv = f32x4.splat(floor), sv = f32x4.splat(scale);
  const top = i32x4.splat(buckets - 1);
  const hist = bucketOf != 0;
  let m = 0;
  let i = 0;
  for (; i < n; i += 4) {
    // The last vector may run past n: its extra lanes are masked off (the scratch is padded to 4).
    const a = v128.load(x + (<usize>i << 2));
    let keep = f32x4.ge(a, fv);
    if (i + 4 > n) keep = v128.and(keep, i32x4.lt_s(i32x4(0, 1, 2, 3), i32x4.splat(n - i)));
    const bits = i32x4.bitmask(keep);
    if (bits == 0) continue;
    const bk = hist ? i32x4.min_s(i32x4.trunc_sat_f32x4_s(f32x4.mul(f32x4.sub(a, fv), sv)), top) : i32x4.splat(0);
    if (bits == 15) {
      v128.store(ids + (<usize>m << 2), i32x4.add(i32x4.splat(i), i32x4(0, 1, 2, 3)));
      v128.store(w + (<usize>m << 2), a);
      if (hist) v128.store64_lane(bucketOf + (<usize>m << 1), i16x8.narrow_i32x4_u(bk, bk), 0);
      m += 4;
      continue;
    }
    if (bits & 1) m = emitCandidate(ids, w, bucketOf, m, i, f32x4.extract_lane(a, 0), i32x4.extract_lane(bk, 0));
    if (bits & 2) m = emitCandidate(ids, w, bucketOf, m, i + 1, f32x4.extract_lane(a, 1), i32x4.extract_lane(bk, 1));
    if (bits & 4) m = emitCandidate(ids, w, bucketOf, m, i + 2, f32x4.extract_lane(a, 2), i32x4.extract_lane(bk, 2));
    if (bits & 8) m = emitCandidate(ids, w, bucketOf, m, i + 3, f32x4.extract_lane(a, 3), i32x4.extract_lane(bk, 3));
  }
  store<f64>(out, expScaled(w, w, m, maxv, invT));
  if (hist) {
    memory.fill(bucketMass, 0, <usize>buckets << 3);
    for (let j = 0; j < m; j++) {
      const q = bucketMass + (<usize>load<u16>(bucketOf + (<usize>j << 1)) << 3);
      store<f64>(q, load<f64>(q) + <f64>load<f32>(w + (<usize>j << 2)));
    }
  }
  return m;
}

/** Appends candidate `id` with score l (and bucket b, unless bucketOf is 0) at index m; returns m + 1. */
@inline function emitCandidate(ids: usize, w: usize, bucketOf: usize, m: i32, id: i32, l: f32, b: i32): i32 {
  store<i32>(ids + (<usize>m << 2), id);
  store<f32>(w + (<usize>m << 2), l);
  if (bucketOf != 0) store<u16>(bucketOf + (<usize>m << 1), <u16>b);
  return m + 1;
}

/** Gathers the weights of the candidates in bucket b into work (f64); returns how many. */
export function sample_bucket_weights(bucketOf: usize, w: usize, n: i32, b: i32, work: usize): i32 {
  const bv = i16x8.splat(<i16>b);
  let m = 0;
  let j = 0;
  for (; j + 8 <= n; j += 8) {
    // Most of a vocabulary lies outside the one bucket: skip eight at a time.
    if (!v128.any_true(i16x8.eq(v128.load(bucketOf + (<usize>j << 1)), bv))) continue;
    for (let l = j; l < j + 8; l++) {
      store<f64>(work + (<usize>m << 3), <f64>load<f32>(w + (<usize>l << 2)));
      m += <i32>(<i32>load<u16>(bucketOf + (<usize>l << 1)) == b);
    }
  }
  for (; j < n; j++) {
    store<f64>(work + (<usize>m << 3), <f64>load<f32>(w + (<usize>j << 2)));
    m += <i32>(<i32>load<u16>(bucketOf + (<usize>j << 1)) == b);
  }
  return m;
}

/**
 * The top-p cut: keeps, in order, the candidates of the buckets above b and
 * those of bucket b with weight ≥ edge (compacting ids, w); returns how many.
 * edge is an f32 here (the caller rounds the f64 edge up: f32AtLeast). The
 * keep test is data-dependent, so lanes are stored unconditionally and the
 * count advances by the test (no branch to mispredict).
 */
export function sample_keep_nucleus(ids: usize, w: usize, bucketOf: usize, n: i32, b: i32, edge: f32): i32 {
  const bv = i32x4.splat(b), ev = f32x4.splat(edge);
  let m = 0;
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const bk = i32x4.extend_low_i16x8_u(v128.load64_zero(bucketOf + (<usize>j << 1)));
    const wv = v128.load(w + (<usize>j << 2));
    const keep = v128.or(i32x4.gt_s(bk, bv), v128.and(i32x4.eq(bk, bv), f32x4.ge(wv, ev)));
    const bits = i32x4.bitmask(keep);
    if (bits == 0) continue;
    const iv = v128.load(ids + (<usize>j << 2));
    if (bits == 15) {
      v128.store(ids + (<usize>m << 2), iv);
      v128.store(w + (<usize>m << 2), wv);
      m += 4;
      continue;
    }
    // m ≤ j: the stores never pass the lanes still to read.
    store<i32>(ids + (<usize>m << 2), i32x4.extract_lane(iv, 0));
    store<f32>(w + (<usize>m << 2), f32x4.extract_lane(wv, 0));
    m += bits & 1;
    store<i32>(ids + (<usize>m << 2), i32x4.extract_lane(iv, 1));
    store<f32>(w + (<usize>m << 2), f32x4.extract_lane(wv, 1));
    m += (bits >> 1) & 1;
    store<i32>(ids + (<usize>m << 2), i32x4.extract_lane(iv, 2));
    store<f32>(w + (<usize>m << 2), f32x4.extract_lane(wv, 2));
    m += (bits >> 2) & 1;
    store<i32>(ids + (<usize>m << 2), i32x4.extract_lane(iv, 3));
    store<f32>(w + (<usize>m << 2), f32x4.extract_lane(wv, 3));
    m += (bits >> 3) & 1;
  }
  for (; j < n; j++) {
    const bj = <i32>load<u16>(bucketOf + (<usize>j << 1));
    const wj = load<f32>(w + (<usize>j << 2));
    store<i32>(ids + (<usize>m << 2), load<i32>(ids + (<usize>j << 2)));
    store<f32>(w + (<usize>m << 2), wj);
    m += <i32>((bj > b) | ((bj == b) & (wj >= edge)));
  }
  return m;
}

/** Σ w[0, n) in f64, by blocks of 8 (the order sample_draw walks in). */
@inline function blockSum8(p: usize): f64 {
  const a = v128.load(p), b = v128.load(p, 16);
  const s2 = f64x2.add(
    f64x2.add(f64x2.promote_low_f32x4(a), f64x2.promote_low_f32x4(highHalf(a))),
    f64x2.add(f64x2.promote_low_f32x4(b), f64x2.promote_low_f32x4(highHalf(b))),
  );
  return f64x2.extract_lane(s2, 0) + f64x2.extract_lane(s2, 1);
}

/**
 * The draw over weights w[0, n) (n ≥ 1) at fraction `frac` ∈ [0, 1) of their
 * total: with u = frac · Σ w, the first j whose running sum passes u. Sums and
 * walk go by blocks of 8 in one order (a block whose sum does not reach u is
 * skipped whole); n − 1 when rounding leaves u past the end.
 */
export function sample_draw(w: usize, n: i32, frac: f64): i32 {
  let total: f64 = 0;
  let j = 0;
  for (; j + 8 <= n; j += 8) total += blockSum8(w + (<usize>j << 2));
  for (; j < n; j++) total += <f64>load<f32>(w + (<usize>j << 2));
  let u = frac * total;
  j = 0;
  for (; j + 8 <= n; j += 8) {
    const s = blockSum8(w + (<usize>j << 2));
    if (u - s < 0) break;
    u -= s;
  }
  for (; j < n; j++) {
    u -= <f64>load<f32>(w + (<usize>j << 2));
    if (u < 0) return j;
  }
  return n - 1;
}

/** Σ e^(x[i] − max) in f64 (max ≥ every x[i], finite), the terms written to tmp (f32 [n]): log-sum-exp's sum. */
export function sample_sum_exp(x: usize, n: i32, maxv: f32, tmp: usize): f64 {
  return expScaled(x, tmp, n, maxv, 1);
}

/** The ids i with x[i] ≥ th, in order, into ids; returns how many. */
export function sample_select_ge(x: usize, n: i32, th: f32, ids: usize): i32 {
  const tv = f32x4.splat(th);
  let m = 0;
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const bits = i32x4.bitmask(f32x4.ge(v128.load(x + (<usize>i << 2)), tv));
    if (bits == 0) continue;
    for (let l = 0; l < 4; l++) if ((bits & (1 << l)) != 0) store<i32>(ids + (<usize>(m++) << 2), i + l);
  }
  for (; i < n; i++) if (load<f32>(x + (<usize>i << 2)) >= th) store<i32>(ids + (<usize>(m++) << 2), i);
  return m;
}

// Roofline probes: peak wasm SIMD f32 arithmetic and memory read bandwidth,
// per work item, so bench/ can run them on one thread or on all.

import { fmadd } from "../runtime/flavor";

@unmanaged class FlopsArgs {
  iterations: i32;
  /** f32[items]: one result per item so nothing is optimized away. */
  sink: usize;
}

/** f32x4 rows: the multiplier 0.9999 and the addend 0.0001 of bench_simd_flops. */
const FLOPS_CONSTS: usize = memory.data<f32>([0.9999, 0.9999, 0.9999, 0.9999, 0.0001, 0.0001, 0.0001, 0.0001], 16);

/**
 * 12 independent chains of x = x·m + c on f32x4: 12 × 4 lanes × 2 FLOPs = 96
 * FLOPs per iteration, enough chains to cover mul and add latency. Each step
 * is flavor.ts fmadd: mul + add (baseline), one FMA (relaxed), so each flavor
 * is measured against its own arithmetic peak.
 */
export function bench_simd_flops(item: i32, tid: i32, args: usize): void {
  const a = changetype<FlopsArgs>(args);
  // m and c read from static data, not v128 constants: V8 13 (Node 24) would
  // rebuild a constant at each of its 24 uses a pass (three instructions each),
  // and the ceiling would measure that (tools/v128-const-audit.mjs).
  const m = v128.load(FLOPS_CONSTS);
  const c = v128.load(FLOPS_CONSTS, 16);
  let x0 = f32x4.splat(<f32>item), x1 = f32x4.splat(1), x2 = f32x4.splat(2), x3 = f32x4.splat(3);
  let x4 = f32x4.splat(4), x5 = f32x4.splat(5), x6 = f32x4.splat(6), x7 = f32x4.splat(7);
  let x8 = f32x4.splat(8), x9 = f32x4.splat(9), x10 = f32x4.splat(10), x11 = f32x4.splat(11);
  for (let i = 0; i < a.iterations; i++) {
    x0 = fmadd(x0, m, c); x1 = fmadd(x1, m, c);
    x2 = fmadd(x2, m, c); x3 = fmadd(x3, m, c);
    x4 = fmadd(x4, m, c); x5 = fmadd(x5, m, c);
    x6 = fmadd(x6, m, c); x7 = fmadd(x7, m, c);
    x8 = fmadd(x8, m, c); x9 = fmadd(x9, m, c);
    x10 = fmadd(x10, m, c); x11 = fmadd(x11, m, c);
  }
  const s = f32x4.add(f32x4.add(f32x4.add(x0, x1), f32x4.add(x2, x3)), f32x4.add(f32x4.add(x4, x5), f32x4.add(x6, x7)));
  const t = f32x4.add(s, f32x4.add(f32x4.add(x8, x9), f32x4.add(x10, x11)));
  store<f32>(a.sink + (<usize>item << 2), f32x4.extract_lane(t, 0) + f32x4.extract_lane(t, 3));
}

@unmanaged class ReadArgs {
  base: usize;
  /** Bytes per item, a multiple of 64. */
  chunkBytes: i32;
  /** i32[items] */
  sink: usize;
}

/** Reads [base + item·chunk, +chunk) with 64-byte strides into 4 accumulators. */
export function bench_read(item: i32, tid: i32, args: usize): void {
  const a = changetype<ReadArgs>(args);
  let p = a.base + <usize>item * <usize>a.chunkBytes;
  const end = p + <usize>a.chunkBytes;
  let s0 = i32x4.splat(0), s1 = i32x4.splat(0), s2 = i32x4.splat(0), s3 = i32x4.splat(0);
  for (; p < end; p += 64) {
    s0 = i32x4.add(s0, v128.load(p));
    s1 = i32x4.add(s1, v128.load(p, 16));
    s2 = i32x4.add(s2, v128.load(p, 32));
    s3 = i32x4.add(s3, v128.load(p, 48));
  }
  const s = i32x4.add(i32x4.add(s0, s1), i32x4.add(s2, s3));
  store<i32>(a.sink + (<usize>item << 2), i32x4.extract_lane(s, 0) ^ i32x4.extract_lane(s, 3));
}

/** Writes byte (item & 255) over the item's chunk, so the pages are real before reading. */
export function bench_fill(item: i32, tid: i32, args: usize): void {
  const a = changetype<ReadArgs>(args);
  memory.fill(a.base + <usize>item * <usize>a.chunkBytes, <u8>(item + 1), <usize>a.chunkBytes);
}

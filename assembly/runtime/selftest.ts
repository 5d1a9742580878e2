// Kernels that exercise the runtime itself: the allocator's base address, the
// module's flavor, a no-op for fork–join overhead, and an item counter that can trap or abort on
// request (the pool tests use it to check exactly-once and error surfacing).

import { RELAXED, dotI8U7Pairs, dotI8U8 } from "./flavor";

/** First byte above the module's static data: the allocator starts here. */
export function heap_base(): usize {
  return __heap_base;
}

/** i32 out[item] = 1 in build/kernels-relaxed.wasm, 0 in build/kernels.wasm (flavor.ts): which module each thread runs. */
export function task_kernels_relaxed(item: i32, tid: i32, out: usize): void {
  store<i32>(out + (<usize>item << 2), RELAXED ? 1 : 0);
}

/**
 * Lane 0 of the flavor's relaxed int8 dot of splat(a) (i8) and splat(b) (the
 * 7-bit operand's bytes) added to splat(acc): what src/runtime/module.ts
 * probeInt8Dot classifies. The operands are arguments, read at run time, so
 * the optimizer cannot fold the relaxed op with its own choice of semantics.
 * Baseline: the exact unsigned emulation (flavor.ts dotI8U8).
 */
export function int8_dot_probe(a: i32, b: i32, acc: i32): i32 {
  return i32x4.extract_lane(dotI8U8(i8x16.splat(<i8>a), i8x16.splat(<i8>b), i32x4.splat(acc)), 0);
}

/**
 * Lane 0 of dotI8U7Pairs(splat(a), splat(b)) widened by
 * i32x4.extadd_pairwise_i16x8_s: 4·a·b where the helper is right (b in
 * [0, 127]). What src/runtime/module.ts probeInt8DotPairs checks: V8 13's
 * Liftoff computes the i16x8 relaxed dot as b·b on x64 without AVX.
 */
export function int8_dot_pairs_probe(a: i32, b: i32): i32 {
  return i32x4.extract_lane(i32x4.extadd_pairwise_i16x8_s(dotI8U7Pairs(i8x16.splat(<i8>a), i8x16.splat(<i8>b))), 0);
}

export function task_noop(item: i32, tid: i32, args: usize): void {}

@unmanaged class CountArgs {
  /** i32[items]: incremented atomically by the item. */
  counts: usize;
  /** i32[items]: the thread that ran the item. */
  tids: usize;
  /** Item that executes `unreachable` (−1: none). */
  trapItem: i32;
  /** Item that calls abort() (−1: none). */
  abortItem: i32;
  /** Busy-work iterations per item, to make threads overlap. */
  spin: i32;
}

export function selftest_count(item: i32, tid: i32, args: usize): void {
  const a = changetype<CountArgs>(args);
  let x: f64 = 0;
  for (let i = 0; i < a.spin; i++) x += Math.sqrt(<f64>(i + item));
  if (x < 0) unreachable();
  atomic.add<i32>(a.counts + (<usize>item << 2), 1);
  store<i32>(a.tids + (<usize>item << 2), tid);
  if (item == a.trapItem) unreachable();
  if (item == a.abortItem) abort("selftest abort requested");
}

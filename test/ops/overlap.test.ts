// The ops' output/input overlap check (ops/check.ts overlaps): exact for views
// whose last dimension is contiguous. Its O(1) path for row views of one stride
// (stridedRunsOverlap: the column slices of a fused gate_up or QKV output) and
// its general path (sorted runs) both against the bytes each tensor touches,
// on random views: offsets, strides, run lengths and row counts.
import assert from "node:assert/strict";
import { test } from "node:test";
import { overlaps, stridedRunsOverlap } from "../../src/ops/check.js";
import { Tensor } from "../../src/tensor/tensor.js";

/** Deterministic integers in [lo, hi]. */
function rng(seed: number): (lo: number, hi: number) => number {
  let s = seed >>> 0;
  return (lo, hi) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return lo + (s % (hi - lo + 1));
  };
}

/** The byte addresses a tensor's elements cover. */
function bytesOf(t: Tensor): Set<number> {
  const out = new Set<number>();
  const idx = new Array<number>(t.rank).fill(0);
  for (let k = 0; k < t.numel; k++) {
    let off = 0;
    for (let d = 0; d < t.rank; d++) off += idx[d]! * t.strides[d]!;
    for (let b = 0; b < t.elementBytes; b++) out.add(t.ptr + off * t.elementBytes + b);
    for (let d = t.rank - 1; d >= 0; d--) {
      if (++idx[d]! < t.shape[d]!) break;
      idx[d] = 0;
    }
  }
  return out;
}

const shareByte = (a: Set<number>, b: Set<number>) => [...a].some((x) => b.has(x));

test("stridedRunsOverlap equals the byte-by-byte answer on 20 000 random pairs of strided runs", () => {
  const r = rng(11);
  for (let n = 0; n < 20_000; n++) {
    const s = r(1, 24);
    const [la, lb] = [r(1, s), r(1, s)];
    const [ra, rb] = [r(1, 5), r(1, 5)];
    const [a0, b0] = [r(0, 120), r(0, 120)];
    const runs = (x0: number, l: number, rows: number) => new Set(Array.from({ length: rows * l }, (_, k) => x0 + Math.floor(k / l) * s + (k % l)));
    const want = shareByte(runs(a0, la, ra), runs(b0, lb, rb));
    assert.equal(stridedRunsOverlap(a0, la, ra, b0, lb, rb, s), want, JSON.stringify({ a0, la, ra, b0, lb, rb, s }));
  }
});

test("overlaps equals the byte-by-byte answer on random views with contiguous rows (one stride, two strides, rank 1-3)", () => {
  const memory = new WebAssembly.Memory({ initial: 1 });
  const r = rng(5);
  /** A random view: rank 1-3, last dimension contiguous, strides ≥ the row (often one shared stride). */
  const view = (stride: number): Tensor => {
    const rank = r(1, 3);
    const cols = r(1, 6);
    const shape = [cols];
    const strides = [1];
    let inner = Math.max(cols, stride);
    for (let d = 1; d < rank; d++) {
      const size = r(1, 4);
      shape.unshift(size);
      strides.unshift(inner);
      inner *= r(0, 3) === 0 ? size + 1 : size; // sometimes not evenly flattening
    }
    return new Tensor(memory, 4 * r(0, 60), "f32", shape, strides);
  };
  let fast = 0; // pairs the one-stride path can take (the generator makes enough of them)
  for (let n = 0; n < 5_000; n++) {
    const stride = r(1, 9);
    const a = view(stride);
    const b = view(r(0, 2) === 0 ? r(1, 9) : stride);
    assert.equal(overlaps(a, b), shareByte(bytesOf(a), bytesOf(b)), `${a.toString()} / ${b.toString()}`);
    if (a.rank === 2 && b.rank === 2 && a.strides[0] === b.strides[0]) fast++;
  }
  assert.ok(fast > 150, `pairs of rank-2 views with one row stride: ${fast}`);
});

test("a fused gate_up output's gate and up slices do not overlap; a slice one column wider does", () => {
  const memory = new WebAssembly.Memory({ initial: 4 });
  const [T, I] = [16, 96];
  const gate = new Tensor(memory, 0, "f32", [T, I], [2 * I, 1]);
  const up = new Tensor(memory, 4 * I, "f32", [T, I], [2 * I, 1]);
  const wide = new Tensor(memory, 0, "f32", [T, I + 1], [2 * I, 1]);
  assert.equal(overlaps(gate, up), false);
  assert.equal(overlaps(up, gate), false);
  assert.equal(overlaps(wide, up), true);
  assert.equal(overlaps(up, wide), true);
});

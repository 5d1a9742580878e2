// Tensor views and the shape/stride checks: errors name the argument and the value.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { type Runtime, Tensor, convert, createRuntime } from "../../src/ops-entry.js";
import { broadcastStrides, checkDims, checkInt, checkStrides, contiguousStrides } from "../../src/tensor/check.js";

let rt: Runtime;
before(async () => {
  rt = await createRuntime({ threads: 2 });
});
after(() => rt.dispose());

test("contiguous strides and strided reads", () => {
  assert.deepEqual(contiguousStrides([2, 3, 4]), [12, 4, 1]);
  const t = rt.tensor("f32", [2, 3]).set([0, 1, 2, 3, 4, 5]);
  const transposed = new Tensor(rt.memory, t.ptr, "f32", [3, 2], [1, 3]);
  assert.equal(transposed.isContiguous(), false);
  assert.deepEqual([...transposed.toFloat32()], [0, 3, 1, 4, 2, 5]);
  assert.throws(() => transposed.data(), /tensor must be contiguous to expose its data/);
  rt.free(t);
});

test("set encodes, toFloat32 decodes, fill poisons", () => {
  const t = rt.tensor("bf16", [3]).set([1, 1.00390625, 3e38]);
  assert.deepEqual([...t.data()], [0x3f80, 0x3f80, 0x7f62]); // 1 + 2^-8 ties to even
  t.fill(NaN);
  assert.ok(t.toFloat32().every(Number.isNaN));
  rt.free(t);
});

test("threaded convert round-trips through every float dtype", () => {
  const n = 200_003; // several work items and a ragged tail
  const src = rt.tensor("f32", [n]);
  const x = new Float32Array(n).map((_, i) => Math.sin(i) * 100);
  src.set(x);
  for (const dtype of ["f16", "bf16", "fp8e4m3", "fp8e5m2", "int8"] as const) {
    const mid = rt.tensor(dtype, [n]);
    const back = rt.tensor("f32", [n]);
    convert(rt, src, mid);
    convert(rt, mid, back);
    const want = mid.toFloat32();
    const got = back.data() as Float32Array;
    for (let i = 0; i < n; i += 997) assert.equal(got[i], want[i], `${dtype}[${i}]`);
    rt.free(mid);
    rt.free(back);
  }
  const wrong = rt.tensor("f16", [n - 1]);
  assert.throws(() => convert(rt, src, wrong), /dst.shape must equal src.shape \[200003\], got \[200002\]/);
  rt.free(wrong);
  rt.free(src);
});

test("views reject bad pointers and out-of-range extents", () => {
  assert.throws(() => new Tensor(rt.memory, 3, "f32", [4]), /ptr must be a non-negative address aligned to 4 bytes, got 3/);
  assert.throws(() => new Tensor(rt.memory, 0, "f32", [2 ** 31]), /beyond the memory/);
  assert.throws(() => new Tensor(rt.memory, 0, "f32", [2, -1]), /shape\[1\] must be ≥ 0, got -1/);
  assert.throws(() => new Tensor(rt.memory, 0, "f64" as never, [2]), /dtype must be one of .*, got "f64"/);
  assert.throws(() => rt.tensor("f32", [4]).reshape([3]), /shape must keep 4 elements, got \[3\]/);
});

test("checks name the argument and the value", () => {
  assert.throws(() => checkInt("numHeads", 2.5, { min: 1 }), /^ArgumentError: numHeads must be an integer, got 2.5$/);
  assert.throws(() => checkInt("numHeads", 0, { min: 1 }), /numHeads must be ≥ 1, got 0/);
  assert.throws(() => checkDims("k", [1, 8, 16, 64], [1, 8, null, 128], ["B", "Hkv", "S", "D"]), /k.shape\[3\] must be 128 \(D\), got 64/);
  assert.throws(() => checkDims("k", [1, 8], [1, 8, null], []), /k.shape must have rank 3, got \[1, 8\]/);
  assert.throws(() => checkStrides("q", [2, 3], [3, 1], 5), /q.strides reach element 5, beyond the 5 elements/);
});

test("broadcasting: NumPy rules, zero strides on stretched dimensions", () => {
  assert.deepEqual(broadcastStrides("mask", [1, 1, 4, 8], [2, 3, 4, 8]), [0, 0, 8, 1]);
  assert.deepEqual(broadcastStrides("bias", [3, 1, 8], [2, 3, 4, 8]), [0, 8, 0, 1]);
  assert.throws(() => broadcastStrides("mask", [2, 4, 8], [2, 3, 4, 8]), /mask.shape \[2, 4, 8\] does not broadcast to \[2, 3, 4, 8\]: dimension 0 is 2, needs 1 or 3/);
});

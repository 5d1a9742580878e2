// A runtime of several memories: every thread runs any kernel in any memory,
// each memory has its own allocator, tensors know their memory, an op given
// operands from two memories is refused naming both, and copyTensor crosses.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ArgumentError, type Runtime, Tensor, add, copyTensor, createRuntime, createWeight, linear, memoryName } from "../../src/ops-entry.js";

let rt: Runtime;
let rt1: Runtime;

before(async () => {
  rt = await createRuntime({ threads: 3 });
  rt1 = rt.addMemory();
});
after(() => rt.dispose());

const seq = (n: number, k = 1): Float32Array => Float32Array.from({ length: n }, (_, i) => ((i * 7 + k) % 13) - 6);

test("a second memory is added on demand: its own allocator, the same threads, named in messages", () => {
  assert.equal(rt.memories.length, 2);
  assert.equal(rt.memories[0], rt);
  assert.equal(rt.memories[1], rt1);
  assert.equal(rt1.index, 1);
  assert.equal(rt.memoryAt(1), rt1);
  assert.notEqual(rt1.memory, rt.memory);
  assert.notEqual(rt1.heap, rt.heap);
  assert.equal(rt1.threads, 3);
  const t = rt1.tensor("f32", [4]);
  assert.equal(t.memory, rt1.memory);
  assert.match(t.toString(), /in memory 1\)$/);
  assert.equal(memoryName(rt.memory), "memory 0");
  assert.deepEqual(rt.memoryUsage().map((u) => u.memory), [0, 1]);
  rt1.free(t);
});

test("every thread runs a kernel in memory 1: each item exactly once, memory 0 untouched", () => {
  const items = 20000;
  const read = (r: Runtime, counts: number): Int32Array => new Int32Array(r.memory.buffer, counts, items);
  const c0 = rt.heap.alloc(items * 4);
  const c1 = rt1.heap.alloc(items * 4);
  const tids = rt1.heap.alloc(items * 4);
  read(rt, c0).fill(0);
  read(rt1, c1).fill(0);
  const used = new Set<number>();
  for (let attempt = 0; attempt < 5 && used.size < 3; attempt++) {
    read(rt1, c1).fill(0);
    rt1.parallelFor("selftest_count", items, rt1.args().ptr(c1).ptr(tids).i32(-1).i32(-1).i32(2000).end());
    assert.ok(read(rt1, c1).every((c) => c === 1), "each item once in memory 1");
    for (const t of new Int32Array(rt1.memory.buffer, tids, items)) used.add(t);
  }
  assert.deepEqual([...used].sort(), [0, 1, 2], "all three threads ran items in memory 1");
  assert.ok(read(rt, c0).every((c) => c === 0), "memory 0's copy of those addresses untouched");
  // And memory 0 still works after memory 1's tasks.
  rt.parallelFor("selftest_count", items, rt.args().ptr(c0).ptr(rt.heap.alloc(items * 4)).i32(-1).i32(-1).i32(0).end());
  assert.ok(read(rt, c0).every((c) => c === 1));
});

test("an op computes the same in either memory", () => {
  const out = [rt, rt1].map((r) => {
    const a = r.tensor("f32", [3, 37]).set(seq(111));
    const b = r.tensor("f32", [3, 37]).set(seq(111, 5));
    const o = r.tensor("f32", [3, 37]).fill(NaN);
    add(r, { a, b, out: o });
    return o.toFloat32();
  });
  assert.deepEqual(out[1], out[0]);
  const w = [rt, rt1].map((r) => {
    const src = r.tensor("f32", [19, 64]).set(seq(19 * 64, 3));
    const weight = createWeight(r, { source: src, format: "q8" });
    const x = r.tensor("f32", [2, 64]).set(seq(128, 2));
    const o = r.tensor("f32", [2, 19]).fill(NaN);
    linear(r, { x, weight, out: o });
    return o.toFloat32();
  });
  assert.deepEqual(w[1], w[0]);
});

test("an op whose operands live in different memories is refused, naming both memories", () => {
  const a = rt.tensor("f32", [8]).set(seq(8));
  const b = rt1.tensor("f32", [8]).set(seq(8));
  const refused = (e: unknown): boolean => e instanceof ArgumentError && /^b must live in memory 0, where this op runs, got Tensor\(f32, \[8\] @ \d+ in memory 1\)/.test(e.message);
  assert.throws(() => add(rt, { a, b, out: a }), refused);
  assert.throws(() => add(rt1, { a: b, b: a, out: b }), /^ArgumentError: b must live in memory 1, where this op runs, got .* in memory 0/);
  const weight = createWeight(rt1, { source: rt1.tensor("f32", [8, 32]).set(seq(256)), format: "f32" });
  assert.throws(() => linear(rt, { x: rt.tensor("f32", [1, 32]), weight, out: rt.tensor("f32", [1, 8]) }), /^ArgumentError: weight must live in memory 0, where this op runs, got Weight\(f32, \[8, 32\] @ \d+ in memory 1\)/);
  assert.throws(() => createWeight(rt, { source: b.reshape([1, 8]), format: "f32" }), /^ArgumentError: source must live in memory 0/);
});

test("copyTensor copies between memories: contiguous, strided, and refuses other shapes or dtypes", () => {
  const src = rt.tensor("f32", [5, 33]).set(seq(165));
  const dst = rt1.tensor("f32", [5, 33]).fill(NaN);
  copyTensor(src, dst);
  assert.deepEqual(dst.toFloat32(), src.toFloat32());
  // A column view (row stride 66) into a contiguous tensor of another memory, and back.
  const wide = rt1.tensor("f32", [5, 66]).set(seq(330, 4));
  const view = new Tensor(rt1.memory, wide.ptr + 33 * 4, "f32", [5, 33], [66, 1]);
  const back = rt.tensor("f32", [5, 33]).fill(NaN);
  copyTensor(view, back);
  assert.deepEqual(back.toFloat32(), view.toFloat32());
  const bf = rt1.tensor("bf16", [4, 3]).set(seq(12));
  const bfView = rt.tensor("bf16", [4, 3]).fill(NaN);
  copyTensor(bf, bfView);
  assert.deepEqual(bfView.toFloat32(), bf.toFloat32());
  assert.throws(() => copyTensor(src, rt1.tensor("f32", [33, 5])), /^ArgumentError: dst\.shape must be src's \[5, 33\], got \[33, 5\]/);
  assert.throws(() => copyTensor(src, rt1.tensor("bf16", [5, 33])), /^ArgumentError: dst\.dtype must be src's f32, got bf16/);
});

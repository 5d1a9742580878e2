// runtime/args.ts: the kernel argument writer — struct fields from the buffer's start in
// call order, i32 tables (a linear's work items, ops/partition.ts) from its far end down;
// the two never overlap, and either running into the other is an error naming the buffer.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ArgumentError } from "../../src/errors.js";
import { ArgsWriter } from "../../src/runtime/args.js";

const BASE = 1024;

function writer(): { w: ArgsWriter; mem: WebAssembly.Memory } {
  const mem = new WebAssembly.Memory({ initial: 1 });
  return { w: new ArgsWriter(mem, BASE), mem };
}

test("i32Array: the table lands at the buffer's far end, a second one below it, and the struct's fields point at them", () => {
  const { w, mem } = writer();
  const a = w.reset().i32Array(Int32Array.of(0, 36, 63, 144));
  const b = w.i32Array(Int32Array.of(-7, 5));
  const end = w.ptr(0xdead0).ptr(a).i32(42).ptr(b).end();
  assert.equal(end, BASE);
  assert.equal(a, BASE + ArgsWriter.CAPACITY - 16);
  assert.equal(b, a - 8);
  const i32 = new Int32Array(mem.buffer);
  assert.deepEqual([...i32.subarray(a / 4, a / 4 + 4)], [0, 36, 63, 144]);
  assert.deepEqual([...i32.subarray(b / 4, b / 4 + 2)], [-7, 5]);
  assert.deepEqual([i32[BASE / 4], i32[BASE / 4 + 1], i32[BASE / 4 + 2], i32[BASE / 4 + 3]], [0xdead0, a, 42, b]);
  // reset() gives the whole buffer back: the next table starts at the far end again.
  assert.equal(w.reset().i32Array(Int32Array.of(1)), BASE + ArgsWriter.CAPACITY - 4);
});

test("i32Array: a table that does not fit beside the struct, or a struct that runs into a table, is refused by name", () => {
  const { w } = writer();
  w.reset().i32(1).i32(2);
  assert.throws(() => w.i32Array(new Int32Array(ArgsWriter.CAPACITY / 4 - 1)), (e: unknown) => e instanceof ArgumentError && e.argument === "args" && /an array of 1023 i32/.test(e.message));
  w.reset().i32Array(new Int32Array(ArgsWriter.CAPACITY / 4 - 2)); // leaves 8 bytes
  w.i32(1).i32(2);
  assert.throws(() => w.i32(3), (e: unknown) => e instanceof ArgumentError && /overflow the 4096-byte argument buffer/.test(e.message));
});

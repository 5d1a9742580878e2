// The allocator over the shared memory: alignment, no overlap, reuse after
// free, coalescing, growth, the 4 GiB ceiling, and the step arena.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Allocator, OutOfMemoryError, StepArena } from "../../src/ops-entry.js";

const newMemory = (pages = 1) => new WebAssembly.Memory({ initial: pages, maximum: 65536, shared: true });

function rng(seed: number): () => number {
  return () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

test("allocations are 64-byte aligned and never overlap, across random alloc/free", () => {
  const a = new Allocator(newMemory(), 1000);
  assert.equal(a.base % 64, 0);
  assert.ok(a.base >= 1000);
  const live = new Map<number, number>();
  const rand = rng(7);
  for (let step = 0; step < 5000; step++) {
    if (live.size > 0 && rand() < 0.45) {
      const keys = [...live.keys()];
      const ptr = keys[Math.floor(rand() * keys.length)]!;
      a.free(ptr);
      live.delete(ptr);
    } else {
      const bytes = Math.floor(rand() * 5000);
      const ptr = a.alloc(bytes);
      assert.equal(ptr % 64, 0, `alignment of ${ptr}`);
      assert.ok(ptr >= a.base);
      live.set(ptr, Math.max(bytes, 1));
    }
  }
  const spans = [...live.entries()].sort((x, y) => x[0] - y[0]);
  for (let i = 1; i < spans.length; i++) {
    assert.ok(spans[i - 1]![0] + spans[i - 1]![1] <= spans[i]![0], `overlap at ${spans[i]![0]}`);
  }
  assert.ok(a.capacity >= spans[spans.length - 1]![0] + spans[spans.length - 1]![1]);
});

test("a freed block is reused, and neighbours coalesce", () => {
  const a = new Allocator(newMemory(), 0);
  const p1 = a.alloc(1000);
  const p2 = a.alloc(1000);
  const p3 = a.alloc(1000);
  a.alloc(64); // keeps p3's end from being the top
  a.free(p2);
  assert.equal(a.alloc(900), p2, "same-size request reuses the hole");
  a.free(p2);
  a.free(p1);
  a.free(p3);
  // p1..p3 coalesced into one 3 KiB hole: a 3000-byte request fits at p1.
  assert.equal(a.alloc(3000), p1);
});

test("freeing the top block lowers the bump pointer; inUse tracks live bytes", () => {
  const a = new Allocator(newMemory(), 0);
  const p = a.alloc(100);
  assert.equal(a.inUse, 128);
  a.free(p);
  assert.equal(a.inUse, 0);
  assert.equal(a.alloc(5000), p);
});

test("memory grows on demand and old addresses stay valid", () => {
  const memory = newMemory(1);
  const a = new Allocator(memory, 0);
  const p = a.alloc(1000);
  new Uint8Array(memory.buffer, p, 1000).fill(42);
  const big = a.alloc(10 << 20, "big");
  assert.ok(memory.buffer.byteLength >= big + (10 << 20));
  assert.equal(new Uint8Array(memory.buffer, p, 1000).every((x) => x === 42), true);
});

test("larger alignments are honoured", () => {
  const a = new Allocator(newMemory(), 0);
  a.alloc(100);
  const p = a.alloc(100, "page aligned", 4096);
  assert.equal(p % 4096, 0);
  const q = a.alloc(100);
  assert.ok(q < p, "the padding before the aligned block is reusable");
});

test("beyond 4 GiB: an OutOfMemoryError naming what was asked and what is in use", () => {
  const a = new Allocator(newMemory(), 0);
  a.alloc(3 << 20, "weights");
  assert.throws(
    () => a.alloc(5 * 2 ** 30, "kv pool"),
    (e: unknown) => {
      assert.ok(e instanceof OutOfMemoryError);
      assert.match(e.message, /cannot allocate 5\.00 GiB for kv pool/);
      assert.match(e.message, /3\.00 MiB already in use \(weights 3\.00 MiB\)/);
      assert.match(e.message, /4 GiB/);
      return true;
    },
  );
  // The failure changed nothing.
  assert.equal(a.inUse, 3 << 20);
  assert.equal(a.liveCount, 1);
});

test("bad arguments are named", () => {
  const a = new Allocator(newMemory(), 0);
  assert.throws(() => a.alloc(-1), /bytes must be a non-negative integer, got -1/);
  assert.throws(() => a.alloc(1.5), /bytes must be a non-negative integer, got 1.5/);
  assert.throws(() => a.alloc(8, "x", 96), /align must be a power of two ≥ 64, got 96/);
  assert.throws(() => a.free(12345), /ptr is not a live allocation of this allocator, got 12345/);
  const p = a.alloc(8);
  a.free(p);
  assert.throws(() => a.free(p), /not a live allocation/, "double free");
});

test("step arena: bump allocation, O(1) reset reuses the same chunks", () => {
  const a = new Allocator(newMemory(), 0);
  const arena = new StepArena(a);
  const first = [arena.alloc(100), arena.alloc(3 << 20), arena.alloc(10)];
  for (const p of first) assert.equal(p % 64, 0);
  assert.ok(first[1]! >= first[0]! + 100);
  const held = a.inUse;
  arena.reset();
  assert.equal(arena.used, 0);
  const second = [arena.alloc(100), arena.alloc(3 << 20), arena.alloc(10)];
  assert.deepEqual(second, first, "same step, same addresses");
  assert.equal(a.inUse, held, "steady state takes nothing more from the allocator");
  arena.release();
  assert.equal(a.inUse, 0);
});

// pagedAttention's checks: each bad block table, length, dtype, scale shape
// or plan throws an ArgumentError naming the argument and the value, before
// any kernel runs or anything stays allocated.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  ArgumentError,
  AttentionPlan,
  PagedKvCache,
  type PagedAttentionOptions,
  type Runtime,
  Tensor,
  appendKv,
  createRuntime,
  increFlashAttention,
  pagedAttention,
  planPagedAttention,
} from "../../src/ops-entry.js";

let rt: Runtime;
before(async () => {
  rt = await createRuntime({ threads: 2 });
});
after(() => rt.dispose());

const H = 4;
const HKV = 2;
const D = 16;

/** Asserts `fn` throws an ArgumentError for `argument` whose message matches `message`, leaving the heap as it was. */
function rejects(fn: () => unknown, argument: string, message: RegExp): void {
  const inUse = rt.heap.inUse;
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ArgumentError, `expected an ArgumentError, got ${String(e)}`);
    assert.equal(e.argument, argument);
    assert.match(e.message, message);
    return true;
  });
  assert.equal(rt.heap.inUse, inUse, "nothing stays allocated");
}

test("block tables: an id out of range, a negative id, a table too short for its length, a wrong size", () => {
  const cache = new PagedKvCache(rt, { numLayers: 1, numBlocks: 12, blockSize: 16, numKvHeads: HKV, headDim: D });
  const q = rt.tensor("f32", [3, H, D]).fill(0.5);
  const base: PagedAttentionOptions = { q, cache, layer: 0, cuSeqlensQ: [0, 1, 3], seqLens: [20, 50], blockTable: Int32Array.of(0, 1, -1, -1, 2, 3, 4, 5), maxBlocksPerSeq: 4 };
  rt.free(pagedAttention(rt, base).out); // fine
  rejects(() => pagedAttention(rt, { ...base, blockTable: Int32Array.of(0, 1, -1, -1, 2, 40, 4, 5) }), "blockTable[1][1]", /must be a block id < numBlocks 12, got 40/);
  rejects(() => pagedAttention(rt, { ...base, blockTable: Int32Array.of(0, -3, -1, -1, 2, 3, 4, 5) }), "blockTable[0][1]", /must be a block id ≥ 0, got -3/);
  rejects(() => pagedAttention(rt, { ...base, seqLens: [20, 70] }), "blockTable[1]", /is too short: seqLens\[1\] = 70 keys need 5 blocks of 16, but maxBlocksPerSeq is 4/);
  rejects(() => pagedAttention(rt, { ...base, blockTable: Int32Array.of(0, 1, 2) }), "blockTable", /must hold B·maxBlocksPerSeq = 2·4 = 8 entries, got 3/);
  rejects(() => pagedAttention(rt, { ...base, blockTable: [0, 1.5, 0, 0, 2, 3, 4, 5] }), "blockTable[0][1]", /must be an integer block id, got 1\.5/);
  // Entries past a sequence's blocks are padding and never read.
  rt.free(pagedAttention(rt, { ...base, blockTable: Int32Array.of(0, 1, 99, -7, 2, 3, 4, 5) }).out);
  // The same checks hold for a plan, against the cache it is used with.
  const plan = planPagedAttention(rt, { cache, numHeads: H, cuSeqlensQ: [0, 1, 3], seqLens: [20, 50], blockTable: Int32Array.of(0, 1, -1, -1, 2, 3, 4, 11), maxBlocksPerSeq: 4 });
  const small = new PagedKvCache(rt, { numLayers: 1, numBlocks: 8, blockSize: 16, numKvHeads: HKV, headDim: D });
  rejects(() => pagedAttention(rt, { q, cache: small, layer: 0, plan }), "blockTable[1][3]", /must be a block id < numBlocks 8, got 11/);
  plan.dispose();
  small.dispose();
  rt.free(q);
  cache.dispose();
});

test("lengths and query offsets", () => {
  const cache = new PagedKvCache(rt, { numLayers: 2, numBlocks: 12, blockSize: 16, numKvHeads: HKV, headDim: D });
  const q = rt.tensor("f32", [3, H, D]).fill(0.5);
  const base: PagedAttentionOptions = { q, cache, layer: 0, cuSeqlensQ: [0, 1, 3], seqLens: [20, 50], blockTable: Int32Array.of(0, 1, -1, -1, 2, 3, 4, 5) };
  rejects(() => pagedAttention(rt, { ...base, seqLens: [20, -1] }), "seqLens[1]", /must be ≥ 0, got -1/);
  rejects(() => pagedAttention(rt, { ...base, cuSeqlensQ: [0, 1, 4] }), "cuSeqlensQ[2]", /must equal q's 3 tokens, got 4/);
  rejects(() => pagedAttention(rt, { ...base, cuSeqlensQ: [0, 2, 1] }), "cuSeqlensQ[2]", /must be ≥ cuSeqlensQ\[1\] = 2 \(offsets are non-decreasing\), got 1/);
  rejects(() => pagedAttention(rt, { ...base, cuSeqlensQ: [0, 3] }), "cuSeqlensQ", /must have B \+ 1 = 3 offsets/);
  rejects(() => pagedAttention(rt, { ...base, seqLens: undefined }), "seqLens", /is required without a plan/);
  rejects(() => pagedAttention(rt, { ...base, layer: 2 }), "layer", /must be ≤ 1, got 2/);
  rt.free(q);
  cache.dispose();
});

test("one plan path: a call without a plan plans as planPagedAttention does, with its limits and the caller's names", () => {
  const cache = new PagedKvCache(rt, { numLayers: 1, numBlocks: 12, blockSize: 16, numKvHeads: HKV, headDim: D });
  const blockTable = Int32Array.of(0, 1, 2, 3, 4, 5, 6, 7);
  // BNSD q: the uniform query length is capped at MAX_DECODE_QLEN = 16, as AttentionPlan.create caps qLen.
  const q17 = rt.tensor("f32", [2, H, 17, D]).fill(0.5);
  rejects(() => pagedAttention(rt, { q: q17, layout: "BNSD", cache, layer: 0, seqLens: [40, 30], blockTable }), "q.shape", /query length must be ≤ 16 for layout BNSD .*got 17/);
  rejects(() => planPagedAttention(rt, { cache, numHeads: H, seqLens: [40, 30], blockTable, qLen: 17 }), "qLen", /must be ≤ 16, got 17/);
  const q2 = rt.tensor("f32", [2, H, 2, D]).fill(0.5);
  rejects(() => pagedAttention(rt, { q: q2, layout: "BNSD", cache, layer: 0, seqLens: [4, 3, 9], blockTable: Int32Array.of(0, 1, 2, 3, 4, 5) }), "seqLens", /must have q's batch 2 entries \(one per sequence\), got 3/);
  // planPagedAttention names seqLens as its caller spells them (not AttentionPlan.create's actualSeqLengths).
  rejects(() => planPagedAttention(rt, { cache, numHeads: H, seqLens: [40, -1], blockTable }), "seqLens[1]", /must be ≥ 0, got -1/);
  rejects(() => planPagedAttention(rt, { cache, numHeads: H, seqLens: [], blockTable }), "seqLens", /must list at least one sequence's length, got \[\]/);
  rejects(() => planPagedAttention(rt, { cache, numHeads: H, seqLens: [40, 90], blockTable }), "blockTable[1]", /is too short: seqLens\[1\] = 90 keys need 6 blocks of 16/);
  rejects(() => AttentionPlan.create(rt, { actualSeqLengths: [4], numHeads: H, numKvHeads: HKV, headDim: D, keyOffsets: [2] }), "keyOffsets", /is for paged plans; got \[2\] without a blockTable/);
  rejects(() => AttentionPlan.create(rt, { actualSeqLengths: [4], numHeads: H, numKvHeads: HKV, headDim: D, blockTable: [0], blockSize: 16, keyOffsets: [13] }), "blockTable[0]", /is too short: actualSeqLengths\[0\] = 17 keys need 2 blocks of 16, but maxBlocksPerSeq is 1/);
  // The same batch planned either way gives the same result, bit for bit.
  cache.layer(0).k.fill(0.3);
  cache.layer(0).v.fill(-0.2);
  const batch = { seqLens: [40, 30], blockTable, splitKv: 2 };
  const viaPlan = planPagedAttention(rt, { cache, numHeads: H, qLen: 2, ...batch });
  const a = pagedAttention(rt, { q: q2, layout: "BNSD", cache, layer: 0, plan: viaPlan });
  const b = pagedAttention(rt, { q: q2, layout: "BNSD", cache, layer: 0, ...batch });
  assert.deepEqual(b.out.toFloat32(), a.out.toFloat32());
  assert.equal(viaPlan.numSlots, 4, "splitKv 2 over two sequences");
  viaPlan.dispose();
  for (const t of [q17, q2, a.out, b.out]) rt.free(t);
  cache.dispose();
});

test("dtypes and scale shapes", () => {
  const f16 = new PagedKvCache(rt, { numLayers: 1, numBlocks: 4, blockSize: 8, numKvHeads: HKV, headDim: 12, dtype: "f16" });
  const batch = { cuSeqlensQ: [0, 1], seqLens: [5], blockTable: [2] };
  const q = rt.tensor("f32", [1, H, 12]).fill(1);
  const qh = rt.tensor("f16", [1, H, 12]).fill(1);
  rejects(() => pagedAttention(rt, { q: qh, cache: f16, layer: 0, ...batch }), "q.dtype", /must be "f32", got "f16"/);
  rejects(() => pagedAttention(rt, { q, cache: f16, layer: 0, ...batch, int8Path: "high-performance" }), "int8Path", /"high-performance" needs an int8 cache, got dtype "f16"/);
  rejects(() => pagedAttention(rt, { q, cache: f16, layer: 0, ...batch, int8Path: "fast" as never }), "int8Path", /must be one of "dequantize" \| "high-performance" \| "high-precision", got "fast"/);
  const int8 = new PagedKvCache(rt, { numLayers: 1, numBlocks: 4, blockSize: 8, numKvHeads: HKV, headDim: 12, dtype: "int8" });
  rejects(() => pagedAttention(rt, { q, cache: int8, layer: 0, ...batch, int8Path: "high-precision" }), "int8Path", /"high-precision" needs headDim % 8 == 0, got headDim 12/);
  rt.free(pagedAttention(rt, { q, cache: int8, layer: 0, ...batch, int8Path: "dequantize" }).out);
  const q16 = rt.tensor("f32", [1, H, 16]);
  rejects(() => pagedAttention(rt, { q: q16, cache: int8, layer: 0, ...batch }), "q.shape", /head dim must equal the cache's headDim 12, got 16/);
  const q3 = rt.tensor("f32", [1, 3, 12]);
  rejects(() => pagedAttention(rt, { q: q3, cache: int8, layer: 0, ...batch }), "q.shape", /heads must be a multiple of the cache's numKvHeads 2 \(GQA\), got 3/);
  // Scale shapes are fixed when the cache is made: per-channel scales must cover every (KV head, channel).
  assert.throws(
    () => new PagedKvCache(rt, { numLayers: 1, numBlocks: 4, blockSize: 8, numKvHeads: HKV, headDim: 12, dtype: "int8", int8: { mode: "per-channel", kScale: new Float32Array(12).fill(1), vScale: new Float32Array(24).fill(1) } }),
    /int8.kScale must have Hkv·D = 24 or numLayers·Hkv·D = 24 values, got 12/,
  );
  // A layer whose storage does not match the cache's dtype and scaling (a tampered KvLayer) is refused.
  const layer = int8.layer(0) as { kScale: Tensor | null };
  const saved = layer.kScale;
  layer.kScale = new Tensor(rt.memory, saved!.ptr, "f32", [HKV, 12]);
  rejects(() => pagedAttention(rt, { q, cache: int8, layer: 0, ...batch }), "cache.layer(0).kScale", /must be f32 \[4, 8, 2\] for int8 per-token KV, got f32 \[2, 12\]/);
  layer.kScale = saved;
  for (const t of [q, qh, q16, q3]) rt.free(t);
  f16.dispose();
  int8.dispose();
});

test("a bad int8 or fp8 scale is refused before the cache allocates: the heap is as it was", () => {
  const geometry = { numLayers: 2, numBlocks: 64, blockSize: 16, numKvHeads: HKV, headDim: D };
  const channels = HKV * D;
  const ones = (n: number): Float32Array => new Float32Array(n).fill(1);
  const withBad = (n: number, at: number, x: number): Float32Array => {
    const a = ones(n);
    a[at] = x;
    return a;
  };
  rejects(() => new PagedKvCache(rt, { ...geometry, dtype: "int8", int8: { mode: "per-channel", kScale: ones(channels), vScale: withBad(channels, 5, 0) } }), "int8.vScale[5]", /must be a finite positive number, got 0/);
  // The second layer's scale is bad: the first layer's must not have been written into a live allocation.
  rejects(() => new PagedKvCache(rt, { ...geometry, dtype: "int8", int8: { mode: "per-channel", kScale: withBad(2 * channels, channels + 1, Number.NaN), vScale: ones(channels) } }), `int8.kScale[${channels + 1}]`, /got NaN/);
  rejects(() => new PagedKvCache(rt, { ...geometry, dtype: "int8", int8: { mode: "per-channel", kScale: ones(channels), vScale: ones(channels), vOffset: withBad(channels, 0, Infinity) } }), "int8.vOffset[0]", /must be a finite number, got Infinity/);
  rejects(() => new PagedKvCache(rt, { ...geometry, dtype: "int8", int8: { mode: "per-channel", kScale: ones(3), vScale: ones(channels) } }), "int8.kScale", /must have Hkv·D = 32 or numLayers·Hkv·D = 64 values, got 3/);
  rejects(() => new PagedKvCache(rt, { ...geometry, dtype: "fp8e4m3", fp8: { kScale: 0.5, vScale: -1 } }), "fp8.vScale", /must be > 0, got -1/);
  rejects(() => new PagedKvCache(rt, { ...geometry, dtype: "fp8e5m2", fp8: { kScale: [0.5, 0] } }), "fp8.kScale[1]", /got 0/);
  rejects(() => new PagedKvCache(rt, { ...geometry, dtype: "fp8e5m2", fp8: { kScale: [0.5] } }), "fp8.kScale", /must be a number or one number per layer \(2\)/);
  // Good scales still make a cache, and disposing it gives every byte back.
  const inUse = rt.heap.inUse;
  const cache = new PagedKvCache(rt, { ...geometry, dtype: "int8", int8: { mode: "per-channel", kScale: ones(2 * channels), vScale: ones(channels) } });
  assert.ok(rt.heap.inUse >= inUse + cache.bytes);
  cache.dispose();
  assert.equal(rt.heap.inUse, inUse);
});

test("plans: built for this cache, these tensors, this kind of call", () => {
  const cache = new PagedKvCache(rt, { numLayers: 1, numBlocks: 8, blockSize: 16, numKvHeads: HKV, headDim: D });
  const q = rt.tensor("f32", [2, H, D]).fill(0.5);
  const batch = { cuSeqlensQ: [0, 1, 2], seqLens: [20, 3], blockTable: Int32Array.of(0, 1, 2, 3) };
  const plan = planPagedAttention(rt, { cache, numHeads: H, ...batch });
  rejects(() => pagedAttention(rt, { q, cache, layer: 0, plan, seqLens: [20, 3] }), "seqLens", /is a plan field; got \[20, 3\] together with a plan/);
  const other = new PagedKvCache(rt, { numLayers: 1, numBlocks: 8, blockSize: 8, numKvHeads: HKV, headDim: D });
  rejects(() => pagedAttention(rt, { q, cache: other, layer: 0, plan }), "plan.blockSize", /must match the cache's blockSize 8, got 16/);
  const q8 = rt.tensor("f32", [2, 8, D]);
  rejects(() => pagedAttention(rt, { q: q8, cache, layer: 0, plan }), "plan.numHeads", /must match q's heads 8, got 4/);
  const q3 = rt.tensor("f32", [3, H, D]);
  rejects(() => pagedAttention(rt, { q: q3, cache, layer: 0, plan }), "q.shape", /must have the plan's cuSeqlensQ\[2\] = 2 tokens, got 3/);
  const padded = AttentionPlan.create(rt, { actualSeqLengths: [20, 3], numHeads: H, numKvHeads: HKV, headDim: D });
  rejects(() => pagedAttention(rt, { q, cache, layer: 0, plan: padded }), "plan", /was built without a blockTable/);
  const k = rt.tensor("f32", [2, HKV, 20, D]);
  const q4 = rt.tensor("f32", [2, H, 1, D]);
  rejects(() => increFlashAttention(rt, { q: q4, k, v: k, plan }), "plan", /was built for a paged cache \(blockTable\): use pagedAttention/);
  rejects(() => planPagedAttention(rt, { cache, numHeads: H, ...batch, qLen: 2 }), "qLen", /is for uniform batches; got 2 together with cuSeqlensQ/);
  plan.dispose();
  rejects(() => pagedAttention(rt, { q, cache, layer: 0, plan }), "plan", /was disposed/);
  padded.dispose();
  for (const t of [q, q8, q3, k, q4]) rt.free(t);
  other.dispose();
  cache.dispose();
});

test("appendKv refuses two tokens written to one slot in one append", () => {
  const cache = new PagedKvCache(rt, { numLayers: 1, numBlocks: 2, blockSize: 4, numKvHeads: HKV, headDim: D });
  const k = rt.tensor("f32", [2, HKV, D]).fill(1);
  rejects(() => appendKv(rt, { cache, layer: 0, k, v: k, slotMapping: Int32Array.of(5, 5) }), "slotMapping[1]", /writes slot 5, already written by token 0 in this append/);
  rt.free(k);
  cache.dispose();
});

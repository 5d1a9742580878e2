// AttentionPlan: the split decision (the seed IFA rule made exact by LPT
// scheduling), chunks balanced by actual length, reuse across layers, and
// the checks that tie a plan to its tensors.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { AttentionPlan, ArgumentError, type IncreFlashAttentionOptions, type Runtime, createRuntime } from "../../src/ops-entry.js";
import { chooseChunks, lptMakespan } from "../../src/attention/plan.js";
import { assertClose, freeAll, host, hostCache, materialize, reference, rng, wasm } from "./support.js";

function plan(rt: Runtime, lengths: number[], Hkv: number, threads: number, extra: object = {}): AttentionPlan {
  return AttentionPlan.create(rt, { actualSeqLengths: lengths, numHeads: 4 * Hkv, numKvHeads: Hkv, headDim: 64, threads, ...extra });
}

/** Chunk lengths of sequence b. */
function chunkLengths(p: AttentionPlan, b: number): number[] {
  const bounds = p.chunkBounds[b]!;
  return Array.from(bounds.subarray(1), (x, i) => x - bounds[i]!);
}

describe("AttentionPlan", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime();
  });
  after(() => rt.dispose());

  test("LPT makespan (longest first onto the least-loaded thread; not always optimal)", () => {
    assert.equal(lptMakespan([5, 4, 3, 3, 3], 2), 10); // the optimum is 9: {5, 4}, {3, 3, 3}
    assert.equal(lptMakespan([3, 3, 2, 2, 2], 2), 7);
    assert.equal(lptMakespan([8], 4), 8);
    assert.equal(lptMakespan([], 2), 0);
  });

  test("no split when the (batch, KV head) units already keep every thread busy", () => {
    const p = plan(rt, [4096], 8, 2);
    assert.equal(p.split, false);
    assert.equal(p.numItems, 8);
    assert.deepEqual(chunkLengths(p, 0), [4096]);
    assert.match(p.reason, /no split/);
    p.dispose();
    assert.equal(plan(rt, [4096], 1, 1).split, false, "one thread never splits");
  });

  test("the seed rule: B·Hkv < 0.4 × threads splits", () => {
    // 4 units on 16 threads: 4 < 6.4.
    const p = plan(rt, [8192], 4, 16);
    assert.equal(p.split, true);
    assert.ok(p.chunkBounds[0]!.length - 1 >= 4, `chunks: ${p.chunkBounds[0]!.length - 1}`);
    p.dispose();
  });

  test("one long sequence on two threads is split into equal chunks covering [0, length)", () => {
    const p = plan(rt, [4096], 1, 2);
    assert.equal(p.split, true);
    const lens = chunkLengths(p, 0);
    assert.ok(lens.length >= 2);
    assert.equal(lens.reduce((a, b) => a + b, 0), 4096);
    assert.ok(Math.max(...lens) - Math.min(...lens) <= 1, `balanced chunks, got ${lens}`);
    assert.equal(p.chunkBounds[0]![0], 0);
    p.dispose();
  });

  test("chunks follow actual lengths, not the capacity: the long sequence is cut, short ones are not", () => {
    const lengths = [16000, 10, 0, 300];
    const { chunks } = chooseChunks(Int32Array.from(lengths), 1, 2);
    assert.ok(chunks[0]! > 1);
    assert.deepEqual(chunks.slice(1), [1, 1, 1]);
    const p = plan(rt, lengths, 1, 2);
    const lens = chunkLengths(p, 0);
    assert.ok(Math.max(...lens) - Math.min(...lens) <= 1);
    assert.deepEqual(chunkLengths(p, 2), [0], "an empty sequence is one empty unit");
    // Every chunk but the ones of unsplit sequences gets a slot.
    assert.equal(p.numSlots, lens.length);
    p.dispose();
  });

  test("forced splitKv: at most one chunk per key", () => {
    const p = plan(rt, [5, 0, 1000], 2, 2, { splitKv: 8 });
    assert.deepEqual(chunkLengths(p, 0), [1, 1, 1, 1, 1]);
    assert.deepEqual(chunkLengths(p, 1), [0]);
    assert.deepEqual(chunkLengths(p, 2), [125, 125, 125, 125, 125, 125, 125, 125]);
    assert.equal(p.numItems, (5 + 1 + 8) * 2);
    p.dispose();
  });

  test("dispose returns the plan's memory", () => {
    const before = rt.heap.inUse;
    const p = plan(rt, [100000, 5, 7], 2, 8);
    assert.ok(rt.heap.inUse > before);
    p.dispose();
    p.dispose();
    assert.equal(rt.heap.inUse, before);
  });

  test("one plan serves every layer of a step (different caches, same lengths)", () => {
    const random = rng(7);
    const lengths = [3000, 1, 700];
    const D = 64;
    const p = AttentionPlan.create(rt, { actualSeqLengths: lengths, numHeads: 8, numKvHeads: 2, headDim: D, qLen: 2 });
    const forced = AttentionPlan.create(rt, { actualSeqLengths: lengths, numHeads: 8, numKvHeads: 2, headDim: D, qLen: 2, splitKv: 4 });
    for (let layer = 0; layer < 3; layer++) {
      const o = materialize(rt, {
        q: host("f32", [3, 8, 2, D], () => random() - 0.5),
        k: hostCache("bf16", "BNSD", 3, 2, 3000, D, lengths, random),
        v: hostCache("bf16", "BNSD", 3, 2, 3000, D, lengths, random),
      }) as unknown as IncreFlashAttentionOptions;
      const ref = reference.decode(rt, { ...o, actualSeqLengths: lengths, causal: true });
      assertClose(`layer ${layer}`, wasm.decode(rt, { ...o, plan: p, causal: true }), ref, D);
      assertClose(`layer ${layer}, forced split`, wasm.decode(rt, { ...o, plan: forced, causal: true }), ref, D);
      freeAll(rt, o);
    }
    p.dispose();
    forced.dispose();
  });

  test("a plan must match the tensors, the lengths and the runtime", async () => {
    const q = rt.tensor("f32", [2, 8, 1, 16]);
    const k = rt.tensor("f32", [2, 2, 50, 16]);
    const p = AttentionPlan.create(rt, { actualSeqLengths: [50, 20], numHeads: 8, numKvHeads: 2, headDim: 16 });
    const call = (extra: object) => () => wasm.decode(rt, { q, k, v: k, ...extra } as IncreFlashAttentionOptions);
    assert.throws(call({ plan: AttentionPlan.create(rt, { actualSeqLengths: [50, 20], numHeads: 8, numKvHeads: 4, headDim: 16 }) }), /plan\.numKvHeads must match the tensors' 2, got 4/);
    assert.throws(call({ plan: AttentionPlan.create(rt, { actualSeqLengths: [50, 20], numHeads: 8, numKvHeads: 2, headDim: 16, qLen: 2 }) }), /plan\.qLen must match the tensors' 1, got 2/);
    assert.throws(call({ plan: AttentionPlan.create(rt, { actualSeqLengths: [51, 20], numHeads: 8, numKvHeads: 2, headDim: 16 }) }), /plan\.lengths\[0\] must be ≤ 50 \(the cache capacity\), got 51/);
    assert.throws(call({ plan: p, actualSeqLengths: [50, 21] }), /actualSeqLengths\[1\] must equal the plan's length 20, got 21/);
    assert.throws(call({ plan: p, splitKv: 2 }), ArgumentError);
    const other = await createRuntime({ threads: 1 });
    const foreign = AttentionPlan.create(other, { actualSeqLengths: [50, 20], numHeads: 8, numKvHeads: 2, headDim: 16 });
    assert.throws(call({ plan: foreign }), /plan was built for another runtime/);
    await other.dispose();
    p.dispose();
    assert.throws(call({ plan: p }), /plan was disposed/);
    assert.throws(() => AttentionPlan.create(rt, { actualSeqLengths: [1, -2], numHeads: 8, numKvHeads: 2, headDim: 16 }), /actualSeqLengths\[1\] must be ≥ 0, got -2/);
    assert.throws(() => AttentionPlan.create(rt, { actualSeqLengths: [1.5], numHeads: 8, numKvHeads: 2, headDim: 16 }), /actualSeqLengths\[0\] must be an integer, got 1.5/);
    assert.throws(() => AttentionPlan.create(rt, { actualSeqLengths: [1], numHeads: 6, numKvHeads: 4, headDim: 16 }), /numHeads must be a multiple of numKvHeads 4 \(GQA\), got 6/);
    assert.throws(() => AttentionPlan.create(rt, { actualSeqLengths: [1], numHeads: 4, numKvHeads: 4, headDim: 320 }), /headDim must be ≤ 256, got 320/);
    assert.throws(() => AttentionPlan.create(rt, { actualSeqLengths: [1], numHeads: 4, numKvHeads: 4, headDim: 64, qLen: 17 }), /qLen must be ≤ 16, got 17/);
    assert.throws(() => AttentionPlan.create(rt, { actualSeqLengths: [], numHeads: 4, numKvHeads: 4, headDim: 64 }), /actualSeqLengths must list at least one sequence/);
    rt.free(q);
    rt.free(k);
  });
});

// buildForwardBatch: a mixed step — a decode token, a new short prompt, and a
// partial prefill chunk after a prefix-cache hit — gives exactly the tokens,
// positions, slot mapping, block table and logit rows the decoder needs.
import assert from "node:assert/strict";
import { test } from "node:test";
import { KvCacheManager, Request, Scheduler, type SchedulerOutput, buildForwardBatch } from "../../src/ops-entry.js";
import { ToyModel, runStep, toyGenerate } from "./toy-model.js";

const BS = 4;
const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);
const plain = (batch: ReturnType<typeof buildForwardBatch>) =>
  Object.fromEntries(Object.entries(batch).map(([k, v]) => [k, v instanceof Int32Array ? [...v] : v]));

test("a mixed batch: decode, new prompt, and a prefix-hit partial chunk", () => {
  const kv = new KvCacheManager({ numBlocks: 16, blockSize: BS });
  const scheduler = new Scheduler({ kvCacheManager: kv, maxNumBatchedTokens: 12, maxNumSeqs: 8, maxModelLen: 64 });
  const model = new ToyModel(16, BS);

  // Warm the cache: blocks 0 and 1 hold [100..103] and [104..107]; freed, they stay cached.
  scheduler.addRequest(new Request({ requestId: "warm", promptTokenIds: range(100, 9), maxTokens: 1 }));
  runStep(scheduler, model);
  assert.deepEqual(kv.pool.freeQueue(), [...range(3, 13), 2, 1, 0]);

  const d = new Request({ requestId: "d", promptTokenIds: range(1, 5), maxTokens: 6 });
  scheduler.addRequest(d);
  runStep(scheduler, model); // d: blocks [3, 4], 5 tokens computed, 1 sampled
  const n = new Request({ requestId: "n", promptTokenIds: [9, 8, 7], maxTokens: 3 });
  const tail = range(500, 14);
  const p = new Request({ requestId: "p", promptTokenIds: [...range(100, 8), ...tail], maxTokens: 2 });
  scheduler.addRequest(n);
  scheduler.addRequest(p);

  const output = scheduler.schedule();
  assert.deepEqual(
    output.scheduled.map((s) => [s.request.requestId, s.numComputedTokens, s.numNewTokens, s.sampling, s.kind]),
    [
      ["d", 5, 1, true, "running"],
      ["n", 0, 3, true, "new"],
      ["p", 8, 8, false, "new"], // 8 tokens hit, 8 of the remaining 14 fit the budget
    ],
  );
  assert.equal(p.numCachedTokens, 8);
  const batch = buildForwardBatch(output, BS);
  assert.deepEqual(plain(batch), {
    tokens: [d.allTokenIds[5]!, 9, 8, 7, ...tail.slice(0, 8)],
    positions: [5, 0, 1, 2, 8, 9, 10, 11, 12, 13, 14, 15],
    cuSeqlensQ: [0, 1, 4, 12],
    seqLens: [6, 3, 16],
    // [B = 3, maxBlocksPerSeq = 4], unused entries 0
    blockTable: [3, 4, 0, 0, 5, 0, 0, 0, 0, 1, 6, 7],
    maxBlocksPerSeq: 4,
    // d: block 4 offset 1; n: block 5 offsets 0–2; p: blocks 6 and 7
    slotMapping: [17, 20, 21, 22, 24, 25, 26, 27, 28, 29, 30, 31],
    logitIndices: [0, 3],
  });

  // Finish the run: every output equals its request run alone.
  const rows = model.forward(batch);
  scheduler.updateFromOutput(new Map([["d", [rows[0]!]], ["n", [rows[1]!]]]));
  while (scheduler.hasUnfinishedRequests) runStep(scheduler, model);
  for (const r of [d, n, p]) assert.deepEqual(r.outputTokenIds, toyGenerate(r.promptTokenIds, r.maxTokens), r.requestId);
  assert.equal(kv.pool.numUsedBlocks, 0);
});

test("an empty step gives an empty batch", () => {
  const empty: SchedulerOutput = { scheduled: [], numScheduledTokens: 0, preemptedRequestIds: [], finishedRequestIds: [], numCommonPrefixBlocks: 0 };
  assert.deepEqual(plain(buildForwardBatch(empty, BS)), {
    tokens: [],
    positions: [],
    cuSeqlensQ: [0],
    seqLens: [],
    blockTable: [],
    maxBlocksPerSeq: 0,
    slotMapping: [],
    logitIndices: [],
  });
});

test("a block table too short for its tokens is refused", () => {
  const request = new Request({ requestId: "r", promptTokenIds: range(0, 5) });
  const output: SchedulerOutput = {
    scheduled: [{ request, numComputedTokens: 0, numNewTokens: 5, blockIds: [0], newBlockIds: [0], sampling: true, specTokenIds: [], kind: "new" }],
    numScheduledTokens: 5,
    preemptedRequestIds: [],
    finishedRequestIds: [],
    numCommonPrefixBlocks: 0,
  };
  assert.throws(() => buildForwardBatch(output, BS), /output\.scheduled\[0\]\.blockIds has 1 blocks, too few for 5 tokens at block size 4/);
});

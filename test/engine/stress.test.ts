// Randomized stress: many requests with shared prefixes and random lengths on
// a tiny pool (so preemption and eviction are constant), random arrivals,
// aborts (some while a step is in flight) and stop tokens. After every step:
// each block's reference count equals the number of requests holding it,
// free + used = total, the free queue holds exactly the unreferenced blocks,
// only running requests hold blocks, a block in two tables is a cached block
// at the same index with the same hash, and a step writes a block only when
// no earlier holder exists (same-step sharers read it). At the end every
// surviving request's output equals the toy model run alone, and every block
// is free.
import assert from "node:assert/strict";
import { test } from "node:test";
import { KvCacheManager, Request, Scheduler, type SchedulerOutput, buildForwardBatch } from "../../src/ops-entry.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import { ToyModel, rng, sampledMap, toyGenerate } from "./toy-model.js";

interface Config {
  seed: number;
  blockSize: number;
  numBlocks: number;
  maxModelLen: number;
  maxNumBatchedTokens: number;
  maxNumSeqs: number;
}

const isStop = (t: number) => t % 53 === 0;

function checkInvariants(kv: KvCacheManager, scheduler: Scheduler, cfg: Config, where: string): void {
  const pool = kv.pool;
  const holders = new Map<number, { id: string; index: number }[]>();
  const held = [...kv.requestIds()];
  assert.deepEqual(held.sort(), scheduler.runningRequestIds().sort(), `${where}: only running requests hold blocks`);
  for (const id of held) {
    const table = kv.blockIds(id);
    const request = scheduler.getRequest(id)!;
    assert.equal(table.length, Math.ceil(request.numComputedTokens / cfg.blockSize), `${where}: ${id} holds one block per ${cfg.blockSize} computed tokens`);
    assert.equal(new Set(table).size, table.length, `${where}: ${id} lists a block twice`);
    table.forEach((b, index) => holders.set(b, [...(holders.get(b) ?? []), { id, index }]));
  }
  let used = 0;
  for (let b = 0; b < cfg.numBlocks; b++) {
    const h = holders.get(b) ?? [];
    assert.equal(pool.refCount(b), h.length, `${where}: block ${b} ref count vs holders ${JSON.stringify(h)}`);
    if (h.length > 0) used++;
    if (h.length > 1) {
      const hash = pool.blockHash(b);
      assert.notEqual(hash, null, `${where}: block ${b} is shared but not cached`);
      for (const { id, index } of h) {
        assert.equal(index, h[0]!.index, `${where}: shared block ${b} at different positions`);
        assert.equal(scheduler.getRequest(id)!.blockHashes[index], hash, `${where}: ${id} shares block ${b} under another hash`);
      }
    }
  }
  assert.equal(pool.numUsedBlocks, used, `${where}: used blocks`);
  assert.equal(pool.numFreeBlocks + pool.numUsedBlocks, cfg.numBlocks, `${where}: free + used = total`);
  const queue = pool.freeQueue();
  assert.equal(queue.length, pool.numFreeBlocks, `${where}: free queue length`);
  assert.ok(queue.every((b) => pool.refCount(b) === 0), `${where}: the free queue holds only unreferenced blocks`);
  assert.ok(scheduler.numRunning <= cfg.maxNumSeqs, `${where}: maxNumSeqs`);
}

/**
 * A step writes a block only if the writing request is its first holder in
 * batch order: any other holder is a later row of the same step that took the
 * block as a prefix-cache hit, and so reads it (the decoder writes a layer's
 * K/V for the whole batch before that layer's attention).
 */
function checkWrites(kv: KvCacheManager, output: SchedulerOutput<unknown>, batch: ForwardBatch, cfg: Config, where: string): void {
  const holders = new Map<number, { id: string; index: number }[]>();
  for (const id of kv.requestIds()) kv.blockIds(id).forEach((b, index) => holders.set(b, [...(holders.get(b) ?? []), { id, index }]));
  const rowOf = new Map(output.scheduled.map((s, i) => [s.request.requestId, i]));
  output.scheduled.forEach((s, row) => {
    for (let t = batch.cuSeqlensQ[row]!; t < batch.cuSeqlensQ[row + 1]!; t++) {
      const b = Math.floor(batch.slotMapping[t]! / cfg.blockSize);
      for (const h of holders.get(b) ?? []) {
        if (h.id === s.request.requestId) continue;
        const reader = rowOf.get(h.id);
        assert.ok(reader !== undefined && reader > row, `${where}: ${s.request.requestId} writes block ${b}, which ${h.id} already holds`);
        const r = output.scheduled[reader]!;
        assert.ok(r.kind !== "running" && r.numComputedTokens >= (h.index + 1) * cfg.blockSize, `${where}: ${h.id} shares block ${b} but does not take it as a hit`);
      }
    }
  });
}

function run(cfg: Config) {
  const rand = rng(cfg.seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const kv = new KvCacheManager({ numBlocks: cfg.numBlocks, blockSize: cfg.blockSize });
  const scheduler = new Scheduler({
    kvCacheManager: kv,
    maxNumBatchedTokens: cfg.maxNumBatchedTokens,
    maxNumSeqs: cfg.maxNumSeqs,
    maxModelLen: cfg.maxModelLen,
    maxWaitingRequests: 10,
    stopChecker: (r, t) => (r.state === "stops" && isStop(t) ? { reason: "stop", stopReason: t } : null),
  });
  const model = new ToyModel(cfg.numBlocks, cfg.blockSize);
  const prefixes = [0, 1, 2].map(() => Array.from({ length: int(3, 14) }, () => int(0, 30)));
  const all: Request<string>[] = [];
  let rejected = 0;
  let aborted = 0;
  let steps = 0;
  const abortOne = () => {
    const live = all.filter((r) => !r.isFinished);
    if (live.length > 0 && scheduler.abort(live[int(0, live.length - 1)]!.requestId)) aborted++;
  };

  while (all.length < 80 || scheduler.hasUnfinishedRequests) {
    assert.ok(++steps < 5000, "the run makes progress");
    for (let k = int(0, 2); k > 0 && all.length < 80; k--) {
      const prefix = prefixes[int(0, 2)]!;
      const suffix = Array.from({ length: int(1, 12) }, () => int(0, 30));
      const prompt = [...prefix, ...suffix].slice(0, cfg.maxModelLen - 1 - int(0, 3));
      const r = new Request({ requestId: `r${all.length}`, promptTokenIds: prompt, maxTokens: int(1, 14), state: rand() < 0.5 ? "stops" : "free" });
      if (scheduler.addRequest(r)) all.push(r);
      else rejected++;
    }
    if (rand() < 0.04) abortOne();
    const where = `seed ${cfg.seed} step ${steps}`;
    const output = scheduler.schedule();
    assert.ok(output.numScheduledTokens <= cfg.maxNumBatchedTokens, `${where}: token budget`);
    const batch = buildForwardBatch(output, cfg.blockSize);
    checkWrites(kv, output, batch, cfg, where);
    const rows = model.forward(batch);
    if (rand() < 0.03) abortOne(); // a client disconnects while the forward runs
    scheduler.updateFromOutput(sampledMap(output, rows));
    checkInvariants(kv, scheduler, cfg, where);
  }

  for (const r of all) {
    if (r.finishReason === "abort") continue;
    const cap = Math.min(r.maxTokens, cfg.maxModelLen - r.numPromptTokens);
    const alone = toyGenerate(r.promptTokenIds, cap);
    // A length limit wins over a stop token on the same token, as in vLLM.
    const stop = r.state === "stops" ? alone.findIndex(isStop) : -1;
    const stops = stop >= 0 && stop < cap - 1;
    assert.deepEqual(r.outputTokenIds, stops ? alone.slice(0, stop + 1) : alone, `seed ${cfg.seed}: ${r.requestId} (${r.finishReason}, ${r.numPreemptions} preemptions)`);
    assert.equal(r.finishReason, stops ? "stop" : "length", `seed ${cfg.seed}: ${r.requestId}`);
  }
  assert.equal(kv.pool.numUsedBlocks, 0, "every block is free at the end");
  return { preemptions: scheduler.numPreemptions, hits: kv.prefixCacheStats().hits + kv.prefixCacheStats().preemptedHits, rejected, aborted };
}

test("randomized runs on a tiny pool keep every invariant and every output", () => {
  const configs: Config[] = [
    { seed: 1, blockSize: 4, numBlocks: 12, maxModelLen: 40, maxNumBatchedTokens: 16, maxNumSeqs: 5 },
    { seed: 2, blockSize: 1, numBlocks: 48, maxModelLen: 32, maxNumBatchedTokens: 9, maxNumSeqs: 6 },
    { seed: 3, blockSize: 3, numBlocks: 14, maxModelLen: 36, maxNumBatchedTokens: 7, maxNumSeqs: 4 },
    { seed: 4, blockSize: 8, numBlocks: 6, maxModelLen: 48, maxNumBatchedTokens: 32, maxNumSeqs: 8 },
    { seed: 5, blockSize: 16, numBlocks: 4, maxModelLen: 40, maxNumBatchedTokens: 5, maxNumSeqs: 3 },
  ];
  for (const cfg of configs) {
    const stats = run(cfg);
    // The run must exercise what it claims to test.
    assert.ok(stats.preemptions > 0, `seed ${cfg.seed}: no preemption happened`);
    assert.ok(stats.hits > 0, `seed ${cfg.seed}: no prefix-cache hit happened`);
    assert.ok(stats.aborted > 0, `seed ${cfg.seed}: no abort happened`);
    assert.ok(stats.rejected > 0, `seed ${cfg.seed}: the waiting queue never filled`);
  }
});

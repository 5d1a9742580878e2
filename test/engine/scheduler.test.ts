// Scheduler: no prefill/decode phases, chunked prefill, the token budget and
// maxNumSeqs, preemption of the newest request with its blocks freed and the
// request recomputed to the same result, abort, finish conditions, the bounded
// waiting queue, and protocol errors. Exact block ids; the toy model checks
// that every output equals the request run alone.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ArgumentError, KvCacheManager, Request, Scheduler, type SchedulerOptions, type SchedulerOutput } from "../../src/ops-entry.js";
import { ToyModel, runStep, toyGenerate } from "./toy-model.js";

const BS = 4;
const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);

function setup(numBlocks: number, options: Partial<SchedulerOptions<unknown>> = {}) {
  const kv = new KvCacheManager({ numBlocks, blockSize: BS });
  const scheduler = new Scheduler({ kvCacheManager: kv, maxNumBatchedTokens: 64, maxNumSeqs: 8, maxModelLen: numBlocks * BS, ...options });
  return { kv, scheduler, model: new ToyModel(numBlocks, BS) };
}

/** The fields of each scheduled request that a test pins down. */
const plan = (output: SchedulerOutput<unknown>) =>
  output.scheduled.map((s) => ({
    id: s.request.requestId,
    from: s.numComputedTokens,
    n: s.numNewTokens,
    blocks: [...s.blockIds],
    fresh: [...s.newBlockIds],
    sampling: s.sampling,
    kind: s.kind,
  }));

test("a lone request: the whole prompt in one step, then one token a step, growing a block at each boundary", () => {
  const { kv, scheduler, model } = setup(8);
  const prompt = range(10, 6);
  assert.equal(scheduler.addRequest(new Request({ requestId: "a", promptTokenIds: prompt, maxTokens: 4 })), true);
  const steps = [runStep(scheduler, model), runStep(scheduler, model), runStep(scheduler, model), runStep(scheduler, model)];
  assert.deepEqual(steps.map((s) => plan(s.output)), [
    [{ id: "a", from: 0, n: 6, blocks: [0, 1], fresh: [0, 1], sampling: true, kind: "new" }],
    [{ id: "a", from: 6, n: 1, blocks: [0, 1], fresh: [], sampling: true, kind: "running" }],
    [{ id: "a", from: 7, n: 1, blocks: [0, 1], fresh: [], sampling: true, kind: "running" }],
    [{ id: "a", from: 8, n: 1, blocks: [0, 1, 2], fresh: [2], sampling: true, kind: "running" }],
  ]);
  const last = steps[3]!.results[0]!;
  assert.equal(last.finishReason, "length");
  assert.deepEqual(last.request.outputTokenIds, toyGenerate(prompt, 4));
  assert.equal(last.request.status, "finished");
  assert.equal(kv.pool.numUsedBlocks, 0);
  assert.equal(scheduler.hasUnfinishedRequests, false);
  assert.deepEqual(scheduler.schedule().finishedRequestIds, ["a"]);
});

test("chunked prefill: a prompt longer than the budget is split across steps and samples only at its end", () => {
  const { scheduler, model } = setup(8, { maxNumBatchedTokens: 4 });
  const prompt = range(40, 10);
  scheduler.addRequest(new Request({ requestId: "a", promptTokenIds: prompt, maxTokens: 2 }));
  const steps = [runStep(scheduler, model), runStep(scheduler, model), runStep(scheduler, model), runStep(scheduler, model)];
  assert.deepEqual(steps.map((s) => plan(s.output)), [
    [{ id: "a", from: 0, n: 4, blocks: [0], fresh: [0], sampling: false, kind: "new" }],
    [{ id: "a", from: 4, n: 4, blocks: [0, 1], fresh: [1], sampling: false, kind: "running" }],
    [{ id: "a", from: 8, n: 2, blocks: [0, 1, 2], fresh: [2], sampling: true, kind: "running" }],
    [{ id: "a", from: 10, n: 1, blocks: [0, 1, 2], fresh: [], sampling: true, kind: "running" }],
  ]);
  assert.deepEqual(steps.map((s) => s.results.length), [0, 0, 1, 1]);
  assert.deepEqual(steps[3]!.results[0]!.request.outputTokenIds, toyGenerate(prompt, 2));
});

test("running requests go first; waiting ones share what is left of the token budget", () => {
  const { scheduler, model } = setup(16, { maxNumBatchedTokens: 6 });
  scheduler.addRequest(new Request({ requestId: "a", promptTokenIds: range(1, 3), maxTokens: 5 }));
  scheduler.addRequest(new Request({ requestId: "b", promptTokenIds: range(100, 10), maxTokens: 2 }));
  const steps = [runStep(scheduler, model), runStep(scheduler, model), runStep(scheduler, model)];
  assert.deepEqual(steps.map((s) => plan(s.output)), [
    [
      { id: "a", from: 0, n: 3, blocks: [0], fresh: [0], sampling: true, kind: "new" },
      { id: "b", from: 0, n: 3, blocks: [1], fresh: [1], sampling: false, kind: "new" },
    ],
    [
      { id: "a", from: 3, n: 1, blocks: [0], fresh: [], sampling: true, kind: "running" },
      { id: "b", from: 3, n: 5, blocks: [1, 2], fresh: [2], sampling: false, kind: "running" },
    ],
    [
      { id: "a", from: 4, n: 1, blocks: [0, 3], fresh: [3], sampling: true, kind: "running" },
      { id: "b", from: 8, n: 2, blocks: [1, 2, 4], fresh: [4], sampling: true, kind: "running" },
    ],
  ]);
  assert.deepEqual(steps.map((s) => s.output.numScheduledTokens), [6, 6, 3]);
});

test("maxNumSeqs caps the running requests; the next waiting one starts when one finishes", () => {
  const { scheduler, model } = setup(16, { maxNumSeqs: 2 });
  scheduler.addRequest(new Request({ requestId: "a", promptTokenIds: [1, 2], maxTokens: 1 }));
  scheduler.addRequest(new Request({ requestId: "b", promptTokenIds: [3, 4], maxTokens: 3 }));
  scheduler.addRequest(new Request({ requestId: "c", promptTokenIds: [5, 6], maxTokens: 1 }));
  const s1 = runStep(scheduler, model);
  assert.deepEqual(plan(s1.output).map((p) => p.id), ["a", "b"]);
  assert.deepEqual(scheduler.waitingRequestIds(), ["c"]);
  assert.equal(s1.results[0]!.finishReason, "length");
  const s2 = runStep(scheduler, model);
  assert.deepEqual(plan(s2.output).map((p) => [p.id, p.kind]), [["b", "running"], ["c", "new"]]);
  assert.deepEqual(s2.output.finishedRequestIds, ["a"]);
});

test("a waiting request that does not fit blocks the queue behind it (FCFS), without preempting", () => {
  const { scheduler, model } = setup(4, { maxModelLen: 16 });
  scheduler.addRequest(new Request({ requestId: "a", promptTokenIds: range(1, 8), maxTokens: 2 }));
  scheduler.addRequest(new Request({ requestId: "big", promptTokenIds: range(20, 9) }));
  scheduler.addRequest(new Request({ requestId: "small", promptTokenIds: [7] }));
  const s1 = runStep(scheduler, model);
  assert.deepEqual(plan(s1.output).map((p) => p.id), ["a"], "big needs 3 blocks, 2 are free; small waits behind it");
  assert.deepEqual(s1.output.preemptedRequestIds, []);
  assert.deepEqual(scheduler.waitingRequestIds(), ["big", "small"]);
});

test("out of blocks, the newest running request is preempted; it is recomputed later to the same result", () => {
  const { kv, scheduler, model } = setup(6, { maxModelLen: 24 });
  const prompts = { a: range(1, 8), b: range(30, 8), c: range(60, 8) };
  const requests = Object.entries(prompts).map(([id, prompt]) => new Request({ requestId: id, promptTokenIds: prompt, maxTokens: 3 }));
  for (const r of requests) scheduler.addRequest(r);
  const c = requests[2]!;
  const s1 = runStep(scheduler, model);
  assert.deepEqual(plan(s1.output).map((p) => [p.id, p.blocks]), [["a", [0, 1]], ["b", [2, 3]], ["c", [4, 5]]]);

  // a's next token needs a block and none is free: c, the newest, gives back 4 and 5 (tail first).
  const s2 = runStep(scheduler, model);
  assert.deepEqual(s2.output.preemptedRequestIds, ["c"]);
  assert.deepEqual(plan(s2.output), [
    { id: "a", from: 8, n: 1, blocks: [0, 1, 5], fresh: [5], sampling: true, kind: "running" },
    { id: "b", from: 8, n: 1, blocks: [2, 3, 4], fresh: [4], sampling: true, kind: "running" },
  ]);
  assert.equal(c.status, "preempted");
  assert.equal(c.numComputedTokens, 0);
  assert.equal(c.numPreemptions, 1);
  assert.deepEqual(c.outputTokenIds, toyGenerate(prompts.c, 1), "its sampled token is kept");
  assert.deepEqual(scheduler.waitingRequestIds(), ["c"]);
  assert.deepEqual(kv.blockIds("c"), []);

  // Still no room for c (3 blocks); a and b finish.
  const s3 = runStep(scheduler, model);
  assert.deepEqual(plan(s3.output).map((p) => p.id), ["a", "b"]);
  assert.deepEqual(s3.results.map((r) => r.finishReason), ["length", "length"]);
  assert.deepEqual(kv.pool.freeQueue(), [5, 1, 0, 4, 3, 2]);

  // c resumes: its cached blocks were evicted, so all 9 known tokens are recomputed.
  const s4 = runStep(scheduler, model);
  assert.deepEqual(plan(s4.output), [{ id: "c", from: 0, n: 9, blocks: [5, 1, 0], fresh: [5, 1, 0], sampling: true, kind: "resumed" }]);
  runStep(scheduler, model);
  for (const r of requests) assert.deepEqual(r.outputTokenIds, toyGenerate(r.promptTokenIds, 3), `request ${r.requestId}`);
  assert.equal(c.finishReason, "length");
  assert.equal(scheduler.numPreemptions, 1);
  assert.equal(kv.prefixCacheStats().preemptedRequests, 1);
  assert.equal(kv.pool.numUsedBlocks, 0);
});

test("a request that is itself the newest is preempted alone, then resumes on its own cached blocks", () => {
  const { kv, scheduler, model } = setup(4, { maxModelLen: 16 });
  const pa = range(1, 6);
  const pb = range(50, 8);
  scheduler.addRequest(new Request({ requestId: "a", promptTokenIds: pa, maxTokens: 4 }));
  scheduler.addRequest(new Request({ requestId: "b", promptTokenIds: pb, maxTokens: 2 }));
  runStep(scheduler, model); // a [0, 1], b [2, 3]
  const b = scheduler.getRequest("b")!;
  const s2 = runStep(scheduler, model);
  assert.deepEqual(s2.output.preemptedRequestIds, ["b"]);
  assert.deepEqual(plan(s2.output).map((p) => [p.id, p.blocks]), [["a", [0, 1]]]);
  assert.deepEqual(kv.pool.freeQueue(), [3, 2]);
  const s3 = runStep(scheduler, model);
  assert.deepEqual(plan(s3.output).map((p) => p.id), ["a"], "b's 2 cached blocks + 1 new exceed the 2 free");
  const s4 = runStep(scheduler, model);
  assert.deepEqual(plan(s4.output).map((p) => [p.id, p.blocks]), [["a", [0, 1, 3]]], "a takes 3, evicting b's second block");
  assert.equal(s4.results[0]!.finishReason, "length");
  const s5 = runStep(scheduler, model);
  assert.deepEqual(plan(s5.output), [{ id: "b", from: 4, n: 5, blocks: [2, 3, 1], fresh: [3, 1], sampling: true, kind: "resumed" }]);
  assert.equal(s5.results[0]!.finishReason, "length");
  assert.deepEqual(b.outputTokenIds, toyGenerate(pb, 2));
  assert.deepEqual(s4.results[0]!.request.outputTokenIds, toyGenerate(pa, 4));
  assert.deepEqual(kv.prefixCacheStats(), { requests: 2, queries: 14, hits: 0, preemptedRequests: 1, preemptedQueries: 9, preemptedHits: 4 });
});

test("abort frees a running request's blocks at once, removes a waiting one, and drops tokens of a step in flight", () => {
  const { kv, scheduler, model } = setup(8, { maxNumSeqs: 1 });
  scheduler.addRequest(new Request({ requestId: "run", promptTokenIds: range(1, 9) }));
  scheduler.addRequest(new Request({ requestId: "wait", promptTokenIds: range(1, 5) }));
  runStep(scheduler, model);
  assert.deepEqual(kv.blockIds("run"), [0, 1, 2]);
  assert.equal(scheduler.abort("wait"), true);
  assert.deepEqual(scheduler.waitingRequestIds(), []);
  const output = scheduler.schedule();
  assert.deepEqual(output.finishedRequestIds, ["wait"]);
  const run = scheduler.getRequest("run")!;
  assert.equal(scheduler.abort("run"), true); // client went away mid-forward
  assert.equal(kv.pool.numUsedBlocks, 0);
  assert.deepEqual(kv.pool.freeQueue(), [3, 4, 5, 6, 7, 2, 1, 0]);
  assert.deepEqual(scheduler.updateFromOutput(new Map([["run", [5]]])), [], "tokens of an aborted request are ignored");
  assert.equal(output.scheduled.length, 1);
  assert.equal(run.finishReason, "abort");
  assert.equal(run.numOutputTokens, 1);
  assert.equal(scheduler.abort("run"), false);
  assert.equal(scheduler.abort("never"), false);
  assert.deepEqual(scheduler.schedule().finishedRequestIds, ["run"]);
  assert.equal(scheduler.hasUnfinishedRequests, false);
});

test("finish conditions: maxModelLen, a stop decision with its reason, tokens after a stop dropped", () => {
  const { scheduler, model } = setup(4, {
    maxModelLen: 9,
    stopChecker: (r, t) => (r.requestId === "stops" && t === 42 ? { reason: "stop", stopReason: 42 } : null),
  });
  const ctx = new Request({ requestId: "ctx", promptTokenIds: range(1, 6) });
  scheduler.addRequest(ctx);
  for (let i = 0; i < 3; i++) runStep(scheduler, model);
  assert.equal(ctx.finishReason, "length");
  assert.equal(ctx.numTokens, 9, "prompt + output fill maxModelLen exactly");

  const stops = new Request({ requestId: "stops", promptTokenIds: [1, 2] });
  scheduler.addRequest(stops);
  const output = scheduler.schedule();
  const results = scheduler.updateFromOutput(new Map([["stops", [7, 42, 8]]])); // e.g. speculative tokens
  assert.equal(output.scheduled.length, 1);
  assert.deepEqual(results.map((r) => [r.newTokenIds, r.finishReason]), [[[7, 42], "stop"]]);
  assert.deepEqual(stops.outputTokenIds, [7, 42]);
  assert.equal(stops.stopReason, 42);

  const ext = new Request({ requestId: "ext", promptTokenIds: [3] });
  scheduler.addRequest(ext);
  runStep(scheduler, model);
  assert.equal(scheduler.finishRequest("ext", "stop", "</s>"), true); // e.g. a stop string seen in the text
  assert.deepEqual([ext.finishReason, ext.stopReason], ["stop", "</s>"]);
});

test("the waiting queue is bounded: addRequest says false when it is full", () => {
  const { scheduler, model } = setup(8, { maxWaitingRequests: 2, maxNumSeqs: 1 });
  const add = (id: string) => scheduler.addRequest(new Request({ requestId: id, promptTokenIds: [1, 2, 3] }));
  assert.deepEqual([add("a"), add("b"), add("c")], [true, true, false]);
  assert.equal(scheduler.getRequest("c"), undefined);
  runStep(scheduler, model); // a starts running
  assert.deepEqual([add("c"), add("d")], [true, false]);
  assert.deepEqual(scheduler.stats(), {
    numRunning: 1,
    numWaiting: 2,
    numPreemptions: 0,
    kvCacheUsage: 1 / 8,
    prefixCache: { requests: 1, queries: 3, hits: 0, preemptedRequests: 0, preemptedQueries: 0, preemptedHits: 0 },
  });
});

test("the waiting-queue bound counts client requests: a group of prompts takes one place", () => {
  const { scheduler } = setup(64, { maxWaitingRequests: 2, maxNumSeqs: 1 });
  const add = (id: string, client: string) => scheduler.addRequest(new Request({ requestId: id, promptTokenIds: [1, 2, 3], clientRequestId: client }));
  assert.deepEqual([add("big-0", "big"), add("big-1", "big"), add("big-2", "big"), add("small", "small"), add("other", "other")], [true, true, true, true, false]);
  assert.equal(scheduler.numWaiting, 4);
  assert.equal(scheduler.numWaitingClientRequests, 2);
  scheduler.abort("small");
  assert.equal(add("other", "other"), true, "an abort frees its client request's place");
  assert.throws(() => new Request({ requestId: "x", promptTokenIds: [1], clientRequestId: "" }), /clientRequestId must be a non-empty string, got ""/);
});

test("fair admission: a 4-token request from another client is admitted as soon as a seat frees, not after a 128-prompt request's every prompt", () => {
  // 128 prompts of one client request, then one small request; 4 seats, each prompt runs 2 tokens.
  const admittedAfter = (fair: boolean) => {
    const { scheduler, model } = setup(1024, { maxNumSeqs: 4, maxNumBatchedTokens: 64 });
    for (let i = 0; i < 128; i++) scheduler.addRequest(new Request({ requestId: `big-${i}`, promptTokenIds: [1 + (i % 50), 2, 3], maxTokens: 2, ...(fair ? { clientRequestId: "big" } : {}) }));
    runStep(scheduler, model); // the first four big prompts start
    scheduler.addRequest(new Request({ requestId: "small", promptTokenIds: [7, 8, 9, 10], maxTokens: 2 }));
    for (let step = 1; step < 200; step++) {
      const { output } = runStep(scheduler, model);
      if (output.scheduled.some((s) => s.request.requestId === "small")) return step;
    }
    return Infinity;
  };
  // Strict FCFS by sequence (each prompt its own client request, as before): the small request waits for all 128.
  assert.ok(admittedAfter(false) >= 60, `FCFS admitted the small request after ${admittedAfter(false)} steps`);
  // Fair: the next seat to free (after the first wave's 2 tokens) goes to the client request with none running.
  assert.equal(admittedAfter(true), 2);
});

test("bad requests and protocol errors throw naming the value", () => {
  const { scheduler } = setup(4, { maxModelLen: 8 });
  assert.throws(() => scheduler.addRequest(new Request({ requestId: "long", promptTokenIds: range(0, 8) })), (e: unknown) => {
    assert.ok(e instanceof ArgumentError);
    assert.equal(e.message, "promptTokenIds has 8 tokens, but maxModelLen 8 leaves room for at most 7 prompt tokens");
    return true;
  });
  scheduler.addRequest(new Request({ requestId: "a", promptTokenIds: [1, 2, 3, 4, 5] }));
  assert.throws(() => scheduler.addRequest(new Request({ requestId: "a", promptTokenIds: [1] })), /request\.requestId "a" is already live/);
  const output = scheduler.schedule();
  assert.equal(output.scheduled[0]!.sampling, true);
  assert.throws(() => scheduler.schedule(), /schedule\(\) called again before updateFromOutput/);
  assert.throws(() => scheduler.updateFromOutput(new Map()), /sampled lacks tokens for request "a"/);
  assert.throws(() => scheduler.updateFromOutput(new Map([["a", [1]], ["zz", [1]]])), /sampled\["zz"\] is not a request that sampled/);
  assert.throws(() => scheduler.updateFromOutput(new Map([["a", [-3]]])), /sampled\["a"\]\[0\] must be ≥ 0, got -3/);
  assert.throws(() => scheduler.updateFromOutput(new Map([["a", []]])), /sampled\["a"\] must be a non-empty array/);
  assert.equal(scheduler.updateFromOutput(new Map([["a", [9]]])).length, 1);
  assert.throws(() => new Scheduler({ kvCacheManager: new KvCacheManager({ numBlocks: 2, blockSize: 4 }), maxNumBatchedTokens: 8, maxNumSeqs: 1, maxModelLen: 9 }), /maxModelLen must fit in the KV pool \(2 blocks × 4 = 8 tokens\), got 9/);
  assert.throws(() => new Request({ requestId: "x", promptTokenIds: [] }), /promptTokenIds must hold at least one token, got 0/);
  assert.throws(() => new Request({ requestId: "x", promptTokenIds: [1, 2.5] }), /promptTokenIds\[1\] must be an integer, got 2\.5/);
  assert.throws(() => new Request({ requestId: "", promptTokenIds: [1] }), /requestId must be a non-empty string, got ""/);
});

test("a step left half applied (the stop checker threw) makes the next schedule() throw naming the request", () => {
  const { scheduler, model } = setup(8, {
    stopChecker: (r) => {
      if (r.requestId === "a") throw new Error("detokenizer failed");
      return null;
    },
  });
  scheduler.addRequest(new Request({ requestId: "a", promptTokenIds: [1, 2, 3] }));
  scheduler.addRequest(new Request({ requestId: "b", promptTokenIds: [4, 5] }));
  assert.throws(() => runStep(scheduler, model), /detokenizer failed/);
  assert.equal(scheduler.getRequest("b")!.numOutputTokens, 0, "b's token was never applied");
  assert.throws(() => scheduler.schedule(), /running request "b" has no known token left to compute/);
});

test("isReady: a request not ready is skipped, keeping its place and blocks; a waiting one not ready is passed over; both go on, unchanged, once ready", () => {
  const held = new Set<string>();
  const { kv, scheduler, model } = setup(8, { isReady: (r) => !held.has(r.requestId) });
  const pa = range(10, 3);
  const pb = range(20, 3);
  const pc = range(30, 3);
  scheduler.addRequest(new Request({ requestId: "a", promptTokenIds: pa, maxTokens: 3 }));
  scheduler.addRequest(new Request({ requestId: "b", promptTokenIds: pb, maxTokens: 3 }));
  assert.deepEqual(plan(runStep(scheduler, model).output).map((s) => s.id), ["a", "b"]);
  held.add("a");
  held.add("c");
  scheduler.addRequest(new Request({ requestId: "c", promptTokenIds: pc, maxTokens: 3 }));
  const step = runStep(scheduler, model);
  assert.deepEqual(plan(step.output), [{ id: "b", from: 3, n: 1, blocks: [1], fresh: [], sampling: true, kind: "running" }]);
  assert.equal(kv.pool.numUsedBlocks, 2, "a keeps its block while skipped");
  assert.deepEqual(scheduler.waitingRequestIds(), ["c"]);
  held.clear();
  const outs = new Map<string, number[]>();
  while (scheduler.hasUnfinishedRequests) for (const r of runStep(scheduler, model).results) if (r.finishReason !== null) outs.set(r.request.requestId, [...r.request.outputTokenIds]);
  assert.deepEqual(outs.get("a"), toyGenerate(pa, 3));
  assert.deepEqual(outs.get("b"), toyGenerate(pb, 3));
  assert.deepEqual(outs.get("c"), toyGenerate(pc, 3));
});

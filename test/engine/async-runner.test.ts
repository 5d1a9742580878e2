// A runner whose forward is asynchronous (as the WebGPU runner's is): the
// engine's step() then returns a Promise and produces exactly the outputs of
// the same runner called synchronously — greedy and seeded sampling, chunked
// prefill, preemption — a rejected forward fails the running requests alone
// and the waiting ones go on, and the offline loop (generate, promptLogits)
// awaits it too. The synchronous runner's step() returns no Promise.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Engine, type EngineOutput } from "../../src/engine/engine.js";
import { generate, promptLogits } from "../../src/engine/offline-generate.js";
import { defaultModelDir } from "../../src/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import type { KvCacheGeometry, ModelRunner } from "../../src/model/model-runner.js";
import { ToyRunner } from "./toy-runner.js";

const dir = defaultModelDir();
const config = parseModelConfig(JSON.parse(readFileSync(join(dir, "config.json"), "utf8")));
const tokenizer = Tokenizer.fromDir(dir);
const V = config.vocabSize;

/** The toy runner with its logits handed back a macrotask later (a GPU readback's shape). */
class AsyncToyRunner implements ModelRunner {
  readonly #inner: ToyRunner;
  constructor(inner: ToyRunner) {
    this.#inner = inner;
  }
  get config() {
    return this.#inner.config;
  }
  get vocabSize(): number {
    return this.#inner.vocabSize;
  }
  get maxModelLen(): number {
    return this.#inner.maxModelLen;
  }
  get kvCache(): KvCacheGeometry {
    return this.#inner.kvCache;
  }
  forward(batch: ForwardBatch): Promise<Float32Array> {
    return new Promise((resolve, reject) =>
      setImmediate(() => {
        try {
          resolve(this.#inner.forward(batch));
        } catch (e) {
          reject(e as Error);
        }
      }),
    );
  }
  dispose(): void {
    this.#inner.dispose();
  }
}

const requests = [
  { requestId: "greedy", promptTokenIds: Array.from({ length: 37 }, (_, i) => (i * 7 + 3) % V), params: resolveSamplingParams({ temperature: 0, maxTokens: 12, ignoreEos: true }, V) },
  { requestId: "sampled", promptTokenIds: [5, 9, 11, 4], params: resolveSamplingParams({ temperature: 1, seed: 3, maxTokens: 30, ignoreEos: true }, V) },
  { requestId: "short", promptTokenIds: [8, 1], params: resolveSamplingParams({ temperature: 0.7, seed: 9, maxTokens: 30, ignoreEos: true }, V) },
];

/** Every request's outputs as (tokens, finish reason) lists, stepping until done. */
async function drain(engine: Engine): Promise<Map<string, [number[], string | null][]>> {
  const by = new Map<string, [number[], string | null][]>();
  for (let i = 0; engine.hasUnfinishedRequests; i++) {
    assert.ok(i < 5000, "the engine did not finish");
    const outs: EngineOutput[] = await engine.step();
    for (const o of outs) by.set(o.requestId, [...(by.get(o.requestId) ?? []), [o.tokenIds, o.finishReason]]);
  }
  return by;
}

test("an asynchronous forward: step() returns a Promise and the outputs of the synchronous runner (chunked prefill, preemption)", async () => {
  // 16 blocks of 4 tokens cannot hold all three at once: the newest is preempted and recomputed.
  const opts = { config, numBlocks: 16, blockSize: 4 };
  const sync = new Engine({ runner: new ToyRunner(opts), tokenizer, eosTokenIds: [], maxNumBatchedTokens: 16, now: () => 0 });
  const async = new Engine({ runner: new AsyncToyRunner(new ToyRunner(opts)), tokenizer, eosTokenIds: [], maxNumBatchedTokens: 16, now: () => 0 });
  for (const r of requests) (sync.addRequest(r), async.addRequest(r));
  assert.ok(!(sync.step() instanceof Promise), "the synchronous runner's step is synchronous");
  const first = async.step();
  assert.ok(first instanceof Promise, "the asynchronous runner's step is a Promise");
  await first;
  const [want, got] = [await drain(sync), await drain(async)];
  assert.ok(sync.stats().numPreemptions > 0, "the pool was small enough to preempt");
  assert.deepEqual(got, want);
});

test("a rejected asynchronous forward fails the running requests; the waiting one goes on", async () => {
  const failToken = 6;
  const engine = new Engine({ runner: new AsyncToyRunner(new ToyRunner({ config, numBlocks: 64, blockSize: 4, failToken })), tokenizer, eosTokenIds: [], maxNumSeqs: 1 });
  const params = resolveSamplingParams({ temperature: 0, maxTokens: 4, ignoreEos: true }, V);
  engine.addRequest({ requestId: "bad", promptTokenIds: [failToken, 8], params });
  engine.addRequest({ requestId: "later", promptTokenIds: [3, 8], params });
  const outs = await drain(engine);
  assert.equal(outs.get("bad")!.at(-1)![1], "error");
  assert.equal(outs.get("later")!.at(-1)![1], "length");
  assert.equal(outs.get("later")!.flatMap(([t]) => t).length, 4);
  assert.equal(engine.stats().numFailedForwards, 1);
});

test("generate and promptLogits await an asynchronous runner and give the synchronous results", async () => {
  const opts = { config, numBlocks: 16, blockSize: 4, maxModelLen: 64 };
  const params = resolveSamplingParams({ temperature: 1, seed: 5, maxTokens: 9, ignoreEos: true }, V);
  const promptIds = [4, 8, 15, 16, 23, 42];
  const want = generate({ runner: new ToyRunner(opts), tokenizer, promptIds, params, maxNumBatchedTokens: 4 });
  const pending = generate({ runner: new AsyncToyRunner(new ToyRunner(opts)), tokenizer, promptIds, params, maxNumBatchedTokens: 4 });
  assert.ok(pending instanceof Promise);
  const got = await pending;
  assert.deepEqual([got.ids, got.text, got.finishReason], [want.ids, want.text, want.finishReason]);
  assert.deepEqual(await promptLogits(new AsyncToyRunner(new ToyRunner(opts)), promptIds), promptLogits(new ToyRunner(opts), promptIds));
});

// The engine worker and its client: load progress then ready, streamed outputs
// equal to the engine run in-process, abort from the client freeing blocks,
// the queue bound and invalid requests as rejections, stats, a failed load,
// and shutdown ending what is in flight. The worker runs the toy loader.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { EngineClient, EngineRejectedError, type OutputStream } from "../../src/engine/engine-client.js";
import type { EngineOutput } from "../../src/engine/engine.js";
import type { EngineWorkerConfig } from "../../src/engine/protocol.js";
import { resolveLoadConfig } from "../../src/model/load-settings.js";
import { defaultModelDir } from "../../src/index.js";
import { resolveSamplingParams } from "../../src/ops-entry.js";
import { toyGreedy } from "./toy-runner.js";

const V = (JSON.parse(readFileSync(join(defaultModelDir(), "config.json"), "utf8")) as { vocab_size: number }).vocab_size;
const loader = new URL("./toy-loader.js", import.meta.url).href;
const config = (extra: Record<string, unknown> = {}, engine: EngineWorkerConfig["engine"] = {}): EngineWorkerConfig => ({
  loader,
  load: { ...resolveLoadConfig({ threads: 1 }), source: { kind: "dir", path: defaultModelDir() }, loaderExtra: { numBlocks: 32, blockSize: 4, progressSteps: 4, ...extra } },
  engine,
});
const greedy = (maxTokens: number) => resolveSamplingParams({ temperature: 0, maxTokens, ignoreEos: true }, V);
const collect = async (s: OutputStream): Promise<EngineOutput[]> => {
  const outs: EngineOutput[] = [];
  for await (const o of s) outs.push(o);
  return outs;
};

const clients: EngineClient[] = [];
after(async () => {
  for (const c of clients) await c.shutdown();
});

test("the worker reports progress, then ready; concurrent streams equal each request run alone", async () => {
  const client = EngineClient.start(config());
  clients.push(client);
  assert.equal(client.state.state, "loading");
  await assert.rejects(client.submit({ requestId: "early", promptTokenIds: [1], params: greedy(1) }), (e: EngineRejectedError) => e.reason === "unavailable");
  const info = await client.ready;
  assert.deepEqual([info.numBlocks, info.blockSize, info.vocabSize, info.maxModelLen], [32, 4, V, 128]);
  const prompts = [[5, 6, 7], [100, 200, 300, 400, 500, 600], [42]];
  const streams = await Promise.all(prompts.map((p, i) => client.submit({ requestId: `c${i}`, promptTokenIds: p, params: greedy(9) })));
  const results = await Promise.all(streams.map(collect));
  results.forEach((outs, i) => {
    assert.deepEqual(outs.flatMap((o) => o.tokenIds), toyGreedy(prompts[i]!, 9, V));
    assert.equal(outs.at(-1)!.finishReason, "length");
  });
  const stats = (await client.stats())!;
  assert.deepEqual([stats.requestSuccess.length, stats.generationTokens, stats.numFreeBlocks], [3, 27, 32]);
});

test("abort from the client ends the stream with 'abort' and frees every block; a full queue and a bad request are rejected", async () => {
  const client = EngineClient.start(config({ numBlocks: 512 }, { maxNumSeqs: 1, maxWaitingRequests: 1 }));
  clients.push(client);
  await client.ready;
  const long = (await client.submit({ requestId: "long", promptTokenIds: [9, 9, 9], params: greedy(2000) }))[Symbol.asyncIterator]();
  const outs: EngineOutput[] = [(await long.next()).value as EngineOutput]; // running now: the next one waits
  const waiting = await client.submit({ requestId: "wait", promptTokenIds: [8], params: greedy(2) });
  await assert.rejects(client.submit({ requestId: "third", promptTokenIds: [7], params: greedy(2) }), (e: EngineRejectedError) => e.reason === "queue_full");
  await assert.rejects(
    client.submit({ requestId: "bad", promptTokenIds: [1, V + 5], params: greedy(2) }),
    (e: EngineRejectedError) => e.reason === "invalid" && e.param === "promptTokenIds[1]",
  );
  for (let r = await long.next(); !r.done; r = await long.next()) {
    outs.push(r.value);
    if (outs.length === 3) client.abort("long");
  }
  assert.equal(outs.at(-1)!.finishReason, "abort");
  assert.ok(outs.length < 2000);
  assert.deepEqual((await collect(waiting)).flatMap((o) => o.tokenIds), toyGreedy([8], 2, V));
  const stats = (await client.stats())!;
  assert.deepEqual([stats.numRequestsRunning, stats.numRequestsWaiting, stats.numFreeBlocks, stats.requestSuccess.abort], [0, 0, 512, 1]);
});

test("a failed load is reported; shutdown ends in-flight streams", async () => {
  const failing = EngineClient.start(config({ failLoad: true }));
  clients.push(failing);
  await assert.rejects(failing.ready, /loading the model failed: toy loader: asked to fail/);
  assert.equal(failing.state.state, "failed");

  const client = EngineClient.start(config({ numBlocks: 512 }));
  clients.push(client);
  await client.ready;
  const stream = await client.submit({ requestId: "s", promptTokenIds: [3, 4], params: greedy(2000) });
  const done = collect(stream);
  await client.shutdown();
  const outs = await done;
  assert.deepEqual([outs.at(-1)!.finishReason, outs.at(-1)!.error], ["error", "the engine stopped"]);
  assert.equal(client.state.state, "stopped");
  assert.equal(await client.stats(), null);
});

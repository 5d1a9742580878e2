// A model placed across 2–4 wasm memories (a lowered per-memory budget
// forces it) computes exactly what the one-memory model computes: the same
// logits, bit for bit, for prefill, decode, a ragged batch and a prefix-cache
// hit, and through the engine under preemption and prefix caching. Placement
// fills memories in layer order (accelerate's device_map="auto").
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Engine, type EngineOutput } from "../../src/engine/engine.js";
import {
  type LoadedModel,
  type ModelConfig,
  type Runtime,
  createRuntime,
  describePlacement,
  loadModel,
  resolveSamplingParams,
} from "../../src/ops-entry.js";
import { planRunner } from "../../src/model/loader.js";
import { writeTinyModel } from "../../src/testing/index.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import type { SyncModelRunner } from "../../src/model/model-runner.js";
import { makeBatch } from "./decoder-support.js";

let rt: Runtime;
let root: string;
let tiedDir: string;
let untiedDir: string;
let tied: ModelConfig;
let untied: ModelConfig;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-placement-"));
  ({ dir: tiedDir, config: tied } = writeTinyModel(join(root, "tied"), { arch: "qwen3", seed: 4, numLayers: 4 }));
  ({ dir: untiedDir, config: untied } = writeTinyModel(join(root, "untied"), { arch: "llama", seed: 5, numLayers: 4 }));
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

const OPTIONS = { weights: "q8", numBlocks: 24, blockSize: 4, maxBatchTokens: 64, maxLogitRows: 8, progress: false } as const;

/** The smallest per-memory budget (scanned in 4 KiB steps) that places the model (f32 checkpoint: 4 bytes an element) in exactly `memories` memories. */
function budgetFor(config: ModelConfig, memories: number): number {
  const one = planRunner(config, "q8", OPTIONS, 4);
  for (let bytes = one.activationBytes; bytes <= one.totalBytes; bytes += 4096) {
    try {
      if (planRunner(config, "q8", { ...OPTIONS, memoryBytes: bytes }, 4).placement.memories.length === memories) return bytes;
    } catch {
      // too small for one part: go on
    }
  }
  throw new Error(`no budget places the model in ${memories} memories`);
}

/** The decoder-level steps: a ragged prefill, a decode step, and a prefix-cache hit (a new sequence on sequence A's first two blocks). */
function steps(bs: number): ForwardBatch[] {
  const a = [0, 1, 2, 3, 4, 5];
  const b = [6, 7, 8];
  const c = [9, 10, 11, 12];
  const A = Array.from({ length: 19 }, (_, i) => 3 + ((i * 37) % 90));
  const B = Array.from({ length: 7 }, (_, i) => 5 + ((i * 11) % 80));
  return [
    makeBatch([{ blocks: a, start: 0, tokens: A, logits: "all" }, { blocks: b, start: 0, tokens: B, logits: "all" }], bs), // ragged prefill
    makeBatch([{ blocks: a, start: 19, tokens: [42] }, { blocks: b, start: 7, tokens: [17] }], bs), // decode
    makeBatch([{ blocks: [a[0]!, a[1]!, ...c], start: 8, tokens: [50, 51, 52, 53, 54], logits: "all" }], bs), // prefix hit: 8 cached tokens
    makeBatch([{ blocks: a, start: 20, tokens: [43] }, { blocks: [a[0]!, a[1]!, ...c], start: 13, tokens: [55] }, { blocks: b, start: 8, tokens: [18] }], bs),
  ];
}

const run = (m: LoadedModel): Float32Array[] => steps(OPTIONS.blockSize).map((batch) => m.runner.forward(batch));

for (const [name, dir, config] of [
  ["tied embeddings (Qwen3)", () => tiedDir, () => tied],
  ["untied LM head (Llama)", () => untiedDir, () => untied],
] as const) {
  test(`${name}: across 2, 3 and 4 memories the logits are bit-identical to one memory`, () => {
    const one = loadModel(rt, dir(), OPTIONS);
    assert.equal(one.plan.placement.memories.length, 1);
    const want = run(one);
    one.runner.dispose();
    for (const n of [2, 3, 4]) {
      const m = loadModel(rt, dir(), { ...OPTIONS, memoryBytes: budgetFor(config(), n) });
      const p = m.plan.placement;
      assert.equal(p.memories.length, n, describePlacement(p));
      assert.equal((m.runner as { memories?: number }).memories, n, "the decoder runs in the memories placed");
      // Layers fill memories in order: non-decreasing, every memory but maybe the first holds some.
      assert.deepEqual([...p.layers].sort((x, y) => x - y), p.layers);
      assert.equal(p.embedding, 0);
      assert.ok(m.runner.weights.layers.every((w, l) => w.qkv.memory === rt.memoryAt(p.layers[l]!).memory), "each layer's weights in its placed memory");
      assert.equal(m.runner.weights.lmHead.memory, rt.memoryAt(p.head).memory);
      const got = run(m);
      got.forEach((g, i) => assert.deepEqual(g, want[i], `step ${i} with ${n} memories (${describePlacement(p)})`));
      m.runner.dispose();
    }
  });
}

test("mean pooling's every-token hidden states (allHiddenStates) across 3 memories are bit-identical to one memory", () => {
  const batch = steps(OPTIONS.blockSize)[0]!;
  const one = loadModel(rt, untiedDir, OPTIONS);
  const want = one.runner.allHiddenStates(batch);
  one.runner.dispose();
  const m = loadModel(rt, untiedDir, { ...OPTIONS, memoryBytes: budgetFor(untied, 3) });
  try {
    assert.equal(m.plan.placement.memories.length, 3);
    const got = m.runner.allHiddenStates(batch);
    assert.equal(got.length, batch.tokens.length * untied.hiddenSize);
    assert.deepEqual(got, want);
  } finally {
    m.runner.dispose();
  }
});

/** A runner that records every logits array the decoder returns. */
function recording(runner: SyncModelRunner, log: Float32Array[]): SyncModelRunner {
  return {
    config: runner.config,
    vocabSize: runner.vocabSize,
    maxModelLen: runner.maxModelLen,
    kvCache: runner.kvCache,
    forward: (batch: ForwardBatch) => {
      const out = runner.forward(batch);
      log.push(out);
      return out;
    },
    dispose: () => runner.dispose(),
  };
}

test("through the engine, with preemptions and prefix-cache hits, three memories give the one-memory logits bit for bit", () => {
  const results = [1, 3].map((n) => {
    const options = { ...OPTIONS, numBlocks: 14, ...(n === 1 ? {} : { memoryBytes: budgetFor(untied, n) }) };
    const m = loadModel(rt, untiedDir, options);
    assert.equal(m.plan.placement.memories.length, n);
    const log: Float32Array[] = [];
    const engine = new Engine({ runner: recording(m.runner, log), tokenizer: m.tokenizer, eosTokenIds: [], maxNumBatchedTokens: 16, now: () => 0 });
    const params = resolveSamplingParams({ temperature: 0, maxTokens: 10, ignoreEos: true }, m.config.vocabSize);
    const shared = Array.from({ length: 9 }, (_, i) => 4 + i * 3);
    for (let r = 0; r < 5; r++) engine.addRequest({ requestId: `r${r}`, promptTokenIds: [...shared, 7 + r, 9 + r], params });
    const tokens = new Map<string, number[]>();
    for (let i = 0; engine.hasUnfinishedRequests; i++) {
      assert.ok(i < 1000, "the engine did not finish");
      for (const out of engine.step() as EngineOutput[]) tokens.set(out.requestId, [...(tokens.get(out.requestId) ?? []), ...out.tokenIds]);
    }
    const stats = engine.stats();
    m.runner.dispose();
    return { log, tokens, stats };
  });
  const [one, three] = results as [(typeof results)[0], (typeof results)[0]];
  assert.ok(one.stats.numPreemptions > 0, "the 14-block pool preempts");
  assert.ok(one.stats.prefixCacheHits > 0, "the shared prompt hits the prefix cache");
  assert.deepEqual(three.stats.numPreemptions, one.stats.numPreemptions);
  assert.deepEqual(three.tokens, one.tokens);
  assert.equal(three.log.length, one.log.length);
  three.log.forEach((l, i) => assert.deepEqual(l, one.log[i], `step ${i}`));
});

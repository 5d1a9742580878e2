// loadModel and the Decoder's guards: option resolution ("auto", vLLM's
// spellings), KV cache sizing, bad options and bad checkpoints that fail
// clearly and leak nothing, malformed ForwardBatches rejected before any K/V
// is written, sharded = single file, dispose frees everything, and the
// synthetic model.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError, type Runtime, createRuntime, loadModel, weightBytes } from "../../src/ops-entry.js";
import { createSyntheticModel, qwen25HalfBConfig, writeTinyModel } from "../../src/testing/index.js";
import { kvBytesPerBlock } from "../../src/model/loader.js";
import { parseModelConfig } from "../../src/model/config.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import { Blocks, makeBatch, relErr } from "./decoder-support.js";

let rt: Runtime;
let root: string;
let f32Dir: string;
let bf16Dir: string;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-loader-"));
  f32Dir = writeTinyModel(join(root, "f32"), { arch: "qwen2", seed: 1 }).dir;
  bf16Dir = writeTinyModel(join(root, "bf16"), { arch: "llama", seed: 2, dtype: "bf16" }).dir;
  // Warm the runtime's lazily grown scratch regions so leak checks below count only model memory.
  const m = loadModel(rt, f32Dir, { weights: "q8", numBlocks: 8, progress: false });
  m.runner.forward(makeBatch([{ blocks: [0, 1], start: 0, tokens: [1, 2, 3, 4, 5, 6, 7, 8, 9] }], 16));
  m.runner.dispose();
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

/** Runs `fn` and checks it left the heap's live allocations as they were. */
function noLeak<T>(fn: () => T): T {
  const live = rt.heap.liveCount;
  const bytes = rt.heap.inUse;
  try {
    return fn();
  } finally {
    assert.equal(rt.heap.liveCount, live, "live allocations");
    assert.equal(rt.heap.inUse, bytes, "bytes in use");
  }
}

test("'auto' takes the checkpoint's dtype; vLLM's KV spellings resolve; the KV cache is sized as asked", () => {
  const a = loadModel(rt, bf16Dir, { progress: false, numBlocks: 10, blockSize: 8 });
  assert.equal(a.runner.weights.format, "bf16");
  assert.equal(a.runner.cache.dtype, "bf16");
  assert.deepEqual(a.runner.kvCache, { numBlocks: 10, blockSize: 8 });
  assert.equal(a.runner.maxModelLen, 80, "capped by the cache's 10 × 8 slots");
  a.runner.dispose();
  const b = loadModel(rt, f32Dir, { progress: false, kvDtype: "fp8", kvCacheBytes: 64 << 10 });
  assert.equal(b.runner.weights.format, "f32");
  assert.equal(b.runner.cache.dtype, "fp8e4m3");
  assert.equal(b.runner.kvCache.blockSize, 16);
  assert.equal(b.runner.kvCache.numBlocks, Math.floor((64 << 10) / kvBytesPerBlock(b.config, 16, "fp8e4m3")));
  b.runner.dispose();
  const c = loadModel(rt, f32Dir, { progress: false, weights: "q4", kvDtype: "fp8_e5m2", maxModelLen: 100 });
  assert.equal(c.runner.cache.dtype, "fp8e5m2");
  assert.equal(c.runner.maxModelLen, 100);
  assert.equal(c.runner.kvCache.numBlocks, 7, "by default no more blocks than one sequence of maxModelLen needs: ceil(100 / 16)");
  assert.equal(c.plan.placement.memories.length, 1, "a model that fits uses one memory");
  c.runner.dispose();
});

test("bad options fail before anything is loaded, naming the option and the value, and leak nothing", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ weights: "q5" }, /^weights must be one of "f32" \| "bf16" \| "q8" \| "q4" \| "auto", got "q5"/],
    [{ kvDtype: "int4" }, /^kvDtype must be one of .*"fp8_e4m3".*, got "int4"/],
    [{ numBlocks: 4, kvCacheBytes: 1 << 20 }, /^kvCacheBytes and numBlocks both size the KV cache/],
    [{ numBlocks: 0 }, /^numBlocks must be ≥ 1, got 0/],
    [{ kvCacheBytes: 100 }, /^kvCacheBytes must hold at least one KV block/],
    [{ blockSize: 300 }, /^blockSize must be ≤ 256, got 300/],
    [{ numBlocks: 2, blockSize: 16, maxModelLen: 64 }, /^maxModelLen must fit in the KV cache \(2 blocks × 16 = 32 tokens/],
    [{ maxModelLen: 100000 }, /^maxModelLen must be ≤ 512, what the model allows \(max_position_embeddings 512 in config\.json\), got 100000$/],
  ];
  for (const [options, message] of cases) {
    noLeak(() => assert.throws(() => loadModel(rt, f32Dir, { progress: false, ...options }), (e: Error) => e instanceof ArgumentError && message.test(e.message), JSON.stringify(options)));
  }
});

test("a checkpoint that disagrees with its config fails naming the tensor, before any weight is read", () => {
  const dir = writeTinyModel(join(root, "bad"), { arch: "mistral", seed: 3 }).dir;
  const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
  writeFileSync(join(dir, "config.json"), JSON.stringify({ ...config, intermediate_size: 100 }));
  noLeak(() => assert.throws(() => loadModel(rt, dir, { progress: false }), /tensor model\.layers\.0\.mlp\.gate_proj\.weight has shape \[128, 64\], expected \[100, 64\]/));
  writeFileSync(join(dir, "config.json"), JSON.stringify({ ...config, num_attention_heads: undefined }));
  noLeak(() => assert.throws(() => loadModel(rt, dir, { progress: false }), /num_attention_heads is required for MistralForCausalLM/));
});

test("a sharded checkpoint gives the same logits as a single file; progress is reported to the end", () => {
  const dir = writeTinyModel(join(root, "sharded"), { arch: "qwen2", seed: 1, shards: 3 }).dir;
  const seen: [number, number][] = [];
  const a = loadModel(rt, f32Dir, { progress: false, numBlocks: 8 });
  const b = loadModel(rt, dir, { progress: false, numBlocks: 8, onProgress: (done, total) => seen.push([done, total]) });
  const batch = makeBatch([{ blocks: [0, 1], start: 0, tokens: [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21] }], 16);
  assert.deepEqual(b.runner.forward(batch), a.runner.forward(batch));
  assert.equal(seen.length, a.config.numLayers + 2, "one report per load group");
  assert.equal(seen.at(-1)![0], seen.at(-1)![1]);
  a.runner.dispose();
  b.runner.dispose();
});

test("malformed batches are rejected naming the field, before any K/V is written", () => {
  const m = loadModel(rt, f32Dir, { progress: false, weights: "f32", kvDtype: "f32", numBlocks: 8, blockSize: 4 });
  const V = m.config.vocabSize;
  const blocks = new Blocks(4);
  const seq = blocks.take(12);
  const good = (): ForwardBatch => makeBatch([{ blocks: seq, start: 0, tokens: [3, 4, 5, 6, 7, 8] }], 4);
  const want = m.runner.forward(good());
  const bad: [string, (b: ForwardBatch) => void, RegExp][] = [
    ["token id", (b) => (b.tokens[2] = V), /^batch\.tokens\[2\] must be a token id in \[0, \d+\), got \d+/],
    ["position", (b) => (b.positions[3] = 9), /^batch\.positions\[3\] must be 3/],
    ["slot", (b) => (b.slotMapping[5] = 0), /^batch\.slotMapping\[5\] must be 5/],
    ["block id", (b) => (b.blockTable[1] = 8), /^batch\.blockTable\[1\] must be a block id in \[0, 8\), got 8/],
    ["seqLens", (b) => (b.seqLens[0] = 5), /^batch\.seqLens\[0\] must be in \[6, /],
    ["cuSeqlensQ", (b) => (b.cuSeqlensQ[1] = 4), /^batch\.cuSeqlensQ\[1\] must be the 6 tokens, got 4/],
    ["logit index", (b) => (b.logitIndices[0] = 6), /^batch\.logitIndices\[0\] must index a token in \[0, 6\), got 6/],
    ["array type", (b) => ((b as unknown as Record<string, unknown>)["positions"] = [0, 1, 2, 3, 4, 5]), /^batch\.positions must be an Int32Array/],
  ];
  for (const [what, spoil, message] of bad) {
    // A spoiled batch whose tokens differ: had it written K/V, the rerun below would differ.
    const b = good();
    b.tokens.set([9, 9, 9, 9, 9, 9]);
    spoil(b);
    assert.throws(() => m.runner.forward(b), (e: Error) => e instanceof ArgumentError && message.test(e.message), what);
  }
  const empty = makeBatch([], 4);
  assert.throws(() => m.runner.forward(empty), /batch\.tokens must hold at least one token/);
  // Decode position 6 over the cache: equals decoding it after the good batch alone.
  const next = makeBatch([{ blocks: seq, start: 6, tokens: [10] }], 4);
  const got = m.runner.forward(next);
  const fresh = blocks.take(12);
  m.runner.forward(makeBatch([{ blocks: fresh, start: 0, tokens: [3, 4, 5, 6, 7, 8] }], 4));
  assert.ok(relErr(got, m.runner.forward(makeBatch([{ blocks: fresh, start: 6, tokens: [10] }], 4))) === 0);
  assert.equal(want.length, V);
  m.runner.dispose();
  assert.throws(() => m.runner.forward(good()), /Decoder used after dispose/);
});

test("dispose frees the weights, the KV cache and the activations", () => {
  noLeak(() => {
    const m = loadModel(rt, bf16Dir, { progress: false, weights: "q8", kvDtype: "int8", numBlocks: 16, maxBatchTokens: 16, maxLogitRows: 4 }); // the 40-token step grows both
    m.runner.forward(makeBatch([{ blocks: [0, 1, 2], start: 0, tokens: Array.from({ length: 40 }, (_, i) => 3 + i), logits: "all" }], 16));
    m.runner.dispose();
  });
});

test("the synthetic model: Qwen2.5-0.5B's config, deterministic weights, any shape via config", () => {
  const q = qwen25HalfBConfig();
  assert.deepEqual([q.hiddenSize, q.numLayers, q.numHeads, q.numKvHeads, q.headDim, q.intermediateSize, q.vocabSize, q.tieWordEmbeddings, q.qkvBias], [896, 24, 14, 2, 64, 4864, 151936, true, true]);
  const small = parseModelConfig({ architectures: ["Qwen2ForCausalLM"], hidden_size: 128, intermediate_size: 256, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 1000, tie_word_embeddings: true });
  const a = createSyntheticModel(rt, { config: small, weights: "q8", numBlocks: 4 });
  const batch = makeBatch([{ blocks: [0, 1], start: 0, tokens: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17] }], 16);
  const la = a.forward(batch); // (also grows the ops' scratch to this model's shapes, outside the leak checks)
  assert.ok(la.every(Number.isFinite));
  const layer = weightBytes("q8", 256, 128) + weightBytes("q8", 128, 128) + weightBytes("q8", 512, 128) + weightBytes("q8", 128, 256);
  assert.equal(a.weights.bytesPerToken, 2 * layer + weightBytes("q8", 1000, 128));
  noLeak(() => {
    const b = createSyntheticModel(rt, { config: small, weights: "q8", numBlocks: 4 });
    const c = createSyntheticModel(rt, { config: small, weights: "q8", numBlocks: 4, seed: 1 });
    assert.deepEqual(b.forward(batch), la);
    assert.notDeepEqual(c.forward(batch), la);
    b.dispose();
    c.dispose();
  });
  a.dispose();
});

test("a decode step allocates only per step (the attention plan's tables), never per layer", () => {
  const counts = [2, 6].map((layers) => {
    const config = parseModelConfig({ architectures: ["Qwen3ForCausalLM"], hidden_size: 64, intermediate_size: 128, num_hidden_layers: layers, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, vocab_size: 512 });
    const m = createSyntheticModel(rt, { config, weights: "q4", kvDtype: "int8", numBlocks: 4 });
    m.forward(makeBatch([{ blocks: [0, 1], start: 0, tokens: [1, 2, 3, 4, 5, 6, 7, 8] }], 16));
    const heap = rt.heap;
    const alloc = heap.alloc.bind(heap);
    let n = 0;
    heap.alloc = (...args: Parameters<typeof alloc>) => (n++, alloc(...args));
    try {
      m.forward(makeBatch([{ blocks: [0, 1], start: 8, tokens: [9] }], 16));
    } finally {
      heap.alloc = alloc;
      m.dispose();
    }
    return n;
  });
  assert.equal(counts[0], counts[1], `allocations per step: ${counts[0]} with 2 layers, ${counts[1]} with 6`);
});

// The memory plan made before the first weight byte is read: the KV cache
// sized to what the sequences need within one budget (vLLM's CPU backend),
// placement of big models across wasm32 memories, and the refusals — too big
// for the machine, for the memory available now, for one memory, absurd
// configs — each an error naming the sizes, with no weight read and nothing
// left allocated.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { loadEngineModel } from "../../src/model/default-loader.js";
import { type RunnerOptions, runtimeMachineMemory, withRuntimeMachine, kvBytesPerBlock, planRunner } from "../../src/model/loader.js";
import { ArgumentError, defaultModelDir } from "../../src/index.js";
import { type Runtime, createRuntime, describePlacement, loadModel } from "../../src/ops-entry.js";
import { parseModelConfig } from "../../src/model/config.js";
import { resolveLoadConfig } from "../../src/model/load-settings.js";
import { writeTinyModel } from "../../src/testing/index.js";

const GIB = 2 ** 30;
let rt: Runtime;
let root: string;
let tinyDir: string;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-plan-"));
  tinyDir = writeTinyModel(join(root, "tiny"), { arch: "llama", seed: 1 }).dir;
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

// Llama-3.1-8B's and -70B's shapes, as in their config.json.
const LLAMA31_8B = {
  architectures: ["LlamaForCausalLM"],
  hidden_size: 4096,
  intermediate_size: 14336,
  num_hidden_layers: 32,
  num_attention_heads: 32,
  num_key_value_heads: 8,
  vocab_size: 128256,
  max_position_embeddings: 131072,
  torch_dtype: "bfloat16",
};
const LLAMA31_70B = { ...LLAMA31_8B, hidden_size: 8192, intermediate_size: 28672, num_hidden_layers: 80, num_attention_heads: 64 };
const BIG_MACHINE = { total: 256 * GIB, available: 256 * GIB };

/** Loads with `options`, expecting a refusal matching `message`: no weight read, nothing left allocated in any memory. */
function refused(dir: string, options: Record<string, unknown>, message: RegExp): void {
  const before = rt.memoryUsage();
  let reads = 0;
  assert.throws(
    () => loadModel(rt, dir, { progress: false, onProgress: () => reads++, ...options }),
    (e: Error) => e instanceof ArgumentError && message.test(e.message),
  );
  assert.equal(reads, 0, "no weight was read");
  assert.deepEqual(rt.memoryUsage(), before, "nothing allocated");
}

test("the default model's KV cache is sized to what its sequences need, not 1 GiB", () => {
  const config = parseModelConfig(JSON.parse(readFileSync(join(defaultModelDir(), "config.json"), "utf8")));
  const perBlock = kvBytesPerBlock(config, 16, "bf16");
  const maxLen = config.maxPositionEmbeddings;
  // The server's loader, with serve's default max_num_seqs 64: 64 sequences × max_position_embeddings / 16 blocks (4096 for 1024 tokens, 128 MiB), where 131072 were reserved before.
  const served = loadEngineModel(rt, { ...resolveLoadConfig({}), device: "cpu", source: { kind: "dir", path: defaultModelDir() }, maxNumSeqs: 64, maxNumBatchedTokens: 512 }, () => {});
  assert.deepEqual(served.runner.kvCache, { numBlocks: (64 * maxLen) / 16, blockSize: 16 });
  assert.equal(served.runner.maxModelLen, maxLen);
  assert.match(served.placement!, /^memory 0: embedding, layers 0–3, head, \d+\.\d+ MiB$/);
  served.runner.dispose();
  // generate: one sequence.
  const one = loadModel(rt, defaultModelDir(), { progress: false });
  assert.equal(one.runner.kvCache.numBlocks, maxLen / 16);
  assert.equal(one.plan.kvBytes, (maxLen / 16) * perBlock);
  one.runner.dispose();
  // A budget smaller than the need wins: --kv-cache-gib.
  const budget = loadModel(rt, defaultModelDir(), { progress: false, maxNumSeqs: 64, kvCacheBytes: 8 << 20 });
  assert.equal(budget.runner.kvCache.numBlocks, Math.floor((8 << 20) / perBlock));
  assert.ok(Math.floor((8 << 20) / perBlock) * 16 >= maxLen, "the budget holds one whole sequence");
  assert.equal(budget.runner.maxModelLen, maxLen, "min(max_position_embeddings, the cache's slots)");
  budget.runner.dispose();
});

test("Llama-3.1-8B's shapes: q8 is placed across wasm32 memories, q4 in fewer; one block table, KV spread by layers", () => {
  const config = parseModelConfig(LLAMA31_8B);
  const q8 = planRunner(config, "q8", { maxModelLen: 8192, maxNumSeqs: 4, machine: BIG_MACHINE });
  const q4 = planRunner(config, "q4", { maxModelLen: 8192, maxNumSeqs: 4, machine: BIG_MACHINE });
  assert.ok(q8.placement.memories.length >= 3, describePlacement(q8.placement));
  assert.ok(q4.placement.memories.length < q8.placement.memories.length, describePlacement(q4.placement));
  assert.equal(q8.numBlocks, 4 * 512, "four sequences of 8192 tokens, within the 4 GiB budget");
  assert.ok(q8.placement.memories.every((m) => m.bytes <= 4 * GIB));
  assert.deepEqual(q8.placement.layers.length, 32);
  assert.equal(q8.placement.memories.reduce((n, m) => n + m.layers[1] - m.layers[0], 0), 32);
  assert.ok(q8.weightBytes > 8.5e9 && q8.weightBytes < 9.5e9, `${q8.weightBytes}: 8.03 G weights at 1.125 bytes`);
});

test("refused before loading: too big for the machine, or for what it has available now", () => {
  refused(tinyDir, { machine: { total: 4 << 20, available: 4 << 20 } }, /^model does not fit in this machine's 4\.00 MiB of memory: it needs .* of f32 weights \+ .* of KV cache \(\d+ blocks × 16 tokens, f32\) .*; try --weights q8 or q4, a lower --max-model-len or --kv-cache-gib$/);
  refused(tinyDir, { weights: "q4", machine: { total: 64 * GIB, available: 4 << 20 } }, /^model does not fit in the 4\.00 MiB of memory available now \(of 64\.00 GiB\): .*; try a lower --max-model-len or --kv-cache-gib$/);
  refused(tinyDir, { numBlocks: 4, machine: { total: 4 << 20, available: 4 << 20 } }, /--num-gpu-blocks-override$/);
  // On a 24 GiB machine Llama-3.1-70B fits in no format (q4 alone is 41 GB).
  for (const format of ["f32", "bf16", "q8", "q4"] as const) {
    assert.throws(() => planRunner(parseModelConfig(LLAMA31_70B), format, { machine: { total: 24 * GIB, available: 20 * GIB } }), /^ArgumentError: model does not fit in this machine's 24\.00 GiB/);
  }
});

test("refused before loading: a layer too big for one wasm32 memory, and absurd configs", () => {
  const wide = parseModelConfig({ ...LLAMA31_8B, hidden_size: 16384, intermediate_size: 131072, num_attention_heads: 128, vocab_size: 1000 });
  assert.throws(() => planRunner(wide, "q8", { machine: BIG_MACHINE }), /^ArgumentError: model cannot be placed in wasm32 memories of 4\.00 GiB: layer 0 needs .* in one memory .* more than a memory's 4\.00 GiB .*; try --weights q4, a lower --max-model-len or --kv-cache-gib$/);
  // A KV budget that leaves no room beside one layer is cut to what the tightest memory allows.
  // (200 GiB of 2 MiB blocks: 102400 blocks, 6.25 GiB per layer, more than a memory.)
  const cut = planRunner(parseModelConfig(LLAMA31_8B), "q8", { kvCacheBytes: 200 * GIB, maxNumSeqs: 64, machine: { total: 1024 * GIB, available: 1024 * GIB } });
  assert.ok(cut.placement.memories.every((m) => m.bytes <= 4 * GIB), describePlacement(cut.placement));
  assert.ok(cut.numBlocks < 102400 && cut.numBlocks > 40000, `${cut.numBlocks} blocks`);
  assert.equal(new Set(cut.placement.layers).size, 32, "one layer per memory");
  const json = JSON.parse(readFileSync(join(tinyDir, "config.json"), "utf8")) as Record<string, unknown>;
  const absurd = writeTinyModel(join(root, "absurd"), { arch: "llama", seed: 1 }).dir;
  for (const [key, value, limit] of [["num_hidden_layers", 1e9, 1024], ["hidden_size", 1e9, 65536], ["vocab_size", 1e12, 16777216]] as const) {
    writeFileSync(join(absurd, "config.json"), JSON.stringify({ ...json, [key]: value }));
    refused(absurd, {}, new RegExp(`config\\.json ${key} must be ≤ ${limit} .*got ${value}$`));
  }
});

test("the fit check counts the pages a runtime's memories hold unused: a disposed model's room is reused, not counted twice", () => {
  // 64 MiB allocated and freed: the memory keeps the pages (wasm memories never shrink).
  const t = rt.tensor("f32", [16 << 20], "room");
  rt.free(t);
  const reusable = rt.memoryUsage().reduce((n, u) => n + u.capacity - u.inUse, 0);
  assert.ok(reusable >= 64 << 20, `${reusable} bytes unused in the runtime's memories`);
  const m = runtimeMachineMemory(rt);
  // freemem() is read inside runtimeMachineMemory; the unused pages come on top of it.
  assert.ok(m.available >= reusable, `available ${m.available} includes the ${reusable} reusable bytes`);
  // Loaders take it unless the caller names the machine (tests do).
  assert.ok(withRuntimeMachine(rt, {} as RunnerOptions).machine!.available >= reusable);
  const given = { total: 4 << 20, available: 4 << 20 };
  assert.equal(withRuntimeMachine(rt, { machine: given }).machine, given);
});

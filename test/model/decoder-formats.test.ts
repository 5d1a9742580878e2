// Weight formats (bf16, q8, q4) and KV cache dtypes (f16, bf16, int8, fp8)
// against f32, on an f32 checkpoint of every architecture, 40 prompt tokens,
// logits of every position. relErr = max |a − b| / max |b| per row.
//
// Stated bounds (measured worst case in parentheses):
//   weights vs f32 weights:   bf16 1e-2 (3.6e-3)   q8 3e-2 (1.1e-2)   q4 0.35 (0.16)
//   each format vs the float64 forward on its own dequantized weights:
//     f32, bf16 2e-4 (3.4e-7): only f32 rounding;  q8, q4 2e-2 (7.9e-3): + Q8_0 activations
//   KV dtype vs f32 KV:       f16 5e-4 (9e-5)   bf16 3e-3 (7.8e-4)   int8 1e-2 (1.9e-3)
//                             fp8e4m3 3e-2 (9.7e-3)   fp8e5m2 6e-2 (2.5e-2)
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type KvDtypeSetting, type Runtime, type WeightsSetting, createRuntime, loadModel } from "../../src/ops-entry.js";
import { referenceForward, TINY_ARCHS, type TinyArch, writeTinyModel } from "../../src/testing/index.js";
import { Blocks, dequantizedWeights, makeBatch, relErr, row } from "./decoder-support.js";

let rt: Runtime;
let root: string;
const dirs = new Map<TinyArch, string>();
const BLOCK = 8;
const N = 40;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-formats-"));
  for (const arch of TINY_ARCHS) dirs.set(arch, writeTinyModel(join(root, arch), { arch, seed: 11, numLayers: 2 }).dir);
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

function prompt(n: number, vocab: number): number[] {
  return Array.from({ length: n }, (_, i) => 3 + ((i * 7919 + 13) % (vocab - 3)));
}

/** Logits of every prompt position [N, V] and, with `reference`, the float64 forward on the loaded weights' values. */
function run(arch: TinyArch, weights: WeightsSetting, kvDtype: KvDtypeSetting, reference = false): { logits: Float32Array; V: number; ref?: Float64Array } {
  const m = loadModel(rt, dirs.get(arch)!, { weights, kvDtype, blockSize: BLOCK, numBlocks: 16, progress: false });
  try {
    const V = m.config.vocabSize;
    const ids = prompt(N, V);
    const logits = m.runner.forward(makeBatch([{ blocks: new Blocks(BLOCK).take(N), start: 0, tokens: ids, logits: "all" }], BLOCK));
    const ref = reference ? referenceForward(m.config, dequantizedWeights(rt, m.runner.weights, m.config), ids) : undefined;
    return { logits, V, ...(ref && { ref }) };
  } finally {
    m.runner.dispose();
  }
}

function worst(a: ArrayLike<number>, b: ArrayLike<number>, V: number): number {
  let e = 0;
  for (let t = 0; t < N; t++) e = Math.max(e, relErr(row(a, t, V), row(b, t, V)));
  return e;
}

const WEIGHT_BOUND: Record<string, number> = { f32: 0, bf16: 1e-2, q8: 3e-2, q4: 0.35 };
const KERNEL_BOUND: Record<string, number> = { f32: 2e-4, bf16: 2e-4, q8: 2e-2, q4: 2e-2 };
const KV_BOUND: Record<string, number> = { f16: 5e-4, bf16: 3e-3, int8: 1e-2, fp8e4m3: 3e-2, fp8e5m2: 6e-2 };

for (const arch of TINY_ARCHS) {
  test(`${arch}: bf16, q8, q4 weights stay within their bounds of f32; each matches the float64 forward on its own values`, () => {
    const base = run(arch, "f32", "f32", true);
    assert.ok(worst(base.logits, base.ref!, base.V) <= KERNEL_BOUND["f32"]!);
    for (const format of ["bf16", "q8", "q4"] as const) {
      const r = run(arch, format, "f32", true);
      const vsF32 = worst(r.logits, base.logits, r.V);
      const vsRef = worst(r.logits, r.ref!, r.V);
      assert.ok(vsF32 <= WEIGHT_BOUND[format]!, `${arch} ${format} vs f32: ${vsF32.toExponential(2)} > ${WEIGHT_BOUND[format]}`);
      assert.ok(vsRef <= KERNEL_BOUND[format]!, `${arch} ${format} vs its float64 forward: ${vsRef.toExponential(2)} > ${KERNEL_BOUND[format]}`);
      assert.ok(vsF32 > 0, `${arch} ${format} must differ from f32 (the format was not applied)`);
    }
  });

  test(`${arch}: KV caches in f16, bf16, int8, fp8 stay within their bounds of f32 KV`, () => {
    const base = run(arch, "f32", "f32");
    for (const [dtype, bound] of Object.entries(KV_BOUND) as [KvDtypeSetting, number][]) {
      const r = run(arch, "f32", dtype);
      const e = worst(r.logits, base.logits, r.V);
      assert.ok(e <= bound && e > 0, `${arch} KV ${dtype}: relErr ${e.toExponential(2)} (bound ${bound})`);
    }
  });
}

test("quantized KV: one prefill equals token-by-token decode (the prefill reads its K/V back from the cache)", () => {
  for (const kvDtype of ["bf16", "int8", "fp8e4m3"] as const) {
    const m = loadModel(rt, dirs.get("qwen3")!, { weights: "q8", kvDtype, blockSize: BLOCK, numBlocks: 16, progress: false });
    const V = m.config.vocabSize;
    const ids = prompt(20, V);
    const blocks = new Blocks(BLOCK);
    const prefill = m.runner.forward(makeBatch([{ blocks: blocks.take(20), start: 0, tokens: ids, logits: "all" }], BLOCK));
    const b = blocks.take(20);
    for (let t = 0; t < 20; t++) {
      const step = m.runner.forward(makeBatch([{ blocks: b, start: t, tokens: [ids[t]!] }], BLOCK));
      const e = relErr(step, row(prefill, t, V));
      assert.ok(e <= 1e-4, `KV ${kvDtype} position ${t}: relErr ${e.toExponential(2)}`);
    }
    m.runner.dispose();
  }
});

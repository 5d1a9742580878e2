// Shared by the WebGPU ModelRunner suites (model-runner.test.ts,
// gemma-runner.test.ts, kquant-runner.test.ts; not a test file of its own):
// the f32 twin of quantized weights (the CPU decoder over exactly the values
// the GPU decodes), the steps both runners take, and the logits comparison
// with its tolerance
//   max |gpu − cpu| ≤ tol · max(1, max |cpu|)   per row
// plus the same argmax (the greedy token) wherever the CPU's top two logits
// are more than 2 · tol · scale apart (else either is a right answer).
import assert from "node:assert/strict";
import { DecoderWeights, type LayerWeights } from "../../src/model/decoder-weights.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import { type Runtime, type Tensor, type Weight, createWeight, dequantizeWeight } from "../../src/ops-entry.js";
import { Blocks, makeBatch } from "../model/decoder-support.js";

/** f32 weights holding exactly the values of `w`'s matrices (dequantized), with copies of its vectors. */
export function f32Twin(rt: Runtime, w: DecoderWeights): DecoderWeights {
  const m = (x: Weight): Weight => {
    const t = dequantizeWeight(rt, { weight: x });
    try {
      return createWeight(rt, { source: t, format: "f32" });
    } finally {
      rt.free(t);
    }
  };
  const v = <T extends Tensor | null>(t: T): T => {
    if (t === null) return t;
    const c = rt.tensor("f32", t.shape);
    c.data().set(t.data());
    return c as T;
  };
  const embedding = m(w.embedding);
  const layers = w.layers.map((l): LayerWeights => ({
    inputNorm: v(l.inputNorm), postNorm: v(l.postNorm), attnOutNorm: v(l.attnOutNorm), mlpOutNorm: v(l.mlpOutNorm), qkv: m(l.qkv), qkvBias: v(l.qkvBias), qNorm: v(l.qNorm), kNorm: v(l.kNorm),
    o: m(l.o), oBias: v(l.oBias), gateUp: m(l.gateUp), gateUpBias: v(l.gateUpBias), down: m(l.down), downBias: v(l.downBias),
  }));
  return new DecoderWeights(rt, "f32", embedding, layers, v(w.finalNorm), w.lmHead === w.embedding ? embedding : m(w.lmHead));
}

function argmax(a: ArrayLike<number>, from: number, n: number): number {
  let best = from;
  for (let i = from; i < from + n; i++) if (a[i]! > a[best]!) best = i;
  return best - from;
}

/** Logits [rows, V] of the GPU runner against the CPU decoder's (see the header). */
export function assertLogitsClose(what: string, gpu: Float32Array, cpu: Float32Array, V: number, TOL: number): void {
  assert.equal(gpu.length, cpu.length, `${what}: length`);
  for (let r = 0; r < cpu.length / V; r++) {
    let scale = 1;
    for (let i = 0; i < V; i++) scale = Math.max(scale, Math.abs(cpu[r * V + i]!));
    for (let i = 0; i < V; i++) {
      const d = Math.abs(gpu[r * V + i]! - cpu[r * V + i]!);
      if (!(d <= TOL * scale)) assert.fail(`${what}: row ${r}, logit ${i}: gpu ${gpu[r * V + i]}, cpu ${cpu[r * V + i]} (tolerance ${TOL * scale})`);
    }
    const top = argmax(cpu, r * V, V);
    let second = -Infinity;
    for (let i = 0; i < V; i++) if (i !== top) second = Math.max(second, cpu[r * V + i]!);
    if (cpu[r * V + top]! - second > 2 * TOL * scale) assert.equal(argmax(gpu, r * V, V), top, `${what}: row ${r}: greedy token`);
  }
}

/**
 * The steps both runners take, over fresh blocks (40 tokens a sequence):
 * a ragged prefill of two sequences (11 and 5 tokens, every row of the first
 * sampled), a decode step, a 10-token chunk after the first's cached prefix
 * beside a decode (sequences reach 22 tokens: past a 16-token window), and a
 * step that samples nothing.
 */
export function runnerSteps(blockSize: number, V: number): ForwardBatch[] {
  const blocks = new Blocks(blockSize);
  const a = { blocks: blocks.take(40), prompt: Array.from({ length: 11 }, (_, i) => (i * 7 + 3) % V) };
  const b = { blocks: blocks.take(40), prompt: Array.from({ length: 5 }, (_, i) => (i * 13 + 1) % V) };
  return [
    makeBatch([{ blocks: a.blocks, start: 0, tokens: a.prompt, logits: "all" }, { blocks: b.blocks, start: 0, tokens: b.prompt }], blockSize),
    makeBatch([{ blocks: a.blocks, start: 11, tokens: [5] }, { blocks: b.blocks, start: 5, tokens: [9] }], blockSize),
    makeBatch([{ blocks: a.blocks, start: 12, tokens: Array.from({ length: 10 }, (_, i) => (i * 5 + 2) % V) }, { blocks: b.blocks, start: 6, tokens: [4] }], blockSize),
    makeBatch([{ blocks: a.blocks, start: 22, tokens: [1, 2, 3], logits: "none" }], blockSize),
  ];
}

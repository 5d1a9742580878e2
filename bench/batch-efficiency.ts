/**
 * What bounds the serving speed-up from batching on a CPU: one decoder layer's
 * four projections (qkv, o, gate_up, down at Qwen2.5-0.5B's shapes) as GEMV
 * (T = 1, one decode) and as GEMM (T tokens, a batched decode step), in one
 * weight format. `efficiency(T)` = T × GEMV time / GEMM time: how many times
 * more tokens a second a batch of T gets through the projections than one
 * sequence does. The serve suite measures it in its own run, before it starts
 * the server, so the two are comparable.
 *
 * Weights rotate over copies totalling ≥ 128 MiB, so every call reads them
 * from memory as a real model's layers do.
 */
import { type Runtime, type Tensor, type Weight, type WeightFormat, createWeight, linear } from "../src/ops-entry.js";
import type { SuiteContext } from "./harness.js";

const HIDDEN = 896;
const INTERMEDIATE = 4864;
const QKV = (14 + 2 * 2) * 64;
/** [rows, cols] of qkv_proj, o_proj, gate_up_proj, down_proj. */
const LAYER: [number, number][] = [
  [QKV, HIDDEN],
  [HIDDEN, 14 * 64],
  [2 * INTERMEDIATE, HIDDEN],
  [HIDDEN, INTERMEDIATE],
];
const ROTATION_BYTES = 128 << 20;

function filled(rt: Runtime, dtype: "bf16" | "f32", shape: [number, number], seed: number): Tensor {
  const t = rt.tensor(dtype, shape, "bench batch-efficiency");
  const d = t.data();
  let s = seed >>> 0;
  for (let i = 0; i < d.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    // bf16 ±[0.004, 0.06) like a trained layer's weights; f32 activations in ±2.
    d[i] = dtype === "bf16" ? ((s >>> 31) << 15) | ((119 + ((s >>> 7) & 3)) << 7) | ((s >>> 16) & 0x7f) : ((s / 2 ** 32) * 4 - 2);
  }
  return t;
}

/** Microseconds of one layer's projections at each token count, and the efficiency of each over T = 1. */
export async function layerBatchEfficiency(ctx: SuiteContext, format: WeightFormat, tokenCounts: readonly number[]): Promise<Map<number, { us: number; efficiency: number }>> {
  const { rt, quick } = ctx;
  const sources = LAYER.map((shape, i) => filled(rt, "bf16", shape, 17 + i));
  const first = LAYER.map((_, i) => createWeight(rt, { source: sources[i]!, format, label: "bench layer" }));
  const layerBytes = first.reduce((s, w) => s + w.byteLength, 0);
  const layers: Weight[][] = [first];
  while (layers.length * layerBytes < ROTATION_BYTES) layers.push(LAYER.map((_, i) => createWeight(rt, { source: sources[i]!, format, label: "bench layer" })));
  for (const s of sources) rt.free(s);
  const timing = quick ? { minReps: 3, minTimeMs: 80 } : { minReps: 5, minTimeMs: 300 };
  const out = new Map<number, { us: number; efficiency: number }>();
  let gemvMs = NaN;
  for (const T of [1, ...tokenCounts.filter((t) => t !== 1)]) {
    const xs = LAYER.map(([, cols], i) => filled(rt, "f32", [T, cols], 5 + i));
    const ys = LAYER.map(([rows]) => rt.tensor("f32", [T, rows], "bench batch-efficiency out"));
    let k = 0;
    const ms = await ctx.time(() => {
      const layer = layers[k++ % layers.length]!;
      for (let i = 0; i < LAYER.length; i++) linear(rt, { x: xs[i]!, weight: layer[i]!, out: ys[i]! });
    }, timing);
    if (T === 1) gemvMs = ms;
    out.set(T, { us: ms * 1000, efficiency: (T * gemvMs) / ms });
    for (const t of [...xs, ...ys]) rt.free(t);
  }
  for (const layer of layers) for (const w of layer) w.free();
  return out;
}

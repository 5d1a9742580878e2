/**
 * Suite `linalg`: the linear kernels on Qwen2.5-0.5B's projection shapes
 * (hidden 896, intermediate 4864, 14 heads × 64, 2 KV heads, vocab 151936),
 * for every weight format.
 *
 *   gemv   T = 1 (decode): `gbps` = weight bytes / time, `roofline` = gbps /
 *          read_gbps_all (this run's all-thread read bandwidth).
 *   layer  one decoder layer's four GEMVs back to back (qkv, o, gate_up, down):
 *          what bounds decode, as gbps and roofline.
 *   gemm   T ∈ {4, 16, 64} (prefill, batched decode): `gflops`, `simd_frac` =
 *          gflops / simd_gflops_all, `batch_efficiency` = T × GEMV time / GEMM
 *          time (how much a batch of T saves over T decodes).
 *
 * Weights are rotated over copies totalling ≥ 4× the 32 MiB L3 so every call
 * reads them from memory, as a real model's layers do.
 */
import {
  type Runtime,
  type Tensor,
  WEIGHT_FORMATS,
  type Weight,
  type WeightFormat,
  createWeight,
  linear,
  weightBytes,
} from "../../src/ops-entry.js";
import type { Row, Suite } from "../harness.js";

interface Projection {
  name: string;
  rows: number;
  cols: number;
}

const HIDDEN = 896;
const INTERMEDIATE = 4864;
const HEAD_DIM = 64;
const HEADS = 14;
const KV_HEADS = 2;
const VOCAB = 151936;

const LAYER: Projection[] = [
  { name: "qkv_proj", rows: (HEADS + 2 * KV_HEADS) * HEAD_DIM, cols: HIDDEN },
  { name: "o_proj", rows: HIDDEN, cols: HEADS * HEAD_DIM },
  { name: "gate_up_proj", rows: 2 * INTERMEDIATE, cols: HIDDEN },
  { name: "down_proj", rows: HIDDEN, cols: INTERMEDIATE },
];
const LM_HEAD: Projection = { name: "lm_head", rows: VOCAB, cols: HIDDEN };

const ROTATION_BYTES = 128 << 20;

/** A bf16 source with values like a trained layer's (±0.05), deterministic. */
function source(rt: Runtime, p: Projection): Tensor {
  const t = rt.tensor("bf16", [p.rows, p.cols], `bench source ${p.name}`);
  const d = t.data() as Uint16Array;
  let s = p.rows * 31 + p.cols;
  for (let i = 0; i < d.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    // bf16 of ±[0.0039, 0.0625): sign, exponent 119..122, 7 random mantissa bits.
    d[i] = ((s >>> 31) << 15) | ((119 + ((s >>> 7) & 3)) << 7) | ((s >>> 16) & 0x7f);
  }
  return t;
}

/** Copies of the projection's Weight totalling ≥ ROTATION_BYTES (at least one). */
function copies(rt: Runtime, p: Projection, format: WeightFormat, src: Tensor): Weight[] {
  const first = createWeight(rt, { source: src, format, label: `bench ${p.name} ${format}` });
  const n = Math.max(1, Math.ceil(ROTATION_BYTES / first.byteLength));
  const ws = [first];
  for (let i = 1; i < n; i++) ws.push(createWeight(rt, { source: src, format, label: `bench ${p.name} ${format}` }));
  return ws;
}

/** A deterministic activation: f32 [tokens, cols]. */
export function activation(rt: Runtime, tokens: number, cols: number): Tensor {
  const x = rt.tensor("f32", [tokens, cols], "bench x");
  const d = x.data() as Float32Array;
  for (let i = 0; i < d.length; i++) d[i] = Math.sin(i * 0.37) * 2;
  return x;
}

export const linalg: Suite = {
  name: "linalg",
  bothKernels: true,
  description: "linear GEMV/GEMM per weight format on Qwen2.5-0.5B projection shapes: bandwidth roofline, GFLOP/s, batch efficiency",
  async run({ rt, quick, ceilings, log, time }): Promise<Row[]> {
    const rows: Row[] = [];
    const timing = quick ? { minReps: 3, minTimeMs: 60 } : { minReps: 7, minTimeMs: 400 };
    const tokenCounts = quick ? [4, 16] : [4, 16, 64];
    const projections = quick ? LAYER : [...LAYER, LM_HEAD];
    const gemvMs = new Map<string, number>();

    for (const p of projections) {
      const src = source(rt, p);
      for (const format of WEIGHT_FORMATS) {
        const ws = copies(rt, p, format, src);
        const bytes = ws[0]!.byteLength;
        for (const T of [1, ...tokenCounts]) {
          const x = activation(rt, T, p.cols);
          const out = rt.tensor("f32", [T, p.rows], "bench out");
          let k = 0;
          const ms = await time(() => linear(rt, { x, weight: ws[k++ % ws.length]!, out }), timing);
          rt.free(x);
          rt.free(out);
          const gflops = (2 * T * p.rows * p.cols) / (ms * 1e6);
          if (T === 1) {
            gemvMs.set(`${p.name} ${format}`, ms);
            const gbps = bytes / (ms * 1e6);
            rows.push({ kind: "gemv", proj: p.name, rows: p.rows, cols: p.cols, weights: format, T, us: ms * 1000, gbps, roofline: gbps / ceilings.read_gbps_all, gflops, simd_frac: gflops / ceilings.simd_gflops_all, batch_efficiency: 1 });
          } else {
            const single = gemvMs.get(`${p.name} ${format}`)!;
            rows.push({ kind: "gemm", proj: p.name, rows: p.rows, cols: p.cols, weights: format, T, us: ms * 1000, gbps: null, roofline: null, gflops, simd_frac: gflops / ceilings.simd_gflops_all, batch_efficiency: (T * single) / ms });
          }
          log(`${p.name} ${format} T=${T}: ${(ms * 1000).toFixed(1)} µs`);
        }
        for (const w of ws) w.free();
      }
      rt.free(src);
    }

    // One layer's GEMVs in sequence, over enough layers to miss the cache.
    for (const format of WEIGHT_FORMATS) {
      const sources = LAYER.map((p) => source(rt, p));
      const layerBytes = LAYER.reduce((s, p) => s + weightBytes(format, p.rows, p.cols), 0);
      const n = Math.max(1, Math.ceil(ROTATION_BYTES / layerBytes));
      const layers = Array.from({ length: n }, () => LAYER.map((_, i) => createWeight(rt, { source: sources[i]!, format, label: `bench layer ${format}` })));
      for (const s of sources) rt.free(s);
      const xs = LAYER.map((p) => activation(rt, 1, p.cols));
      const outs = LAYER.map((p) => rt.tensor("f32", [1, p.rows], "bench out"));
      let k = 0;
      const ms = await time(() => {
        const layer = layers[k++ % n]!;
        for (let i = 0; i < LAYER.length; i++) linear(rt, { x: xs[i]!, weight: layer[i]!, out: outs[i]! });
      }, timing);
      const gbps = layerBytes / (ms * 1e6);
      const flops = LAYER.reduce((s, p) => s + 2 * p.rows * p.cols, 0);
      rows.push({ kind: "layer", proj: "qkv+o+gate_up+down", rows: null, cols: null, weights: format, T: 1, us: ms * 1000, gbps, roofline: gbps / ceilings.read_gbps_all, gflops: flops / (ms * 1e6), simd_frac: flops / (ms * 1e6) / ceilings.simd_gflops_all, batch_efficiency: null });
      log(`layer ${format}: ${(ms * 1000).toFixed(1)} µs`);
      for (const layer of layers) for (const w of layer) w.free();
      for (const t of [...xs, ...outs]) rt.free(t);
    }
    return rows;
  },
};

/**
 * Suite `gguf-kernels`: the native ggml linear kernels (Q2_K, Q3_K, Q4_K, Q5_K,
 * Q6_K, IQ4_XS, and Q8_0 / IQ4_NL kept as kvflash q8) against kvflash's own q8 in the same process, on
 * Qwen2.5-1.5B's projection shapes (hidden 1536, intermediate 8960, 12 heads ×
 * 128, 2 KV heads: every width a multiple of ggml's 256-value superblock).
 *
 *   gemv  T = 1 (decode): `gbps` = weight bytes / time, `roofline` = gbps /
 *         read_gbps_all (this run's all-thread read bandwidth).
 *   gemm  T ∈ {16, 64} (prefill): `gflops`, `simd_frac` = gflops / simd_gflops_all.
 *   layer the four GEMVs of one layer back to back (decode's cost per layer).
 *
 * Every row has `over_q8` = q8's time / this format's time on the same shape
 * and T (> 1: faster than q8), the median over rounds that interleave the
 * formats, and `bytes_over_q8` = its weight bytes / q8's.
 * The K-quant weights are random ggml blocks (finite f16 scales): the kernels'
 * speed does not depend on the values. Weights rotate over copies totalling
 * ≥ 128 MiB so every call reads them from memory, as in `linalg`.
 */
import { GgmlMatrix, type Runtime, type Weight, createGgmlWeight, createWeight, linear } from "../../src/ops-entry.js";
import { type Row, type Suite, median, timeMedian } from "../harness.js";
import { activation } from "./linalg.js";

interface Projection {
  name: string;
  rows: number;
  cols: number;
}

const LAYER: Projection[] = [
  { name: "qkv_proj", rows: (12 + 2 * 2) * 128, cols: 1536 },
  { name: "o_proj", rows: 1536, cols: 1536 },
  { name: "gate_up_proj", rows: 2 * 8960, cols: 1536 },
  { name: "down_proj", rows: 1536, cols: 8960 },
];
const ROTATION_BYTES = 128 << 20;
/** What each row's weights are: kvflash q8 converted from floats, or ggml blocks kept native. */
const FORMATS = ["q8", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ4_NL"] as const;
type BenchFormat = (typeof FORMATS)[number];
const BLOCK: Readonly<Record<Exclude<BenchFormat, "q8">, { size: number; bytes: number; scales: number[] }>> = {
  Q8_0: { size: 32, bytes: 34, scales: [0] },
  Q4_K: { size: 256, bytes: 144, scales: [0, 2] },
  Q5_K: { size: 256, bytes: 176, scales: [0, 2] },
  Q6_K: { size: 256, bytes: 210, scales: [208] },
  Q2_K: { size: 256, bytes: 84, scales: [80, 82] },
  Q3_K: { size: 256, bytes: 110, scales: [108] },
  IQ4_XS: { size: 256, bytes: 136, scales: [0] },
  IQ4_NL: { size: 32, bytes: 18, scales: [0] },
};

/** A deterministic pseudo-random byte stream. */
function fillRandom(d: Uint8Array | Uint16Array, seed: number, f: (s: number) => number): void {
  let s = seed >>> 0;
  for (let i = 0; i < d.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    d[i] = f(s);
  }
}

function makeWeight(rt: Runtime, p: Projection, format: BenchFormat): Weight {
  if (format === "q8") {
    const src = rt.tensor("bf16", [p.rows, p.cols], `bench source ${p.name}`);
    // bf16 of ±[0.0039, 0.0625), as the linalg suite.
    fillRandom(src.data() as Uint16Array, p.rows * 31 + p.cols, (s) => ((s >>> 31) << 15) | ((119 + ((s >>> 7) & 3)) << 7) | ((s >>> 16) & 0x7f));
    const w = createWeight(rt, { source: src, format: "q8", label: `bench ${p.name} q8` });
    rt.free(src);
    return w;
  }
  const b = BLOCK[format];
  const rowBytes = (p.cols / b.size) * b.bytes;
  const raw = rt.tensor("uint8", [p.rows, rowBytes], `bench ${p.name} ${format} blocks`);
  const d = raw.data() as Uint8Array;
  fillRandom(d, p.rows + p.cols, (s) => s >>> 24);
  // f16 super-scales of about 2^-10: exponent 5, random mantissa.
  for (let at = 0; at < d.length; at += b.bytes) for (const o of b.scales) d[at + o + 1] = 0x14 | (d[at + o + 1]! & 0x83);
  const w = createGgmlWeight(rt, { source: new GgmlMatrix(format, raw, p.rows, p.cols), label: `bench ${p.name} ${format}` });
  rt.free(raw);
  return w;
}

function copies(rt: Runtime, p: Projection, format: BenchFormat): Weight[] {
  const ws = [makeWeight(rt, p, format)];
  const n = Math.max(1, Math.ceil(ROTATION_BYTES / ws[0]!.byteLength));
  for (let i = 1; i < n; i++) ws.push(makeWeight(rt, p, format));
  return ws;
}

/**
 * Times each format's call in rounds, the formats interleaved within a round
 * (this machine is shared: load drifts between seconds, not within one
 * round): per format the median time over rounds, and the median over rounds
 * of q8's time / its time.
 */
function interleaved(calls: readonly (() => void)[], rounds: number, timing: { minReps: number; minTimeMs: number }): { ms: number[]; overQ8: number[] } {
  const per = calls.map(() => [] as number[]);
  const ratios = calls.map(() => [] as number[]);
  for (let r = 0; r < rounds; r++) {
    const t = calls.map((fn) => timeMedian(fn, timing));
    t.forEach((ms, i) => {
      per[i]!.push(ms);
      ratios[i]!.push(t[0]! / ms);
    });
  }
  return { ms: per.map(median), overQ8: ratios.map(median) };
}

export const ggufKernels: Suite = {
  name: "gguf-kernels",
  bothKernels: true,
  description: "native ggml Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / IQ4_XS / IQ4_NL / Q8_0 linear GEMV and GEMM vs kvflash q8, interleaved in one process, Qwen2.5-1.5B shapes",
  run({ rt, quick, ceilings, log }): Row[] {
    const rows: Row[] = [];
    const timing = quick ? { minReps: 3, minTimeMs: 20 } : { minReps: 3, minTimeMs: 60 };
    const rounds = quick ? 5 : 9;
    const tokenCounts = quick ? [1, 16] : [1, 16, 64];
    const row = (kind: string, proj: string, format: BenchFormat, T: number, ms: number, overQ8: number, bytes: number, q8Bytes: number, flops: number): Row => {
      const gbps = bytes / (ms * 1e6);
      const gflops = flops / (ms * 1e6);
      return {
        kind, proj, weights: format, T, us: ms * 1000,
        gbps: T === 1 ? gbps : null, roofline: T === 1 ? gbps / ceilings.read_gbps_all : null,
        gflops, simd_frac: gflops / ceilings.simd_gflops_all,
        over_q8: overQ8, bytes_over_q8: bytes / q8Bytes,
      };
    };

    for (const p of quick ? LAYER.slice(2, 3) : LAYER) {
      const sets = FORMATS.map((f) => copies(rt, p, f));
      for (const T of tokenCounts) {
        const x = activation(rt, T, p.cols);
        const out = rt.tensor("f32", [T, p.rows], "bench out");
        const calls = sets.map((ws) => {
          let k = 0;
          return () => linear(rt, { x, weight: ws[k++ % ws.length]!, out });
        });
        const { ms, overQ8 } = interleaved(calls, rounds, timing);
        FORMATS.forEach((f, i) => {
          rows.push(row(T === 1 ? "gemv" : "gemm", p.name, f, T, ms[i]!, overQ8[i]!, sets[i]![0]!.byteLength, sets[0]![0]!.byteLength, 2 * T * p.rows * p.cols));
          log(`${p.name} ${f} T=${T}: ${(ms[i]! * 1000).toFixed(1)} µs, ${overQ8[i]!.toFixed(2)}× q8`);
        });
        rt.free(x);
        rt.free(out);
      }
      for (const ws of sets) for (const w of ws) w.free();
    }

    // One layer's four GEMVs in sequence (decode), rotated over enough layers to miss the cache.
    const stacks = FORMATS.map((f) => {
      const first = LAYER.map((p) => makeWeight(rt, p, f));
      const bytes = first.reduce((s, w) => s + w.byteLength, 0);
      const n = Math.max(1, Math.ceil(ROTATION_BYTES / bytes));
      return { bytes, layers: [first, ...Array.from({ length: n - 1 }, () => LAYER.map((p) => makeWeight(rt, p, f)))] };
    });
    const xs = LAYER.map((p) => activation(rt, 1, p.cols));
    const outs = LAYER.map((p) => rt.tensor("f32", [1, p.rows], "bench out"));
    const calls = stacks.map(({ layers }) => {
      let k = 0;
      return () => {
        const layer = layers[k++ % layers.length]!;
        for (let i = 0; i < LAYER.length; i++) linear(rt, { x: xs[i]!, weight: layer[i]!, out: outs[i]! });
      };
    });
    const { ms, overQ8 } = interleaved(calls, rounds, timing);
    const flops = LAYER.reduce((s, p) => s + 2 * p.rows * p.cols, 0);
    FORMATS.forEach((f, i) => {
      rows.push(row("layer", "qkv+o+gate_up+down", f, 1, ms[i]!, overQ8[i]!, stacks[i]!.bytes, stacks[0]!.bytes, flops));
      log(`layer ${f}: ${(ms[i]! * 1000).toFixed(1)} µs, ${overQ8[i]!.toFixed(2)}× q8`);
    });
    for (const { layers } of stacks) for (const layer of layers) for (const w of layer) w.free();
    for (const t of [...xs, ...outs]) rt.free(t);
    return rows;
  },
};

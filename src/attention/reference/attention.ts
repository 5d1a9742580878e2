/**
 * Float64 references of the attention operators — the test oracle, written to
 * be read next to ../shared/ARCHITECTURE.md ("Attention semantics"), not to be
 * fast. They take the operators' own option objects, read every tensor
 * through Tensor.toFloat32() (so f16/bf16 K/V are the decoded values) and
 * return plain row-major Float64Arrays shaped like out and lse.
 *
 * They trust their input: run the operator's validation first if in doubt.
 */
import { decodeInto, storageArray } from "../../tensor/codec.js";
import type { Tensor } from "../../tensor/tensor.js";
import type { FlashAttentionOptions } from "../flash-attention.js";
import type { IncreFlashAttentionOptions } from "../incre-flash-attention.js";
import type { AttentionLayout, AttentionOptions } from "../types.js";

export interface ReferenceResult {
  /** q's shape, row-major. */
  out: Float64Array;
  /** out's shape without D, row-major (see AttentionOptions.lse). */
  lse: Float64Array;
}

/**
 * Attention for one query row over keys 0..sk−1: `score(j)` is s_j, or null
 * when key j is excluded; `value(j)` is v_j (D numbers).
 */
export function attendRow(D: number, sk: number, score: (j: number) => number | null, value: (j: number) => ArrayLike<number>): { o: Float64Array; lse: number } {
  const kept: { j: number; s: number }[] = [];
  for (let j = 0; j < sk; j++) {
    const s = score(j);
    if (s !== null) kept.push({ j, s });
  }
  const o = new Float64Array(D);
  if (kept.length === 0) return { o, lse: -Infinity };
  const m = Math.max(...kept.map((x) => x.s));
  let l = 0;
  for (const { j, s } of kept) {
    const w = Math.exp(s - m);
    l += w;
    const vj = value(j);
    for (let d = 0; d < D; d++) o[d]! += w * vj[d]!;
  }
  for (let d = 0; d < D; d++) o[d]! /= l;
  return { o, lse: m + Math.log(l) };
}

/** Every element of t, decoded, in row-major order of its shape. */
export function values(t: Tensor): Float32Array {
  if (!t.isContiguous()) return t.toFloat32();
  const out = new Float32Array(t.numel);
  decodeInto(t.dtype, storageArray(t.dtype, t.memory.buffer, t.ptr, t.numel), out);
  return out;
}

/** Element index of logical (b, n, s, d) in a row-major tensor of `layout`; `t0` is the sequence's first token (TND). */
export function layoutIndex(layout: AttentionLayout, shape: readonly number[], b: number, n: number, s: number, d: number, t0: number): number {
  if (layout === "BNSD") return ((b * shape[1]! + n) * shape[2]! + s) * shape[3]! + d;
  if (layout === "BSND") return ((b * shape[1]! + s) * shape[2]! + n) * shape[3]! + d;
  return ((t0 + s) * shape[1]! + n) * shape[2]! + d;
}

/** Reads t (broadcast to [B, H, Sq, Sk] by NumPy rules) at (b, h, i, j). */
export function broadcastReader(t: Tensor): (b: number, h: number, i: number, j: number) => number {
  const data = values(t);
  const shape = t.shape;
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let k = shape.length - 1; k >= 0; k--) {
    strides[k] = s;
    s *= shape[k]!;
  }
  return (b, h, i, j) => {
    const coords = [b, h, i, j].slice(4 - shape.length);
    let idx = 0;
    coords.forEach((c, k) => (idx += (shape[k] === 1 ? 0 : c) * strides[k]!));
    return data[idx]!;
  };
}

interface Sequence {
  sq: number;
  sk: number;
  q0: number;
  k0: number;
}

function referenceCore(options: AttentionOptions & { q: Tensor; k: Tensor; v: Tensor }, layout: AttentionLayout, seqs: Sequence[]): ReferenceResult {
  const { q, k, v } = options;
  const rank = q.rank;
  const D = q.shape[rank - 1]!;
  const H = layout === "BSND" ? q.shape[2]! : q.shape[1]!;
  const Hkv = layout === "BSND" ? k.shape[2]! : k.shape[1]!;
  const G = H / Hkv;
  const qv = values(q);
  const kv = values(k);
  const vv = values(v);
  const scale = options.scale ?? 1 / Math.sqrt(D);
  const softcap = options.softcap ?? 0;
  const [left, right] = options.window ?? [-1, -1];
  const bias = options.bias ? broadcastReader(options.bias) : undefined;
  const mask = options.mask ? broadcastReader(options.mask) : undefined;
  const slopes = options.alibiSlopes ? values(options.alibiSlopes) : undefined;
  const slope = (b: number, h: number): number => (options.alibiSlopes!.rank === 1 ? slopes![h]! : slopes![b * H + h]!);

  const out = new Float64Array(q.numel);
  const lseTotal = layout === "TND" ? q.shape[0]! * H : q.shape[0]! * H * (layout === "BNSD" ? q.shape[2]! : q.shape[1]!);
  const lse = new Float64Array(lseTotal);
  seqs.forEach(({ sq, sk, q0, k0 }, b) => {
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / G);
      for (let i = 0; i < sq; i++) {
        const diag = i + sk - sq; // the key aligned with query i (bottom-right)
        const qRow = layoutIndex(layout, q.shape, b, h, i, 0, q0); // the head dim is innermost
        const score = (j: number): number | null => {
          if (mask && mask(b, h, i, j) !== 0) return null;
          if (options.causal && j > diag) return null;
          if (left >= 0 && j < diag - left) return null;
          if (right >= 0 && j > diag + right) return null;
          const kRow = layoutIndex(layout, k.shape, b, kvh, j, 0, k0);
          let dot = 0;
          for (let d = 0; d < D; d++) dot += qv[qRow + d]! * kv[kRow + d]!;
          let s = scale * dot;
          if (softcap > 0) s = softcap * Math.tanh(s / softcap);
          if (bias) s += bias(b, h, i, j);
          if (slopes) s -= slope(b, h) * Math.abs(diag - j);
          return s;
        };
        const row = attendRow(D, sk, score, (j) => {
          const vRow = layoutIndex(layout, v.shape, b, kvh, j, 0, k0);
          return vv.subarray(vRow, vRow + D);
        });
        out.set(row.o, qRow);
        const li = layout === "BNSD" ? (b * H + h) * sq + i : layout === "BSND" ? (b * sq + i) * H + h : (q0 + i) * H + h;
        lse[li] = row.lse;
      }
    }
  });
  return { out, lse };
}

/** Float64 flashAttention (same options; out/lse/returnLse are ignored). */
export function referenceFlashAttention(options: FlashAttentionOptions): ReferenceResult {
  const layout = options.layout ?? "BNSD";
  let seqs: Sequence[];
  if (layout === "TND") {
    const cq = options.cuSeqlensQ!;
    const ck = options.cuSeqlensK!;
    seqs = Array.from({ length: cq.length - 1 }, (_, b) => ({ q0: cq[b]!, sq: cq[b + 1]! - cq[b]!, k0: ck[b]!, sk: ck[b + 1]! - ck[b]! }));
  } else {
    const B = options.q.shape[0]!;
    const Sq = layout === "BNSD" ? options.q.shape[2]! : options.q.shape[1]!;
    const Sk = layout === "BNSD" ? options.k.shape[2]! : options.k.shape[1]!;
    seqs = Array.from({ length: B }, () => ({ q0: 0, sq: Sq, k0: 0, sk: Sk }));
  }
  return referenceCore(options, layout, seqs);
}

/** Float64 increFlashAttention (same options; plan/splitKv/out/lse are ignored). */
export function referenceIncreFlashAttention(options: IncreFlashAttentionOptions): ReferenceResult {
  const layout = options.layout ?? "BNSD";
  const B = options.q.shape[0]!;
  const Sq = layout === "BNSD" ? options.q.shape[2]! : options.q.shape[1]!;
  const Smax = layout === "BNSD" ? options.k.shape[2]! : options.k.shape[1]!;
  const lengths = options.actualSeqLengths ?? options.plan?.lengths ?? new Array<number>(B).fill(Smax);
  const seqs = Array.from({ length: B }, (_, b) => ({ q0: 0, sq: Sq, k0: 0, sk: lengths[b]! }));
  return referenceCore(options, layout, seqs);
}

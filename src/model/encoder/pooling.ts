/**
 * Pooling of a ragged batch's last hidden states into one vector per
 * sequence, as sentence-transformers' Pooling and Normalize modules do (every
 * token of a ragged sequence is a real one: the attention mask is all ones):
 *
 *   cls    h[first token]
 *   mean   Σ h[t] / n over the sequence's n tokens (sum in f64)
 *   last   h[last token]
 *   normalize: v / max(‖v‖₂, 1e-12)   (torch.nn.functional.normalize)
 *
 * Then, for `dimensions` (Matryoshka), truncate and renormalize (vLLM's order).
 */
import type { PoolingMode } from "./pooling-config.js";

/** hidden f32 [T, h]; cuSeqlens [B + 1] → B vectors of h. */
export function poolSequences(hidden: Float32Array, h: number, cuSeqlens: ArrayLike<number>, mode: PoolingMode, normalize: boolean): Float32Array[] {
  const out: Float32Array[] = [];
  for (let b = 0; b + 1 < cuSeqlens.length; b++) {
    const t0 = cuSeqlens[b]!;
    const t1 = cuSeqlens[b + 1]!;
    let v: Float32Array;
    if (mode === "mean") {
      const acc = new Float64Array(h);
      for (let t = t0; t < t1; t++) for (let i = 0; i < h; i++) acc[i]! += hidden[t * h + i]!;
      v = Float32Array.from(acc, (s) => s / (t1 - t0));
    } else {
      const t = mode === "cls" ? t0 : t1 - 1;
      v = hidden.slice(t * h, t * h + h);
    }
    out.push(normalize ? l2Normalize(v) : v);
  }
  return out;
}

/** v / max(‖v‖₂, 1e-12), in place; returns v. */
export function l2Normalize(v: Float32Array): Float32Array {
  let sq = 0;
  for (let i = 0; i < v.length; i++) sq += v[i]! * v[i]!;
  const inv = 1 / Math.max(Math.sqrt(sq), 1e-12);
  for (let i = 0; i < v.length; i++) v[i] = v[i]! * inv;
  return v;
}

/** Matryoshka: the first `dimensions` values, renormalized (a fresh array). */
export function truncateEmbedding(v: Float32Array, dimensions: number): Float32Array {
  return l2Normalize(v.slice(0, dimensions));
}

/**
 * Option and result types shared by the attention operators. Semantics are
 * those of ../shared/ARCHITECTURE.md, "Attention semantics":
 *
 *   s_j = scale · (q_i · k_j)
 *   s_j = softcap · tanh(s_j / softcap)        (softcap > 0)
 *   s_j = s_j + bias[b, h, i, j]
 *   s_j = s_j − slope_h · |i + Sk − Sq − j|     (alibiSlopes)
 *   j excluded if mask[b, h, i, j] ≠ 0, or causal and j > i + Sk − Sq,
 *     or outside [i + Sk − Sq − left, i + Sk − Sq + right], or j ≥ Sk
 *   o_i = Σ softmax(s)_j · v_j,  lse_i = ln Σ e^(s_j)   (over kept j)
 *
 * A row that keeps no key gives o = 0 and lse = −Infinity.
 */
import type { Tensor } from "../tensor/tensor.js";

/**
 * Memory layouts of q, k, v and out:
 * - `BNSD`: [B, N, S, D]
 * - `BSND`: [B, S, N, D] (the seeds' BSH)
 * - `TND`: [T, N, D], sequences concatenated along T, bounded by cuSeqlensQ / cuSeqlensK
 * N is H for q/out and Hkv for k/v. The head dim must be contiguous (stride 1);
 * other strides are free (views work).
 */
export type AttentionLayout = "BNSD" | "BSND" | "TND";

/** Options every attention operator takes. */
export interface AttentionOptions {
  /** Query heads H; checked against q's shape when given. */
  numHeads?: number;
  /** KV heads Hkv (H % Hkv == 0; GQA/MQA, KV is never repeated); checked against k's shape when given. */
  numKvHeads?: number;
  /** Multiplies q·k. Default 1/√D. */
  scale?: number;
  /** Bottom-right aligned causal mask: query i keeps keys j ≤ i + Sk − Sq. Default false. */
  causal?: boolean;
  /** `[left, right]`: query i keeps keys in [i + Sk − Sq − left, i + Sk − Sq + right]; −1 = unbounded. Default [−1, −1]. */
  window?: readonly [number, number];
  /** f32 [H] or [B, H]: ALiBi slopes; s −= slope_h · |i + Sk − Sq − j|. */
  alibiSlopes?: Tensor;
  /** f32, broadcastable (NumPy rules) to [B, H, Sq, Sk]: added to the scores (the seeds' pse). */
  bias?: Tensor;
  /** uint8, broadcastable to [B, H, Sq, Sk]: nonzero = masked out (the seeds' atten_mask). */
  mask?: Tensor;
  /** > 0: s = softcap · tanh(s / softcap) before bias and ALiBi. Default 0 (off). */
  softcap?: number;
  /** Also return lse (natural log). Default false, or true when `lse` is given. */
  returnLse?: boolean;
  /** f32, q's shape and layout: written with the result (else allocated with rt.tensor; free it with rt.free). */
  out?: Tensor;
  /** f32, out's shape without the head dim ([B, H, Sq] for BNSD, [B, Sq, H] for BSND, [T, H] for TND). */
  lse?: Tensor;
}

export interface AttentionResult {
  /** f32, q's shape. */
  out: Tensor;
  /** f32, out's shape without D; present when returnLse or lse was given. */
  lse?: Tensor;
}

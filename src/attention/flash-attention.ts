/**
 * flashAttention: prefill attention, FlashAttention-2 (Dao 2023) on wasm SIMD.
 * Check → work list → one parallelFor of `attention_task` (assembly/attention/flash.ts).
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tensor } from "../tensor/tensor.js";
import { attentionScratch, packItems, uploadInt32, writeAttnArgs } from "./kernel-args.js";
import { prefillItems } from "./prefill-work.js";
import {
  type AttentionProblem,
  LAYOUTS,
  type SeqExtent,
  checkCuSeqlens,
  checkLayout,
  readQkv,
  resolveOutputs,
  resolveScoreOptions,
  seqTable,
} from "./problem.js";
import type { AttentionLayout, AttentionOptions, AttentionResult } from "./types.js";

export interface FlashAttentionOptions extends AttentionOptions {
  /**
   * f32 queries: BNSD [B, H, Sq, D], BSND [B, Sq, H, D], or TND [Tq, H, D].
   */
  q: Tensor;
  /** f32 | f16 | bf16 keys: BNSD [B, Hkv, Sk, D], BSND [B, Sk, Hkv, D], or TND [Tk, Hkv, D]. */
  k: Tensor;
  /** Values, k's dtype and shape. */
  v: Tensor;
  /** Default "BNSD". */
  layout?: AttentionLayout;
  /** TND only: int32 [B + 1] query offsets, 0 = cuSeqlensQ[0] ≤ … ≤ cuSeqlensQ[B] = Tq. */
  cuSeqlensQ?: ArrayLike<number>;
  /**
   * TND only: int32 [B + 1] key offsets (cuSeqlensK[B] ≤ Tk). A sequence may have
   * more keys than queries (its earlier tokens are already cached); causal and
   * window align its queries with its last keys.
   */
  cuSeqlensK?: ArrayLike<number>;
}

/** Validates everything and allocates the outputs last; throws before any kernel runs. */
export function prefillProblem(rt: Runtime, options: FlashAttentionOptions): AttentionProblem {
  if (typeof options !== "object" || options === null) throw new ArgumentError("options", `must be an object, got ${show(options)}`);
  const layout = options.layout === undefined ? "BNSD" : checkLayout("layout", options.layout, LAYOUTS);
  const { q, qd, kd, vd, H, Hkv, G, D, kvDtype } = readQkv(rt, options, layout);
  if (kd.S !== vd.S) throw new ArgumentError("v.shape", `must have k's ${kd.S} tokens, got ${vd.S}`);
  let B: number;
  let seqs: SeqExtent[];
  if (layout === "TND") {
    if (options.cuSeqlensQ === undefined) throw new ArgumentError("cuSeqlensQ", "is required for layout TND, got undefined");
    if (options.cuSeqlensK === undefined) throw new ArgumentError("cuSeqlensK", "is required for layout TND, got undefined");
    const cq = checkCuSeqlens("cuSeqlensQ", options.cuSeqlensQ, qd.S, true, "q");
    const ck = checkCuSeqlens("cuSeqlensK", options.cuSeqlensK, kd.S, false, "k");
    if (ck.length !== cq.length) throw new ArgumentError("cuSeqlensK", `must have ${cq.length} offsets like cuSeqlensQ, got ${ck.length}`);
    B = cq.length - 1;
    seqs = Array.from({ length: B }, (_, b) => ({ q0: cq[b]!, sq: cq[b + 1]! - cq[b]!, k0: ck[b]!, sk: ck[b + 1]! - ck[b]! }));
  } else {
    if (options.cuSeqlensQ !== undefined) throw new ArgumentError("cuSeqlensQ", `is only for layout TND, got it with ${layout}`);
    if (options.cuSeqlensK !== undefined) throw new ArgumentError("cuSeqlensK", `is only for layout TND, got it with ${layout}`);
    B = qd.B!;
    if (kd.B !== B) throw new ArgumentError("k.shape", `batch must equal q's ${B}, got ${kd.B}`);
    if (vd.B !== B) throw new ArgumentError("v.shape", `batch must equal q's ${B}, got ${vd.B}`);
    seqs = Array.from({ length: B }, () => ({ q0: 0, sq: qd.S, k0: 0, sk: kd.S }));
  }
  const maxSq = seqs.reduce((m, s) => Math.max(m, s.sq), 0);
  const maxSk = seqs.reduce((m, s) => Math.max(m, s.sk), 0);
  const score = resolveScoreOptions(rt, options, D, [B, H, maxSq, maxSk]);
  const allocated: Tensor[] = [];
  const outs = resolveOutputs(rt, options, q, layout, B, H, qd.S, allocated);
  return { layout, B, H, Hkv, G, D, q: qd.op, k: kd.op, v: vd.op, kvDtype, seqs, score, ...outs, allocated };
}

/**
 * Prefill attention (FlashAttention-2): for each query row, the softmax of its
 * scores over the kept keys times V, with every option of AttentionOptions.
 * Work is split over the runtime's threads by (sequence, KV head, block of
 * query positions); workspace is O(tile) per thread — no Sq×Sk buffer.
 *
 *   const { out } = flashAttention(rt, { q, k, v, causal: true });  // BNSD
 *
 * @returns out f32 (q's shape) and, with returnLse / lse, lse f32 (out's shape without D).
 */
export function flashAttention(rt: Runtime, options: FlashAttentionOptions): AttentionResult {
  const p = prefillProblem(rt, options);
  let seqsPtr = 0;
  let itemsPtr = 0;
  try {
    const items = prefillItems(p.seqs, p.Hkv, p.G, p.score);
    seqsPtr = uploadInt32(rt, seqTable(p.seqs), "attention seqs");
    itemsPtr = uploadInt32(rt, packItems(items), "attention work items");
    const scratch = attentionScratch(rt, p.D);
    rt.parallelFor("attention_task", items.length, writeAttnArgs(rt, p, seqsPtr, itemsPtr, undefined, scratch));
  } catch (e) {
    for (const t of p.allocated) rt.free(t);
    throw e;
  } finally {
    if (seqsPtr) rt.free(seqsPtr);
    if (itemsPtr) rt.free(itemsPtr);
  }
  return p.lse ? { out: p.out, lse: p.lse } : { out: p.out };
}

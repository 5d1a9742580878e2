/**
 * increFlashAttention: decode attention over a padded KV cache (the seeds'
 * IncreFlashAttention), with FlashDecoding split-KV when the plan says so.
 * Check → plan (given, or built for this call) → parallelFor `attention_task`
 * over the plan's (b, KV head, chunk) units → parallelFor
 * `attention_combine_task` when any sequence was split.
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tensor } from "../tensor/tensor.js";
import { AttentionPlan, MAX_DECODE_QLEN } from "./plan.js";
import { runPrepared } from "./run-plan.js";
import {
  type AttentionProblem,
  checkLayout,
  checkLengths,
  readQkv,
  resolveOutputs,
  resolveScoreOptions,
} from "./problem.js";
import type { AttentionOptions, AttentionResult } from "./types.js";

export interface IncreFlashAttentionOptions extends AttentionOptions {
  /** f32 queries: BNSD [B, H, Sq, D] or BSND [B, Sq, H, D], Sq in 1..16 (the last Sq tokens of each sequence). */
  q: Tensor;
  /** f32 | f16 | bf16 key cache: BNSD [B, Hkv, Smax, D] or BSND [B, Smax, Hkv, D]; rows past a sequence's length are padding. */
  k: Tensor;
  /** Value cache, k's dtype and shape. */
  v: Tensor;
  /** Default "BNSD". */
  layout?: "BNSD" | "BSND";
  /**
   * int32 [B]: keys in each sequence's cache, 0..Smax (Sk of the semantics for
   * that sequence). Default: the plan's lengths, else Smax for every sequence.
   */
  actualSeqLengths?: ArrayLike<number>;
  /** A plan built for this step's lengths and shapes (reuse it across layers). Default: one built for this call. */
  plan?: AttentionPlan;
  /** Without a plan: force this many KV chunks per sequence (see AttentionPlanOptions.splitKv). */
  splitKv?: number;
}

export interface DecodeProblem extends AttentionProblem {
  Sq: number;
  lengths: Int32Array;
}

function decodeProblem(rt: Runtime, options: IncreFlashAttentionOptions): DecodeProblem {
  if (typeof options !== "object" || options === null) throw new ArgumentError("options", `must be an object, got ${show(options)}`);
  const layout = options.layout === undefined ? "BNSD" : checkLayout("layout", options.layout, ["BNSD", "BSND"]);
  const { q, qd, kd, vd, H, Hkv, G, D, kvDtype } = readQkv(rt, options, layout);
  const B = qd.B!;
  const Sq = qd.S;
  if (Sq < 1 || Sq > MAX_DECODE_QLEN) throw new ArgumentError("q.shape", `query length Sq must be in [1, ${MAX_DECODE_QLEN}] for decode, got ${Sq} (use flashAttention for prefill)`);
  if (kd.B !== B) throw new ArgumentError("k.shape", `batch must equal q's ${B}, got ${kd.B}`);
  if (vd.B !== B) throw new ArgumentError("v.shape", `batch must equal q's ${B}, got ${vd.B}`);
  const Smax = kd.S;
  if (vd.S !== Smax) throw new ArgumentError("v.shape", `cache capacity must equal k's ${Smax}, got ${vd.S}`);

  let lengths: Int32Array;
  const plan = options.plan;
  if (plan !== undefined) {
    if (!(plan instanceof AttentionPlan)) throw new ArgumentError("plan", `must be an AttentionPlan, got ${show(plan)}`);
    if (plan.disposed) throw new ArgumentError("plan", "was disposed");
    if (plan.buffers().runtime !== rt) throw new ArgumentError("plan", "was built for another runtime");
    if (plan.paged !== null) throw new ArgumentError("plan", "was built for a paged cache (blockTable): use pagedAttention");
    if (plan.qLen === null) throw new ArgumentError("plan", "was built for a ragged batch (cuSeqlensQ): use pagedAttention or flashAttention");
    const want: [string, number, number][] = [
      ["batch", plan.batch, B],
      ["numHeads", plan.numHeads, H],
      ["numKvHeads", plan.numKvHeads, Hkv],
      ["headDim", plan.headDim, D],
      ["qLen", plan.qLen, Sq],
    ];
    for (const [name, got, need] of want) {
      if (got !== need) throw new ArgumentError(`plan.${name}`, `must match the tensors' ${need}, got ${got}`);
    }
    if (options.splitKv !== undefined) throw new ArgumentError("splitKv", `is a plan option; got ${show(options.splitKv)} together with a plan`);
    lengths = plan.lengths;
    lengths.forEach((n, b) => {
      if (n > Smax) throw new ArgumentError(`plan.lengths[${b}]`, `must be ≤ ${Smax} (the cache capacity), got ${n}`);
    });
    if (options.actualSeqLengths !== undefined) {
      const given = checkLengths("actualSeqLengths", options.actualSeqLengths, B, Smax, "the cache capacity");
      given.forEach((n, b) => {
        if (n !== lengths[b]) throw new ArgumentError(`actualSeqLengths[${b}]`, `must equal the plan's length ${lengths[b]}, got ${n}`);
      });
    }
  } else {
    lengths = options.actualSeqLengths === undefined ? new Int32Array(B).fill(Smax) : checkLengths("actualSeqLengths", options.actualSeqLengths, B, Smax, "the cache capacity");
    if (options.splitKv !== undefined && (!Number.isInteger(options.splitKv) || options.splitKv < 1)) {
      throw new ArgumentError("splitKv", `must be an integer ≥ 1, got ${show(options.splitKv)}`);
    }
  }
  const seqs = Array.from(lengths, (sk) => ({ q0: 0, sq: Sq, k0: 0, sk }));
  const score = resolveScoreOptions(rt, options, D, [B, H, Sq, Smax]);
  const allocated: Tensor[] = [];
  const outs = resolveOutputs(rt, options, q, layout, B, H, Sq, allocated);
  return { layout, B, H, Hkv, G, D, q: qd.op, k: kd.op, v: vd.op, kvDtype, seqs, score, ...outs, allocated, Sq, lengths };
}

/**
 * Decode attention: each of the B sequences has Sq (1..16) new query tokens,
 * the last Sq of its actualSeqLengths[b] cached keys. One work unit computes
 * all G query heads of a KV head against each K/V row it loads, so the cache
 * is read once per KV head, not once per query head. With a split plan, KV
 * chunks run as separate units and merge by log-sum-exp (FlashDecoding).
 *
 *   const plan = AttentionPlan.create(rt, { actualSeqLengths, numHeads: 32, numKvHeads: 8, headDim: 128 });
 *   for (const layer of layers) increFlashAttention(rt, { q, k: layer.k, v: layer.v, plan, out });
 *   plan.dispose();
 *
 * Bias and mask broadcast to [B, H, Sq, Smax] (Smax = the cache capacity).
 * @returns out f32 (q's shape) and, with returnLse / lse, lse f32 (out's shape without D).
 */
export function increFlashAttention(rt: Runtime, options: IncreFlashAttentionOptions): AttentionResult {
  return runPrepared(rt, prepareIncreFlashAttention(rt, options));
}

/**
 * The check and plan steps of increFlashAttention, for every backend: the
 * checked problem and the plan (the caller's, or one built for this call,
 * `ownPlan`: the caller disposes it after dispatch). Frees what it allocated
 * if planning throws. `planThreads`: the parallel units a built plan balances
 * for (default the runtime's threads; a GPU backend passes its own).
 */
export function prepareIncreFlashAttention(rt: Runtime, options: IncreFlashAttentionOptions, planThreads?: number): { p: DecodeProblem; plan: AttentionPlan; ownPlan: boolean } {
  const p = decodeProblem(rt, options);
  if (options.plan) return { p, plan: options.plan, ownPlan: false };
  try {
    const plan = AttentionPlan.create(rt, {
      actualSeqLengths: p.lengths,
      numHeads: p.H,
      numKvHeads: p.Hkv,
      headDim: p.D,
      qLen: p.Sq,
      ...(planThreads === undefined ? {} : { threads: planThreads }),
      ...(options.splitKv === undefined ? {} : { splitKv: options.splitKv }),
    });
    return { p, plan, ownPlan: true };
  } catch (e) {
    for (const t of p.allocated) rt.free(t);
    throw e;
  }
}

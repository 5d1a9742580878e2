/**
 * Runs a checked attention problem under an AttentionPlan: one parallelFor of
 * `attention_task` over the plan's work units, then, when the plan split any
 * sequence's keys (FlashDecoding), one of `attention_combine_task` that merges
 * the partial states by log-sum-exp into out and lse. Shared by
 * increFlashAttention and pagedAttention.
 */
import type { Runtime } from "../runtime/runtime.js";
import { attentionScratch, writeAttnArgs } from "./kernel-args.js";
import type { AttentionPlan } from "./plan.js";
import type { AttentionProblem } from "./problem.js";
import type { AttentionResult } from "./types.js";

/**
 * Dispatches a prepared call (prepareIncreFlashAttention's, preparePagedAttention's)
 * on the CPU kernels: frees what the check allocated if a kernel throws, and
 * disposes a plan built for this call.
 */
export function runPrepared(rt: Runtime, { p, plan, ownPlan }: { p: AttentionProblem; plan: AttentionPlan; ownPlan: boolean }): AttentionResult {
  try {
    runPlan(rt, p, plan);
  } catch (e) {
    for (const t of p.allocated) rt.free(t);
    throw e;
  } finally {
    if (ownPlan) plan.dispose();
  }
  return p.lse ? { out: p.out, lse: p.lse } : { out: p.out };
}

export function runPlan(rt: Runtime, p: AttentionProblem, plan: AttentionPlan): void {
  const buf = plan.buffers();
  const scratch = attentionScratch(rt, p.D);
  const partials = { oPtr: buf.partO, lsePtr: buf.partLse, sq: plan.partSq };
  rt.parallelFor("attention_task", plan.numItems, writeAttnArgs(rt, p, buf.seqs, buf.items, partials, scratch));
  if (!plan.split) return;
  const args = rt
    .args()
    .ptr(buf.partO)
    .ptr(buf.partLse)
    .i32(p.H)
    .i32(plan.partSq)
    .i32(p.D)
    .ptr(buf.chunks)
    .ptr(buf.seqs)
    .ptr(p.outOp.ptr)
    .i32(p.outOp.sB)
    .i32(p.outOp.sH)
    .i32(p.outOp.sS)
    .ptr(p.lseOp.ptr)
    .i32(p.lseOp.sB)
    .i32(p.lseOp.sH)
    .i32(p.lseOp.sS)
    .end();
  rt.parallelFor("attention_combine_task", p.B * p.H, args);
}

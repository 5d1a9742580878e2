/**
 * The attention operators on a GpuDevice: the same options, checks and plans
 * as flashAttention, increFlashAttention and pagedAttention (src/attention,
 * src/kv), then the WebGPU dispatch (attention-run.ts) instead of the wasm
 * one. Asynchronous, as GPU readback is; the result tensors are the CPU
 * operator's (out and lse in the runtime's memory, allocated or the caller's).
 *
 *   const gpu = await GpuDevice.open({ device: "webgpu" });
 *   const { out, lse } = await gpuFlashAttention(gpu, rt, { q, k, v, causal: true, returnLse: true });
 */
import { type FlashAttentionOptions, prefillProblem } from "../attention/flash-attention.js";
import { type IncreFlashAttentionOptions, prepareIncreFlashAttention } from "../attention/incre-flash-attention.js";
import type { AttentionPlan } from "../attention/plan.js";
import type { AttentionProblem } from "../attention/problem.js";
import type { AttentionResult } from "../attention/types.js";
import type { KvQuantMode } from "../kv/kv-quant.js";
import { type PagedAttentionOptions, preparePagedAttention } from "../kv/paged-attention.js";
import type { KvLayer } from "../kv/paged-kv-cache.js";
import { ArgumentError } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { type ProblemSplit, type ProblemTensors, runAttentionOnGpu } from "./attention-run.js";
import type { GpuDevice } from "./device.js";

/**
 * The parallel units a plan these operators build balances for (the CPU
 * plan's `threads`): workgroups to fill a GPU's compute units a few times
 * over, so one long decode sequence splits into FlashDecoding chunks. A
 * caller's own plan (built once per step for every layer) is used as it is:
 * build it with `threads: GPU_PLAN_SLOTS` for the GPU.
 */
export const GPU_PLAN_SLOTS = 256;

/** The cache quantizations the GPU kernels read (kv-load.ts): none, int8 per-token or per-channel, fp8 at scale 1. */
function checkGpuQuant(quant: KvQuantMode, layer: KvLayer): void {
  if (quant === "per-tensor" && (layer.kScalar !== 1 || layer.vScalar !== 1)) {
    throw new ArgumentError("cache", `is fp8 with per-tensor scales (k ${layer.kScalar}, v ${layer.vScalar}), which the webgpu backend does not run yet (scale 1 it does): use the CPU pagedAttention`);
  }
}

async function dispatch(rt: Runtime, gpu: GpuDevice, p: AttentionProblem, tensors: ProblemTensors, split: ProblemSplit): Promise<AttentionResult> {
  try {
    await runAttentionOnGpu(gpu, p, tensors, split);
  } catch (e) {
    for (const t of p.allocated) rt.free(t);
    throw e;
  }
  return p.lse ? { out: p.out, lse: p.lse } : { out: p.out };
}

function planSplit(plan: AttentionPlan): ProblemSplit {
  return { bounds: plan.chunkBounds, table: plan.paged?.table ?? null };
}

/** flashAttention (prefill, FlashAttention-2) on the GPU. */
export async function gpuFlashAttention(gpu: GpuDevice, rt: Runtime, options: FlashAttentionOptions): Promise<AttentionResult> {
  const p = prefillProblem(rt, options);
  return dispatch(rt, gpu, p, options, { bounds: p.seqs.map((s) => [0, s.sk]), table: null });
}

/** increFlashAttention (decode over a padded cache; FlashDecoding split-KV as the plan says) on the GPU. */
export async function gpuIncreFlashAttention(gpu: GpuDevice, rt: Runtime, options: IncreFlashAttentionOptions): Promise<AttentionResult> {
  const { p, plan, ownPlan } = prepareIncreFlashAttention(rt, options, GPU_PLAN_SLOTS);
  try {
    return await dispatch(rt, gpu, p, options, planSplit(plan));
  } finally {
    if (ownPlan) plan.dispose();
  }
}

/**
 * pagedAttention (a ragged or uniform batch over a PagedKvCache with its
 * block table) on the GPU. f32 | f16 | bf16 caches, int8 with per-token
 * or per-channel scales, fp8e4m3 | fp8e5m2 with per-tensor scale 1 (what
 * loadModel makes); other fp8 scales are ArgumentErrors.
 */
export async function gpuPagedAttention(gpu: GpuDevice, rt: Runtime, options: PagedAttentionOptions): Promise<AttentionResult> {
  const { p, plan, ownPlan } = preparePagedAttention(rt, options, GPU_PLAN_SLOTS);
  try {
    const layer = options.cache.layer(options.layer);
    checkGpuQuant(options.cache.quant, layer);
    const quant = options.cache.quant;
    const scales = quant === "per-token" || quant === "per-channel" ? { kScale: layer.kScale!, vScale: layer.vScale! } : {};
    const offsets = quant === "per-channel" ? { kOffset: layer.kOffset!, vOffset: layer.vOffset! } : {};
    return await dispatch(rt, gpu, p, { ...options, k: layer.k, v: layer.v, ...scales, ...offsets }, planSplit(plan));
  } finally {
    if (ownPlan) plan.dispose();
  }
}

/**
 * pagedAttention: attention of a batch's new query tokens over their keys in a
 * PagedKvCache (vLLM's PagedAttention, the IFA design's PageAttention with a
 * block_table), for decode (1..16 tokens a sequence) and chunked prefill (a
 * sequence's new tokens attend to its cached prefix plus themselves; with
 * `causal`, bottom-right aligned) in one ragged batch.
 *
 * The attention kernel of flashAttention / increFlashAttention runs as it is:
 * only where a K/V row lives (the block table) and how a tile decodes
 * (f32 | f16 | bf16 | int8 | fp8, dequantized as it loads) change, and the
 * AttentionPlan's split-KV units and log-sum-exp combine are the same. int8
 * caches can instead take the IFA design's integer path (int8Path).
 */
import { runPrepared } from "../attention/run-plan.js";
import { AttentionPlan, MAX_DECODE_QLEN } from "../attention/plan.js";
import {
  type AttentionProblem,
  type KvDequant,
  type LayoutDims,
  checkLayout,
  checkTensor,
  readLayout,
  resolveOutputs,
  resolveScoreOptions,
} from "../attention/problem.js";
import type { AttentionLayout, AttentionOptions, AttentionResult } from "../attention/types.js";
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt, checkOneOf } from "../tensor/check.js";
import { type Tensor, checkSameMemory } from "../tensor/tensor.js";
import { KV_QUANT_CODE } from "./kv-quant.js";
import { PagedKvCache } from "./paged-kv-cache.js";

/**
 * How an int8 cache is multiplied:
 * - "high-performance" (the default for int8 caches with headDim % 8 == 0;
 *   otherwise "dequantize"): the IFA design's AntiQuant with msdIterNum = 2:
 *   each query row (and each tile's probabilities) is expanded into 2 int8
 *   rows and Q·Kᵀ and P·V run as integer dot products (i32x4.dot_i16x8_s) on
 *   the int8 cache in place; the expanded row carries its value to 1/32258 of
 *   its largest element (error against the decoded values: BENCHMARKS.md);
 * - "high-precision": msdIterNum = 3, 3 int8 rows (to about f32 rounding), at
 *   twice the integer work;
 * - "dequantize": each K/V tile is dequantized to f32 as it loads and the f32
 *   microkernels run — exact on the decoded values: the reference path.
 */
export type Int8Path = "dequantize" | "high-performance" | "high-precision";
export const INT8_PATHS: readonly Int8Path[] = ["dequantize", "high-performance", "high-precision"];
const INT_ROWS: Readonly<Record<Int8Path, number>> = { dequantize: 0, "high-performance": 2, "high-precision": 3 };

/** The step's batch as pagedAttention (and planPagedAttention) read it: ForwardBatch's fields. */
export interface PagedBatch {
  /** int32 [B + 1]: query offsets of the ragged batch (TND q). Not for BNSD/BSND q. */
  cuSeqlensQ?: ArrayLike<number>;
  /** int32 [B]: KV length of each sequence, its new tokens included (they are in the cache: appendKv first). */
  seqLens: ArrayLike<number>;
  /** int32 [B, maxBlocksPerSeq], row-major: each sequence's block ids in order. */
  blockTable: ArrayLike<number>;
  /** Columns of blockTable. Default blockTable.length / B. */
  maxBlocksPerSeq?: number;
}

export interface PlanPagedAttentionOptions extends PagedBatch {
  cache: PagedKvCache;
  /** Query heads H (a multiple of the cache's KV heads). */
  numHeads: number;
  /** BNSD/BSND q instead of a ragged batch: the uniform query length (1..16). */
  qLen?: number;
  threads?: number;
  splitKv?: number;
}

/**
 * Builds the step's plan for pagedAttention once (work units balanced by
 * actual lengths, the split-KV decision, the block table copied to shared
 * memory); every layer's pagedAttention reuses it. Dispose it after the step.
 *
 *   const plan = planPagedAttention(rt, { cache, numHeads: 32, ...forwardBatch });
 */
export function planPagedAttention(rt: Runtime, options: PlanPagedAttentionOptions): AttentionPlan {
  if (typeof options !== "object" || options === null) throw new ArgumentError("options", `must be an object, got ${show(options)}`);
  const cache = checkCache(options.cache, rt);
  return AttentionPlan.create(rt, {
    actualSeqLengths: options.seqLens,
    lengthsName: "seqLens",
    numHeads: options.numHeads,
    numKvHeads: cache.numKvHeads,
    headDim: cache.headDim,
    blockTable: options.blockTable,
    blockSize: cache.blockSize,
    ...(options.maxBlocksPerSeq === undefined ? {} : { maxBlocksPerSeq: options.maxBlocksPerSeq }),
    ...(options.cuSeqlensQ === undefined ? {} : { cuSeqlensQ: options.cuSeqlensQ }),
    ...(options.qLen === undefined ? {} : { qLen: options.qLen }),
    ...(options.threads === undefined ? {} : { threads: options.threads }),
    ...(options.splitKv === undefined ? {} : { splitKv: options.splitKv }),
  });
}

export interface PagedAttentionOptions extends AttentionOptions, Partial<PagedBatch> {
  /** f32 queries: TND [T, H, D] (default: a ragged batch), or BNSD [B, H, Sq, D] / BSND [B, Sq, H, D] with one Sq for all. */
  q: Tensor;
  /** Default "TND". */
  layout?: AttentionLayout;
  cache: PagedKvCache;
  /** Which of the cache's layers to read. */
  layer: number;
  /**
   * The step's plan (planPagedAttention, or AttentionPlan.create with a
   * blockTable), shared by every layer. Without one, the batch fields
   * (cuSeqlensQ, seqLens, blockTable, maxBlocksPerSeq) are required and a plan
   * is built for this call.
   */
  plan?: AttentionPlan;
  /** Without a plan: force this many KV chunks per sequence (see AttentionPlanOptions.splitKv). */
  splitKv?: number;
  /** int8 caches only: see Int8Path. Default "high-performance" (headDim % 8 == 0), else "dequantize". */
  int8Path?: Int8Path;
}

export function checkCache(value: unknown, rt: { readonly memory: WebAssembly.Memory }): PagedKvCache {
  if (!(value instanceof PagedKvCache)) throw new ArgumentError("cache", `must be a PagedKvCache, got ${show(value)}`);
  checkSameMemory("cache", value, value.memory, rt);
  return value;
}

/** Dequantization arguments of one layer of `cache` (and the int8 path). */
export function kvDequant(cache: PagedKvCache, layerIndex: number, int8Path: unknown): KvDequant {
  const layer = cache.layer(layerIndex);
  let intRows = cache.dtype === "int8" && cache.headDim % 8 === 0 ? INT_ROWS["high-performance"] : 0;
  if (int8Path !== undefined) {
    const path = checkOneOf("int8Path", int8Path, INT8_PATHS);
    if (path !== "dequantize" && cache.dtype !== "int8") throw new ArgumentError("int8Path", `${show(path)} needs an int8 cache, got dtype ${show(cache.dtype)}`);
    if (path !== "dequantize" && cache.headDim % 8 !== 0) throw new ArgumentError("int8Path", `${show(path)} needs headDim % 8 == 0, got headDim ${cache.headDim}`);
    intRows = INT_ROWS[path];
  }
  const expect = (name: string, t: Tensor | null, shape: number[] | null): void => {
    const got = t === null ? null : t.shape;
    const ok = shape === null ? got === null : got !== null && got.length === shape.length && got.every((d, i) => d === shape[i]) && t!.dtype === "f32";
    if (!ok) throw new ArgumentError(`cache.layer(${layerIndex}).${name}`, `must be ${shape === null ? "absent" : `f32 ${show(shape)}`} for ${cache.dtype} ${cache.quant} KV, got ${t === null ? "none" : `${t.dtype} ${show(t.shape)}`}`);
  };
  const { numBlocks, blockSize, numKvHeads: hkv, headDim: d } = cache;
  for (const [name, t] of [["k", layer.k], ["v", layer.v]] as const) {
    if (t.dtype !== cache.dtype) throw new ArgumentError(`cache.layer(${layerIndex}).${name}.dtype`, `must be the cache's ${show(cache.dtype)}, got ${show(t.dtype)}`);
  }
  const scaleShape = cache.quant === "per-token" ? [numBlocks, blockSize, hkv] : cache.quant === "per-channel" ? [hkv, d] : null;
  expect("kScale", layer.kScale, scaleShape);
  expect("vScale", layer.vScale, scaleShape);
  const offsetShape = cache.quant === "per-channel" ? [hkv, d] : null;
  expect("kOffset", layer.kOffset, offsetShape);
  expect("vOffset", layer.vOffset, offsetShape);
  return {
    quant: KV_QUANT_CODE[cache.quant],
    kScalar: layer.kScalar,
    vScalar: layer.vScalar,
    kScale: layer.kScale?.ptr ?? 0,
    vScale: layer.vScale?.ptr ?? 0,
    kOffset: layer.kOffset?.ptr ?? 0,
    vOffset: layer.vOffset?.ptr ?? 0,
    intRows,
  };
}

/** Checks that `plan` fits the cache, the query tensor and the call. */
function checkPlan(rt: Runtime, plan: unknown, cache: PagedKvCache, layout: AttentionLayout, qd: LayoutDims): AttentionPlan {
  if (!(plan instanceof AttentionPlan)) throw new ArgumentError("plan", `must be an AttentionPlan, got ${show(plan)}`);
  if (plan.disposed) throw new ArgumentError("plan", "was disposed");
  if (plan.buffers().runtime !== rt) throw new ArgumentError("plan", "was built for another runtime");
  const pg = plan.paged;
  if (pg === null) throw new ArgumentError("plan", "was built without a blockTable (a padded-cache plan): build it with planPagedAttention");
  const want: [string, number, number, string][] = [
    ["plan.numKvHeads", plan.numKvHeads, cache.numKvHeads, "the cache's numKvHeads"],
    ["plan.headDim", plan.headDim, cache.headDim, "the cache's headDim"],
    ["plan.blockSize", pg.blockSize, cache.blockSize, "the cache's blockSize"],
    ["plan.numHeads", plan.numHeads, qd.N, "q's heads"],
  ];
  for (const [name, got, need, what] of want) if (got !== need) throw new ArgumentError(name, `must match ${what} ${need}, got ${got}`);
  if (pg.maxBlockId >= cache.numBlocks) throw new ArgumentError(pg.maxBlockAt, `must be a block id < numBlocks ${cache.numBlocks}, got ${pg.maxBlockId}`);
  if (layout === "TND") {
    if (plan.cuSeqlensQ === null) throw new ArgumentError("plan", "was built for uniform qLen (BNSD/BSND q), but q is TND: build it with cuSeqlensQ");
    const T = plan.cuSeqlensQ[plan.batch]!;
    if (qd.S !== T) throw new ArgumentError("q.shape", `must have the plan's cuSeqlensQ[${plan.batch}] = ${T} tokens, got ${qd.S}`);
  } else {
    if (plan.qLen === null) throw new ArgumentError("plan", `was built for a ragged batch (cuSeqlensQ), but q is ${layout}: use layout TND`);
    if (qd.B !== plan.batch) throw new ArgumentError("q.shape", `batch must equal the plan's ${plan.batch} sequences, got ${qd.B}`);
    if (qd.S !== plan.qLen) throw new ArgumentError("q.shape", `query length must equal the plan's qLen ${plan.qLen}, got ${qd.S}`);
  }
  return plan;
}

/**
 * A plan for one call without a plan (planPagedAttention over the batch fields
 * of the options), then checked against q as a given plan is.
 */
function planFromOptions(rt: Runtime, options: PagedAttentionOptions, cache: PagedKvCache, layout: AttentionLayout, qd: LayoutDims, planThreads?: number): AttentionPlan {
  if (options.seqLens === undefined) throw new ArgumentError("seqLens", "is required without a plan, got undefined");
  if (options.blockTable === undefined) throw new ArgumentError("blockTable", "is required without a plan, got undefined");
  if (layout === "TND" && options.cuSeqlensQ === undefined) throw new ArgumentError("cuSeqlensQ", "is required for layout TND without a plan, got undefined");
  if (layout !== "TND" && options.cuSeqlensQ !== undefined) throw new ArgumentError("cuSeqlensQ", `is only for layout TND, got it with ${layout}`);
  if (layout !== "TND" && qd.S > MAX_DECODE_QLEN) throw new ArgumentError("q.shape", `query length must be ≤ ${MAX_DECODE_QLEN} for layout ${layout} (longer queries: a TND batch), got ${qd.S}`);
  if (qd.N % cache.numKvHeads !== 0) throw new ArgumentError("q.shape", `heads must be a multiple of the cache's numKvHeads ${cache.numKvHeads} (GQA), got ${qd.N}`);
  const plan = planPagedAttention(rt, {
    cache,
    numHeads: qd.N,
    seqLens: options.seqLens,
    blockTable: options.blockTable,
    ...(options.maxBlocksPerSeq === undefined ? {} : { maxBlocksPerSeq: options.maxBlocksPerSeq }),
    ...(layout === "TND" ? { cuSeqlensQ: options.cuSeqlensQ! } : { qLen: qd.S }),
    ...(options.splitKv === undefined ? {} : { splitKv: options.splitKv }),
    ...(planThreads === undefined ? {} : { threads: planThreads }),
  });
  try {
    // What q fixes is named as the options spell it; checkPlan then checks the rest (block ids against the cache).
    const B = plan.batch;
    if (layout === "TND" && plan.cuSeqlensQ![B] !== qd.S) throw new ArgumentError(`cuSeqlensQ[${B}]`, `must equal q's ${qd.S} tokens, got ${plan.cuSeqlensQ![B]}`);
    if (layout !== "TND" && B !== qd.B) throw new ArgumentError("seqLens", `must have q's batch ${qd.B} entries (one per sequence), got ${B}`);
    return checkPlan(rt, plan, cache, layout, qd);
  } catch (e) {
    plan.dispose();
    throw e;
  }
}

/**
 * Validates a pagedAttention call against its plan. Returns the problem the
 * kernels run; allocates outputs last (recorded in `allocated`).
 */
export function pagedProblem(rt: Runtime, options: PagedAttentionOptions, plan: AttentionPlan, cache: PagedKvCache, layout: AttentionLayout, q: Tensor, qd: LayoutDims): AttentionProblem {
  const layerIndex = checkInt("layer", options.layer, { min: 0, max: cache.numLayers - 1 });
  const layer = cache.layer(layerIndex);
  const dequant = kvDequant(cache, layerIndex, options.int8Path);
  const H = qd.N;
  const Hkv = cache.numKvHeads;
  const D = cache.headDim;
  if (q.dtype !== "f32") throw new ArgumentError("q.dtype", `must be "f32", got ${show(q.dtype)}`);
  if (qd.D !== D) throw new ArgumentError("q.shape", `head dim must equal the cache's headDim ${D}, got ${qd.D}`);
  if (options.numHeads !== undefined && checkInt("numHeads", options.numHeads, { min: 1 }) !== H) throw new ArgumentError("numHeads", `must match q's ${H} heads, got ${options.numHeads}`);
  if (options.numKvHeads !== undefined && checkInt("numKvHeads", options.numKvHeads, { min: 1 }) !== Hkv) {
    throw new ArgumentError("numKvHeads", `must match the cache's ${Hkv} KV heads, got ${options.numKvHeads}`);
  }
  const B = plan.batch;
  const seqs = plan.seqs; // built once per step, shared by every layer's call
  const maxSq = seqs.reduce((m, s) => Math.max(m, s.sq), 0);
  const maxSk = seqs.reduce((m, s) => Math.max(m, s.sk), 0);
  const score = resolveScoreOptions(rt, options, D, [B, H, maxSq, maxSk]);
  const allocated: Tensor[] = [];
  const outs = resolveOutputs(rt, options, q, layout, B, H, qd.S, allocated);
  const slot = Hkv * D; // elements between consecutive slots of [numBlocks, blockSize, Hkv, D]
  const pg = plan.paged!;
  return {
    layout,
    B,
    H,
    Hkv,
    G: H / Hkv,
    D,
    q: qd.op,
    k: { ptr: layer.k.ptr, sB: 0, sH: D, sS: slot },
    v: { ptr: layer.v.ptr, sB: 0, sH: D, sS: slot },
    kvDtype: cache.dtype,
    seqs,
    score,
    ...outs,
    allocated,
    paged: { blockTable: plan.buffers().blockTable, maxBlocksPerSeq: pg.maxBlocksPerSeq, blockSize: pg.blockSize },
    dequant,
  };
}

/** The query tensor and its layout, checked. */
export function readQuery(rt: Runtime, options: { q: unknown; layout?: unknown }): { q: Tensor; layout: AttentionLayout; qd: LayoutDims } {
  const layout = options.layout === undefined ? "TND" : checkLayout("layout", options.layout, ["TND", "BNSD", "BSND"]);
  const q = checkTensor("q", options.q, rt);
  return { q, layout, qd: readLayout("q", q, layout) };
}

/**
 * Attention over a paged KV cache, one layer: for each sequence b, its Sq_b
 * new query tokens (the last Sq_b of its seqLens[b] keys, already written by
 * appendKv) against keys [0, seqLens[b]) read through its block table, with
 * every option of AttentionOptions (scale, causal bottom-right, window, ALiBi,
 * bias / mask broadcast to [B, H, max Sq, max seqLens], softcap, lse).
 * Quantized caches dequantize inside the kernel as tiles load.
 *
 *   const plan = planPagedAttention(rt, { cache, numHeads: 32, ...batch });   // once per step
 *   for (let l = 0; l < layers; l++) {
 *     appendKv(rt, { cache, layer: l, k, v, slotMapping: batch.slotMapping });
 *     pagedAttention(rt, { q, cache, layer: l, plan, causal: true, out });
 *   }
 *   plan.dispose();
 *
 * @returns out f32 (q's shape) and, with returnLse / lse, lse f32 ([T, H] for TND).
 */
export function pagedAttention(rt: Runtime, options: PagedAttentionOptions): AttentionResult {
  return runPrepared(rt, preparePagedAttention(rt, options));
}

/**
 * The check and plan steps of pagedAttention, for every backend: the checked
 * problem and the plan (the caller's, or one built for this call, `ownPlan`:
 * the caller disposes it after dispatch). `planThreads`: the parallel units a
 * built plan balances for (default the runtime's threads; a GPU backend
 * passes its own).
 */
export function preparePagedAttention(rt: Runtime, options: PagedAttentionOptions, planThreads?: number): { p: AttentionProblem; plan: AttentionPlan; ownPlan: boolean } {
  if (typeof options !== "object" || options === null) throw new ArgumentError("options", `must be an object, got ${show(options)}`);
  const cache = checkCache(options.cache, rt);
  const { q, layout, qd } = readQuery(rt, options);
  let plan = options.plan;
  const ownPlan = plan === undefined;
  if (plan !== undefined) {
    checkPlan(rt, plan, cache, layout, qd);
    for (const name of ["cuSeqlensQ", "seqLens", "blockTable", "maxBlocksPerSeq", "splitKv"] as const) {
      if (options[name] !== undefined) throw new ArgumentError(name, `is a plan field; got ${show(options[name])} together with a plan`);
    }
  } else {
    plan = planFromOptions(rt, options, cache, layout, qd, planThreads);
  }
  try {
    return { p: pagedProblem(rt, options, plan, cache, layout, q, qd), plan, ownPlan };
  } catch (e) {
    if (ownPlan) plan.dispose();
    throw e;
  }
}

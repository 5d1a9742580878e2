/**
 * cascadeAttention: shared-prefix (cascade) attention over a paged cache, as
 * FlashInfer's two-level cascade. When every sequence of a batch starts with
 * the same prefix held in the same blocks (a system prompt, a prefix-cache
 * hit), attending each query to it through its own table reads the prefix
 * once per sequence. Here it is read once per block of queries instead:
 *
 *   1. shared: all T query tokens of the batch, as one sequence of T queries,
 *      against the prefix keys [0, Lp) (every query comes after the prefix, so
 *      none is excluded): the kernel's many-row path loads each prefix tile
 *      once for P·G query rows (P = ⌊64 / G⌋ tokens) → (o_p, lse_p);
 *   2. suffix: each sequence's queries against its own keys [Lp, seqLen)
 *      (causal, bottom-right, within the suffix) → (o_s, lse_s);
 *   3. mergeStates((o_p, lse_p), (o_s, lse_s)): attention over the union,
 *      which equals pagedAttention over the whole tables.
 *
 * Options: scale, softcap, causal, lse/returnLse/out, int8Path. ALiBi, window,
 * bias and mask depend on each query's position, which the shared pass does
 * not have: use pagedAttention for those.
 */
import { mergeStates } from "../attention/merge-states.js";
import { type PagedTable, checkBlockTable, checkOffsets } from "../attention/batch-tables.js";
import { AttentionPlan } from "../attention/plan.js";
import { checkLengths, checkTensor } from "../attention/problem.js";
import { runPlan } from "../attention/run-plan.js";
import type { AttentionResult } from "../attention/types.js";
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkBoolean, checkInt } from "../tensor/check.js";
import type { Tensor } from "../tensor/tensor.js";
import { type Int8Path, type PagedBatch, checkCache, pagedProblem, readQuery } from "./paged-attention.js";
import type { PagedKvCache } from "./paged-kv-cache.js";

export interface PlanCascadeAttentionOptions extends PagedBatch {
  cache: PagedKvCache;
  /** Query heads H. */
  numHeads: number;
  /** int32 [B + 1]: query offsets of the ragged batch (q is TND [T, H, D]). */
  cuSeqlensQ: ArrayLike<number>;
  /**
   * Keys [0, Lp) every sequence shares: the first ⌈Lp / blockSize⌉ entries of
   * every blockTable row must be the same block ids. Every sequence's new
   * tokens come after it (seqLens[b] − Sq_b ≥ Lp).
   */
  sharedPrefixLength: number;
  threads?: number;
}

/** The two plans of a cascade step (shared prefix, per-sequence suffixes); reuse across layers, then dispose. */
export class CascadePlan {
  readonly shared: AttentionPlan;
  readonly suffix: AttentionPlan;
  readonly sharedPrefixLength: number;
  /** T: query tokens of the batch. */
  readonly tokens: number;

  /** @internal use planCascadeAttention */
  constructor(shared: AttentionPlan, suffix: AttentionPlan, sharedPrefixLength: number, tokens: number) {
    this.shared = shared;
    this.suffix = suffix;
    this.sharedPrefixLength = sharedPrefixLength;
    this.tokens = tokens;
  }

  get disposed(): boolean {
    return this.shared.disposed;
  }

  dispose(): void {
    this.shared.dispose();
    this.suffix.dispose();
  }
}

/** Builds the shared-prefix and suffix plans of one step. */
export function planCascadeAttention(rt: Runtime, options: PlanCascadeAttentionOptions): CascadePlan {
  if (typeof options !== "object" || options === null) throw new ArgumentError("options", `must be an object, got ${show(options)}`);
  const cache = checkCache(options.cache, rt);
  const H = checkInt("numHeads", options.numHeads, { min: 1 });
  const Hkv = cache.numKvHeads;
  if (H % Hkv !== 0) throw new ArgumentError("numHeads", `must be a multiple of the cache's numKvHeads ${Hkv} (GQA), got ${H}`);
  const raw = options.seqLens as unknown;
  const B = raw !== null && typeof raw === "object" && "length" in raw ? (raw as ArrayLike<unknown>).length : -1;
  const seqLens = checkLengths("seqLens", raw, Math.max(B, 0), 0x3fffffff, "2^30 − 1");
  if (B < 1) throw new ArgumentError("seqLens", `must list at least one sequence, got ${show(raw)}`);
  const cu = checkOffsets("cuSeqlensQ", options.cuSeqlensQ, B);
  const Lp = checkInt("sharedPrefixLength", options.sharedPrefixLength, { min: 0 });
  const threads = options.threads === undefined ? rt.threads : checkInt("threads", options.threads, { min: 1 });
  seqLens.forEach((n, b) => {
    const sq = cu[b + 1]! - cu[b]!;
    if (n - sq < Lp) throw new ArgumentError(`seqLens[${b}]`, `must be ≥ sharedPrefixLength + its ${sq} new tokens = ${Lp + sq} (queries come after the shared prefix), got ${n}`);
  });
  const full = Array.from(seqLens, (sk, b) => ({ q0: cu[b]!, sq: cu[b + 1]! - cu[b]!, k0: 0, sk }));
  const pages = checkBlockTable(options.blockTable, options.maxBlocksPerSeq, cache.blockSize, full, "seqLens");
  if (pages.maxBlockId >= cache.numBlocks) throw new ArgumentError(pages.maxBlockAt, `must be a block id < numBlocks ${cache.numBlocks}, got ${pages.maxBlockId}`);
  const cols = pages.maxBlocksPerSeq;
  const sharedBlocks = Math.ceil(Lp / cache.blockSize);
  for (let b = 1; b < B; b++) {
    for (let i = 0; i < sharedBlocks; i++) {
      const id = pages.table[b * cols + i]!;
      const first = pages.table[i]!;
      if (id !== first) throw new ArgumentError(`blockTable[${b}][${i}]`, `must be the shared prefix's block ${first} (blockTable[0][${i}]), got ${id}`);
    }
  }
  const T = cu[B]!;
  const D = cache.headDim;
  const base = { H, Hkv, D, threads, qLen: null };
  const sharedTable: PagedTable = { ...pages, table: pages.table.slice(0, cols) };
  const shared = AttentionPlan.build(rt, { ...base, seqs: [{ q0: 0, sq: T, k0: 0, sk: Lp }], cuSeqlensQ: Int32Array.of(0, T), pages: sharedTable });
  try {
    const suffixSeqs = full.map((s) => ({ ...s, k0: Lp, sk: s.sk - Lp }));
    const suffix = AttentionPlan.build(rt, { ...base, seqs: suffixSeqs, cuSeqlensQ: cu, pages });
    return new CascadePlan(shared, suffix, Lp, T);
  } catch (e) {
    shared.dispose();
    throw e;
  }
}

export interface CascadeAttentionOptions extends Partial<PlanCascadeAttentionOptions> {
  /** f32 queries, TND [T, H, D]. */
  q: Tensor;
  cache: PagedKvCache;
  layer: number;
  /** The step's plan (planCascadeAttention); without one, the batch fields and sharedPrefixLength are required. */
  plan?: CascadePlan;
  /** Default 1/√D. */
  scale?: number;
  /** > 0: s = softcap · tanh(s / softcap). */
  softcap?: number;
  /** Bottom-right causal within each sequence (the shared prefix precedes every query). */
  causal?: boolean;
  returnLse?: boolean;
  /** f32 [T, H, D], contiguous. */
  out?: Tensor;
  /** f32 [T, H], contiguous. */
  lse?: Tensor;
  /** int8 caches: see Int8Path. */
  int8Path?: Int8Path;
}

const UNSUPPORTED = ["window", "alibiSlopes", "bias", "mask", "layout"] as const;

/**
 * Shared-prefix attention: equals pagedAttention over the whole block tables
 * (up to rounding), reading the shared blocks once per block of queries.
 *
 *   const plan = planCascadeAttention(rt, { cache, numHeads, sharedPrefixLength: 512, ...batch });
 *   for (let l = 0; l < layers; l++) cascadeAttention(rt, { q, cache, layer: l, plan, causal: true, out });
 *   plan.dispose();
 *
 * @returns out f32 [T, H, D] and, with returnLse / lse, lse f32 [T, H].
 */
export function cascadeAttention(rt: Runtime, options: CascadeAttentionOptions): AttentionResult {
  if (typeof options !== "object" || options === null) throw new ArgumentError("options", `must be an object, got ${show(options)}`);
  const given = options as unknown as Record<string, unknown>;
  for (const name of UNSUPPORTED) {
    if (given[name] !== undefined) {
      throw new ArgumentError(name, `is not supported by cascadeAttention (the shared pass has no per-sequence positions; use pagedAttention), got ${show(given[name])}`);
    }
  }
  const cache = checkCache(options.cache, rt);
  const { q, layout, qd } = readQuery(rt, options);
  let plan = options.plan;
  const ownPlan = plan === undefined;
  if (plan !== undefined) {
    if (!(plan instanceof CascadePlan)) throw new ArgumentError("plan", `must be a CascadePlan (planCascadeAttention), got ${show(plan)}`);
    if (plan.disposed) throw new ArgumentError("plan", "was disposed");
    for (const name of ["cuSeqlensQ", "seqLens", "blockTable", "maxBlocksPerSeq", "sharedPrefixLength"] as const) {
      if (options[name] !== undefined) throw new ArgumentError(name, `is a plan field; got ${show(options[name])} together with a plan`);
    }
  } else {
    if (options.sharedPrefixLength === undefined) throw new ArgumentError("sharedPrefixLength", "is required without a plan, got undefined");
    if (options.cuSeqlensQ === undefined) throw new ArgumentError("cuSeqlensQ", "is required without a plan, got undefined");
    if (options.seqLens === undefined) throw new ArgumentError("seqLens", "is required without a plan, got undefined");
    if (options.blockTable === undefined) throw new ArgumentError("blockTable", "is required without a plan, got undefined");
    plan = planCascadeAttention(rt, {
      cache,
      numHeads: qd.N,
      cuSeqlensQ: options.cuSeqlensQ,
      seqLens: options.seqLens,
      blockTable: options.blockTable,
      sharedPrefixLength: options.sharedPrefixLength,
      ...(options.maxBlocksPerSeq === undefined ? {} : { maxBlocksPerSeq: options.maxBlocksPerSeq }),
    });
  }
  const temps: Tensor[] = [];
  try {
    const P = plan;
    if (P.shared.buffers().runtime !== rt) throw new ArgumentError("plan", "was built for another runtime");
    if (P.suffix.numHeads !== qd.N) throw new ArgumentError("plan.numHeads", `must match q's ${qd.N} heads, got ${P.suffix.numHeads}`);
    if (P.suffix.numKvHeads !== cache.numKvHeads || P.suffix.paged!.blockSize !== cache.blockSize || P.suffix.headDim !== cache.headDim) {
      throw new ArgumentError("plan", `was built for another cache (numKvHeads ${P.suffix.numKvHeads}, headDim ${P.suffix.headDim}, blockSize ${P.suffix.paged!.blockSize})`);
    }
    if (P.suffix.paged!.maxBlockId >= cache.numBlocks) throw new ArgumentError(P.suffix.paged!.maxBlockAt, `must be a block id < numBlocks ${cache.numBlocks}, got ${P.suffix.paged!.maxBlockId}`);
    if (qd.S !== P.tokens) throw new ArgumentError("q.shape", `must have the plan's ${P.tokens} tokens, got ${qd.S}`);
    const H = qd.N;
    const T = qd.S;
    for (const name of ["out", "lse"] as const) {
      const t = options[name];
      if (t !== undefined && !checkTensor(name, t, rt).isContiguous()) throw new ArgumentError(`${name}.strides`, `must be contiguous for cascadeAttention, got ${show(t.strides)}`);
    }
    const wantLse = options.lse !== undefined || (options.returnLse !== undefined && checkBoolean("returnLse", options.returnLse));
    // Suffix pass straight into out/lse (lse always: the merge needs it).
    const common = { q, layout, cache, layer: options.layer, scale: options.scale, softcap: options.softcap, int8Path: options.int8Path } as const;
    const suffixLse = options.lse ?? rt.tensor("f32", [T, H], "cascade lse");
    if (options.lse === undefined) temps.push(suffixLse);
    const ps = pagedProblem(rt, { ...common, plan: P.suffix, causal: options.causal, lse: suffixLse, ...(options.out ? { out: options.out } : {}) }, P.suffix, cache, layout, q, qd);
    try {
      runPlan(rt, ps, P.suffix);
      if (P.sharedPrefixLength > 0 && T > 0) {
        const oShared = rt.tensor("f32", [T, H, cache.headDim], "cascade shared o");
        temps.push(oShared);
        const lseShared = rt.tensor("f32", [T, H], "cascade shared lse");
        temps.push(lseShared);
        const pp = pagedProblem(rt, { ...common, plan: P.shared, out: oShared, lse: lseShared }, P.shared, cache, layout, q, qd);
        runPlan(rt, pp, P.shared);
        mergeStates(rt, { oA: oShared, lseA: lseShared, oB: ps.out, lseB: suffixLse, out: ps.out, lseOut: suffixLse });
      }
    } catch (e) {
      for (const t of ps.allocated) rt.free(t);
      throw e;
    }
    return wantLse ? { out: ps.out, lse: options.lse ?? keep(temps, suffixLse) } : { out: ps.out };
  } finally {
    for (const t of temps) rt.free(t);
    if (ownPlan) plan.dispose();
  }
}

/** Takes `t` out of the temporaries (the caller returns it). */
function keep(temps: Tensor[], t: Tensor): Tensor {
  temps.splice(temps.indexOf(t), 1);
  return t;
}

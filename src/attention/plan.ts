/**
 * AttentionPlan: the scheduling metadata of one step (FlashInfer's plan(),
 * the seed IFA's tiling), built once from the sequence lengths and reused by
 * every layer's increFlashAttention (uniform Sq over a padded cache) or
 * pagedAttention (a ragged batch over a paged cache: the plan also holds the
 * block table, FlashInfer's page table, in shared memory).
 *
 * Work unit: (sequence b, block of query positions, KV head, KV chunk); one
 * unit computes the P·G query rows of P = ⌊RMAX / G⌋ positions (a decode
 * step's Sq ≤ 16 positions are one block for G ≤ 4) of that KV head, so each
 * K/V row it loads serves all of them. On a paged cache a decode unit takes
 * up to 8 KV heads (their rows of a token are adjacent: one touch of a page
 * serves them all). Whether to split the KV axis (FlashDecoding) follows
 * the seed IFA rule — split when B·Hkv units cannot keep every core busy
 * (there: B·Hkv < 0.4 × cores) — made exact for small core counts: split when
 * the longest-processing-time-first schedule of the unsplit units (cost ∝
 * keys × rows) finishes later than 1.1 × the ideal per-thread share, which
 * includes the seed's case. The chunk length is then the largest one (halving
 * from the longest sequence, not below MIN_CHUNK keys) whose schedule is
 * within that bound; each sequence's actual length is cut into equal chunks,
 * so chunks are balanced by actual length, never by the padded capacity.
 *
 * Split sequences write partial (o, lse) per chunk into the plan's workspace
 * ([slots, H, partSq, D] and [slots, H, partSq], slot = one chunk of one
 * sequence, partSq = the longest Sq of a split sequence) and
 * a combine kernel merges them by log-sum-exp; unsplit sequences write their
 * output directly.
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt } from "../tensor/check.js";
import { NKV_MAX, RMAX, STREAM_ROWS, type WorkItem, packItems, uploadInt32 } from "./kernel-args.js";
import { MAX_BLOCK_SIZE, MAX_SEQ_LENGTH, type PagedTable, checkBlockTable, checkOffsets, checkSeqLengths } from "./batch-tables.js";
import { MAX_HEAD_DIM, type SeqExtent, checkLengths, seqTable } from "./problem.js";

/** Longest multi-token decode (speculative / MTP) the decode path takes. */
export const MAX_DECODE_QLEN = 16;
/** Shortest chunk the automatic split makes, in keys. */
export const MIN_CHUNK = 256;
/** Fixed cost of a unit (loading q, writing o, merging), in keys, for scheduling. */
const UNIT_OVERHEAD_KEYS = 32;
/** Accept a schedule finishing within this factor of the ideal per-thread share. */
const BALANCE_SLACK = 1.1;

export interface AttentionPlanOptions {
  /**
   * int32 [B]: keys in each sequence's cache (its actual length; for a step of
   * pagedAttention, the KV length after the step: cached prefix + new tokens,
   * ForwardBatch.seqLens).
   */
  actualSeqLengths: ArrayLike<number>;
  /** Query heads H. */
  numHeads: number;
  /** KV heads Hkv (H % Hkv == 0). */
  numKvHeads: number;
  /** Head dim D (1..256). */
  headDim: number;
  /** Query tokens per sequence Sq (1..16), the same for every sequence (padded decode, q [B, H, Sq, D]). Default 1. */
  qLen?: number;
  /**
   * int32 [B + 1]: a ragged batch's query offsets (TND q [T, H, D]; ForwardBatch.cuSeqlensQ),
   * 0 = cuSeqlensQ[0] ≤ … ≤ cuSeqlensQ[B] = T. Any Sq per sequence (decode tokens
   * and prefill chunks mixed). Not with qLen.
   */
  cuSeqlensQ?: ArrayLike<number>;
  /**
   * Paged KV (pagedAttention): int32 [B, maxBlocksPerSeq], row-major, the
   * block ids of each sequence's keys in order; entries past a sequence's
   * ⌈length / blockSize⌉ blocks are ignored. Copied into the plan.
   */
  blockTable?: ArrayLike<number>;
  /** Columns of blockTable. Default blockTable.length / B. */
  maxBlocksPerSeq?: number;
  /** Tokens per block (1..256); required with blockTable. */
  blockSize?: number;
  /**
   * Paged plans: int32 [B], the first key of each sequence in its cache
   * (default 0); sequence b attends to keys [keyOffsets[b], keyOffsets[b] +
   * actualSeqLengths[b]). A cascade's suffix plan starts after the shared prefix.
   */
  keyOffsets?: ArrayLike<number>;
  /**
   * The name error messages give actualSeqLengths, as the caller spelled it
   * (planPagedAttention: "seqLens"). Default "actualSeqLengths".
   */
  lengthsName?: string;
  /** Threads to balance for. Default: the runtime's. */
  threads?: number;
  /** Force each sequence into this many KV chunks (at most one per key; 1 = never split). For tests and tuning. */
  splitKv?: number;
}

/** What a plan is built from, once the public options are checked. */
interface PlanSpec {
  seqs: SeqExtent[];
  H: number;
  Hkv: number;
  D: number;
  /** Uniform query length, or null for a ragged batch. */
  qLen: number | null;
  cuSeqlensQ: Int32Array | null;
  pages: PagedTable | null;
  threads: number;
  splitKv?: number;
}


/** LPT (longest processing time first) makespan of `costs` on `threads` machines. */
export function lptMakespan(costs: readonly number[], threads: number): number {
  const sorted = [...costs].sort((a, b) => b - a);
  const load = new Array<number>(threads).fill(0);
  for (const c of sorted) {
    let m = 0;
    for (let t = 1; t < threads; t++) if (load[t]! < load[m]!) m = t;
    load[m]! += c;
  }
  return Math.max(0, ...load);
}

/** Chunks per sequence for chunk length L (at least 1, at most one per key). */
function chunksFor(lengths: Int32Array, L: number): number[] {
  return Array.from(lengths, (n) => Math.max(1, Math.ceil(n / L)));
}

/** Unit costs: (keys of the chunk + a fixed overhead) × the unit's weight (rows × KV heads), per unit of each chunk. */
function unitCosts(lengths: Int32Array, chunks: readonly number[], weights: readonly (readonly number[])[]): number[] {
  const costs: number[] = [];
  lengths.forEach((n, b) => {
    const c = chunks[b]!;
    for (let i = 0; i < c; i++) {
      const len = Math.floor(((i + 1) * n) / c) - Math.floor((i * n) / c);
      for (const w of weights[b]!) costs.push((len + UNIT_OVERHEAD_KEYS) * w);
    }
  });
  return costs;
}

/**
 * The automatic split decision; returns chunks per sequence and the reason in
 * words. `unitWeights[b]` lists the relative weights of the work units each
 * chunk of sequence b makes (default: Hkv units of weight 1, one per KV head).
 */
export function chooseChunks(lengths: Int32Array, Hkv: number, threads: number, unitWeights?: readonly (readonly number[])[]): { chunks: number[]; reason: string } {
  const weights = unitWeights ?? Array.from(lengths, () => new Array<number>(Hkv).fill(1));
  const none = lengths.length === 0 ? [] : chunksFor(lengths, Infinity);
  if (threads <= 1) return { chunks: none, reason: "one thread: no split" };
  const ideal = (costs: number[]) => costs.reduce((s, c) => s + c, 0) / threads;
  const base = unitCosts(lengths, none, weights);
  const baseSpan = lptMakespan(base, threads);
  if (baseSpan <= BALANCE_SLACK * ideal(base)) {
    return { chunks: none, reason: `${base.length} units keep ${threads} threads busy (LPT makespan ${(baseSpan / ideal(base)).toFixed(2)}× ideal): no split` };
  }
  const longest = Math.max(...lengths);
  let L = Math.max(MIN_CHUNK, 2 ** Math.ceil(Math.log2(Math.max(1, longest))) / 2);
  for (; ; L /= 2) {
    const chunks = chunksFor(lengths, L);
    const costs = unitCosts(lengths, chunks, weights);
    const span = lptMakespan(costs, threads);
    if (span <= BALANCE_SLACK * ideal(costs) || L <= MIN_CHUNK) {
      return {
        chunks,
        reason: `${base.length} unsplit units: LPT makespan ${(baseSpan / ideal(base)).toFixed(2)}× ideal on ${threads} threads; split into chunks of ≤ ${L} keys: ${costs.length} units, ${(span / ideal(costs)).toFixed(2)}× ideal`,
      };
    }
  }
}

/** Addresses of a plan's tables in the shared memory. */
interface PlanBuffers {
  /** int32 [B, 4] sequence table. */
  seqs: number;
  /** int32 [numItems, 8] work items, longest first. */
  items: number;
  /** int32 [B, 2]: first slot and chunk count per sequence. */
  chunks: number;
  /** int32 [B, maxBlocksPerSeq] block table (paged plans), else 0. */
  blockTable: number;
  /** f32 [numSlots, H, Sq, D] partial outputs. */
  partO: number;
  /** f32 [numSlots, H, Sq] partial lse. */
  partLse: number;
}

type PlanFields = Pick<
  AttentionPlan,
  | "batch"
  | "numHeads"
  | "numKvHeads"
  | "headDim"
  | "qLen"
  | "cuSeqlensQ"
  | "keyOffsets"
  | "seqs"
  | "paged"
  | "threads"
  | "lengths"
  | "chunkBounds"
  | "split"
  | "reason"
  | "numItems"
  | "numSlots"
  | "partSq"
  | "workspaceBytes"
>;

export class AttentionPlan {
  readonly batch: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  /** Query tokens per sequence when uniform (increFlashAttention, BNSD/BSND q); null for a ragged batch. */
  readonly qLen: number | null;
  /** A ragged batch's query offsets [B + 1] (TND q), else null. */
  readonly cuSeqlensQ: Int32Array | null;
  /** First key of each sequence along its cache (0 but for cascade suffixes). */
  readonly keyOffsets: Int32Array;
  /** @internal Each sequence's query rows and keys as planned: what the operators' problems carry (read-only). */
  readonly seqs: readonly SeqExtent[];
  /** The block table (a host copy of what the kernels read), its shape and the largest id it uses (paged plans), else null. */
  readonly paged: Readonly<PagedTable> | null;
  readonly threads: number;
  /** Keys per sequence, as planned. */
  readonly lengths: Int32Array;
  /** Chunk boundaries per sequence: [0, …, length], one more entry than chunks. */
  readonly chunkBounds: readonly Int32Array[];
  /** Whether any sequence is split (a combine step runs). */
  readonly split: boolean;
  /** Why the plan split or not, in words. */
  readonly reason: string;
  /** Work units (parallelFor items) of the attention kernel. */
  readonly numItems: number;
  /** Partial-state slots (one per chunk of a split sequence). */
  readonly numSlots: number;
  /** Query rows per (slot, head) in the partial workspace. */
  readonly partSq: number;
  /** Bytes of shared memory the plan holds (tables and partial workspace). */
  readonly workspaceBytes: number;

  readonly #rt: Runtime;
  readonly #ptrs: PlanBuffers;
  #disposed = false;

  private constructor(rt: Runtime, fields: PlanFields, ptrs: PlanBuffers) {
    this.#rt = rt;
    this.batch = fields.batch;
    this.numHeads = fields.numHeads;
    this.numKvHeads = fields.numKvHeads;
    this.headDim = fields.headDim;
    this.qLen = fields.qLen;
    this.cuSeqlensQ = fields.cuSeqlensQ;
    this.keyOffsets = fields.keyOffsets;
    this.seqs = fields.seqs;
    this.paged = fields.paged;
    this.threads = fields.threads;
    this.lengths = fields.lengths;
    this.chunkBounds = fields.chunkBounds;
    this.split = fields.split;
    this.reason = fields.reason;
    this.numItems = fields.numItems;
    this.numSlots = fields.numSlots;
    this.partSq = fields.partSq;
    this.workspaceBytes = fields.workspaceBytes;
    this.#ptrs = ptrs;
  }

  /**
   * Builds the plan and its workspace in the runtime's heap; free it with
   * dispose(). Throws an ArgumentError naming a bad option before allocating.
   */
  static create(rt: Runtime, options: AttentionPlanOptions): AttentionPlan {
    if (typeof options !== "object" || options === null) throw new ArgumentError("options", `must be an object, got ${show(options)}`);
    const H = checkInt("numHeads", options.numHeads, { min: 1 });
    const Hkv = checkInt("numKvHeads", options.numKvHeads, { min: 1 });
    if (H % Hkv !== 0) throw new ArgumentError("numHeads", `must be a multiple of numKvHeads ${Hkv} (GQA), got ${H}`);
    const D = checkInt("headDim", options.headDim, { min: 1, max: MAX_HEAD_DIM });
    const threads = options.threads === undefined ? rt.threads : checkInt("threads", options.threads, { min: 1 });
    const lengthsName = options.lengthsName ?? "actualSeqLengths";
    const lengths = checkSeqLengths(lengthsName, options.actualSeqLengths);
    const B = lengths.length;
    let qLen: number | null = null;
    let cuSeqlensQ: Int32Array | null = null;
    let seqs: SeqExtent[];
    if (options.cuSeqlensQ !== undefined) {
      if (options.qLen !== undefined) throw new ArgumentError("qLen", `is for uniform batches; got ${show(options.qLen)} together with cuSeqlensQ`);
      cuSeqlensQ = checkOffsets("cuSeqlensQ", options.cuSeqlensQ, B);
      seqs = Array.from(lengths, (sk, b) => ({ q0: cuSeqlensQ![b]!, sq: cuSeqlensQ![b + 1]! - cuSeqlensQ![b]!, k0: 0, sk }));
    } else {
      qLen = options.qLen === undefined ? 1 : checkInt("qLen", options.qLen, { min: 1, max: MAX_DECODE_QLEN });
      seqs = Array.from(lengths, (sk) => ({ q0: 0, sq: qLen!, k0: 0, sk }));
    }
    let pages: PagedTable | null = null;
    if (options.blockTable !== undefined) {
      if (options.blockSize === undefined) throw new ArgumentError("blockSize", "is required with blockTable, got undefined");
      const blockSize = checkInt("blockSize", options.blockSize, { min: 1, max: MAX_BLOCK_SIZE });
      if (options.keyOffsets !== undefined) {
        const k0 = checkLengths("keyOffsets", options.keyOffsets, B, MAX_SEQ_LENGTH, "2^30 − 1");
        seqs.forEach((s, b) => {
          if (k0[b]! + s.sk > MAX_SEQ_LENGTH) throw new ArgumentError(`keyOffsets[${b}]`, `+ ${lengthsName}[${b}] must be ≤ 2^30 − 1, got ${k0[b]! + s.sk}`);
          s.k0 = k0[b]!;
        });
      }
      pages = checkBlockTable(options.blockTable, options.maxBlocksPerSeq, blockSize, seqs, lengthsName);
    } else {
      for (const name of ["blockSize", "maxBlocksPerSeq", "keyOffsets"] as const) {
        if (options[name] !== undefined) throw new ArgumentError(name, `is for paged plans; got ${show(options[name])} without a blockTable`);
      }
    }
    let splitKv: number | undefined;
    if (options.splitKv !== undefined) splitKv = checkInt("splitKv", options.splitKv, { min: 1 });
    return AttentionPlan.#build(rt, { seqs, H, Hkv, D, qLen, cuSeqlensQ, pages, threads, ...(splitKv === undefined ? {} : { splitKv }) });
  }

  /** Builds a plan from checked sequences: the work units, the split decision, the tables in shared memory. */
  static #build(rt: Runtime, spec: PlanSpec): AttentionPlan {
    const { seqs, H, Hkv, D, threads } = spec;
    const B = seqs.length;
    const G = H / Hkv;
    const lengths = Int32Array.from(seqs, (s) => s.sk);
    // Query blocks of P positions: [p0, p1) per block.
    const P = Math.max(1, Math.floor(RMAX / G));
    const blocks = seqs.map((s) => {
      const out: [number, number][] = [];
      for (let p0 = 0; p0 < s.sq; p0 += P) out.push([p0, Math.min(s.sq, p0 + P)]);
      return out;
    });
    // KV heads per unit: on a paged cache (heads adjacent in each token's row), a
    // streaming block takes up to NKV_MAX heads at once (flash.ts processBlock),
    // so each page of K/V a tile touches serves all of them.
    const headGroups = (rows: number): [number, number][] => {
      const per = spec.pages && rows <= STREAM_ROWS ? Math.max(1, Math.min(NKV_MAX, Math.floor(RMAX / Math.max(1, rows)))) : 1;
      const out: [number, number][] = [];
      for (let h = 0; h < Hkv; h += per) out.push([h, Math.min(Hkv, h + per)]);
      return out;
    };
    const unitWeights = blocks.map((bl) => (bl.length === 0 ? [0] : bl.flatMap(([p0, p1]) => headGroups((p1 - p0) * G).map(([h0, h1]) => (p1 - p0) * G * (h1 - h0)))));

    let chunks: number[];
    let reason: string;
    if (spec.splitKv !== undefined) {
      const s = spec.splitKv;
      chunks = Array.from(lengths, (n) => Math.max(1, Math.min(s, n)));
      reason = `forced: splitKv = ${s}`;
    } else {
      ({ chunks, reason } = chooseChunks(lengths, Hkv, threads, unitWeights));
    }

    const chunkBounds: Int32Array[] = [];
    const chunkTable = new Int32Array(2 * B);
    const units: { item: WorkItem; cost: number }[] = [];
    let slots = 0;
    let partSq = 0;
    lengths.forEach((n, b) => {
      const c = chunks[b]!;
      const bounds = new Int32Array(c + 1);
      for (let i = 0; i <= c; i++) bounds[i] = Math.floor((i * n) / c);
      chunkBounds.push(bounds);
      chunkTable[2 * b] = c > 1 ? slots : -1;
      chunkTable[2 * b + 1] = c;
      for (let i = 0; i < c; i++) {
        const slot = c > 1 ? slots + i : -1;
        for (const [p0, p1] of blocks[b]!) {
          const rows = (p1 - p0) * G;
          for (const [h0, h1] of headGroups(rows)) {
            const cost = (bounds[i + 1]! - bounds[i]! + UNIT_OVERHEAD_KEYS) * rows * (h1 - h0);
            units.push({ item: { b, kvh: h0, row0: p0 * G, rows, kv0: bounds[i]!, kv1: bounds[i + 1]!, slot, nkv: h1 - h0 }, cost });
          }
        }
      }
      if (c > 1) {
        slots += c;
        partSq = Math.max(partSq, seqs[b]!.sq);
      }
    });
    units.sort((x, y) => y.cost - x.cost);
    const items = units.map((u) => u.item);

    const seqData = seqTable(seqs);
    const partOBytes = slots * H * partSq * D * 4;
    const partLseBytes = slots * H * partSq * 4;
    const ptrs: PlanBuffers = { seqs: 0, items: 0, chunks: 0, blockTable: 0, partO: 0, partLse: 0 };
    try {
      ptrs.seqs = uploadInt32(rt, seqData, "attention plan seqs");
      ptrs.items = uploadInt32(rt, packItems(items), "attention plan items");
      ptrs.chunks = uploadInt32(rt, chunkTable, "attention plan chunks");
      if (spec.pages) ptrs.blockTable = uploadInt32(rt, spec.pages.table, "attention plan block table");
      ptrs.partO = rt.heap.alloc(Math.max(4, partOBytes), "attention plan partial o");
      ptrs.partLse = rt.heap.alloc(Math.max(4, partLseBytes), "attention plan partial lse");
    } catch (e) {
      for (const p of Object.values(ptrs)) if (p) rt.free(p);
      throw e;
    }
    const workspaceBytes = seqData.byteLength + items.length * 32 + chunkTable.byteLength + (spec.pages?.table.byteLength ?? 0) + partOBytes + partLseBytes;
    const paged = spec.pages;
    return new AttentionPlan(
      rt,
      {
        batch: B,
        numHeads: H,
        numKvHeads: Hkv,
        headDim: D,
        qLen: spec.qLen,
        cuSeqlensQ: spec.cuSeqlensQ,
        keyOffsets: Int32Array.from(seqs, (s) => s.k0),
        seqs,
        paged,
        threads,
        lengths,
        chunkBounds,
        split: slots > 0,
        reason,
        numItems: items.length,
        numSlots: slots,
        partSq,
        workspaceBytes,
      },
      ptrs,
    );
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** @internal The plan's shared-memory tables, for the decode operator. */
  buffers(): PlanBuffers & { runtime: Runtime } {
    if (this.#disposed) throw new ArgumentError("plan", "was disposed");
    return { runtime: this.#rt, ...this.#ptrs };
  }

  /** Frees the plan's tables and workspace. Idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const p of Object.values(this.#ptrs)) if (p) this.#rt.free(p);
  }
}

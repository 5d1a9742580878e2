/**
 * AttentionPlan: the scheduling metadata of one decode step (FlashInfer's
 * plan(), the seed IFA's tiling), built once from the sequence lengths and
 * reused by every layer's increFlashAttention.
 *
 * Work unit: (sequence b, KV head, KV chunk); one unit computes all G·Sq query
 * rows of that KV head. Whether to split the KV axis (FlashDecoding) follows
 * the seed IFA rule — split when B·Hkv units cannot keep every core busy
 * (there: B·Hkv < 0.4 × cores) — made exact for small core counts: split when
 * the longest-processing-time-first schedule of the unsplit units (cost ∝
 * actual length) finishes later than 1.1 × the ideal per-thread share, which
 * includes the seed's case. The chunk length is then the largest one (halving
 * from the longest sequence, not below MIN_CHUNK keys) whose schedule is
 * within that bound; each sequence's actual length is cut into equal chunks,
 * so chunks are balanced by actual length, never by the padded capacity.
 *
 * Split sequences write partial (o, lse) per chunk into the plan's workspace
 * ([slots, H, Sq, D] and [slots, H, Sq], slot = one chunk of one sequence) and
 * a combine kernel merges them by log-sum-exp; unsplit sequences write their
 * output directly.
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt } from "../tensor/check.js";
import { type WorkItem, packItems, uploadInt32 } from "./kernel-args.js";
import { MAX_HEAD_DIM, checkLengths, seqTable } from "./problem.js";

/** Longest multi-token decode (speculative / MTP) the decode path takes. */
export const MAX_DECODE_QLEN = 16;
/** Shortest chunk the automatic split makes, in keys. */
export const MIN_CHUNK = 256;
/** Fixed cost of a unit (loading q, writing o, merging), in keys, for scheduling. */
const UNIT_OVERHEAD_KEYS = 32;
/** Accept a schedule finishing within this factor of the ideal per-thread share. */
const BALANCE_SLACK = 1.1;

export interface AttentionPlanOptions {
  /** int32 [B]: keys in each sequence's cache (its actual length). */
  actualSeqLengths: ArrayLike<number>;
  /** Query heads H. */
  numHeads: number;
  /** KV heads Hkv (H % Hkv == 0). */
  numKvHeads: number;
  /** Head dim D (1..256). */
  headDim: number;
  /** Query tokens per sequence Sq (1..16). Default 1. */
  qLen?: number;
  /** Threads to balance for. Default: the runtime's. */
  threads?: number;
  /** Force each sequence into this many KV chunks (at most one per key; 1 = never split). For tests and tuning. */
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

function unitCosts(lengths: Int32Array, chunks: readonly number[], Hkv: number): number[] {
  const costs: number[] = [];
  lengths.forEach((n, b) => {
    const c = chunks[b]!;
    for (let i = 0; i < c; i++) {
      const len = Math.floor(((i + 1) * n) / c) - Math.floor((i * n) / c);
      for (let h = 0; h < Hkv; h++) costs.push(len + UNIT_OVERHEAD_KEYS);
    }
  });
  return costs;
}

/** The automatic split decision; returns chunks per sequence and the reason in words. */
export function chooseChunks(lengths: Int32Array, Hkv: number, threads: number): { chunks: number[]; reason: string } {
  const none = lengths.length === 0 ? [] : chunksFor(lengths, Infinity);
  if (threads <= 1) return { chunks: none, reason: "one thread: no split" };
  const ideal = (costs: number[]) => costs.reduce((s, c) => s + c, 0) / threads;
  const base = unitCosts(lengths, none, Hkv);
  const baseSpan = lptMakespan(base, threads);
  if (baseSpan <= BALANCE_SLACK * ideal(base)) {
    return { chunks: none, reason: `${base.length} units keep ${threads} threads busy (LPT makespan ${(baseSpan / ideal(base)).toFixed(2)}× ideal): no split` };
  }
  const longest = Math.max(...lengths);
  let L = Math.max(MIN_CHUNK, 2 ** Math.ceil(Math.log2(Math.max(1, longest))) / 2);
  for (; ; L /= 2) {
    const chunks = chunksFor(lengths, L);
    const costs = unitCosts(lengths, chunks, Hkv);
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
  /** f32 [numSlots, H, Sq, D] partial outputs. */
  partO: number;
  /** f32 [numSlots, H, Sq] partial lse. */
  partLse: number;
}

type PlanFields = Pick<
  AttentionPlan,
  "batch" | "numHeads" | "numKvHeads" | "headDim" | "qLen" | "threads" | "lengths" | "chunkBounds" | "split" | "reason" | "numItems" | "numSlots" | "workspaceBytes"
>;

export class AttentionPlan {
  readonly batch: number;
  readonly numHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly qLen: number;
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
    this.threads = fields.threads;
    this.lengths = fields.lengths;
    this.chunkBounds = fields.chunkBounds;
    this.split = fields.split;
    this.reason = fields.reason;
    this.numItems = fields.numItems;
    this.numSlots = fields.numSlots;
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
    const Sq = options.qLen === undefined ? 1 : checkInt("qLen", options.qLen, { min: 1, max: MAX_DECODE_QLEN });
    const threads = options.threads === undefined ? rt.threads : checkInt("threads", options.threads, { min: 1 });
    const raw = options.actualSeqLengths as unknown;
    const B = raw !== null && typeof raw === "object" && "length" in raw ? (raw as ArrayLike<unknown>).length : -1;
    const lengths = checkLengths("actualSeqLengths", raw, Math.max(B, 0), 0x3fffffff, "2^30 − 1");
    if (B < 1) throw new ArgumentError("actualSeqLengths", `must list at least one sequence, got ${show(raw)}`);

    let chunks: number[];
    let reason: string;
    if (options.splitKv !== undefined) {
      const s = checkInt("splitKv", options.splitKv, { min: 1 });
      chunks = Array.from(lengths, (n) => Math.max(1, Math.min(s, n)));
      reason = `forced: splitKv = ${s}`;
    } else {
      ({ chunks, reason } = chooseChunks(lengths, Hkv, threads));
    }

    const G = H / Hkv;
    const chunkBounds: Int32Array[] = [];
    const chunkTable = new Int32Array(2 * B);
    const units: { item: WorkItem; cost: number }[] = [];
    let slots = 0;
    lengths.forEach((n, b) => {
      const c = chunks[b]!;
      const bounds = new Int32Array(c + 1);
      for (let i = 0; i <= c; i++) bounds[i] = Math.floor((i * n) / c);
      chunkBounds.push(bounds);
      const first = c > 1 ? slots : -1;
      chunkTable[2 * b] = first;
      chunkTable[2 * b + 1] = c;
      for (let i = 0; i < c; i++) {
        const slot = c > 1 ? slots + i : -1;
        for (let kvh = 0; kvh < Hkv; kvh++) {
          units.push({ item: { b, kvh, row0: 0, rows: Sq * G, kv0: bounds[i]!, kv1: bounds[i + 1]!, slot }, cost: bounds[i + 1]! - bounds[i]! });
        }
      }
      if (c > 1) slots += c;
    });
    units.sort((x, y) => y.cost - x.cost);
    const items = units.map((u) => u.item);

    const seqs = seqTable(Array.from(lengths, (sk) => ({ q0: 0, sq: Sq, k0: 0, sk })));
    const partOBytes = slots * H * Sq * D * 4;
    const partLseBytes = slots * H * Sq * 4;
    const ptrs: PlanBuffers = { seqs: 0, items: 0, chunks: 0, partO: 0, partLse: 0 };
    try {
      ptrs.seqs = uploadInt32(rt, seqs, "attention plan seqs");
      ptrs.items = uploadInt32(rt, packItems(items), "attention plan items");
      ptrs.chunks = uploadInt32(rt, chunkTable, "attention plan chunks");
      ptrs.partO = rt.heap.alloc(Math.max(4, partOBytes), "attention plan partial o");
      ptrs.partLse = rt.heap.alloc(Math.max(4, partLseBytes), "attention plan partial lse");
    } catch (e) {
      for (const p of Object.values(ptrs)) if (p) rt.free(p);
      throw e;
    }
    const workspaceBytes = seqs.byteLength + items.length * 32 + chunkTable.byteLength + partOBytes + partLseBytes;
    return new AttentionPlan(
      rt,
      { batch: B, numHeads: H, numKvHeads: Hkv, headDim: D, qLen: Sq, threads, lengths, chunkBounds, split: slots > 0, reason, numItems: items.length, numSlots: slots, workspaceBytes },
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
    for (const p of Object.values(this.#ptrs)) this.#rt.free(p);
  }
}

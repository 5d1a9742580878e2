/**
 * The TypeScript twin of assembly/attention/args.ts: writes AttnArgs field by
 * field in declaration order, and copies int32 tables (sequences, work items)
 * into the shared memory. Keep in step with the AssemblyScript struct.
 */
import type { Runtime } from "../runtime/runtime.js";
import { DTYPE_CODE } from "../tensor/dtype.js";
import type { AttentionProblem } from "./problem.js";

/** Rows per Q block and keys per K/V tile (assembly/attention/args.ts RMAX, BC). */
export const RMAX = 64;
export const BC = 64;
/** int32 fields per work item: b, kvh, row0, rows, kv0, kv1, slot, nkv. */
export const ITEM_FIELDS = 8;
/** Most KV heads one work item takes (assembly/attention/args.ts NKV_MAX). */
export const NKV_MAX = 8;
/** Rows per KV head up to which a block takes the streaming (decode) path (flash.ts STREAM_ROWS). */
export const STREAM_ROWS = 8;

export interface WorkItem {
  b: number;
  kvh: number;
  row0: number;
  rows: number;
  kv0: number;
  kv1: number;
  /** −1: final output; s ≥ 0: split slot s. */
  slot: number;
  /** KV heads kvh … kvh + nkv − 1 with `rows` rows each, in one block (nkv·rows ≤ RMAX). Default 1. */
  nkv?: number;
}

export function packItems(items: readonly WorkItem[]): Int32Array {
  const t = new Int32Array(items.length * ITEM_FIELDS);
  items.forEach((it, i) => t.set([it.b, it.kvh, it.row0, it.rows, it.kv0, it.kv1, it.slot, it.nkv ?? 1], i * ITEM_FIELDS));
  return t;
}

/** Allocates a heap block holding `data` (int32); the caller frees it. */
export function uploadInt32(rt: Runtime, data: Int32Array, label: string): number {
  const ptr = rt.heap.alloc(Math.max(4, data.byteLength), label);
  new Int32Array(rt.memory.buffer, ptr, data.length).set(data);
  return ptr;
}

/** Per-thread scratch for head dim D, as the kernels compute it. */
export function attentionScratch(rt: Runtime, D: number): { ptr: number; stride: number } {
  return rt.threadScratch(rt.exports["attention_scratch_bytes"]!(D));
}

export interface Partials {
  oPtr: number;
  lsePtr: number;
  sq: number;
}

/** Writes the AttnArgs struct for `p` and returns its address (write just before the launch). */
export function writeAttnArgs(rt: Runtime, p: AttentionProblem, seqsPtr: number, itemsPtr: number, partials: Partials | undefined, scratch: { ptr: number; stride: number }): number {
  const s = p.score;
  const w = rt.args();
  w.ptr(p.q.ptr).i32(p.q.sB).i32(p.q.sH).i32(p.q.sS);
  w.ptr(p.k.ptr).i32(p.k.sB).i32(p.k.sH).i32(p.k.sS);
  w.ptr(p.v.ptr).i32(p.v.sB).i32(p.v.sH).i32(p.v.sS);
  w.i32(DTYPE_CODE[p.kvDtype]);
  w.ptr(p.outOp.ptr).i32(p.outOp.sB).i32(p.outOp.sH).i32(p.outOp.sS);
  w.ptr(p.lseOp.ptr).i32(p.lseOp.sB).i32(p.lseOp.sH).i32(p.lseOp.sS);
  w.i32(p.D).i32(p.G).i32(p.H);
  w.f32(s.scale).f32(s.softcap);
  w.i32(s.causal ? 1 : 0).i32(s.winLeft).i32(s.winRight);
  w.ptr(s.alibi?.ptr ?? 0).i32(s.alibi?.sB ?? 0);
  w.ptr(s.bias?.ptr ?? 0).i32(s.bias?.sB ?? 0).i32(s.bias?.sH ?? 0).i32(s.bias?.sI ?? 0).i32(s.bias?.sJ ?? 0);
  w.ptr(s.mask?.ptr ?? 0).i32(s.mask?.sB ?? 0).i32(s.mask?.sH ?? 0).i32(s.mask?.sI ?? 0).i32(s.mask?.sJ ?? 0);
  w.ptr(seqsPtr).ptr(itemsPtr);
  w.ptr(partials?.oPtr ?? 0).ptr(partials?.lsePtr ?? 0).i32(partials?.sq ?? 0);
  w.ptr(scratch.ptr).i32(scratch.stride);
  const pg = p.paged;
  w.ptr(pg?.blockTable ?? 0).i32(pg?.maxBlocksPerSeq ?? 0).i32(pg?.blockSize ?? 0);
  const dq = p.dequant;
  w.i32(dq?.quant ?? 0).f32(dq?.kScalar ?? 1).f32(dq?.vScalar ?? 1);
  w.ptr(dq?.kScale ?? 0).ptr(dq?.vScale ?? 0).ptr(dq?.kOffset ?? 0).ptr(dq?.vOffset ?? 0);
  w.i32(dq?.intRows ?? 0);
  return w.end();
}

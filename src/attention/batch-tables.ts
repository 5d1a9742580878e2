/**
 * Checks of a step's batch tables, shared by every plan (AttentionPlan.create,
 * and through it planPagedAttention and planCascadeAttention): the sequences'
 * key counts, a ragged batch's query offsets, and a block table against the
 * sequences it serves. Each throws an ArgumentError naming the entry and the
 * value.
 */
import { ArgumentError, show } from "../errors.js";
import { checkInt } from "../tensor/check.js";
import { type SeqExtent, checkLengths } from "./problem.js";

/** A checked block table. */
export interface PagedTable {
  /** int32 [B, maxBlocksPerSeq] */
  table: Int32Array;
  maxBlocksPerSeq: number;
  blockSize: number;
  /** The largest block id a sequence uses (−1: none), and where it is, for the check against a cache. */
  maxBlockId: number;
  maxBlockAt: string;
}

/** Most tokens a KV block may hold: the paged kernels' limit (every layer above takes its range from here). */
export const MAX_BLOCK_SIZE = 256;

/** Longest sequence (and largest offset) a plan takes, in keys or tokens. */
export const MAX_SEQ_LENGTH = 0x3fffffff;

/** Keys per sequence of a batch (seqLens, actualSeqLengths): at least one sequence, each 0..2^30 − 1. Their count is B. */
export function checkSeqLengths(argument: string, value: unknown): Int32Array {
  const isArray = Array.isArray(value) || (ArrayBuffer.isView(value) && !(value instanceof DataView));
  if (!isArray || (value as ArrayLike<unknown>).length < 1) throw new ArgumentError(argument, `must list at least one sequence's length, got ${show(value)}`);
  return checkLengths(argument, value, (value as ArrayLike<unknown>).length, MAX_SEQ_LENGTH, "2^30 − 1");
}

/** Query offsets of a ragged batch: B + 1 non-decreasing integers from 0. */
export function checkOffsets(argument: string, value: unknown, B: number): Int32Array {
  const isArray = Array.isArray(value) || (ArrayBuffer.isView(value) && !(value instanceof DataView));
  if (!isArray) throw new ArgumentError(argument, `must be an array of B + 1 = ${B + 1} offsets, got ${show(value)}`);
  const v = value as ArrayLike<unknown>;
  if (v.length !== B + 1) throw new ArgumentError(argument, `must have B + 1 = ${B + 1} offsets (one more than the sequences), got ${v.length}`);
  const out = new Int32Array(B + 1);
  for (let b = 0; b <= B; b++) {
    const n = v[b];
    if (typeof n !== "number" || !Number.isInteger(n)) throw new ArgumentError(`${argument}[${b}]`, `must be an integer, got ${show(n)}`);
    if (b === 0 && n !== 0) throw new ArgumentError(`${argument}[0]`, `must be 0, got ${n}`);
    if (b > 0 && n < out[b - 1]!) throw new ArgumentError(`${argument}[${b}]`, `must be ≥ ${argument}[${b - 1}] = ${out[b - 1]} (offsets are non-decreasing), got ${n}`);
    if (n > MAX_SEQ_LENGTH) throw new ArgumentError(`${argument}[${b}]`, `must be ≤ 2^30 − 1, got ${n}`);
    out[b] = n;
  }
  return out;
}

/**
 * Checks a block table [B, maxBlocksPerSeq] against the sequences it serves:
 * every sequence's keys [0, k0 + sk) must have their ⌈(k0 + sk) / blockSize⌉
 * blocks in its row, each a non-negative integer id. The upper bound of the
 * ids is checked against the cache by pagedAttention (maxBlockId).
 */
export function checkBlockTable(value: unknown, maxBlocksPerSeq: unknown, blockSize: number, seqs: readonly SeqExtent[], lengthsName: string): PagedTable {
  const isArray = Array.isArray(value) || (ArrayBuffer.isView(value) && !(value instanceof DataView));
  if (!isArray) throw new ArgumentError("blockTable", `must be an int32 array [B, maxBlocksPerSeq], got ${show(value)}`);
  const v = value as ArrayLike<unknown>;
  const B = seqs.length;
  let cols: number;
  if (maxBlocksPerSeq === undefined) {
    if (v.length % B !== 0) throw new ArgumentError("blockTable", `must hold B·maxBlocksPerSeq entries for B = ${B} sequences, got ${v.length}`);
    cols = v.length / B;
  } else {
    cols = checkInt("maxBlocksPerSeq", maxBlocksPerSeq, { min: 0 });
    if (v.length !== B * cols) throw new ArgumentError("blockTable", `must hold B·maxBlocksPerSeq = ${B}·${cols} = ${B * cols} entries, got ${v.length}`);
  }
  const table = new Int32Array(B * cols);
  let maxBlockId = -1;
  let maxBlockAt = "";
  seqs.forEach((s, b) => {
    const need = Math.ceil((s.k0 + s.sk) / blockSize);
    if (need > cols) {
      throw new ArgumentError(
        `blockTable[${b}]`,
        `is too short: ${lengthsName}[${b}] = ${s.k0 + s.sk} keys need ${need} blocks of ${blockSize}, but maxBlocksPerSeq is ${cols}`,
      );
    }
    for (let i = 0; i < cols; i++) {
      const id = v[b * cols + i];
      if (i >= need) {
        table[b * cols + i] = typeof id === "number" && Number.isInteger(id) && id >= 0 && id <= 0x7fffffff ? id : 0;
        continue;
      }
      if (typeof id !== "number" || !Number.isInteger(id)) throw new ArgumentError(`blockTable[${b}][${i}]`, `must be an integer block id, got ${show(id)}`);
      if (id < 0 || id > 0x7fffffff) throw new ArgumentError(`blockTable[${b}][${i}]`, `must be a block id ≥ 0, got ${id}`);
      table[b * cols + i] = id;
      if (id > maxBlockId) {
        maxBlockId = id;
        maxBlockAt = `blockTable[${b}][${i}]`;
      }
    }
  });
  return { table, maxBlocksPerSeq: cols, blockSize, maxBlockId, maxBlockAt };
}

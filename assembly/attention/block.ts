// The block descriptor flash.ts's steps share: which rows one block holds,
// what step 1 found out about their key ranges, and which of the compute
// paths the block takes. It lives in the thread's scratch (args.ts offBlock),
// so the steps pass one pointer instead of a dozen scalars.
//
// A block is Rg rows (row0 …) of each of the nkv KV heads kvh0 … kvh0 + nkv − 1
// (R = nkv·Rg ≤ RMAX rows, head-major: row r belongs to head kvh0 + r / Rg).
// The compute paths, fixed per block:
//   PATH_INT       int8 K/V with intRows = 2 | 3: qkInt / pvInt on the int8
//                  rows in place (int-microkernel.ts), at any row count.
//   PATH_IN_PLACE  few rows (decode), f32/bf16/f16/fp8 rows with D % 4 == 0:
//                  read in place, widened as loaded (qkStream, pvTile).
//   PATH_STREAM    few rows, other storage (int8 dequantized, D % 4 ≠ 0):
//                  each head's tile decoded into scratch, then streamed.
//   PATH_TILE      many rows (prefill): tiles decoded into scratch once and
//                  reused by every row (qkTile, pvTile<f32>).

import { AttnArgs, QUANT_NONE, QUANT_PER_TENSOR, QUANT_PER_TOKEN, SEQ_FIELDS, SEQ_K0, SEQ_Q0, SEQ_SK, SEQ_SQ, padD } from "./args";

/** Row blocks up to this size per head take the streaming (decode) paths. */
export const STREAM_ROWS = 8;

export const PATH_INT: i32 = 0;
export const PATH_IN_PLACE: i32 = 1;
export const PATH_STREAM: i32 = 2;
export const PATH_TILE: i32 = 3;

@unmanaged export class Block {
  b: i32;
  kvh0: i32;
  nkv: i32;
  row0: i32;
  /** Rows per KV head; R = nkv·Rg. */
  Rg: i32;
  R: i32;
  /** −1: write out/lse; s ≥ 0: split slot s's partials. */
  slot: i32;
  /** The sequence's first query and key index along q's / k's S axis, and Sk − Sq (the causal diagonal). */
  q0: i32;
  k0: i32;
  diagShift: i32;
  /** Keys [kv0, kvEnd) of the work item. */
  kv0: i32;
  kvEnd: i32;
  /** Set by step 1: the union of the rows' kept ranges [unionLo, unionHi], and [maxLo, minHi], kept by every row. */
  unionLo: i32;
  unionHi: i32;
  maxLo: i32;
  minHi: i32;
  path: i32;
  /** Applied to q when loaded, and to o when written: fp8's per-tensor scales fold in here on PATH_IN_PLACE. */
  qScale: f32;
  oScale: f32;
}

/** Fills the descriptor at blk for one block of work item (b, kvh0 … + nkv − 1, rows row0 … + Rg − 1, keys [kv0, kv1)). */
export function initBlock(a: AttnArgs, blk: Block, b: i32, kvh0: i32, nkv: i32, row0: i32, Rg: i32, kv0: i32, kv1: i32, slot: i32): void {
  const seq = a.seqs + (<usize>(b * SEQ_FIELDS) << 2);
  const Sq = load<i32>(seq, SEQ_SQ << 2);
  const Sk = load<i32>(seq, SEQ_SK << 2);
  blk.b = b;
  blk.kvh0 = kvh0;
  blk.nkv = nkv;
  blk.row0 = row0;
  blk.Rg = Rg;
  blk.R = nkv * Rg;
  blk.slot = slot;
  blk.q0 = load<i32>(seq, SEQ_Q0 << 2);
  blk.k0 = load<i32>(seq, SEQ_K0 << 2);
  blk.diagShift = Sk - Sq;
  blk.kv0 = kv0;
  blk.kvEnd = min(kv1, Sk);
  const stream = Rg <= STREAM_ROWS;
  const quant = a.quant;
  const inPlace = stream && a.D == padD(a.D) && (quant == QUANT_NONE || quant == QUANT_PER_TENSOR);
  blk.path = a.intRows != 0 ? PATH_INT : inPlace ? PATH_IN_PLACE : stream ? PATH_STREAM : PATH_TILE;
  const fold = blk.path == PATH_IN_PLACE && quant == QUANT_PER_TENSOR;
  blk.qScale = fold ? a.scale * a.kScalar : a.scale;
  blk.oScale = fold ? a.vScalar : 1;
}

/** Per-token int8 scales are gathered beside the tile's row addresses. */
@inline export function perToken(a: AttnArgs): bool {
  return a.quant == QUANT_PER_TOKEN;
}

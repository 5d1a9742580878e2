// The attention kernels' argument struct, work-item records and per-thread
// scratch layout. The TypeScript side (src/attention/kernel-args.ts) writes the
// same fields in the same order; keep the two in step.
//
// Every tensor is addressed as base + Σ index·stride (strides in elements of
// the tensor's dtype), with the head dim contiguous. BNSD, BSND and TND are
// only different strides (TND: batch stride 0, each sequence's first token
// from the `seqs` table), so one kernel serves all layouts. A paged cache
// (blockTable ≠ 0) keeps K/V as [numBlocks, blockSize, Hkv, D]: key k0 + j of
// sequence b is slot blockTable[b, (k0 + j) / blockSize] · blockSize +
// (k0 + j) % blockSize, at base + slot·ksS + kvh·ksH (see kv-tile.ts).

/** Rows (query positions × heads of one KV group) in one Q block. */
export const RMAX: i32 = 64;
/** K/V rows in one tile (a multiple of 4). */
export const BC: i32 = 64;

/** int32 fields of one work item (see ITEM_* below). */
export const ITEM_FIELDS: i32 = 8;
export const ITEM_B: i32 = 0;
export const ITEM_KVH: i32 = 1;
/** First row of the item: row r ↔ query index r / G, head kvh·G + r % G. */
export const ITEM_ROW0: i32 = 2;
export const ITEM_ROWS: i32 = 3;
/** KV range [kvStart, kvEnd) of the item (a split-KV chunk, or the whole sequence). */
export const ITEM_KV0: i32 = 4;
export const ITEM_KV1: i32 = 5;
/** −1: write the final out/lse; s ≥ 0: write the partial (o, lse) of split slot s. */
export const ITEM_SLOT: i32 = 6;
/** KV heads of the item: 0 or 1 = the one head ITEM_KVH; n > 1 = heads ITEM_KVH … + n − 1, ITEM_ROWS rows each, one block. */
export const ITEM_NKV: i32 = 7;
/** Most KV heads one work item takes (the per-head row-address and scale arrays in scratch). */
export const NKV_MAX: i32 = 8;

/** int32 fields per sequence in the `seqs` table. */
export const SEQ_FIELDS: i32 = 4;
/** Index of the sequence's first query token along q's S axis (TND: cuSeqlensQ[b]). */
export const SEQ_Q0: i32 = 0;
/** Query tokens Sq of the sequence. */
export const SEQ_SQ: i32 = 1;
/** Index of the sequence's first key along k's S axis (TND: cuSeqlensK[b]). */
export const SEQ_K0: i32 = 2;
/** Keys Sk of the sequence (padded caches: the actual length). */
export const SEQ_SK: i32 = 3;

@unmanaged export class AttnArgs {
  /** f32 query, element strides per batch, head, token. */
  q: usize; qsB: i32; qsH: i32; qsS: i32;
  /** K and V storage (dtype kvDtype), element strides per batch, KV head, token. */
  k: usize; ksB: i32; ksH: i32; ksS: i32;
  v: usize; vsB: i32; vsH: i32; vsS: i32;
  kvDtype: i32;
  /** f32 output, strides as q. */
  out: usize; osB: i32; osH: i32; osS: i32;
  /** f32 log-sum-exp per (b, h, token); 0 when not requested. */
  lse: usize; lsB: i32; lsH: i32; lsS: i32;
  D: i32;
  G: i32;
  H: i32;
  scale: f32;
  /** > 0: s = softcap · tanh(s / softcap). */
  softcap: f32;
  causal: i32;
  /** −1: unbounded. */
  winLeft: i32;
  winRight: i32;
  /** f32 slopes at alibi + (b·alibiSB + h); 0 when absent. */
  alibi: usize; alibiSB: i32;
  /** f32 additive bias and uint8 mask (nonzero = masked out), strides per (b, h, i, j); 0 when absent. */
  bias: usize; bsB: i32; bsH: i32; bsI: i32; bsJ: i32;
  mask: usize; msB: i32; msH: i32; msI: i32; msJ: i32;
  /** int32 [B, SEQ_FIELDS] */
  seqs: usize;
  /** int32 [items, ITEM_FIELDS] */
  items: usize;
  /** Split-KV partials: o f32 [slots, H, partSq, D], lse f32 [slots, H, partSq]. */
  partO: usize;
  partLse: usize;
  partSq: i32;
  /** Per-thread scratch: thread tid owns [scratch + tid·scratchStride, +attention_scratch_bytes(D)). */
  scratch: usize;
  scratchStride: i32;
  /** Paged K/V: int32 block ids [B, btStride]; 0 = a padded cache (rows at base + b·sB + kvh·sH + s·sS). */
  blockTable: usize;
  btStride: i32;
  blockSize: i32;
  /** How stored K/V decode (src/kv/kv-quant.ts codes): QUANT_NONE … QUANT_PER_TOKEN. */
  quant: i32;
  /** Per-tensor (fp8) scales. */
  kScalar: f32;
  vScalar: f32;
  /** int8 per-channel: f32 [Hkv, D] scales and offsets; per-token: f32 [numSlots, Hkv] scales (offsets 0). */
  kScale: usize;
  vScale: usize;
  kOffset: usize;
  vOffset: usize;
  /** int8 K/V: 0 = dequantize tiles to f32; 2 or 3 = the integer path with that many int8 rows per query/probability row. */
  intRows: i32;
}

/** Dequantization modes (src/kv/kv-quant.ts KV_QUANT_CODE). */
export const QUANT_NONE: i32 = 0;
export const QUANT_PER_TENSOR: i32 = 1;
export const QUANT_PER_CHANNEL: i32 = 2;
export const QUANT_PER_TOKEN: i32 = 3;

/** D rounded up to a multiple of 4: rows in scratch are zero-padded to it. */
@inline export function padD(D: i32): i32 {
  return (D + 3) & ~3;
}

// Per-thread scratch, in bytes from the thread's base (D4 = padD(D)):
//   qs   f32 [RMAX, D4]   scale · q rows of the block
//   os   f32 [RMAX, D4]   unnormalized output accumulators
//   s    f32 [RMAX, BC]   scores, then probabilities, of the current tile
//   m, l f32 [RMAX]       running max and sum (online softmax)
//   info i32 [RMAX, 4]    per row: query index, head, first and last kept key
//   kt   f32 [BC, D4]     decoded K tile (when K is not f32 with D % 4 == 0)
//   vt   f32 [BC, D4]     decoded V tile
//   kRows, vRows usize [NKV_MAX, BC]  address of each K/V row of the tile, per KV head of the item
//   sink i32              where the touch pass's loads end up (keeps them alive)
//   kSc, vSc f32 [NKV_MAX, BC]  per-token scales of the tile's K and V rows (int8 per-token)
//   q16  i16 [2, RMAX, D4]  integer path: each query row as int8 rows packed in i16 (int-microkernel.ts)
//   p16  i16 [2, RMAX, BC]  integer path: the tile's probabilities, likewise
//   qInfo f32 [2, RMAX]   integer path: per query row, the scale of q16 and the offset term
//   pInfo f32 [2, RMAX]   integer path: per row, the scale of p16 and Σ p of the tile
//   block BLOCK_BYTES     the block being processed (block.ts Block)
export const ROW_I: i32 = 0;
export const ROW_H: i32 = 1;
export const ROW_LO: i32 = 2;
export const ROW_HI: i32 = 3;

@inline export function offQs(D4: i32): usize { return 0; }
@inline export function offOs(D4: i32): usize { return <usize>(RMAX * D4) << 2; }
@inline export function offS(D4: i32): usize { return <usize>(2 * RMAX * D4) << 2; }
@inline export function offM(D4: i32): usize { return offS(D4) + (<usize>(RMAX * BC) << 2); }
@inline export function offL(D4: i32): usize { return offM(D4) + (<usize>RMAX << 2); }
@inline export function offInfo(D4: i32): usize { return offL(D4) + (<usize>RMAX << 2); }
@inline export function offKt(D4: i32): usize { return offInfo(D4) + (<usize>(RMAX * 4) << 2); }
@inline export function offVt(D4: i32): usize { return offKt(D4) + (<usize>(BC * D4) << 2); }
@inline export function offKRows(D4: i32): usize { return offVt(D4) + (<usize>(BC * D4) << 2); }
@inline export function offVRows(D4: i32): usize { return offKRows(D4) + (<usize>(NKV_MAX * BC) << 2); }
@inline export function offSink(D4: i32): usize { return offVRows(D4) + (<usize>(NKV_MAX * BC) << 2); }
@inline export function offKSc(D4: i32): usize { return offSink(D4) + 64; }
@inline export function offVSc(D4: i32): usize { return offKSc(D4) + (<usize>(NKV_MAX * BC) << 2); }
@inline export function offQ16(D4: i32): usize { return offVSc(D4) + (<usize>(NKV_MAX * BC) << 2); }
@inline export function offP16(D4: i32): usize { return offQ16(D4) + (<usize>(2 * RMAX * D4) << 1); }
@inline export function offQInfo(D4: i32): usize { return offP16(D4) + (<usize>(2 * RMAX * BC) << 1); }
@inline export function offPInfo(D4: i32): usize { return offQInfo(D4) + (<usize>(2 * RMAX) << 2); }
@inline export function offBlock(D4: i32): usize { return offPInfo(D4) + (<usize>(2 * RMAX) << 2); }
@inline export function scratchBytes(D4: i32): usize { return offBlock(D4) + BLOCK_BYTES; }

/** Bytes reserved for the block descriptor (block.ts Block: 18 four-byte fields, rounded up). */
export const BLOCK_BYTES: usize = 128;

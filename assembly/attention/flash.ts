// FlashAttention-2 over one work item: a block of query rows of one (batch,
// KV head) against a range of that sequence's keys. Prefill (flashAttention),
// decode (increFlashAttention, FlashDecoding chunks) and paged attention
// (pagedAttention: block-table rows, quantized K/V) differ only in the work
// lists and arguments the TypeScript side builds, so all run this kernel.
//
// Rows of an item are (query index, head) pairs of one GQA group, row r ↔
// query r / G, head kvh·G + r % G: every K/V row loaded is used by all G query
// heads that share it (KV is never repeated). Rows go in blocks of RMAX; an
// item on a paged cache may instead hold the decode rows of up to NKV_MAX KV
// heads in one block (head-major), whose rows of a token are adjacent in
// memory, so one touch pass reads them as one run per token. Each block is
// described once (block.ts: its rows, its compute path) and run in three steps:
//   1. prepareRows, per row: kept key range [lo, hi] from the item's range, the sequence
//      length, causal (bottom-right: j ≤ i + Sk − Sq) and the window; the Q row
//      scaled by `scale`, zero-padded to D4, into scratch (integer path: also
//      expanded into int8 rows, int-microkernel.ts).
//   2. processTile, for each K/V tile of BC keys inside the union of the rows' ranges (tiles
//      outside it are never touched: causal/window tile skipping), with the
//      tile's row addresses from tileRows (padded strides or the block table):
//        S = Q·Kᵀ (scoreHead) → options and exclusions (scoreOptions) →
//        online softmax (softmaxUpdate) → O += P·V (accumulateHead), the
//        products head by head.
//      Many rows per head (prefill): K and V tiles are decoded into scratch
//      once (fillTile, dequantizing) and reused by every row (qkTile,
//      pvTile<f32>). Few rows (decode, ≤ STREAM_ROWS): a touch pass over the
//      K tile's lines before Q·Kᵀ and over the V tile's before P·V (kv-tile.ts,
//      touchRows: wasm has no prefetch), then
//      f32/bf16/f16/fp8 rows are read in place, widened as loaded (qkStream,
//      pvTile; fp8's per-tensor scales folded into q and into 1 / l); int8 on
//      the dequantize path and D % 4 ≠ 0 are decoded into scratch. int8 with
//      intRows = 2 | 3 takes the integer path at any row count (qkInt / pvInt
//      on the int8 rows in place).
//   3. writeRows: o = O / l and lse = m + ln l, or o = 0 and lse = −Infinity for a row that
//      kept no key — to the output, or to split slot `slot`'s partials.
// Workspace is the thread's scratch only: O(RMAX·D + BC·D), never Sq×Sk.

import {
  AttnArgs, BC, ITEM_B, ITEM_FIELDS, ITEM_KV0, ITEM_KV1, ITEM_KVH, ITEM_NKV, ITEM_ROW0, ITEM_ROWS, ITEM_SLOT, QUANT_PER_CHANNEL,
  RMAX, ROW_H, ROW_HI, ROW_I, ROW_LO,
  offBlock, offInfo, offKRows, offKSc, offKt, offL, offM, offOs, offP16, offPInfo, offQ16, offQInfo, offQs, offS, offSink, offVRows, offVSc, offVt,
  padD, scratchBytes,
} from "./args";
import { Block, PATH_IN_PLACE, PATH_INT, PATH_STREAM, PATH_TILE, initBlock, perToken } from "./block";
import { pvInt2, pvInt3, qkInt2, qkInt3, quantizeProbs, quantizeRow } from "./int-microkernel";
import { fillTile, tileRows, touchRows } from "./kv-tile";
import { pvTile, qkStream, qkTile } from "./microkernel";
import { scoreOptions, softmaxUpdate } from "./scores";
import { DT_BF16, DT_F16, DT_F32, DT_FP8E4M3, dtypeBytes } from "../tensor/dtype";

/** Bytes of per-thread scratch the attention kernels need for head dim D. */
export function attention_scratch_bytes(D: i32): i32 {
  return <i32>scratchBytes(padD(D));
}

/** Loads scale · q[row] (D floats) into dst, zero-padded to D4. */
@inline function loadQRow(src: usize, D: i32, D4: i32, scale: f32, dst: usize): void {
  const sv = f32x4.splat(scale);
  let e = 0;
  for (; e + 4 <= D; e += 4) v128.store(dst + (<usize>e << 2), f32x4.mul(v128.load(src + (<usize>e << 2)), sv));
  for (; e < D; e++) store<f32>(dst + (<usize>e << 2), load<f32>(src + (<usize>e << 2)) * scale);
  for (; e < D4; e++) store<f32>(dst + (<usize>e << 2), 0);
}

/**
 * The integer path's query rows: q' = (scale · q) · kScale_d (per-channel K;
 * in place in qs), expanded into int8 rows packed in q16 (hi, and lo when
 * `lo`), with qInfo[r] = the hi unit and qInfo[RMAX + r] = Σ_d q'_d · kOffset_d
 * (the offset term of every score of the row; 0 without offsets). D % 8 == 0.
 */
function prepareIntQuery(qs: usize, R: i32, D: i32, D4: i32, chScale: usize, chOffset: usize, lo: bool, q16: usize, qInfo: usize): void {
  const qStride = <usize>D4 << 2;
  const cStride = <usize>D4 << 1;
  for (let r = 0; r < R; r++) {
    const row = qs + <usize>r * qStride;
    let off = f32x4.splat(0);
    if (chScale != 0) {
      for (let e = 0; e < D; e += 4) {
        const p = row + (<usize>e << 2);
        const x = f32x4.mul(v128.load(p), v128.load(chScale + (<usize>e << 2)));
        v128.store(p, x);
        off = f32x4.add(off, f32x4.mul(x, v128.load(chOffset + (<usize>e << 2))));
      }
      off = f32x4.add(off, f32x4.shuffle(off, off, 2, 3, 0, 1));
      off = f32x4.add(off, f32x4.shuffle(off, off, 1, 0, 3, 2));
    }
    store<f32>(qInfo + ((<usize>RMAX + <usize>r) << 2), f32x4.extract_lane(off, 0));
    const hi = q16 + <usize>r * cStride;
    store<f32>(qInfo + (<usize>r << 2), quantizeRow(row, D, hi, lo ? hi + <usize>RMAX * cStride : 0));
  }
}

/** S = Q·Kᵀ on K rows in place, by stored dtype (microkernel.ts load4). */
function qkInPlace(dt: i32, qs: usize, R: i32, D4: i32, kRows: usize, n: i32, s: usize): void {
  if (dt == DT_F32) qkStream<f32>(qs, R, D4, kRows, n, s);
  else if (dt == DT_BF16) qkStream<u16>(qs, R, D4, kRows, n, s);
  else if (dt == DT_F16) qkStream<i16>(qs, R, D4, kRows, n, s);
  else if (dt == DT_FP8E4M3) qkStream<u8>(qs, R, D4, kRows, n, s);
  else qkStream<i8>(qs, R, D4, kRows, n, s);
}

/** O += P·V on V rows in place, by stored dtype. */
function pvInPlace(dt: i32, p: usize, R: i32, vRows: usize, n: i32, D4: i32, os: usize): void {
  if (dt == DT_F32) pvTile<f32>(p, R, vRows, n, D4, os);
  else if (dt == DT_BF16) pvTile<u16>(p, R, vRows, n, D4, os);
  else if (dt == DT_F16) pvTile<i16>(p, R, vRows, n, D4, os);
  else if (dt == DT_FP8E4M3) pvTile<u8>(p, R, vRows, n, D4, os);
  else pvTile<i8>(p, R, vRows, n, D4, os);
}

/** Writes o = acc · inv (D floats; never past D: the next row may belong to another thread). */
@inline function storeORow(acc: usize, D: i32, inv: f32, dst: usize): void {
  const iv = f32x4.splat(inv);
  let e = 0;
  for (; e + 4 <= D; e += 4) v128.store(dst + (<usize>e << 2), f32x4.mul(v128.load(acc + (<usize>e << 2)), iv));
  for (; e < D; e++) store<f32>(dst + (<usize>e << 2), load<f32>(acc + (<usize>e << 2)) * inv);
}

// ---- 1. Rows ------------------------------------------------------------------

/**
 * Step 1: per row, the kept key range [lo, hi] (the item's range, the sequence
 * length, causal and window) into info, scale · q into qs, fresh softmax state;
 * the union of the ranges and the range every row keeps into blk. On the
 * integer path, also the rows' int8 expansions.
 */
function prepareRows(a: AttnArgs, ws: usize, blk: Block): void {
  const D = a.D;
  const D4 = padD(D);
  const G = a.G;
  const Rg = blk.Rg;
  const qs = ws + offQs(D4);
  const os = ws + offOs(D4);
  const m = ws + offM(D4);
  const l = ws + offL(D4);
  const info = ws + offInfo(D4);
  let unionLo = i32.MAX_VALUE, unionHi = -1;
  let maxLo = -1, minHi = i32.MAX_VALUE;
  for (let r = 0; r < blk.R; r++) {
    const g = r / Rg;
    const row = blk.row0 + r - g * Rg;
    const i = row / G;
    const h = (blk.kvh0 + g) * G + (row - i * G);
    const diag = i + blk.diagShift;
    let lo = blk.kv0;
    let hi = blk.kvEnd - 1;
    if (a.causal != 0) hi = min(hi, diag);
    if (a.winRight >= 0) hi = min(hi, diag + a.winRight);
    if (a.winLeft >= 0) lo = max(lo, diag - a.winLeft);
    const ri = info + (<usize>r << 4);
    store<i32>(ri, i, ROW_I << 2);
    store<i32>(ri, h, ROW_H << 2);
    store<i32>(ri, lo, ROW_LO << 2);
    store<i32>(ri, hi, ROW_HI << 2);
    if (lo <= hi) {
      unionLo = min(unionLo, lo);
      unionHi = max(unionHi, hi);
    }
    maxLo = max(maxLo, lo);
    minHi = min(minHi, hi);
    const qRow = a.q + ((<usize>blk.b * <usize>a.qsB + <usize>h * <usize>a.qsH + <usize>(blk.q0 + i) * <usize>a.qsS) << 2);
    loadQRow(qRow, D, D4, blk.qScale, qs + <usize>r * (<usize>D4 << 2));
    store<f32>(m + (<usize>r << 2), -Infinity);
    store<f32>(l + (<usize>r << 2), 0);
    memory.fill(os + <usize>r * (<usize>D4 << 2), 0, <usize>D4 << 2);
  }
  blk.unionLo = unionLo;
  blk.unionHi = unionHi;
  blk.maxLo = maxLo;
  blk.minHi = minHi;
  if (blk.path == PATH_INT) {
    const perChannel = a.quant == QUANT_PER_CHANNEL;
    for (let g = 0; g < blk.nkv; g++) {
      const chOff = <usize>(blk.kvh0 + g) * <usize>D << 2;
      prepareIntQuery(qs + <usize>g * <usize>Rg * (<usize>D4 << 2), Rg, D, D4, perChannel ? a.kScale + chOff : 0, perChannel ? a.kOffset + chOff : 0, a.intRows == 3,
        ws + offQ16(D4) + <usize>g * c16Rows(Rg, D4), ws + offQInfo(D4) + <usize>g * infoRows(Rg));
    }
  }
}

// ---- 2. K/V tiles ---------------------------------------------------------------
// Head g of a block owns these slices of the per-head scratch arrays.

@inline function headRows(g: i32): usize { return <usize>g * (<usize>BC << 2); } // kRows, vRows, kSc, vSc
@inline function sRows(Rg: i32): usize { return <usize>Rg * (<usize>BC << 2); } // s
@inline function fRows(Rg: i32, D4: i32): usize { return <usize>Rg * (<usize>D4 << 2); } // qs, os
@inline function c16Rows(Rg: i32, D4: i32): usize { return <usize>Rg * (<usize>D4 << 1); } // q16
@inline function p16Rows(Rg: i32): usize { return <usize>Rg * (<usize>BC << 1); } // p16
@inline function infoRows(Rg: i32): usize { return <usize>Rg << 2; } // qInfo, pInfo

/**
 * The addresses (and int8 per-token scales) of keys [t0, t0 + n) for each
 * head: rows[g·BC + j] in kRows and vRows (tileRows).
 */
function loadTileRows(a: AttnArgs, ws: usize, blk: Block, t0: i32, n: i32): void {
  const D4 = padD(a.D);
  const kRows = ws + offKRows(D4), vRows = ws + offVRows(D4);
  const kTok: usize = perToken(a) ? a.kScale : 0;
  const vTok: usize = perToken(a) ? a.vScale : 0;
  for (let g = 0; g < blk.nkv; g++) {
    const at = headRows(g);
    tileRows(a, a.k, a.ksB, a.ksH, a.ksS, blk.b, blk.kvh0 + g, blk.k0, t0, n, kRows + at, kTok, ws + offKSc(D4) + at);
    tileRows(a, a.v, a.vsB, a.vsH, a.vsS, blk.b, blk.kvh0 + g, blk.k0, t0, n, vRows + at, vTok, ws + offVSc(D4) + at);
  }
}

/**
 * On the streaming and integer paths (decode reads K/V from DRAM): a touch
 * pass (kv-tile.ts) over the n rows of every head at `rows` (the tile's
 * kRows or vRows). The heads' rows of one token are one run when the head
 * stride is D (paged NHD, BSND): one pass then reads each token's rows of all
 * heads, so every 4 KiB page serves all of them. K is touched before Q·Kᵀ and
 * V before P·V, each just before its product, so that one operand's tile of
 * one head (BC rows, 32 KiB in f32 at D = 128) can stay in a 48 KiB L1 for its
 * product; touching both first (64 KiB) left K in L2. The gain measured so
 * far is within the shared machine's noise (BENCHMARKS.md, attention).
 */
function touchTile(a: AttnArgs, ws: usize, blk: Block, rows: usize, headStride: i32, n: i32): void {
  if (blk.path == PATH_TILE) return;
  const nkv = blk.nkv;
  const rowBytes = <usize>a.D * <usize>dtypeBytes(a.kvDtype);
  let sink = 0;
  if (nkv > 1 && headStride == a.D) sink = touchRows(rows, n, <usize>nkv * rowBytes);
  else {
    for (let g = 0; g < nkv; g++) sink ^= touchRows(rows + headRows(g), n, rowBytes);
  }
  const at = ws + offSink(padD(a.D));
  store<i32>(at, load<i32>(at) ^ sink);
}

/** S = Q·Kᵀ for head g's Rg rows over the tile's n keys, on the block's path. */
function scoreHead(a: AttnArgs, ws: usize, blk: Block, g: i32, n: i32): void {
  const D = a.D;
  const D4 = padD(D);
  const Rg = blk.Rg;
  const kRows = ws + offKRows(D4) + headRows(g);
  const kSc = ws + offKSc(D4) + headRows(g);
  const sg = ws + offS(D4) + <usize>g * sRows(Rg);
  const qg = ws + offQs(D4) + <usize>g * fRows(Rg, D4);
  if (blk.path == PATH_INT) {
    const q16 = ws + offQ16(D4) + <usize>g * c16Rows(Rg, D4);
    const qInfo = ws + offQInfo(D4) + <usize>g * infoRows(Rg);
    const tokSc: usize = perToken(a) ? kSc : 0;
    if (a.intRows == 3) qkInt3(q16, Rg, D, D4, kRows, n, qInfo, tokSc, sg);
    else qkInt2(q16, Rg, D, D4, kRows, n, qInfo, tokSc, sg);
  } else if (blk.path == PATH_IN_PLACE) {
    qkInPlace(a.kvDtype, qg, Rg, D4, kRows, n, sg);
  } else {
    const perChannel = a.quant == QUANT_PER_CHANNEL;
    const chOff = <usize>(blk.kvh0 + g) * <usize>D << 2;
    fillTile(a.kvDtype, a.quant, kRows, n, D, D4, ws + offKt(D4), a.kScalar, perChannel ? a.kScale + chOff : 0, perChannel ? a.kOffset + chOff : 0, kSc);
    if (blk.path == PATH_STREAM) qkStream<f32>(qg, Rg, D4, kRows, n, sg);
    else qkTile(qg, Rg, D4, kRows, (n + 3) & ~3, sg);
  }
}

/** O += P·V for head g's Rg rows over the tile's n keys (P = the probabilities in s). */
function accumulateHead(a: AttnArgs, ws: usize, blk: Block, g: i32, n: i32): void {
  const D = a.D;
  const D4 = padD(D);
  const Rg = blk.Rg;
  const vRows = ws + offVRows(D4) + headRows(g);
  const og = ws + offOs(D4) + <usize>g * fRows(Rg, D4);
  const sg = ws + offS(D4) + <usize>g * sRows(Rg);
  const perChannel = a.quant == QUANT_PER_CHANNEL;
  const chOff = <usize>(blk.kvh0 + g) * <usize>D << 2;
  const vChScale: usize = perChannel ? a.vScale + chOff : 0;
  const vChOffset: usize = perChannel ? a.vOffset + chOff : 0;
  if (blk.path == PATH_INT) {
    const p16 = ws + offP16(D4) + <usize>g * p16Rows(Rg);
    const pInfo = ws + offPInfo(D4) + <usize>g * infoRows(Rg);
    if (a.intRows == 3) pvInt3(p16, Rg, vRows, n, D, D4, pInfo, vChScale, vChOffset, og);
    else pvInt2(p16, Rg, vRows, n, D, D4, pInfo, vChScale, vChOffset, og);
  } else if (blk.path == PATH_IN_PLACE) {
    pvInPlace(a.kvDtype, sg, Rg, vRows, n, D4, og);
  } else {
    fillTile(a.kvDtype, a.quant, vRows, n, D, D4, ws + offVt(D4), a.vScalar, vChScale, vChOffset, ws + offVSc(D4) + headRows(g));
    pvTile<f32>(sg, Rg, vRows, n, D4, og);
  }
}

/**
 * Step 2 for the tile of keys [t0, t0 + n): S = Q·Kᵀ head by head → score
 * options and exclusions → online softmax → (integer path: P quantized) →
 * O += P·V head by head.
 */
function processTile(a: AttnArgs, ws: usize, blk: Block, t0: i32, n: i32): void {
  const D4 = padD(a.D);
  const n4 = (n + 3) & ~3;
  const s = ws + offS(D4);
  loadTileRows(a, ws, blk, t0, n);
  touchTile(a, ws, blk, ws + offKRows(D4), a.ksH, n);
  for (let g = 0; g < blk.nkv; g++) scoreHead(a, ws, blk, g, n);
  const full = t0 >= blk.maxLo && t0 + n - 1 <= blk.minHi;
  scoreOptions(a, blk.b, blk.diagShift, s, ws + offInfo(D4), blk.R, t0, n, n4, full);
  softmaxUpdate(s, blk.R, n4, ws + offM(D4), ws + offL(D4), ws + offOs(D4), D4);
  if (blk.path == PATH_INT) {
    const Rg = blk.Rg;
    for (let g = 0; g < blk.nkv; g++) {
      const vSc: usize = perToken(a) ? ws + offVSc(D4) + headRows(g) : 0;
      quantizeProbs(s + <usize>g * sRows(Rg), Rg, n4, vSc, ws + offP16(D4) + <usize>g * p16Rows(Rg), a.intRows == 3, ws + offPInfo(D4) + <usize>g * infoRows(Rg));
    }
  }
  touchTile(a, ws, blk, ws + offVRows(D4), a.vsH, n);
  for (let g = 0; g < blk.nkv; g++) accumulateHead(a, ws, blk, g, n);
}

// ---- 3. Output ------------------------------------------------------------------

/**
 * Step 3: o = O / l and lse = m + ln l, or o = 0 and lse = −Infinity for a row
 * that kept no key — to the output, or to split slot blk.slot's partials.
 */
function writeRows(a: AttnArgs, ws: usize, blk: Block): void {
  const D = a.D;
  const D4 = padD(D);
  const os = ws + offOs(D4);
  const m = ws + offM(D4);
  const l = ws + offL(D4);
  const info = ws + offInfo(D4);
  const b = blk.b;
  for (let r = 0; r < blk.R; r++) {
    const ri = info + (<usize>r << 4);
    const i = load<i32>(ri, ROW_I << 2);
    const h = load<i32>(ri, ROW_H << 2);
    let oDst: usize, lseDst: usize;
    if (blk.slot < 0) {
      const q = <usize>(blk.q0 + i);
      oDst = a.out + ((<usize>b * <usize>a.osB + <usize>h * <usize>a.osH + q * <usize>a.osS) << 2);
      lseDst = a.lse == 0 ? 0 : a.lse + ((<usize>b * <usize>a.lsB + <usize>h * <usize>a.lsH + q * <usize>a.lsS) << 2);
    } else {
      const prow = (<usize>blk.slot * <usize>a.H + <usize>h) * <usize>a.partSq + <usize>i;
      oDst = a.partO + ((prow * <usize>D) << 2);
      lseDst = a.partLse + (prow << 2);
    }
    const sum = load<f32>(l + (<usize>r << 2));
    if (sum > 0) {
      storeORow(os + <usize>r * (<usize>D4 << 2), D, blk.oScale / sum, oDst);
      if (lseDst != 0) store<f32>(lseDst, load<f32>(m + (<usize>r << 2)) + Mathf.log(sum));
    } else {
      memory.fill(oDst, 0, <usize>D << 2);
      if (lseDst != 0) store<f32>(lseDst, -Infinity);
    }
  }
}

/** One block (block.ts): the three steps. */
function processBlock(a: AttnArgs, ws: usize, blk: Block): void {
  prepareRows(a, ws, blk);
  for (let t0 = blk.unionLo; t0 <= blk.unionHi; t0 += BC) processTile(a, ws, blk, t0, min(BC, blk.unionHi + 1 - t0));
  writeRows(a, ws, blk);
}

/**
 * Work item `item` of the list at args.items: rows [row0, row0 + rows) of (b, kvh)
 * over keys [kv0, kv1), or, with nkv > 1, those rows of each of the KV heads
 * kvh … kvh + nkv − 1 in one block (nkv·rows ≤ RMAX).
 */
export function attention_task(item: i32, tid: i32, args: usize): void {
  const a = changetype<AttnArgs>(args);
  const it = a.items + (<usize>(item * ITEM_FIELDS) << 2);
  const b = load<i32>(it, ITEM_B << 2);
  const kvh = load<i32>(it, ITEM_KVH << 2);
  const row0 = load<i32>(it, ITEM_ROW0 << 2);
  const rows = load<i32>(it, ITEM_ROWS << 2);
  const kv0 = load<i32>(it, ITEM_KV0 << 2);
  const kv1 = load<i32>(it, ITEM_KV1 << 2);
  const slot = load<i32>(it, ITEM_SLOT << 2);
  const nkv = load<i32>(it, ITEM_NKV << 2);
  const ws = a.scratch + <usize>tid * <usize>a.scratchStride;
  const blk = changetype<Block>(ws + offBlock(padD(a.D)));
  if (nkv > 1) {
    initBlock(a, blk, b, kvh, nkv, row0, rows, kv0, kv1, slot);
    processBlock(a, ws, blk);
  } else {
    for (let r = 0; r < rows; r += RMAX) {
      initBlock(a, blk, b, kvh, 1, row0 + r, min(RMAX, rows - r), kv0, kv1, slot);
      processBlock(a, ws, blk);
    }
  }
}

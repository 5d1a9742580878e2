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
// memory, so one touch pass reads them as one run per token. For each block:
//   1. per row: kept key range [lo, hi] from the item's range, the sequence
//      length, causal (bottom-right: j ≤ i + Sk − Sq) and the window; the Q row
//      scaled by `scale`, zero-padded to D4, into scratch (integer path: also
//      expanded into int8 rows, int-microkernel.ts).
//   2. for each K/V tile of BC keys inside the union of the rows' ranges (tiles
//      outside it are never touched: causal/window tile skipping), with the
//      tile's row addresses from tileRows (padded strides or the block table):
//        S = Q·Kᵀ → options and exclusions (scoreOptions) → online softmax
//        (softmaxUpdate) → O += P·V, the products head by head.
//      Many rows per head (prefill): K and V tiles are decoded into scratch
//      once (fillTile, dequantizing) and reused by every row (qkTile,
//      pvTile<f32>). Few rows (decode, ≤ STREAM_ROWS): a touch pass over the
//      tile's lines first (kv-tile.ts, touchRows: wasm has no prefetch), then
//      f32/bf16/f16/fp8 rows are read in place, widened as loaded (qkStream,
//      pvTile; fp8's per-tensor scales folded into q and into 1 / l); int8 on
//      the dequantize path and D % 4 ≠ 0 are decoded into scratch. int8 with
//      intRows = 2 | 3 takes the integer path at any row count (qkInt / pvInt
//      on the int8 rows in place).
//   3. o = O / l and lse = m + ln l, or o = 0 and lse = −Infinity for a row that
//      kept no key — to the output, or to split slot `slot`'s partials.
// Workspace is the thread's scratch only: O(RMAX·D + BC·D), never Sq×Sk.

import {
  AttnArgs, BC, ITEM_B, ITEM_FIELDS, ITEM_KV0, ITEM_KV1, ITEM_KVH, ITEM_NKV, ITEM_ROW0, ITEM_ROWS, ITEM_SLOT, QUANT_NONE, QUANT_PER_CHANNEL, QUANT_PER_TENSOR,
  QUANT_PER_TOKEN, RMAX, ROW_H, ROW_HI, ROW_I, ROW_LO, SEQ_FIELDS, SEQ_K0, SEQ_Q0, SEQ_SK, SEQ_SQ,
  offInfo, offKRows, offKSc, offKt, offL, offM, offOs, offP16, offPInfo, offQ16, offQInfo, offQs, offS, offSink, offVRows, offVSc, offVt,
  padD, scratchBytes,
} from "./args";
import { pvInt2, pvInt3, qkInt2, qkInt3, quantizeProbs, quantizeRow } from "./int-microkernel";
import { fillTile, tileRows, touchRows } from "./kv-tile";
import { pvTile, qkStream, qkTile } from "./microkernel";
import { scoreOptions, softmaxUpdate } from "./scores";
import { DT_BF16, DT_F16, DT_F32, DT_FP8E4M3, dtypeBytes } from "../tensor/dtype";

/** Row blocks up to this size take the streaming (decode) path. */
const STREAM_ROWS = 8;

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

/**
 * One block of rows: Rg rows (row0 …) of each of the nkv KV heads kvh0 … kvh0 + nkv − 1
 * (R = nkv·Rg ≤ RMAX rows in all, head-major: row r belongs to head kvh0 + r / Rg).
 * Several heads share a block only on the streaming path over a cache whose heads
 * are adjacent in memory (paged NHD): one touch pass then reads each token's
 * rows of all nkv heads as one contiguous run, so every 4 KiB page a tile
 * touches serves all of its heads (against one page walk per head and row).
 */
function processBlock(a: AttnArgs, ws: usize, b: i32, kvh0: i32, nkv: i32, row0: i32, Rg: i32, kv0: i32, kv1: i32, slot: i32): void {
  const D = a.D;
  const D4 = padD(D);
  const G = a.G;
  const R = nkv * Rg;
  const seq = a.seqs + (<usize>(b * SEQ_FIELDS) << 2);
  const q0 = load<i32>(seq, SEQ_Q0 << 2);
  const Sq = load<i32>(seq, SEQ_SQ << 2);
  const k0 = load<i32>(seq, SEQ_K0 << 2);
  const Sk = load<i32>(seq, SEQ_SK << 2);
  const diagShift = Sk - Sq;

  const qs = ws + offQs(D4);
  const os = ws + offOs(D4);
  const s = ws + offS(D4);
  const m = ws + offM(D4);
  const l = ws + offL(D4);
  const info = ws + offInfo(D4);

  // In place, fp8's per-tensor scales fold into q (K) and into the final 1 / l (V).
  const foldScalars = a.quant == QUANT_PER_TENSOR && a.intRows == 0 && Rg <= STREAM_ROWS && D == D4;
  const qScale: f32 = foldScalars ? a.scale * a.kScalar : a.scale;
  const oScale: f32 = foldScalars ? a.vScalar : 1;

  // 1. Rows: kept ranges, scaled Q, fresh softmax state.
  let unionLo = i32.MAX_VALUE, unionHi = -1; // union of the rows' ranges
  let maxLo = -1, minHi = i32.MAX_VALUE; // a tile inside [maxLo, minHi] needs no range exclusion
  const kvEnd = min(kv1, Sk);
  for (let r = 0; r < R; r++) {
    const g = r / Rg;
    const row = row0 + r - g * Rg;
    const i = row / G;
    const h = (kvh0 + g) * G + (row - i * G);
    const diag = i + diagShift;
    let lo = kv0;
    let hi = kvEnd - 1;
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
    const qRow = a.q + ((<usize>b * <usize>a.qsB + <usize>h * <usize>a.qsH + <usize>(q0 + i) * <usize>a.qsS) << 2);
    loadQRow(qRow, D, D4, qScale, qs + <usize>r * (<usize>D4 << 2));
    store<f32>(m + (<usize>r << 2), -Infinity);
    store<f32>(l + (<usize>r << 2), 0);
    memory.fill(os + <usize>r * (<usize>D4 << 2), 0, <usize>D4 << 2);
  }

  // 2. K/V tiles over the union of the kept ranges.
  const kt = ws + offKt(D4);
  const vt = ws + offVt(D4);
  const dt = a.kvDtype;
  const quant = a.quant;
  const eb = <usize>dtypeBytes(dt);
  const rowBytes = <usize>D * eb;
  const perToken = quant == QUANT_PER_TOKEN;
  const perChannel = quant == QUANT_PER_CHANNEL;
  const kTok: usize = perToken ? a.kScale : 0;
  const vTok: usize = perToken ? a.vScale : 0;
  // Few rows per head (decode: the G heads × Sq queries of one KV head) → stream: K/V
  // read in place after a touch pass. Many rows (prefill) → tiles decoded
  // into scratch once and reused by every row. int8 with intRows → integer path.
  const stream = Rg <= STREAM_ROWS;
  const intRows = a.intRows;
  // In place: f32, bf16, f16 and fp8 (its per-tensor scales folded into q and o) rows of D4 elements.
  const inPlace = intRows == 0 && stream && D == D4 && (quant == QUANT_NONE || quant == QUANT_PER_TENSOR);
  // The heads' rows of one token are one run when the head stride is D (paged NHD, BSND).
  const adjacent = nkv > 1 && a.ksH == D && a.vsH == D;
  const q16 = ws + offQ16(D4);
  const p16 = ws + offP16(D4);
  const qInfo = ws + offQInfo(D4);
  const pInfo = ws + offPInfo(D4);
  const rowStride = <usize>D4 << 2; // f32 rows of qs, os
  const sRows = <usize>Rg * (<usize>BC << 2); // one head's block of s
  const c16Rows = <usize>Rg * (<usize>D4 << 1); // one head's block of q16
  const p16Rows = <usize>Rg * (<usize>BC << 1); // one head's block of p16
  const infoRows = <usize>Rg << 2; // one head's block of qInfo / pInfo
  if (intRows != 0) {
    for (let g = 0; g < nkv; g++) {
      const chOff = <usize>(kvh0 + g) * <usize>D << 2;
      prepareIntQuery(qs + <usize>g * <usize>Rg * rowStride, Rg, D, D4, perChannel ? a.kScale + chOff : 0, perChannel ? a.kOffset + chOff : 0, intRows == 3, q16 + <usize>g * c16Rows, qInfo + <usize>g * infoRows);
    }
  }
  let sink = 0;
  for (let t0 = unionLo; t0 <= unionHi; t0 += BC) {
    const n = min(BC, unionHi + 1 - t0);
    const n4 = (n + 3) & ~3;
    for (let g = 0; g < nkv; g++) {
      const at = <usize>g * (<usize>BC << 2);
      tileRows(a, a.k, a.ksB, a.ksH, a.ksS, b, kvh0 + g, k0, t0, n, ws + offKRows(D4) + at, kTok, ws + offKSc(D4) + at);
      tileRows(a, a.v, a.vsB, a.vsH, a.vsS, b, kvh0 + g, k0, t0, n, ws + offVRows(D4) + at, vTok, ws + offVSc(D4) + at);
    }
    // Decode streams K/V from DRAM: touch the tile's lines first (kv-tile.ts).
    if (stream || intRows != 0) {
      if (adjacent) sink ^= touchRows(ws + offKRows(D4), n, <usize>nkv * rowBytes) ^ touchRows(ws + offVRows(D4), n, <usize>nkv * rowBytes);
      else {
        for (let g = 0; g < nkv; g++) {
          const at = <usize>g * (<usize>BC << 2);
          sink ^= touchRows(ws + offKRows(D4) + at, n, rowBytes) ^ touchRows(ws + offVRows(D4) + at, n, rowBytes);
        }
      }
    }
    // S = Q·Kᵀ, head by head.
    for (let g = 0; g < nkv; g++) {
      const kRows = ws + offKRows(D4) + <usize>g * (<usize>BC << 2);
      const kSc = ws + offKSc(D4) + <usize>g * (<usize>BC << 2);
      const sg = s + <usize>g * sRows;
      const qg = qs + <usize>g * <usize>Rg * rowStride;
      if (intRows == 3) qkInt3(q16 + <usize>g * c16Rows, Rg, D, D4, kRows, n, qInfo + <usize>g * infoRows, kTok != 0 ? kSc : 0, sg);
      else if (intRows != 0) qkInt2(q16 + <usize>g * c16Rows, Rg, D, D4, kRows, n, qInfo + <usize>g * infoRows, kTok != 0 ? kSc : 0, sg);
      else if (inPlace) qkInPlace(dt, qg, Rg, D4, kRows, n, sg);
      else {
        const chOff = <usize>(kvh0 + g) * <usize>D << 2;
        fillTile(dt, quant, kRows, n, D, D4, kt, a.kScalar, perChannel ? a.kScale + chOff : 0, perChannel ? a.kOffset + chOff : 0, kSc);
        if (stream) qkStream<f32>(qg, Rg, D4, kRows, n, sg);
        else qkTile(qg, Rg, D4, kRows, n4, sg);
      }
    }
    const full = t0 >= maxLo && t0 + n - 1 <= minHi;
    scoreOptions(a, b, diagShift, s, info, R, t0, n, n4, full);
    softmaxUpdate(s, R, n4, m, l, os, D4);
    // O += P·V, head by head.
    if (intRows != 0) {
      for (let g = 0; g < nkv; g++) {
        const vSc = ws + offVSc(D4) + <usize>g * (<usize>BC << 2);
        quantizeProbs(s + <usize>g * sRows, Rg, n4, vTok != 0 ? vSc : 0, p16 + <usize>g * p16Rows, intRows == 3, pInfo + <usize>g * infoRows);
      }
    }
    for (let g = 0; g < nkv; g++) {
      const vRows = ws + offVRows(D4) + <usize>g * (<usize>BC << 2);
      const vSc = ws + offVSc(D4) + <usize>g * (<usize>BC << 2);
      const og = os + <usize>g * <usize>Rg * rowStride;
      const sg = s + <usize>g * sRows;
      const chOff = <usize>(kvh0 + g) * <usize>D << 2;
      const vChScale: usize = perChannel ? a.vScale + chOff : 0;
      const vChOffset: usize = perChannel ? a.vOffset + chOff : 0;
      if (intRows == 3) pvInt3(p16 + <usize>g * p16Rows, Rg, vRows, n, D, D4, pInfo + <usize>g * infoRows, vChScale, vChOffset, og);
      else if (intRows != 0) pvInt2(p16 + <usize>g * p16Rows, Rg, vRows, n, D, D4, pInfo + <usize>g * infoRows, vChScale, vChOffset, og);
      else if (inPlace) pvInPlace(dt, sg, Rg, vRows, n, D4, og);
      else {
        fillTile(dt, quant, vRows, n, D, D4, vt, a.vScalar, vChScale, vChOffset, vSc);
        pvTile<f32>(sg, Rg, vRows, n, D4, og);
      }
    }
  }
  store<i32>(ws + offSink(D4), sink);

  // 3. Normalize and write.
  for (let r = 0; r < R; r++) {
    const ri = info + (<usize>r << 4);
    const i = load<i32>(ri, ROW_I << 2);
    const h = load<i32>(ri, ROW_H << 2);
    let oDst: usize, lseDst: usize;
    if (slot < 0) {
      oDst = a.out + ((<usize>b * <usize>a.osB + <usize>h * <usize>a.osH + <usize>(q0 + i) * <usize>a.osS) << 2);
      lseDst = a.lse == 0 ? 0 : a.lse + ((<usize>b * <usize>a.lsB + <usize>h * <usize>a.lsH + <usize>(q0 + i) * <usize>a.lsS) << 2);
    } else {
      const prow = (<usize>slot * <usize>a.H + <usize>h) * <usize>a.partSq + <usize>i;
      oDst = a.partO + ((prow * <usize>D) << 2);
      lseDst = a.partLse + (prow << 2);
    }
    const sum = load<f32>(l + (<usize>r << 2));
    if (sum > 0) {
      storeORow(os + <usize>r * (<usize>D4 << 2), D, oScale / sum, oDst);
      if (lseDst != 0) store<f32>(lseDst, load<f32>(m + (<usize>r << 2)) + Mathf.log(sum));
    } else {
      memory.fill(oDst, 0, <usize>D << 2);
      if (lseDst != 0) store<f32>(lseDst, -Infinity);
    }
  }
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
  if (nkv > 1) processBlock(a, ws, b, kvh, nkv, row0, rows, kv0, kv1, slot);
  else for (let r = 0; r < rows; r += RMAX) processBlock(a, ws, b, kvh, 1, row0 + r, min(RMAX, rows - r), kv0, kv1, slot);
}

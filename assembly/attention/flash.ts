// FlashAttention-2 over one work item: a block of query rows of one (batch,
// KV head) against a range of that sequence's keys. Prefill (flashAttention)
// and decode (increFlashAttention, FlashDecoding chunks) differ only in the
// work lists the TypeScript side builds, so both run this kernel.
//
// Rows of an item are (query index, head) pairs of one GQA group, row r ↔
// query r / G, head kvh·G + r % G: every K/V row loaded is used by all G query
// heads that share it (KV is never repeated). Rows go in blocks of RMAX; for
// each block:
//   1. per row: kept key range [lo, hi] from the item's range, the sequence
//      length, causal (bottom-right: j ≤ i + Sk − Sq) and the window; the Q row
//      scaled by `scale`, zero-padded to D4, into scratch.
//   2. for each K/V tile of BC keys inside the union of the rows' ranges (tiles
//      outside it are never touched: causal/window tile skipping):
//        S = Q·Kᵀ → options and exclusions (scoreOptions) → online softmax
//        (softmaxUpdate) → O += P·V.
//      Many rows (prefill): K and V tiles are decoded into scratch once
//      (fillTile) and reused by every row (qkTile, pvTile<f32>). Few rows
//      (decode, ≤ STREAM_ROWS): f32/bf16 K/V are read in place (qkStream,
//      pvTile<f32 | u16>) after a touch pass over the tile's lines (kv-tile.ts,
//      touchRows: wasm has no prefetch); f16 or D % 4 ≠ 0 decode into scratch.
//   3. o = O / l and lse = m + ln l, or o = 0 and lse = −Infinity for a row that
//      kept no key — to the output, or to split slot `slot`'s partials.
// Workspace is the thread's scratch only: O(RMAX·D + BC·D), never Sq×Sk.

import {
  AttnArgs, BC, ITEM_B, ITEM_FIELDS, ITEM_KV0, ITEM_KV1, ITEM_KVH, ITEM_ROW0, ITEM_ROWS, ITEM_SLOT, RMAX,
  ROW_H, ROW_HI, ROW_I, ROW_LO, SEQ_FIELDS, SEQ_K0, SEQ_Q0, SEQ_SK, SEQ_SQ,
  offInfo, offKRows, offKt, offL, offM, offOs, offQs, offS, offSink, offVRows, offVt, padD, scratchBytes,
} from "./args";
import { fillTile, rowAddress, rowsInPlace, touchRows } from "./kv-tile";
import { pvTile, qkStream, qkTile } from "./microkernel";
import { scoreOptions, softmaxUpdate } from "./scores";
import { DT_BF16, DT_F32, dtypeBytes } from "../tensor/dtype";

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

/** Writes o = acc · inv (D floats; never past D: the next row may belong to another thread). */
@inline function storeORow(acc: usize, D: i32, inv: f32, dst: usize): void {
  const iv = f32x4.splat(inv);
  let e = 0;
  for (; e + 4 <= D; e += 4) v128.store(dst + (<usize>e << 2), f32x4.mul(v128.load(acc + (<usize>e << 2)), iv));
  for (; e < D; e++) store<f32>(dst + (<usize>e << 2), load<f32>(acc + (<usize>e << 2)) * inv);
}

function processBlock(a: AttnArgs, ws: usize, b: i32, kvh: i32, row0: i32, R: i32, kv0: i32, kv1: i32, slot: i32): void {
  const D = a.D;
  const D4 = padD(D);
  const G = a.G;
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

  // 1. Rows: kept ranges, scaled Q, fresh softmax state.
  let unionLo = i32.MAX_VALUE, unionHi = -1; // union of the rows' ranges
  let maxLo = -1, minHi = i32.MAX_VALUE; // a tile inside [maxLo, minHi] needs no range exclusion
  const kvEnd = min(kv1, Sk);
  for (let r = 0; r < R; r++) {
    const row = row0 + r;
    const i = row / G;
    const h = kvh * G + (row - i * G);
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
    loadQRow(qRow, D, D4, a.scale, qs + <usize>r * (<usize>D4 << 2));
    store<f32>(m + (<usize>r << 2), -Infinity);
    store<f32>(l + (<usize>r << 2), 0);
    memory.fill(os + <usize>r * (<usize>D4 << 2), 0, <usize>D4 << 2);
  }

  // 2. K/V tiles over the union of the kept ranges.
  const kt = ws + offKt(D4);
  const vt = ws + offVt(D4);
  const kRows = ws + offKRows(D4);
  const vRows = ws + offVRows(D4);
  const dt = a.kvDtype;
  const eb = <usize>dtypeBytes(dt);
  const kStride = <usize>a.ksS * eb;
  const vStride = <usize>a.vsS * eb;
  // Few rows (decode: the G heads × Sq queries of one KV head) → stream: K/V
  // read in place after a touch pass. Many rows (prefill) → tiles decoded
  // into scratch once and reused by every row.
  const stream = R <= STREAM_ROWS;
  const inPlace = stream && D == D4 && (dt == DT_F32 || dt == DT_BF16);
  let sink = 0;
  for (let t0 = unionLo; t0 <= unionHi; t0 += BC) {
    const n = min(BC, unionHi + 1 - t0);
    const n4 = (n + 3) & ~3;
    const kFirst = rowAddress(a.k, dt, a.ksB, a.ksH, a.ksS, b, kvh, k0, t0);
    const vFirst = rowAddress(a.v, dt, a.vsB, a.vsH, a.vsS, b, kvh, k0, t0);
    if (inPlace) {
      sink ^= touchRows(kFirst, kStride, n, <usize>D * eb) ^ touchRows(vFirst, vStride, n, <usize>D * eb);
      rowsInPlace(kFirst, kStride, n, kRows);
      rowsInPlace(vFirst, vStride, n, vRows);
      if (dt == DT_F32) qkStream<f32>(qs, R, D4, kRows, n, s);
      else qkStream<u16>(qs, R, D4, kRows, n, s);
    } else {
      fillTile(dt, kFirst, kStride, n, D, D4, kt, kRows);
      if (stream) qkStream<f32>(qs, R, D4, kRows, n, s);
      else qkTile(qs, R, D4, kRows, n4, s);
    }
    const full = t0 >= maxLo && t0 + n - 1 <= minHi;
    scoreOptions(a, b, diagShift, s, info, R, t0, n, n4, full);
    softmaxUpdate(s, R, n4, m, l, os, D4);
    if (inPlace) {
      if (dt == DT_F32) pvTile<f32>(s, R, vRows, n, D4, os);
      else pvTile<u16>(s, R, vRows, n, D4, os);
    } else {
      fillTile(dt, vFirst, vStride, n, D, D4, vt, vRows);
      pvTile<f32>(s, R, vRows, n, D4, os);
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
      storeORow(os + <usize>r * (<usize>D4 << 2), D, 1 / sum, oDst);
      if (lseDst != 0) store<f32>(lseDst, load<f32>(m + (<usize>r << 2)) + Mathf.log(sum));
    } else {
      memory.fill(oDst, 0, <usize>D << 2);
      if (lseDst != 0) store<f32>(lseDst, -Infinity);
    }
  }
}

/** Work item `item` of the list at args.items: rows [row0, row0 + rows) of (b, kvh) over keys [kv0, kv1). */
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
  const ws = a.scratch + <usize>tid * <usize>a.scratchStride;
  for (let r = 0; r < rows; r += RMAX) processBlock(a, ws, b, kvh, row0 + r, min(RMAX, rows - r), kv0, kv1, slot);
}

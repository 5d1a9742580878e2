// Shared fixtures of the paged-attention tests: a paged cache filled through
// appendKv from known f32 rows, its blocks scattered by a random permutation,
// the same rows as a padded or contiguous cache, and a ragged query batch.
import assert from "node:assert/strict";
import {
  type PagedAttentionOptions,
  PagedKvCache,
  type PagedKvCacheOptions,
  type Runtime,
  Tensor,
  appendKv,
  pagedAttention,
} from "../../src/ops-entry.js";
import { storageArray } from "../../src/tensor/codec.js";

export { rng } from "../helpers/random.js";

/** Standard normal values (Box–Muller); with `outliers`, 1% of them ×40, as real K/V have. */
export function gaussian(n: number, random: () => number, outliers = false): Float32Array {
  const x = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const g = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
    x[i] = outliers && random() < 0.01 ? 40 * g : g;
  }
  return x;
}

export interface PagedFixture {
  cache: PagedKvCache;
  lengths: number[];
  /** int32 [B, maxBlocksPerSeq]; unused entries are −1. */
  blockTable: Int32Array;
  maxBlocksPerSeq: number;
  /** Per sequence, the f32 rows written: K and V [length, Hkv, D]. */
  k: Float32Array[];
  v: Float32Array[];
}

export interface FixtureOptions extends Partial<PagedKvCacheOptions> {
  lengths: number[];
  blockSize: number;
  numKvHeads: number;
  headDim: number;
  random: () => number;
  /** Values of K/V rows (default: uniform in [−1, 1)). */
  values?: (n: number) => Float32Array;
  /** Blocks beyond those the sequences need (never referenced). Default 3. */
  spareBlocks?: number;
  /** Extra table columns (padding, −1). Default 1. */
  spareColumns?: number;
  /** Write through appendKv in this many chunks per sequence (as prefill chunks and decode steps would). Default 1. */
  appendChunks?: number;
  /** Tokens every sequence shares (a multiple of blockSize): the same blocks and rows, written once. Default 0. */
  sharedPrefix?: number;
}

/** A paged cache whose sequences' blocks are a random permutation of the pool; unwritten slots hold NaN (float dtypes). */
export function pagedFixture(rt: Runtime, o: FixtureOptions): PagedFixture {
  const { lengths, blockSize: bs, numKvHeads: hkv, headDim: d, random } = o;
  const need = lengths.map((n) => Math.ceil(n / bs));
  const Lp = o.sharedPrefix ?? 0;
  const sharedBlocks = Lp / bs;
  const numBlocks = need.reduce((a, b) => a + b - sharedBlocks, sharedBlocks) + (o.spareBlocks ?? 3);
  const cache = new PagedKvCache(rt, {
    numLayers: o.numLayers ?? 1,
    numBlocks,
    blockSize: bs,
    numKvHeads: hkv,
    headDim: d,
    ...(o.dtype === undefined ? {} : { dtype: o.dtype }),
    ...(o.int8 === undefined ? {} : { int8: o.int8 }),
    ...(o.fp8 === undefined ? {} : { fp8: o.fp8 }),
  });
  for (let l = 0; l < cache.numLayers; l++) {
    const layer = cache.layer(l);
    for (const t of [layer.k, layer.v]) {
      if (t.dtype === "f32") new Float32Array(rt.memory.buffer, t.ptr, t.numel).fill(NaN);
      else if (t.dtype === "f16") new Uint16Array(rt.memory.buffer, t.ptr, t.numel).fill(0x7e00);
      else if (t.dtype === "bf16") new Uint16Array(rt.memory.buffer, t.ptr, t.numel).fill(0x7fc0);
    }
  }
  const perm = [...Array(numBlocks).keys()];
  for (let i = perm.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [perm[i], perm[j]] = [perm[j]!, perm[i]!];
  }
  const cols = Math.max(...need, 0) + (o.spareColumns ?? 1);
  const blockTable = new Int32Array(lengths.length * cols).fill(-1);
  let next = sharedBlocks;
  need.forEach((n, b) => {
    for (let i = 0; i < n; i++) blockTable[b * cols + i] = i < sharedBlocks ? perm[i]! : perm[next++]!;
  });
  const gen = o.values ?? ((n: number) => Float32Array.from({ length: n }, () => 2 * random() - 1));
  const k = lengths.map((n) => gen(n * hkv * d));
  const v = lengths.map((n) => gen(n * hkv * d));
  for (let b = 1; b < lengths.length; b++) {
    k[b]!.set(k[0]!.subarray(0, Lp * hkv * d));
    v[b]!.set(v[0]!.subarray(0, Lp * hkv * d));
  }
  for (let l = 0; l < cache.numLayers; l++) {
    // Chunk c of every sequence goes in one append (a ragged batch step).
    const chunks = o.appendChunks ?? 1;
    for (let c = 0; c < chunks; c++) {
      const rows: { b: number; p: number }[] = [];
      lengths.forEach((n, b) => {
        for (let p = Math.floor((c * n) / chunks); p < Math.floor(((c + 1) * n) / chunks); p++) if (b === 0 || p >= Lp) rows.push({ b, p });
      });
      if (rows.length === 0) continue;
      const kt = rt.tensor("f32", [rows.length, hkv, d]);
      const vt = rt.tensor("f32", [rows.length, hkv, d]);
      const kd = kt.data() as Float32Array;
      const vd = vt.data() as Float32Array;
      const slots = new Int32Array(rows.length);
      rows.forEach(({ b, p }, t) => {
        kd.set(k[b]!.subarray(p * hkv * d, (p + 1) * hkv * d), t * hkv * d);
        vd.set(v[b]!.subarray(p * hkv * d, (p + 1) * hkv * d), t * hkv * d);
        slots[t] = blockTable[b * cols + Math.floor(p / bs)]! * bs + (p % bs);
      });
      appendKv(rt, { cache, layer: l, k: kt, v: vt, slotMapping: slots });
      rt.free(kt);
      rt.free(vt);
    }
  }
  return { cache, lengths, blockTable, maxBlocksPerSeq: cols, k, v };
}

/**
 * The fixture's stored codes (K or V of `layer`) as a padded cache of the
 * cache's dtype, BNSD [B, Hkv, Smax, D] or BSND [B, Smax, Hkv, D]: the same
 * bits, NaN (float dtypes) past each length.
 */
export function paddedFromPaged(rt: Runtime, f: PagedFixture, which: "k" | "v", layout: "BNSD" | "BSND", Smax: number, layer = 0): Tensor {
  const { cache, lengths, blockTable, maxBlocksPerSeq: cols } = f;
  const { blockSize: bs, numKvHeads: hkv, headDim: d, dtype } = cache;
  const B = lengths.length;
  const t = rt.tensor(dtype, layout === "BNSD" ? [B, hkv, Smax, d] : [B, Smax, hkv, d]);
  const dst = storageArray(dtype, rt.memory.buffer, t.ptr, t.numel);
  dst.fill(dtype === "f32" ? NaN : dtype === "f16" ? 0x7e00 : dtype === "bf16" ? 0x7fc0 : 0);
  const src = (which === "k" ? cache.layer(layer).k : cache.layer(layer).v).data();
  lengths.forEach((n, b) => {
    for (let p = 0; p < n; p++) {
      const slot = blockTable[b * cols + Math.floor(p / bs)]! * bs + (p % bs);
      for (let h = 0; h < hkv; h++) {
        const at = layout === "BNSD" ? ((b * hkv + h) * Smax + p) * d : ((b * Smax + p) * hkv + h) * d;
        dst.set(src.subarray((slot * hkv + h) * d, (slot * hkv + h + 1) * d), at);
      }
    }
  });
  return t;
}

/** The written f32 rows of every sequence concatenated: [Σ lengths, Hkv, D] (flashAttention's TND K/V), and cuSeqlensK. */
export function contiguousKv(rt: Runtime, rows: Float32Array[], hkv: number, d: number): { t: Tensor; cu: number[] } {
  const total = rows.reduce((s, r) => s + r.length, 0) / (hkv * d);
  const t = rt.tensor("f32", [total, hkv, d]);
  const data = t.data() as Float32Array;
  const cu = [0];
  let at = 0;
  for (const r of rows) {
    data.set(r, at);
    at += r.length;
    cu.push(at / (hkv * d));
  }
  return { t, cu };
}

/** cuSeqlensQ for query counts `sq`. */
export function offsets(sq: readonly number[]): number[] {
  const cu = [0];
  for (const n of sq) cu.push(cu[cu.length - 1]! + n);
  return cu;
}

/** Max row-relative error of out against a float64 reference (rows of D), ignoring rows whose reference is 0. */
export function maxRelError(got: ArrayLike<number>, ref: ArrayLike<number>, D: number): number {
  let worst = 0;
  for (let r = 0; r < ref.length / D; r++) {
    let err = 0;
    let scale = 0;
    for (let e = 0; e < D; e++) {
      err = Math.max(err, Math.abs(got[r * D + e]! - ref[r * D + e]!));
      scale = Math.max(scale, Math.abs(ref[r * D + e]!));
    }
    if (Number.isNaN(err)) return NaN;
    if (scale > 0) worst = Math.max(worst, err / scale);
  }
  return worst;
}

/** Runs pagedAttention into out/lse poisoned with NaN first and reads them back (lse: [T, H] for TND q). */
export function runPaged(rt: Runtime, o: PagedAttentionOptions, lseShape = [o.q.shape[0]!, o.q.shape[1]!]): { out: Float32Array; lse: Float32Array } {
  const out = rt.tensor("f32", o.q.shape).fill(NaN);
  const lse = rt.tensor("f32", lseShape).fill(NaN);
  try {
    const r = pagedAttention(rt, { ...o, out, lse });
    assert.equal(r.out, out);
    assert.equal(r.lse, lse);
    return { out: out.toFloat32(), lse: lse.toFloat32() };
  } finally {
    rt.free(out);
    rt.free(lse);
  }
}

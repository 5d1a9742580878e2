/**
 * Float64 references for the paged KV cache, written for clarity: what
 * appendKv must store (codes and scales, mirroring the kernel's f32
 * arithmetic step by step), and what a stored row decodes to.
 */
import { decodeValue, encodeValue } from "../tensor/codec.js";
import type { KvLayer, PagedKvCache } from "./paged-kv-cache.js";

const f = Math.fround;

export interface StoredRow {
  /** The D codes of the row, as the cache's dtype stores them (f32: the value). */
  codes: number[];
  /** per-token scale of the row (int8 per-token), else null. */
  scale: number | null;
}

/** What appendKv stores for one row x[D] of KV head h (K side when `which` = "k"). */
export function referenceQuantizeRow(cache: PagedKvCache, layer: KvLayer, which: "k" | "v", h: number, x: ArrayLike<number>): StoredRow {
  const d = cache.headDim;
  const codes: number[] = [];
  switch (cache.quant) {
    case "none":
      for (let i = 0; i < d; i++) codes.push(encodeValue(cache.dtype, x[i]!));
      return { codes, scale: null };
    case "per-tensor": {
      const s = f(which === "k" ? layer.kScalar : layer.vScalar);
      for (let i = 0; i < d; i++) codes.push(encodeValue(cache.dtype, f(x[i]! / s), { saturate: true }));
      return { codes, scale: null };
    }
    case "per-channel": {
      const scale = (which === "k" ? layer.kScale : layer.vScale)!.data() as Float32Array;
      const offset = (which === "k" ? layer.kOffset : layer.vOffset)!.data() as Float32Array;
      for (let i = 0; i < d; i++) codes.push(encodeValue("int8", f(f(x[i]! / scale[h * d + i]!) - offset[h * d + i]!)));
      return { codes, scale: null };
    }
    case "per-token": {
      let amax = 0;
      for (let i = 0; i < d; i++) amax = Math.max(amax, Math.abs(f(x[i]!)));
      const s = f(amax / 127);
      for (let i = 0; i < d; i++) codes.push(s > 0 ? encodeValue("int8", f(x[i]! / s)) : 0);
      return { codes, scale: s };
    }
  }
}

/** What dequantizing one side (K or V) of a layer reads besides the code: its scalar, scales and offsets. */
interface DequantParams {
  scalar: number;
  scale: ArrayLike<number> | null;
  offset: ArrayLike<number> | null;
}

function dequantParams(layer: KvLayer, which: "k" | "v"): DequantParams {
  const scale = which === "k" ? layer.kScale : layer.vScale;
  const offset = which === "k" ? layer.kOffset : layer.vOffset;
  return { scalar: which === "k" ? layer.kScalar : layer.vScalar, scale: scale ? scale.data() : null, offset: offset ? offset.data() : null };
}

/** referenceDequantize over `p` read once (a gather dequantizes every element of a side). */
function dequantizeWith(cache: PagedKvCache, p: DequantParams, slot: number, h: number, i: number, code: number): number {
  const d = cache.headDim;
  switch (cache.quant) {
    case "none":
      return decodeValue(cache.dtype, code);
    case "per-tensor":
      return decodeValue(cache.dtype, code) * p.scalar;
    case "per-channel":
      return (code + p.offset![h * d + i]!) * p.scale![h * d + i]!;
    case "per-token":
      return code * p.scale![slot * cache.numKvHeads + h]!;
  }
}

/** The value a stored code decodes to (float64), per ARCHITECTURE.md's dequantization rules. */
export function referenceDequantize(cache: PagedKvCache, layer: KvLayer, which: "k" | "v", slot: number, h: number, i: number, code: number): number {
  return dequantizeWith(cache, dequantParams(layer, which), slot, h, i, code);
}

/**
 * Reads a sequence's K or V out of the cache through its block table and
 * dequantizes it: float64 [length, Hkv, D]. The oracle's view of paged KV.
 */
export function referenceGatherKv(
  cache: PagedKvCache,
  layerIndex: number,
  which: "k" | "v",
  blockTable: ArrayLike<number>,
  length: number,
): Float64Array {
  const layer = cache.layer(layerIndex);
  const { blockSize, numKvHeads: hkv, headDim: d } = cache;
  const raw = (which === "k" ? layer.k : layer.v).data();
  const params = dequantParams(layer, which);
  const out = new Float64Array(length * hkv * d);
  for (let j = 0; j < length; j++) {
    const slot = blockTable[Math.floor(j / blockSize)]! * blockSize + (j % blockSize);
    for (let h = 0; h < hkv; h++) {
      for (let i = 0; i < d; i++) {
        out[(j * hkv + h) * d + i] = dequantizeWith(cache, params, slot, h, i, raw[(slot * hkv + h) * d + i]!);
      }
    }
  }
  return out;
}

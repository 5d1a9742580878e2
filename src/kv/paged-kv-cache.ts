/**
 * The paged KV cache: for every layer, K and V storage `[numBlocks, blockSize,
 * Hkv, D]` (NHD) in one storage dtype, plus whatever scale storage that dtype
 * needs (see kv-quant.ts). All layers live in one long-lived allocation; block
 * ids (managed by BlockPool) index the first dimension, and a slot is
 * `blockId · blockSize + offset`.
 *
 * Per layer (each region 64-byte aligned):
 *   k, v             dtype [numBlocks, blockSize, Hkv, D]
 *   kScale, vScale   f32 [numBlocks, blockSize, Hkv]   int8 per-token
 *                    f32 [Hkv, D]                      int8 per-channel
 *   kOffset, vOffset f32 [Hkv, D]                      int8 per-channel
 *   kScalar, vScalar number                            fp8 per-tensor scale (1 otherwise)
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt, checkNumber, checkOneOf } from "../tensor/check.js";
import { DTYPE_BYTES } from "../tensor/dtype.js";
import { Tensor, memoryName } from "../tensor/tensor.js";
import { MAX_BLOCK_SIZE } from "../attention/batch-tables.js";
import { type Fp8Scales, type Int8Scaling, KV_CACHE_DTYPES, type KvCacheDType, type KvQuantMode, int8ChannelParams } from "./kv-quant.js";

export interface PagedKvCacheOptions {
  numLayers: number;
  numBlocks: number;
  /** Tokens per block, 1..MAX_BLOCK_SIZE (256). */
  blockSize: number;
  numKvHeads: number;
  /** Head dim D, 1..256. */
  headDim: number;
  /** Storage dtype. Default f32. */
  dtype?: KvCacheDType;
  /** int8 only. Default { mode: "per-token" }. */
  int8?: Int8Scaling;
  /** fp8 only. Default scales 1. */
  fp8?: Fp8Scales;
}

/** One layer's storage. */
export interface KvLayer {
  readonly k: Tensor;
  readonly v: Tensor;
  readonly kScale: Tensor | null;
  readonly vScale: Tensor | null;
  readonly kOffset: Tensor | null;
  readonly vOffset: Tensor | null;
  readonly kScalar: number;
  readonly vScalar: number;
}

const align64 = (n: number): number => Math.ceil(n / 64) * 64;

/** Most tokens a block holds (the kernels' limit, attention/batch-tables.ts). */
export { MAX_BLOCK_SIZE };

/** Tokens per block unless set (vLLM's default). */
export const DEFAULT_BLOCK_SIZE = 16;

export class PagedKvCache {
  readonly numLayers: number;
  readonly numBlocks: number;
  readonly blockSize: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly dtype: KvCacheDType;
  readonly quant: KvQuantMode;
  /** Slots in the cache: numBlocks · blockSize. */
  readonly numSlots: number;
  /** Bytes of the one allocation holding every layer. */
  readonly bytes: number;
  /** The memory the cache lives in (ops on it must run in that memory's runtime). */
  readonly memory: WebAssembly.Memory;
  readonly #rt: Runtime;
  readonly #ptr: number;
  readonly #layers: KvLayer[];
  #disposed = false;

  constructor(rt: Runtime, options: PagedKvCacheOptions) {
    const numLayers = checkInt("numLayers", options.numLayers, { min: 1 });
    const numBlocks = checkInt("numBlocks", options.numBlocks, { min: 1 });
    const blockSize = checkInt("blockSize", options.blockSize, { min: 1, max: MAX_BLOCK_SIZE });
    const hkv = checkInt("numKvHeads", options.numKvHeads, { min: 1 });
    const d = checkInt("headDim", options.headDim, { min: 1, max: 256 });
    const dtype = checkOneOf("dtype", options.dtype ?? "f32", KV_CACHE_DTYPES);
    if (options.int8 !== undefined && dtype !== "int8") throw new ArgumentError("int8", `applies to dtype int8 only, got dtype ${show(dtype)}`);
    if (options.fp8 !== undefined && !dtype.startsWith("fp8")) throw new ArgumentError("fp8", `applies to fp8 dtypes only, got dtype ${show(dtype)}`);

    const int8 = dtype === "int8" ? (options.int8 ?? { mode: "per-token" as const }) : undefined;
    if (int8) checkOneOf("int8.mode", int8.mode, ["per-token", "per-channel"] as const);
    const quant: KvQuantMode = int8 ? int8.mode : dtype.startsWith("fp8") ? "per-tensor" : "none";
    const channels = hkv * d;
    const channelParams = int8?.mode === "per-channel" ? int8ChannelParams(int8, numLayers, hkv, d) : null;
    const perLayerScalar = (name: "kScale" | "vScale", layer: number): number => {
      const s = options.fp8?.[name];
      if (s === undefined) return 1;
      if (typeof s === "number") return checkNumber(`fp8.${name}`, s, { minExclusive: 0 });
      if (!Array.isArray(s) || s.length !== numLayers) throw new ArgumentError(`fp8.${name}`, `must be a number or one number per layer (${numLayers}), got ${show(s)}`);
      return checkNumber(`fp8.${name}[${layer}]`, s[layer], { minExclusive: 0 });
    };

    // Every scale is checked before the allocation, so a bad one leaves the heap as it was.
    const params = Array.from({ length: numLayers }, (_, l) => ({
      kScale: channelParams?.[l]?.kScale ?? null,
      vScale: channelParams?.[l]?.vScale ?? null,
      kOffset: channelParams?.[l]?.kOffset ?? null,
      vOffset: channelParams?.[l]?.vOffset ?? null,
      kScalar: quant === "per-tensor" ? perLayerScalar("kScale", l) : 1,
      vScalar: quant === "per-tensor" ? perLayerScalar("vScale", l) : 1,
    }));

    // Lay out every layer inside one allocation.
    const dataBytes = align64(numBlocks * blockSize * channels * DTYPE_BYTES[dtype]);
    const scaleElems = quant === "per-token" ? numBlocks * blockSize * hkv : quant === "per-channel" ? channels : 0;
    const scaleBytes = align64(scaleElems * 4);
    const offsetBytes = quant === "per-channel" ? align64(channels * 4) : 0;
    const layerBytes = 2 * (dataBytes + scaleBytes + offsetBytes);
    this.bytes = layerBytes * numLayers;
    this.#ptr = rt.heap.alloc(this.bytes, "paged KV cache");
    const mem = rt.memory;
    this.#layers = params.map((param, l) => {
      let p = this.#ptr + l * layerBytes;
      const take = (bytes: number): number => {
        const at = p;
        p += bytes;
        return at;
      };
      const shape = [numBlocks, blockSize, hkv, d];
      const k = new Tensor(mem, take(dataBytes), dtype, shape);
      const v = new Tensor(mem, take(dataBytes), dtype, shape);
      let kScale: Tensor | null = null;
      let vScale: Tensor | null = null;
      let kOffset: Tensor | null = null;
      let vOffset: Tensor | null = null;
      if (quant === "per-token") {
        kScale = new Tensor(mem, take(scaleBytes), "f32", [numBlocks, blockSize, hkv]).fill(0);
        vScale = new Tensor(mem, take(scaleBytes), "f32", [numBlocks, blockSize, hkv]).fill(0);
      } else if (quant === "per-channel") {
        kScale = new Tensor(mem, take(scaleBytes), "f32", [hkv, d]).set(param.kScale!);
        vScale = new Tensor(mem, take(scaleBytes), "f32", [hkv, d]).set(param.vScale!);
        kOffset = new Tensor(mem, take(offsetBytes), "f32", [hkv, d]).set(param.kOffset!);
        vOffset = new Tensor(mem, take(offsetBytes), "f32", [hkv, d]).set(param.vOffset!);
      }
      return { k, v, kScale, vScale, kOffset, vOffset, kScalar: param.kScalar, vScalar: param.vScalar };
    });
    this.#rt = rt;
    this.memory = rt.memory;
    this.numLayers = numLayers;
    this.numBlocks = numBlocks;
    this.blockSize = blockSize;
    this.numKvHeads = hkv;
    this.headDim = d;
    this.dtype = dtype;
    this.quant = quant;
    this.numSlots = numBlocks * blockSize;
  }

  /** Layer `l`'s storage views. */
  layer(l: number): KvLayer {
    if (this.#disposed) throw new Error("PagedKvCache used after dispose()");
    checkInt("layer", l, { min: 0, max: this.numLayers - 1 });
    return this.#layers[l]!;
  }

  toString(): string {
    return `PagedKvCache(${this.numLayers} layers, ${this.numBlocks} blocks × ${this.blockSize}, ${this.dtype}, in ${memoryName(this.memory)})`;
  }

  /** Frees the cache's memory. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#rt.heap.free(this.#ptr);
  }
}

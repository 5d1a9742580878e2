/**
 * appendKv — vLLM's reshape_and_cache: writes the K and V rows of a ragged
 * batch's new tokens into their paged-cache slots, quantizing on write
 * (assembly/kv/append.ts; the modes are described in kv-quant.ts).
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt } from "../tensor/check.js";
import { DTYPE_CODE } from "../tensor/dtype.js";
import { Tensor, checkSameMemory, checkTensor } from "../tensor/tensor.js";
import { KV_QUANT_CODE } from "./kv-quant.js";
import type { PagedKvCache } from "./paged-kv-cache.js";

export interface AppendKvOptions {
  cache: PagedKvCache;
  layer: number;
  /**
   * New keys and values, f32 [T, Hkv, D]. Heads and head dims must be contiguous;
   * tokens may be `strides[0]` elements apart (a slice of a fused QKV output).
   * k and v must share that token stride.
   */
  k: Tensor;
  v: Tensor;
  /** Slot of each token, blockId · blockSize + offset: int32 [T]; −1 skips a token (padding). */
  slotMapping: Int32Array | Tensor;
}

/** Checks a slot mapping: integers in [−1, numSlots), no slot twice. Returns it as an Int32Array. */
export function checkSlotMapping(slotMapping: Int32Array | Tensor, tokens: number, numSlots: number): Int32Array {
  let slots: Int32Array;
  if (slotMapping instanceof Tensor) {
    if (slotMapping.dtype !== "int32") throw new ArgumentError("slotMapping.dtype", `must be int32, got ${show(slotMapping.dtype)}`);
    slots = slotMapping.data() as Int32Array;
  } else if (slotMapping instanceof Int32Array) {
    slots = slotMapping;
  } else {
    throw new ArgumentError("slotMapping", `must be an Int32Array or an int32 Tensor, got ${show(slotMapping)}`);
  }
  if (slots.length !== tokens) throw new ArgumentError("slotMapping", `must have one slot per token (${tokens}), got ${slots.length}`);
  const writer = new Map<number, number>();
  for (let t = 0; t < tokens; t++) {
    const s = slots[t]!;
    if (s < -1 || s >= numSlots) throw new ArgumentError(`slotMapping[${t}]`, `must be in [-1, ${numSlots}) (−1 skips), got ${s}`);
    if (s < 0) continue;
    const other = writer.get(s);
    if (other !== undefined) throw new ArgumentError(`slotMapping[${t}]`, `writes slot ${s}, already written by token ${other} in this append`);
    writer.set(s, t);
  }
  return slots;
}

function checkRows(name: string, t: Tensor, tokens: number, hkv: number, d: number): void {
  if (t.dtype !== "f32") throw new ArgumentError(`${name}.dtype`, `must be f32, got ${show(t.dtype)}`);
  if (t.rank !== 3 || t.shape[0] !== tokens || t.shape[1] !== hkv || t.shape[2] !== d) {
    throw new ArgumentError(`${name}.shape`, `must be [T, Hkv, D] = [${tokens}, ${hkv}, ${d}], got ${show(t.shape)}`);
  }
  if (t.strides[2] !== 1 || (hkv > 1 && t.strides[1] !== d)) {
    throw new ArgumentError(`${name}.strides`, `must keep heads and head dims contiguous ([*, ${d}, 1]), got ${show(t.strides)}`);
  }
}

export function appendKv(rt: Runtime, options: AppendKvOptions): void {
  const { cache } = options;
  checkSameMemory("cache", cache, cache.memory, rt);
  const k = checkTensor("k", options.k, rt);
  const v = checkTensor("v", options.v, rt);
  if (options.slotMapping instanceof Tensor) checkTensor("slotMapping", options.slotMapping, rt);
  const layer = cache.layer(checkInt("layer", options.layer, { min: 0, max: cache.numLayers - 1 }));
  const tokens = k.shape[0] ?? 0;
  checkRows("k", k, tokens, cache.numKvHeads, cache.headDim);
  checkRows("v", v, tokens, cache.numKvHeads, cache.headDim);
  if (tokens > 1 && k.strides[0] !== v.strides[0]) {
    throw new ArgumentError("v.strides", `must share k's token stride ${k.strides[0]}, got ${v.strides[0]}`);
  }
  const slots = checkSlotMapping(options.slotMapping, tokens, cache.numSlots);
  if (tokens === 0) return;

  // Slots given as a JS array travel through a temporary heap block.
  const own = options.slotMapping instanceof Tensor ? 0 : rt.heap.alloc(tokens * 4, "appendKv slots");
  try {
    if (own) new Int32Array(rt.memory.buffer, own, tokens).set(slots);
    const slotsPtr = own || (options.slotMapping as Tensor).ptr;
    const args = rt
      .args()
      .ptr(k.ptr)
      .ptr(v.ptr)
      .i32(k.strides[0]!)
      .ptr(slotsPtr)
      .ptr(layer.k.ptr)
      .ptr(layer.v.ptr)
      .i32(DTYPE_CODE[cache.dtype])
      .i32(cache.numKvHeads)
      .i32(cache.headDim)
      .i32(KV_QUANT_CODE[cache.quant])
      .f32(layer.kScalar)
      .f32(layer.vScalar)
      .ptr(layer.kScale?.ptr ?? 0)
      .ptr(layer.vScale?.ptr ?? 0)
      .ptr(layer.kOffset?.ptr ?? 0)
      .ptr(layer.vOffset?.ptr ?? 0)
      .end();
    rt.parallelFor("task_append_kv", tokens, args);
  } finally {
    if (own) rt.heap.free(own);
  }
}

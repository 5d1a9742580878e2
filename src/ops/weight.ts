/**
 * Weights of a linear layer, packed for the SIMD kernels.
 *
 * A `Weight` is a matrix W [rows (out features), cols (in features)] — the
 * PyTorch `nn.Linear.weight` / safetensors layout — stored in one of four
 * formats, chosen at load time:
 *
 *   format  bytes/weight  element value                      round trip of x
 *   f32     4             x                                  exact
 *   bf16    2             bf16(x), round to nearest even     |e| ≤ 2⁻⁹·|x|
 *   q8      1.125         q·d, q ∈ [−127, 127] (GGUF Q8_0)   |e| ≤ d/2, d = max|x|/127 of its block
 *   q4      0.625         q·d, q ∈ [−8, 7]     (GGUF Q4_0)   |e| ≤ d/2, d = |m|/8 (m: the block's
 *                                                            largest-magnitude value, which maps to −8);
 *                                                            a value near −m clamps to 7: |e| ≤ d
 *
 * One scale d (f32) per row and block of 32 consecutive columns. Rounding is to
 * nearest, ties to even, of x · f32(1/d) computed in f32 — which can add up to
 * 2⁻¹⁶·d to the bounds above. q8/q4 are GGUF's Q8_0/Q4_0 with f32 instead of f16
 * scales (+2 bytes a block: no decode in the hot loop, no f16 range limit).
 *
 * Layout (assembly/linalg/layout.ts): rows are zero-padded to a multiple of 8
 * and columns to a multiple of 32; tile (g, b) holds rows [8g, 8g + 8) ×
 * columns [32b, 32b + 32), tiles stored [groups][blocks], so a run of row
 * groups is one sequential stream — the decode GEMV's whole access pattern, the
 * one the hardware prefetcher keeps up with (interleaving two streams halved
 * the speed from DRAM). The 8 rows are two halves of 4; inside a half the four
 * rows are interleaved so a SIMD vector holds the same column(s) of the four
 * rows and a dot product leaves row r's sum in lane r (no horizontal
 * reductions). Offsets in a tile, half h, lane r:
 *
 *   f32   1024 B  column k at 32k + 16h + 4r
 *   bf16   512 B  column pair j at 32j + 16h + 4r: u32 = bf16(2j) | bf16(2j + 1) << 16
 *   q8     288 B  at 144h: [16 column pairs][4 rows][2] int8, then f32 scale[4 rows]
 *   q4     160 B  at 80h: [4 chunks][4 rows][2 halves] u16 of 4-bit codes, then
 *                 f32 scale[4 rows]; nibble k of (chunk m, half s) is column
 *                 2·(4m + k) + s, a 4-bit two's-complement q (GGUF stores q + 8:
 *                 the same code with its top bit flipped)
 *
 * GGUF Q5_0, kept as the file has it (ggml-weight.ts; never made from floats here):
 *
 *   q5     224 B  at 112h: 6 vectors of [4 rows][2 halves] u16 holding three of
 *                 ggml's 5-bit codes q each (the last vector one; value (q − 16)·d),
 *                 then f32 scale[4 rows]: 7 bits a weight (ggml's block_q5_0: 5.5;
 *                 as q8 it took 9)
 *
 * Native ggml K-quants (kept from a GGUF file as they are, see ggml-weight.ts;
 * never made from floats here): tiles of 4 rows × 256 columns, ggml's codes,
 * sub-block scales and f16 super-scales regrouped for SIMD
 * (assembly/linalg/kquant-layout.ts):
 *
 *   q2_k   416 B  per 4 × 256: 3.25 bits a weight (ggml's block_q2_K: 2.625)
 *   q3_k   464 B  per 4 × 256: 3.625 bits a weight (ggml's block_q3_K: 3.4375)
 *   q4_k   608 B  per 4 × 256: 4.75 bits a weight (ggml's block_q4_K: 4.5)
 *   iq4_xs 560 B  per 4 × 256: 4.375 bits a weight (ggml's block_iq4_xs: 4.25)
 *   q5_k   736 B  per 4 × 256: 5.75 bits a weight (ggml's block_q5_K: 5.5)
 *   q6_k   848 B  per 4 × 256: 6.625 bits a weight (ggml's block_q6_K: 6.5625)
 *
 * Columns not a multiple of 32: padded, as zero weights with a zero-padded
 * activation, which changes no result (llama.cpp instead refuses Q8_0/Q4_0
 * for such tensors and falls back to another type; padding keeps the format the
 * user chose and costs at most 31 columns). The hidden and intermediate sizes
 * of Llama, Mistral and Qwen checkpoints are multiples of 32 anyway.
 */
import { ArgumentError, show } from "../errors.js";
import type { Allocator } from "../runtime/allocator.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkDims, checkOneOf } from "../tensor/check.js";
import { DTYPE_CODE } from "../tensor/dtype.js";
import { Tensor, checkSameMemory, memoryName } from "../tensor/tensor.js";

/** The formats any matrix can be converted to (createWeight, --weights). */
export type WeightFormat = "f32" | "bf16" | "q8" | "q4";
/** ggml K-quants, kept natively from a GGUF file (createGgmlWeight); never converted to. */
export type KquantFormat = "q2_k" | "q3_k" | "q4_k" | "q5_k" | "q6_k" | "iq4_xs";
/** GGUF Q5_0 kept natively (createGgmlWeight), in tiles of 8 rows × 32 columns like q8's; never converted to. */
export type Q5Format = "q5";
/** Every format a Weight can be stored in. */
export type StorageFormat = WeightFormat | KquantFormat | Q5Format;
export const WEIGHT_FORMATS: readonly WeightFormat[] = ["f32", "bf16", "q8", "q4"];
export const KQUANT_FORMATS: readonly KquantFormat[] = ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_xs"];
/** What a user may ask for (--weights, loadModel's weights): a format, or "auto" (the checkpoint's). */
export type WeightsSetting = WeightFormat | "auto";
export const WEIGHTS_SETTINGS: readonly WeightsSetting[] = [...WEIGHT_FORMATS, "auto"];

export function isKquantFormat(format: StorageFormat): format is KquantFormat {
  return (KQUANT_FORMATS as readonly StorageFormat[]).includes(format);
}

/** Columns per block (one scale per row and block in q8/q4). */
export const WEIGHT_BLOCK = 32;
/** Rows per row group: a tile is 8 rows (two halves of 4, the f32x4 lanes) × 32 columns. */
export const WEIGHT_ROW_GROUP = 8;

/** Columns per K-quant superblock (ggml's QK_K) and rows per K-quant tile. */
export const KQUANT_BLOCK = 256;
export const KQUANT_ROW_GROUP = 4;

/** Format codes shared with assembly/linalg/layout.ts and kquant-layout.ts. */
export const WEIGHT_FORMAT_CODE: Readonly<Record<StorageFormat, number>> = { f32: 0, bf16: 1, q8: 2, q4: 3, q4_k: 4, q6_k: 5, q5_k: 6, q2_k: 7, q3_k: 8, iq4_xs: 9, q5: 10 };
/** Bytes of one tile of each format: 8 rows × 32 columns, or 4 rows × 256 columns for the K-quants. */
export const WEIGHT_TILE_BYTES: Readonly<Record<StorageFormat, number>> = { f32: 1024, bf16: 512, q8: 288, q4: 160, q4_k: 608, q5_k: 736, q6_k: 848, q2_k: 416, q3_k: 464, iq4_xs: 560, q5: 224 };

/** Columns and rows of one tile of `format`. */
export function tileShape(format: StorageFormat): { cols: number; rows: number } {
  return isKquantFormat(format) ? { cols: KQUANT_BLOCK, rows: KQUANT_ROW_GROUP } : { cols: WEIGHT_BLOCK, rows: WEIGHT_ROW_GROUP };
}

/** Source dtypes a Weight can be made from (what safetensors files hold). */
const SOURCE_DTYPES = ["f32", "f16", "bf16"] as const;

export class Weight {
  readonly memory: WebAssembly.Memory;
  /** Byte address of the packed tiles (64-byte aligned). */
  readonly ptr: number;
  readonly format: StorageFormat;
  /** Output features. */
  readonly rows: number;
  /** Input features. */
  readonly cols: number;
  /** Column blocks of 32 (K-quants: superblocks of 256): ceil(cols / tile cols). */
  readonly blocks: number;
  /** Row groups of 8 (K-quants: quads of 4): ceil(rows / tile rows). */
  readonly groups: number;
  readonly #heap: Allocator;
  #freed = false;

  /** @internal use createWeight() */
  constructor(heap: Allocator, memory: WebAssembly.Memory, ptr: number, format: StorageFormat, rows: number, cols: number) {
    this.#heap = heap;
    this.memory = memory;
    this.ptr = ptr;
    this.format = format;
    this.rows = rows;
    this.cols = cols;
    const tile = tileShape(format);
    this.blocks = Math.ceil(cols / tile.cols);
    this.groups = Math.ceil(rows / tile.rows);
  }

  /** Bytes of the packed tiles: what one pass over the weight reads. */
  get byteLength(): number {
    return weightBytes(this.format, this.rows, this.cols);
  }

  /** Bytes of one row group's tiles. */
  get groupBytes(): number {
    return this.blocks * WEIGHT_TILE_BYTES[this.format];
  }

  get freed(): boolean {
    return this.#freed;
  }

  /** Returns the memory to the runtime's heap. The Weight cannot be used afterwards. */
  free(): void {
    if (this.#freed) throw new ArgumentError("weight", "was already freed");
    this.#freed = true;
    this.#heap.free(this.ptr);
  }

  toString(): string {
    return `Weight(${this.format}, [${this.rows}, ${this.cols}] @ ${this.ptr} in ${memoryName(this.memory)})`;
  }
}

/** Bytes a [rows, cols] weight takes in `format` (padding included). */
export function weightBytes(format: StorageFormat, rows: number, cols: number): number {
  const tile = tileShape(format);
  return Math.ceil(rows / tile.rows) * Math.ceil(cols / tile.cols) * WEIGHT_TILE_BYTES[format];
}

/** Throws unless `weight` is a live Weight (in `rt`'s memory, when given). */
export function checkWeight(argument: string, weight: unknown, rt?: { readonly memory: WebAssembly.Memory }): Weight {
  if (!(weight instanceof Weight)) throw new ArgumentError(argument, `must be a Weight (see createWeight), got ${show(weight)}`);
  if (weight.freed) throw new ArgumentError(argument, `was freed: ${weight.toString()}`);
  if (rt) checkSameMemory(argument, weight, weight.memory, rt);
  return weight;
}

export interface CreateWeightOptions {
  /**
   * The matrix [rows, cols] in f32, f16 or bf16, contiguous (as loaded from
   * safetensors), or several such matrices with equal cols, concatenated along
   * rows (a fused QKV or gate/up projection, as vLLM's QKVParallelLinear).
   */
  source: Tensor | readonly Tensor[];
  format: WeightFormat;
  /** Names the allocation in out-of-memory errors. */
  label?: string;
}

/**
 * Packs (and for q8/q4 quantizes) a matrix into a new Weight, in the kernels,
 * on all threads. The sources are left untouched and may be freed afterwards.
 */
export function createWeight(rt: Runtime, options: CreateWeightOptions): Weight {
  const format = checkOneOf("format", options.format, WEIGHT_FORMATS);
  const sources = options.source instanceof Tensor ? [options.source] : options.source;
  if (!Array.isArray(sources) || sources.length === 0) {
    throw new ArgumentError("source", `must be a Tensor or a non-empty array of Tensors, got ${show(options.source)}`);
  }
  let rows = 0;
  const cols = (sources[0] as Tensor | undefined)?.shape?.[1];
  sources.forEach((t: unknown, i) => {
    const name = sources.length === 1 ? "source" : `source[${i}]`;
    if (!(t instanceof Tensor)) throw new ArgumentError(name, `must be a Tensor, got ${show(t)}`);
    if (!(SOURCE_DTYPES as readonly string[]).includes(t.dtype)) {
      throw new ArgumentError(`${name}.dtype`, `must be one of ${SOURCE_DTYPES.join(" | ")}, got ${show(t.dtype)}`);
    }
    checkDims(name, t.shape, [null, i === 0 ? null : cols!], ["rows", "cols"]);
    if (t.shape[0]! < 1) throw new ArgumentError(`${name}.shape[0]`, `must be ≥ 1 (rows), got ${t.shape[0]}`);
    if (t.shape[1]! < 1) throw new ArgumentError(`${name}.shape[1]`, `must be ≥ 1 (cols), got ${t.shape[1]}`);
    if (!t.isContiguous()) throw new ArgumentError(name, `must be contiguous, got strides ${show(t.strides)}`);
    checkSameMemory(name, t, t.memory, rt);
    rows += t.shape[0]!;
  });
  const bytes = weightBytes(format, rows, cols!);
  const ptr = rt.heap.alloc(bytes, options.label ?? `weight ${format} [${rows}, ${cols}]`);
  const weight = new Weight(rt.heap, rt.memory, ptr, format, rows, cols!);
  if (rows % WEIGHT_ROW_GROUP !== 0) {
    // Lanes of the padding rows are never written by the packer: zero them.
    const last = ptr + (weight.groups - 1) * weight.groupBytes;
    new Uint8Array(rt.memory.buffer, last, weight.groupBytes).fill(0);
  }
  const scratch = rt.threadScratch(256);
  let rowOffset = 0;
  for (const t of sources as readonly Tensor[]) {
    const srcRows = t.shape[0]!;
    const firstGroup = Math.floor(rowOffset / WEIGHT_ROW_GROUP);
    const lastGroup = Math.floor((rowOffset + srcRows - 1) / WEIGHT_ROW_GROUP);
    const args = rt
      .args()
      .ptr(t.ptr)
      .i32(DTYPE_CODE[t.dtype])
      .i32(srcRows)
      .i32(cols!)
      .i32(rowOffset)
      .ptr(ptr)
      .i32(WEIGHT_FORMAT_CODE[format])
      .i32(weight.blocks)
      .ptr(scratch.ptr)
      .i32(scratch.stride)
      .end();
    rt.parallelFor("task_weight_pack", lastGroup - firstGroup + 1, args);
    rowOffset += srcRows;
  }
  return weight;
}

export interface DequantizeWeightOptions {
  weight: Weight;
  /** f32 [rows, cols]; allocated on the heap when omitted (free it with rt.free). */
  out?: Tensor;
}

/** Decodes a Weight back to f32 [rows, cols]: the values the kernels multiply by. */
export function dequantizeWeight(rt: Runtime, options: DequantizeWeightOptions): Tensor {
  const weight = checkWeight("weight", options.weight);
  const out = options.out ?? rt.tensor("f32", [weight.rows, weight.cols], "dequantized weight");
  if (options.out) {
    if (out.dtype !== "f32") throw new ArgumentError("out.dtype", `must be f32, got ${show(out.dtype)}`);
    checkDims("out", out.shape, [weight.rows, weight.cols], ["rows", "cols"]);
    if (!out.isContiguous()) throw new ArgumentError("out", `must be contiguous, got strides ${show(out.strides)}`);
  }
  gatherRows(rt, weight, 0, weight.rows, out.ptr, weight.cols * 4);
  return out;
}

/** out row i = decoded row ids[i] (ids = 0: row i), for `count` rows. Validated by the caller. */
export function gatherRows(rt: Runtime, weight: Weight, ids: number, count: number, out: number, outStrideBytes: number): void {
  if (weight instanceof WeightStack) {
    // Only whole-matrix decoding (ids = 0) reaches a stack: each part's rows in turn.
    for (const part of weight.parts) {
      gatherRows(rt, part, 0, part.rows, out, outStrideBytes);
      out += part.rows * outStrideBytes;
    }
    return;
  }
  if (isKquantFormat(weight.format)) {
    const args = rt.args().ptr(weight.ptr).i32(WEIGHT_FORMAT_CODE[weight.format]).i32(weight.blocks).ptr(ids).ptr(out).i32(outStrideBytes).end();
    rt.parallelFor("task_kquant_rows", count, args);
    return;
  }
  const args = rt
    .args()
    .ptr(weight.ptr)
    .i32(WEIGHT_FORMAT_CODE[weight.format])
    .i32(weight.blocks)
    .i32(weight.cols)
    .ptr(ids)
    .ptr(out)
    .i32(outStrideBytes)
    .end();
  rt.parallelFor("task_embedding", count, args);
}

/**
 * Matrices [rows_i, cols] of different formats stacked along rows, used as
 * one Weight (a fused QKV whose V is Q6_K while Q and K are Q4_K, as in
 * llama.cpp's Q4_K_M files): linear() runs each part into its slice of the
 * output, and the whole is [Σ rows_i, cols]. Made by stackWeights.
 */
export class WeightStack extends Weight {
  readonly parts: readonly Weight[];

  /** @internal use stackWeights() */
  constructor(heap: Allocator, parts: readonly Weight[]) {
    const first = parts[0]!;
    super(heap, first.memory, first.ptr, first.format, parts.reduce((n, p) => n + p.rows, 0), first.cols);
    this.parts = parts;
  }

  override get byteLength(): number {
    return this.parts.reduce((n, p) => n + p.byteLength, 0);
  }

  override get freed(): boolean {
    return this.parts.some((p) => p.freed);
  }

  override free(): void {
    if (this.freed) throw new ArgumentError("weight", "was already freed");
    for (const p of this.parts) p.free();
  }

  override toString(): string {
    return `WeightStack([${this.rows}, ${this.cols}]: ${this.parts.map((p) => `${p.format} × ${p.rows}`).join(" + ")} in ${memoryName(this.memory)})`;
  }
}

/** One Weight of several with equal cols in one memory, stacked along rows (itself when given one). It owns the parts. */
export function stackWeights(rt: Runtime, parts: readonly Weight[]): Weight {
  if (parts.length === 0) throw new ArgumentError("parts", "must hold at least one Weight, got none");
  parts.forEach((p, i) => {
    checkWeight(`parts[${i}]`, p, rt);
    if (p instanceof WeightStack) throw new ArgumentError(`parts[${i}]`, `must not itself be a stack, got ${p.toString()}`);
    if (p.cols !== parts[0]!.cols) throw new ArgumentError(`parts[${i}].cols`, `must be ${parts[0]!.cols} (parts[0].cols), got ${p.cols}`);
  });
  return parts.length === 1 ? parts[0]! : new WeightStack(rt.heap, parts);
}

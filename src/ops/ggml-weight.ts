/**
 * Native ggml weights: a matrix as a GGUF file stores it (rows of ggml
 * blocks) becomes a Weight without requantizing, so the values the kernels
 * multiply by are exactly those of llama.cpp's dequantize_row_* :
 *
 *   ggml type  Weight format  what is kept
 *   Q8_0       q8             the int8 codes; the f16 scale as f32 (exact)
 *   Q5_0       q8             the codes q − 16 ∈ [−16, 15]; the f16 scale as f32 (exact, 9 bits a
 *                             weight instead of 5.5: llama.cpp's Q4_K_M falls back to Q5_0 for
 *                             matrices whose width is not a multiple of 256)
 *   IQ4_NL     q8             the codes as the values of ggml's kvalues_iq4nl (int8, |v| ≤ 127); the f16
 *                             scale as f32 (exact; 9 bits a weight instead of 4.5: llama.cpp writes
 *                             IQ4_NL mostly as the fallback of IQ4_XS / Q2_K / Q3_K for widths that are
 *                             not a multiple of 256)
 *   IQ4_XS     iq4_xs         4-bit indices into kvalues_iq4nl, i8 sub-block scales (ls − 32), f16 d
 *   Q2_K       q2_k           2-bit codes, 4-bit sub-block scales and mins, f16 d and dmin
 *   Q3_K       q3_k           3-bit codes, 6-bit sub-block scales (− 32), f16 d
 *   Q4_K       q4_k           codes, 6-bit sub-block scales and mins, f16 d and dmin
 *   Q5_K       q5_k           the same, with the 5th bit of each code
 *   Q6_K       q6_k           codes, int8 sub-block scales, f16 d
 *
 * (assembly/linalg/ggml-pack.ts repacks the blocks into the SIMD tiles, on
 * all threads; layouts in layout.ts and kquant-layout.ts.) The one exception:
 * a Q8_0 code of −128, which ggml's quantizer never writes, is read as −127
 * (the relaxed int8 dot needs |q| ≤ 127).
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkDims } from "../tensor/check.js";
import { GGML_TYPES, type GgmlNativeType } from "../tensor/ggml-types.js";
import { Tensor, checkSameMemory } from "../tensor/tensor.js";
import { Weight, type StorageFormat, tileShape, weightBytes } from "./weight.js";

/** ggml tensor types that stay native; each with its block geometry and Weight format (tensor/ggml-types.ts, where cpuFormat is not null). */
export const GGML_NATIVE: Readonly<Record<GgmlNativeType, { id: number; blockSize: number; typeSize: number; format: StorageFormat }>> = Object.fromEntries(
  Object.values(GGML_TYPES).flatMap((t) => (t.cpuFormat === null ? [] : [[t.name, { id: t.id, blockSize: t.blockSize, typeSize: t.typeSize, format: t.cpuFormat satisfies StorageFormat }]])),
) as Record<GgmlNativeType, { id: number; blockSize: number; typeSize: number; format: StorageFormat }>;
export type { GgmlNativeType };

export function isGgmlNativeType(name: string): name is GgmlNativeType {
  return Object.hasOwn(GGML_NATIVE, name);
}

/** Rows [rows, cols] of ggml blocks of one type, as read from a file into the runtime's memory. */
export class GgmlMatrix {
  /**
   * @param type   the ggml type of every block
   * @param bytes  uint8 [rows, rowBytes], contiguous: row r's blocks back to back
   */
  constructor(readonly type: GgmlNativeType, readonly bytes: Tensor, readonly rows: number, readonly cols: number) {}

  /** The Weight format this matrix keeps. */
  get format(): StorageFormat {
    return GGML_NATIVE[this.type].format;
  }
}

/** Bytes of one row of `cols` values of a native ggml type. */
export function ggmlNativeRowBytes(type: GgmlNativeType, cols: number): number {
  return (cols / GGML_NATIVE[type].blockSize) * GGML_NATIVE[type].typeSize;
}

export interface CreateGgmlWeightOptions {
  /** One matrix, or several of one Weight format and equal cols stacked along rows (all but the last a whole number of tiles: 8 rows for q8, 4 for K-quants). */
  source: GgmlMatrix | readonly GgmlMatrix[];
  /** Names the allocation in out-of-memory errors. */
  label?: string;
}

function checkGgmlMatrix(rt: Runtime, name: string, m: unknown): GgmlMatrix {
  if (!(m instanceof GgmlMatrix)) throw new ArgumentError(name, `must be a GgmlMatrix, got ${show(m)}`);
  if (!isGgmlNativeType(m.type)) throw new ArgumentError(`${name}.type`, `must be one of ${Object.keys(GGML_NATIVE).join(" | ")}, got ${show(m.type)}`);
  const { blockSize } = GGML_NATIVE[m.type];
  if (!Number.isInteger(m.rows) || m.rows < 1) throw new ArgumentError(`${name}.rows`, `must be an integer ≥ 1, got ${show(m.rows)}`);
  if (!Number.isInteger(m.cols) || m.cols < 1 || m.cols % blockSize !== 0) {
    throw new ArgumentError(`${name}.cols`, `must be a positive multiple of ${m.type}'s block of ${blockSize}, got ${show(m.cols)}`);
  }
  checkSameMemory(`${name}.bytes`, m.bytes, m.bytes.memory, rt);
  if (m.bytes.dtype !== "uint8") throw new ArgumentError(`${name}.bytes.dtype`, `must be uint8, got ${show(m.bytes.dtype)}`);
  checkDims(`${name}.bytes`, m.bytes.shape, [m.rows, ggmlNativeRowBytes(m.type, m.cols)], ["rows", "rowBytes"]);
  if (!m.bytes.isContiguous()) throw new ArgumentError(`${name}.bytes`, `must be contiguous, got strides ${show(m.bytes.strides)}`);
  return m;
}

/** Repacks ggml matrices into a new Weight, in the kernels, on all threads. The sources may be freed afterwards. */
export function createGgmlWeight(rt: Runtime, options: CreateGgmlWeightOptions): Weight {
  const list: readonly unknown[] = Array.isArray(options.source) ? options.source : [options.source];
  if (list.length === 0) throw new ArgumentError("source", "must hold at least one GgmlMatrix, got none");
  const parts = list.map((m, i) => checkGgmlMatrix(rt, list.length === 1 ? "source" : `source[${i}]`, m));
  const { format, cols } = parts[0]!;
  const tileRows = tileShape(format).rows;
  parts.forEach((m, i) => {
    if (m.format !== format || m.cols !== cols) throw new ArgumentError(`source[${i}]`, `must be ${format} with ${cols} cols like source[0], got ${m.type} (${m.format}) with ${m.cols}`);
    if (i < parts.length - 1 && m.rows % tileRows !== 0) throw new ArgumentError(`source[${i}].rows`, `must be a multiple of ${tileRows} (${format} tile rows) to stack, got ${m.rows}`);
  });
  const rows = parts.reduce((n, m) => n + m.rows, 0);
  const ptr = rt.heap.alloc(weightBytes(format, rows, cols), options.label ?? `weight ${parts[0]!.type} → ${format} [${rows}, ${cols}]`);
  const weight = new Weight(rt.heap, rt.memory, ptr, format, rows, cols);
  let rowOffset = 0;
  for (const m of parts) {
    const { id, blockSize } = GGML_NATIVE[m.type];
    const args = rt.args().ptr(m.bytes.ptr).i32(m.rows).i32(rowOffset).ptr(ptr).i32(id).i32(cols / blockSize).end();
    rt.parallelFor("task_ggml_pack", Math.ceil(m.rows / tileRows), args);
    rowOffset += m.rows;
  }
  return weight;
}

/**
 * Splits the parts of a fused matrix (q, k, v; gate, up) into runs that can
 * each be one Weight: consecutive float sources (createWeight stacks any
 * rows), or consecutive ggml matrices of one Weight format whose rows before
 * the last fill whole tiles (8 rows for q8, 4 for the K-quants). More than
 * one run makes a WeightStack.
 */
export function stackRuns<T>(parts: readonly T[], describe: (p: T) => { native: GgmlNativeType | null; rows: number }): T[][] {
  const runs: T[][] = [];
  let key: StorageFormat | "float" | null = null;
  let rows = 0;
  for (const p of parts) {
    const d = describe(p);
    const k = d.native ? GGML_NATIVE[d.native].format : "float";
    const run = runs[runs.length - 1];
    if (run && k === key && (k === "float" || rows % tileShape(k).rows === 0)) {
      run.push(p);
      rows += d.rows;
    } else {
      runs.push([p]);
      key = k;
      rows = d.rows;
    }
  }
  return runs;
}

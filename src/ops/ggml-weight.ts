/**
 * Native ggml weights: a matrix as a GGUF file stores it (rows of ggml
 * blocks) becomes a Weight without requantizing, so the values the kernels
 * multiply by are exactly those of llama.cpp's dequantize_row_* :
 *
 *   ggml type  Weight format  what is kept
 *   Q8_0       q8             the int8 codes; the f16 scale as f32 (exact)
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
import { Tensor, checkSameMemory } from "../tensor/tensor.js";
import { WEIGHT_FORMAT_CODE, Weight, type StorageFormat, tileShape, weightBytes } from "./weight.js";

/** ggml tensor types that stay native; each with its block geometry and Weight format. */
export const GGML_NATIVE = {
  Q8_0: { blockSize: 32, typeSize: 34, format: "q8" },
  Q4_K: { blockSize: 256, typeSize: 144, format: "q4_k" },
  Q5_K: { blockSize: 256, typeSize: 176, format: "q5_k" },
  Q6_K: { blockSize: 256, typeSize: 210, format: "q6_k" },
} as const satisfies Record<string, { blockSize: number; typeSize: number; format: StorageFormat }>;
export type GgmlNativeType = keyof typeof GGML_NATIVE;

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
  source: GgmlMatrix;
  /** Names the allocation in out-of-memory errors. */
  label?: string;
}

/** Repacks a ggml matrix into a new Weight, in the kernels, on all threads. The source may be freed afterwards. */
export function createGgmlWeight(rt: Runtime, options: CreateGgmlWeightOptions): Weight {
  const m = options.source;
  if (!(m instanceof GgmlMatrix)) throw new ArgumentError("source", `must be a GgmlMatrix, got ${show(m)}`);
  const { blockSize } = GGML_NATIVE[m.type];
  if (!Number.isInteger(m.rows) || m.rows < 1) throw new ArgumentError("source.rows", `must be an integer ≥ 1, got ${show(m.rows)}`);
  if (!Number.isInteger(m.cols) || m.cols < 1 || m.cols % blockSize !== 0) {
    throw new ArgumentError("source.cols", `must be a positive multiple of ${m.type}'s block of ${blockSize}, got ${show(m.cols)}`);
  }
  checkSameMemory("source.bytes", m.bytes.toString(), m.bytes.memory, rt);
  if (m.bytes.dtype !== "uint8") throw new ArgumentError("source.bytes.dtype", `must be uint8, got ${show(m.bytes.dtype)}`);
  checkDims("source.bytes", m.bytes.shape, [m.rows, ggmlNativeRowBytes(m.type, m.cols)], ["rows", "rowBytes"]);
  if (!m.bytes.isContiguous()) throw new ArgumentError("source.bytes", `must be contiguous, got strides ${show(m.bytes.strides)}`);
  const format = m.format;
  const bytes = weightBytes(format, m.rows, m.cols);
  const ptr = rt.heap.alloc(bytes, options.label ?? `weight ${m.type} → ${format} [${m.rows}, ${m.cols}]`);
  const weight = new Weight(rt.heap, rt.memory, ptr, format, m.rows, m.cols);
  const args = rt.args().ptr(m.bytes.ptr).i32(m.rows).ptr(ptr).i32(WEIGHT_FORMAT_CODE[format]).i32(m.cols / blockSize).end();
  rt.parallelFor("task_ggml_pack", Math.ceil(m.rows / tileShape(format).rows), args);
  return weight;
}

/**
 * Splits the parts of a fused matrix (q, k, v; gate, up) into runs that can
 * each be one Weight: consecutive float sources (createWeight stacks any
 * rows), or consecutive ggml matrices of one type whose rows before the last
 * fill whole tiles (8 rows for q8, 4 for the K-quants). More than one run
 * makes a WeightStack.
 */
export function stackRuns<T>(parts: readonly T[], describe: (p: T) => { native: GgmlNativeType | null; rows: number }): T[][] {
  const runs: T[][] = [];
  let key: GgmlNativeType | "float" | null = null;
  let rows = 0;
  for (const p of parts) {
    const d = describe(p);
    const k = d.native ?? "float";
    const run = runs[runs.length - 1];
    if (run && k === key && (k === "float" || rows % tileShape(GGML_NATIVE[k].format).rows === 0)) {
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

/** One GgmlMatrix holding `run` (all of one type and cols) end to end in a new uint8 tensor, or run[0] itself. */
export function concatGgml(rt: Runtime, run: readonly GgmlMatrix[]): GgmlMatrix {
  if (run.length === 1) return run[0]!;
  const rows = run.reduce((n, m) => n + m.rows, 0);
  const rowBytes = ggmlNativeRowBytes(run[0]!.type, run[0]!.cols);
  const out = rt.tensor("uint8", [rows, rowBytes], `${run[0]!.type} rows [${rows}, ${run[0]!.cols}]`);
  const dst = new Uint8Array(rt.memory.buffer, out.ptr, rows * rowBytes);
  let at = 0;
  for (const m of run) {
    dst.set(new Uint8Array(rt.memory.buffer, m.bytes.ptr, m.rows * rowBytes), at);
    at += m.rows * rowBytes;
  }
  return new GgmlMatrix(run[0]!.type, out, rows, run[0]!.cols);
}

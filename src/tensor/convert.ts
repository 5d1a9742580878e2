/**
 * Tensor dtype conversion in the kernels (threaded): decode to f32, encode from
 * f32, or any → any through f32.
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { DTYPE_CODE } from "./dtype.js";
import type { Tensor } from "./tensor.js";

/** Elements per work item: large enough to amortize the claim, small enough to balance. */
const CHUNK = 1 << 16;

export interface ConvertOptions {
  /** fp8 targets: clamp overflow to ±max finite instead of NaN/Inf (OCP saturation). */
  saturate?: boolean;
}

/** Writes `src` converted to `dst.dtype` into `dst` (same shape, both contiguous). */
export function convert(rt: Runtime, src: Tensor, dst: Tensor, options: ConvertOptions = {}): void {
  if (src.numel !== dst.numel || src.shape.some((d, i) => dst.shape[i] !== d) || src.rank !== dst.rank) {
    throw new ArgumentError("dst.shape", `must equal src.shape ${show(src.shape)}, got ${show(dst.shape)}`);
  }
  if (!src.isContiguous()) throw new ArgumentError("src", "must be contiguous");
  if (!dst.isContiguous()) throw new ArgumentError("dst", "must be contiguous");
  for (const [name, t] of [["src", src], ["dst", dst]] as const) {
    if (t.dtype === "int32" || t.dtype === "uint8") {
      throw new ArgumentError(`${name}.dtype`, `must be a float or int8 storage dtype, got ${show(t.dtype)}`);
    }
  }
  const n = src.numel;
  const args = rt
    .args()
    .ptr(src.ptr)
    .ptr(dst.ptr)
    .i32(n)
    .i32(DTYPE_CODE[src.dtype])
    .i32(DTYPE_CODE[dst.dtype])
    .i32(options.saturate ? 1 : 0)
    .i32(CHUNK)
    .end();
  rt.parallelFor("task_convert", Math.ceil(n / CHUNK), args);
}

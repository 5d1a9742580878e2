/**
 * RMSNorm as Llama, Mistral and Qwen compute it (in f32):
 *   out = weight ⊙ x / sqrt(mean(x²) + eps)
 * over the last dimension, for rows of any length: hidden states [T, hidden],
 * the final norm, and Qwen3's per-head q/k norm on [T, H, headDim].
 * `addRmsNorm` fuses the residual add before it (vLLM's fused_add_rms_norm):
 * x ← x + delta (x is the residual stream), then out = norm(x).
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkNumber } from "../tensor/check.js";
import { DTYPE_CODE } from "../tensor/dtype.js";
import type { Tensor } from "../tensor/tensor.js";
import { type RowGrid, asRowGrid, checkDistinctGridRows, checkNoOverlap, checkSameOrDisjoint, checkTensor, checkTensorDType } from "./check.js";

export interface RmsNormOptions {
  /**
   * f32 [..., D], each row contiguous; rows may be strided, also in two levels
   * ([T, H, D] heads inside a fused QKV output: token stride ≠ H·D).
   */
  x: Tensor;
  /** [D] f32, f16 or bf16 (the checkpoint's norm weight). */
  weight: Tensor;
  /** f32, same shape as x; may be x itself (in place). Default: x. */
  out?: Tensor;
  /** The config's rms_norm_eps (Llama 1e-5 or 1e-6, Qwen 1e-6). */
  eps: number;
}

export interface AddRmsNormOptions extends RmsNormOptions {
  /** f32, same shape as x: added into x (the residual stream) before the norm. */
  delta: Tensor;
}

const ROWS_PER_ITEM_TARGET = 16384; // elements per work item, about

function launch(rt: Runtime, options: RmsNormOptions, delta: Tensor | undefined): void {
  const x = checkTensor("x", options.x, rt);
  checkTensorDType("x", x, ["f32"]);
  const out = options.out === undefined ? x : checkTensor("out", options.out, rt);
  checkTensorDType("out", out, ["f32"]);
  const weight = checkTensor("weight", options.weight, rt);
  checkTensorDType("weight", weight, ["f32", "f16", "bf16"]);
  const eps = checkNumber("eps", options.eps, { min: 0 });
  const xm = asRowGrid("x", x);
  const om = asRowGrid("out", out);
  checkDistinctGridRows("x", xm);
  checkDistinctGridRows("out", om);
  if (out.rank !== x.rank || out.shape.some((d, i) => d !== x.shape[i])) {
    throw new ArgumentError("out.shape", `must equal x.shape ${show(x.shape)}, got ${show(out.shape)}`);
  }
  if (weight.rank !== 1 || weight.shape[0] !== xm.cols || !weight.isContiguous()) {
    throw new ArgumentError("weight.shape", `must be [${xm.cols}] (x's last dimension), contiguous, got ${show(weight.shape)}`);
  }
  checkSameOrDisjoint("out", out, "x", x);
  checkNoOverlap("out", out, "weight", weight);
  let dm: RowGrid | undefined;
  if (delta) {
    checkTensorDType("delta", delta, ["f32"]);
    if (delta.rank !== x.rank || delta.shape.some((d, i) => d !== x.shape[i])) {
      throw new ArgumentError("delta.shape", `must equal x.shape ${show(x.shape)}, got ${show(delta.shape)}`);
    }
    dm = asRowGrid("delta", delta);
    checkNoOverlap("x", x, "delta", delta);
    checkSameOrDisjoint("out", out, "delta", delta);
  }
  if (xm.rows === 0 || xm.cols === 0) return;
  const rowsPerItem = Math.max(1, Math.floor(ROWS_PER_ITEM_TARGET / xm.cols));
  const args = rt
    .args()
    .ptr(x.ptr)
    .i32(xm.innerStride * 4)
    .i32(xm.outerStride * 4)
    .ptr(delta ? delta.ptr : 0)
    .i32(dm ? dm.innerStride * 4 : 0)
    .i32(dm ? dm.outerStride * 4 : 0)
    .ptr(out.ptr)
    .i32(om.innerStride * 4)
    .i32(om.outerStride * 4)
    .i32(xm.inner)
    .ptr(weight.ptr)
    .i32(DTYPE_CODE[weight.dtype])
    .i32(xm.cols)
    .i32(xm.rows)
    .i32(rowsPerItem)
    .f32(eps)
    .end();
  rt.parallelFor("task_rmsnorm", Math.ceil(xm.rows / rowsPerItem), args);
}

/** out = weight ⊙ x / sqrt(mean(x²) + eps), row by row. */
export function rmsNorm(rt: Runtime, options: RmsNormOptions): void {
  launch(rt, options, undefined);
}

/** x ← x + delta, then out = rmsNorm(x): the residual add and the next layer's norm in one pass. */
export function addRmsNorm(rt: Runtime, options: AddRmsNormOptions): void {
  launch(rt, options, checkTensor("delta", options.delta, rt));
}

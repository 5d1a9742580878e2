/**
 * x ← s · x in f32, in place: Gemma's embedding times √hidden (transformers'
 * GemmaModel `normalizer`, llama.cpp's `inp_scaled`).
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkNumber } from "../tensor/check.js";
import type { Tensor } from "../tensor/tensor.js";
import { checkTensor, checkTensorDType } from "./check.js";

export interface ScaleOptions {
  /** f32, contiguous, any shape; rewritten in place. */
  x: Tensor;
  /** A finite factor. */
  s: number;
}

const CHUNK = 1 << 15;

/** Checks an in-place elementwise operand: f32, contiguous, in `rt`'s memory. */
export function checkContiguousF32(rt: Runtime, name: string, value: Tensor): Tensor {
  const x = checkTensor(name, value, rt);
  checkTensorDType(name, x, ["f32"]);
  if (!x.isContiguous()) throw new ArgumentError(name, `must be contiguous, got strides ${show(x.strides)}`);
  return x;
}

export function scale(rt: Runtime, options: ScaleOptions): void {
  const x = checkContiguousF32(rt, "x", options.x);
  const s = checkNumber("s", options.s);
  if (x.numel === 0) return;
  const args = rt.args().ptr(x.ptr).i32(x.numel).i32(CHUNK).f32(s).end();
  rt.parallelFor("task_scale", Math.ceil(x.numel / CHUNK), args);
}

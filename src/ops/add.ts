/** Elementwise out = a + b in f32: a decoder layer's residual adds. */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tensor } from "../tensor/tensor.js";
import { checkSameOrDisjoint, checkTensor, checkTensorDType } from "./check.js";

export interface AddOptions {
  /** f32, contiguous, any shape. */
  a: Tensor;
  /** f32, contiguous, the shape of a. */
  b: Tensor;
  /** f32, contiguous, the shape of a; may be a or b itself (x += y). */
  out: Tensor;
}

const CHUNK = 1 << 15;

export function add(rt: Runtime, options: AddOptions): void {
  const a = checkTensor("a", options.a, rt);
  const b = checkTensor("b", options.b, rt);
  const out = checkTensor("out", options.out, rt);
  for (const [name, t] of [["a", a], ["b", b], ["out", out]] as const) {
    checkTensorDType(name, t, ["f32"]);
    if (t.rank !== a.rank || t.shape.some((d, i) => d !== a.shape[i])) {
      throw new ArgumentError(`${name}.shape`, `must equal a.shape ${show(a.shape)}, got ${show(t.shape)}`);
    }
    if (!t.isContiguous()) throw new ArgumentError(name, `must be contiguous, got strides ${show(t.strides)}`);
  }
  checkSameOrDisjoint("out", out, "a", a);
  checkSameOrDisjoint("out", out, "b", b);
  const n = a.numel;
  if (n === 0) return;
  const args = rt.args().ptr(a.ptr).ptr(b.ptr).ptr(out.ptr).i32(n).i32(CHUNK).end();
  rt.parallelFor("task_add", Math.ceil(n / CHUNK), args);
}

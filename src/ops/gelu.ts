/**
 * GELU (Hendrycks & Gimpel 2016) in place, between BERT's up projection (with
 * its bias) and its down projection: exact, x·Φ(x) = ½x(1 + erf(x/√2))
 * (transformers' "gelu", PyTorch's gelu(approximate="none")), or the tanh
 * approximation ½x(1 + tanh(√(2/π)(x + 0.044715x³))) ("gelu_new",
 * "gelu_pytorch_tanh"). Kernel: assembly/ops/activations.ts task_gelu (erf
 * through Numerical Recipes' erfcc); float64 twin: reference/gelu.ts.
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tensor } from "../tensor/tensor.js";
import { checkContiguousF32 } from "./scale.js";

export type GeluForm = "erf" | "tanh";

export interface GeluOptions {
  /** f32, contiguous, any shape ([T, I]); rewritten in place. */
  x: Tensor;
  /** "erf" (exact) or "tanh". */
  form: GeluForm;
}

const CHUNK = 1 << 14;

/** The kernel's code for each form (assembly/ops/activations.ts GELU_ERF, GELU_TANH). */
const FORM_CODES: Readonly<Record<GeluForm, number>> = { erf: 0, tanh: 1 };

export function gelu(rt: Runtime, options: GeluOptions): void {
  const x = checkContiguousF32(rt, "x", options.x);
  if (!Object.hasOwn(FORM_CODES, options.form)) throw new ArgumentError("form", `must be "erf" or "tanh", got ${show(options.form)}`);
  const code = FORM_CODES[options.form];
  if (x.numel === 0) return;
  const args = rt.args().ptr(x.ptr).i32(x.numel).i32(CHUNK).i32(code).end();
  rt.parallelFor("task_gelu", Math.ceil(x.numel / CHUNK), args);
}

/**
 * Logit soft-capping (Gemma 2's final_logit_softcapping; Gemma 2 report §2):
 * x ← cap · tanh(x / cap), in place, so every logit lies in (−cap, cap). The
 * attention scores' softcap lives in the attention kernels (ARCHITECTURE.md).
 */
import type { Runtime } from "../runtime/runtime.js";
import { checkNumber } from "../tensor/check.js";
import type { Tensor } from "../tensor/tensor.js";
import { checkContiguousF32 } from "./scale.js";

export interface SoftcapOptions {
  /** f32, contiguous, any shape (logits [S, V]); rewritten in place. */
  x: Tensor;
  /** > 0 (Gemma 2: 30). */
  cap: number;
}

const CHUNK = 1 << 14;

export function softcap(rt: Runtime, options: SoftcapOptions): void {
  const x = checkContiguousF32(rt, "x", options.x);
  const cap = checkNumber("cap", options.cap, { minExclusive: 0 });
  if (x.numel === 0) return;
  const args = rt.args().ptr(x.ptr).i32(x.numel).i32(CHUNK).f32(cap).end();
  rt.parallelFor("task_softcap", Math.ceil(x.numel / CHUNK), args);
}

/**
 * mergeStates: combines two attention states over disjoint key segments into
 * the state over their union (FlashInfer's merge_state; how split-KV and
 * shared-prefix / cascade attention combine).
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tensor } from "../tensor/tensor.js";
import { MAX_HEAD_DIM, checkTensor } from "./problem.js";

export interface MergeStatesOptions {
  /** f32 [..., D], contiguous: o over segment a (any leading shape, e.g. [T, H, D] or [B, H, Sq, D]). */
  oA: Tensor;
  /** f32 [...] (oA's shape without D), contiguous: natural-log lse over segment a; −Infinity = empty segment. */
  lseA: Tensor;
  /** f32, oA's shape: o over segment b. */
  oB: Tensor;
  /** f32, lseA's shape: lse over segment b. */
  lseB: Tensor;
  /** f32, oA's shape, contiguous; may be oA or oB (in place). Default: allocated with rt.tensor. */
  out?: Tensor;
  /** f32, lseA's shape, contiguous; may be lseA or lseB. Default: allocated with rt.tensor. */
  lseOut?: Tensor;
}

const ROWS_PER_ITEM = 64;

function checkF32Contiguous(argument: string, value: unknown, rt: Runtime, shape?: readonly number[]): Tensor {
  const t = checkTensor(argument, value, rt);
  if (t.dtype !== "f32") throw new ArgumentError(`${argument}.dtype`, `must be "f32", got ${show(t.dtype)}`);
  if (shape && (t.rank !== shape.length || t.shape.some((d, i) => d !== shape[i]))) {
    throw new ArgumentError(`${argument}.shape`, `must be ${show(shape)}, got ${show(t.shape)}`);
  }
  if (!t.isContiguous()) throw new ArgumentError(`${argument}.strides`, `must be contiguous, got ${show(t.strides)} for shape ${show(t.shape)}`);
  return t;
}

/**
 * Per row: m = max(lse_a, lse_b), w = e^(lse − m),
 * o = (w_a·o_a + w_b·o_b) / (w_a + w_b), lse = m + ln(w_a + w_b).
 * Exact when a side is empty: lse_a = −Infinity returns (o_b, lse_b) bit for
 * bit (and vice versa); both empty give o = 0, lse = −Infinity.
 *
 * @returns out f32 (oA's shape) and lse f32 (lseA's shape).
 */
export function mergeStates(rt: Runtime, options: MergeStatesOptions): { out: Tensor; lse: Tensor } {
  if (typeof options !== "object" || options === null) throw new ArgumentError("options", `must be an object, got ${show(options)}`);
  const oA = checkF32Contiguous("oA", options.oA, rt);
  if (oA.rank < 1) throw new ArgumentError("oA.shape", `must be [..., D], got ${show(oA.shape)}`);
  const D = oA.shape[oA.rank - 1]!;
  if (D < 1 || D > MAX_HEAD_DIM) throw new ArgumentError("oA.shape", `head dim must be in [1, ${MAX_HEAD_DIM}], got ${D}`);
  const lseShape = oA.shape.slice(0, -1);
  const lseA = checkF32Contiguous("lseA", options.lseA, rt, lseShape);
  const oB = checkF32Contiguous("oB", options.oB, rt, oA.shape);
  const lseB = checkF32Contiguous("lseB", options.lseB, rt, lseShape);
  const out = options.out === undefined ? undefined : checkF32Contiguous("out", options.out, rt, oA.shape);
  const lseOut = options.lseOut === undefined ? undefined : checkF32Contiguous("lseOut", options.lseOut, rt, lseShape);
  const o = out ?? rt.tensor("f32", oA.shape, "merged o");
  const l = lseOut ?? rt.tensor("f32", lseShape, "merged lse");
  const rows = lseA.numel;
  const args = rt.args().ptr(oA.ptr).ptr(lseA.ptr).ptr(oB.ptr).ptr(lseB.ptr).ptr(o.ptr).ptr(l.ptr).i32(rows).i32(D).i32(ROWS_PER_ITEM).end();
  rt.parallelFor("merge_states_task", Math.ceil(rows / ROWS_PER_ITEM), args);
  return { out: o, lse: l };
}

/**
 * Embedding lookup: out[t, :] = E[ids[t], :] for an embedding matrix E
 * [vocab, hidden] held as a Weight in any format (decoded to f32). With tied
 * embeddings the same Weight is the LM head: `linear({ x, weight: E, out })`.
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { Tensor } from "../tensor/tensor.js";
import { asMatrix, checkDistinctRows, checkTensor, checkTensorDType } from "./check.js";
import { type Weight, checkWeight, gatherRows } from "./weight.js";
import { opsWorkspace } from "./workspace.js";

export interface EmbeddingOptions {
  /** E [vocab, hidden]. */
  weight: Weight;
  /** Token ids [T], each in [0, vocab): int32 Tensor, Int32Array or numbers. */
  ids: Tensor | Int32Array | readonly number[];
  /** f32 [T, hidden] (any rank whose last dimension is hidden), rows possibly strided. */
  out: Tensor;
}

export function embedding(rt: Runtime, options: EmbeddingOptions): void {
  const weight = checkWeight("weight", options.weight, rt);
  const out = checkTensor("out", options.out, rt);
  checkTensorDType("out", out, ["f32"]);
  const om = asMatrix("out", out);
  checkDistinctRows("out", om);
  if (om.cols !== weight.cols) {
    throw new ArgumentError(`out.shape[${out.rank - 1}]`, `must be ${weight.cols} (weight cols), got ${om.cols}`);
  }
  const ids = options.ids;
  let values: ArrayLike<number>;
  let ptr: number;
  if (ids instanceof Tensor) {
    checkTensor("ids", ids, rt);
    checkTensorDType("ids", ids, ["int32"]);
    if (ids.rank !== 1 || !ids.isContiguous()) throw new ArgumentError("ids", `must be a contiguous rank-1 tensor, got shape ${show(ids.shape)}`);
    values = ids.data();
    ptr = ids.ptr;
  } else if (ids instanceof Int32Array || Array.isArray(ids)) {
    values = ids;
    ptr = 0;
  } else {
    throw new ArgumentError("ids", `must be an int32 Tensor, an Int32Array or an array of numbers, got ${show(ids)}`);
  }
  if (values.length !== om.rows) throw new ArgumentError("ids", `must have ${om.rows} entries (out rows), got ${values.length}`);
  for (let i = 0; i < values.length; i++) {
    const id = values[i]!;
    if (!Number.isInteger(id) || id < 0 || id >= weight.rows) {
      throw new ArgumentError(`ids[${i}]`, `must be an integer in [0, ${weight.rows}), got ${show(id)}`);
    }
  }
  if (om.rows === 0) return;
  if (ptr === 0) {
    ptr = opsWorkspace(rt, values.length * 4);
    new Int32Array(rt.memory.buffer, ptr, values.length).set(values);
  }
  gatherRows(rt, weight, ptr, om.rows, out.ptr, om.rowStride * 4);
}

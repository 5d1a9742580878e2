/**
 * The SwiGLU MLP's activation: out = silu(gate) ⊙ up, silu(x) = x·σ(x) —
 * between the gate/up projections and the down projection of Llama, Mistral
 * and Qwen. gate and up may be column slices of one fused [T, 2·I] gate_up
 * output (row-strided views).
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tensor } from "../tensor/tensor.js";
import { asMatrix, checkDistinctRows, checkSameOrDisjoint, checkTensor, checkTensorDType } from "./check.js";

export interface SwigluOptions {
  /** f32 [T, I] (any rank), rows possibly strided. */
  gate: Tensor;
  /** f32, the shape of gate. */
  up: Tensor;
  /** f32, the shape of gate; may be gate or up itself. */
  out: Tensor;
}

const CHUNK = 4096;

export function swiglu(rt: Runtime, options: SwigluOptions): void {
  const gate = checkTensor("gate", options.gate, rt);
  const up = checkTensor("up", options.up, rt);
  const out = checkTensor("out", options.out, rt);
  for (const [name, t] of [["gate", gate], ["up", up], ["out", out]] as const) {
    checkTensorDType(name, t, ["f32"]);
    if (t.rank !== gate.rank || t.shape.some((d, i) => d !== gate.shape[i])) {
      throw new ArgumentError(`${name}.shape`, `must equal gate.shape ${show(gate.shape)}, got ${show(t.shape)}`);
    }
  }
  const gm = asMatrix("gate", gate);
  const um = asMatrix("up", up);
  const om = asMatrix("out", out);
  checkDistinctRows("out", om);
  checkSameOrDisjoint("out", out, "gate", gate);
  checkSameOrDisjoint("out", out, "up", up);
  if (gm.rows === 0 || gm.cols === 0) return;
  const chunksPerRow = Math.ceil(gm.cols / CHUNK);
  const args = rt
    .args()
    .ptr(gate.ptr)
    .i32(gm.rowStride * 4)
    .ptr(up.ptr)
    .i32(um.rowStride * 4)
    .ptr(out.ptr)
    .i32(om.rowStride * 4)
    .i32(gm.cols)
    .i32(CHUNK)
    .i32(chunksPerRow)
    .end();
  rt.parallelFor("task_swiglu", gm.rows * chunksPerRow, args);
}

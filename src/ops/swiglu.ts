/**
 * The gated MLP activations, between the gate/up projections and the down
 * projection: SwiGLU out = silu(gate) ⊙ up, silu(x) = x·σ(x) (Llama, Mistral,
 * Qwen, Phi-3), and GeGLU out = gelu_tanh(gate) ⊙ up (Gemma; PyTorch's
 * gelu(approximate="tanh")). gate and up may be column slices of one fused
 * [T, 2·I] gate_up output (row-strided views).
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

/** out = silu(gate) ⊙ up. */
export function swiglu(rt: Runtime, options: SwigluOptions): void {
  gated(rt, options, "task_swiglu");
}

/** out = gelu_tanh(gate) ⊙ up (same options as swiglu). */
export function geglu(rt: Runtime, options: SwigluOptions): void {
  gated(rt, options, "task_geglu");
}

function gated(rt: Runtime, options: SwigluOptions, kernel: "task_swiglu" | "task_geglu"): void {
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
  rt.parallelFor(kernel, gm.rows * chunksPerRow, args);
}

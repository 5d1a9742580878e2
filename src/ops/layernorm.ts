/**
 * LayerNorm as torch.nn.LayerNorm computes it (Ba et al. 2016; biased
 * variance, eps inside the square root), with a bias, over the last dimension
 * — BERT's embedding norm and its post-LN residual norms — and `addLayerNorm`,
 * the residual add fused in front (transformers' BertSelfOutput / BertOutput:
 * LayerNorm(hidden + input)), the RMSNorm pair's shape (rmsnorm.ts). Kernel:
 * assembly/ops/layernorm.ts; float64 twin: reference/layernorm.ts.
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkNumber } from "../tensor/check.js";
import type { Tensor } from "../tensor/tensor.js";
import { type MatrixView, asMatrix, checkDistinctRows, checkNoOverlap, checkSameOrDisjoint, checkTensor, checkTensorDType } from "./check.js";

export interface LayerNormOptions {
  /** f32 [..., D] (leading dimensions are rows), rows possibly strided, each row contiguous. */
  x: Tensor;
  /** f32 [D], contiguous: the gain (γ). */
  weight: Tensor;
  /** f32 [D], contiguous: the bias (β). */
  bias: Tensor;
  /** f32, the shape of x; may be x itself (in place). Default: x. */
  out?: Tensor;
  /** The config's layer_norm_eps (BERT 1e-12, XLM-R 1e-5). */
  eps: number;
}

export interface AddLayerNormOptions extends LayerNormOptions {
  /** f32, the shape of x: out = LayerNorm(x + delta). Neither x nor delta is written unless it is out. */
  delta: Tensor;
}

/** Elements per work item, about (rmsnorm.ts's split). */
const ELEMENTS_PER_ITEM = 16384;

function sameShape(name: string, t: Tensor, x: Tensor): void {
  if (t.rank !== x.rank || t.shape.some((d, i) => d !== x.shape[i])) {
    throw new ArgumentError(`${name}.shape`, `must equal x.shape ${show(x.shape)}, got ${show(t.shape)}`);
  }
}

function launch(rt: Runtime, options: LayerNormOptions, deltaIn: Tensor | undefined): void {
  const x = checkTensor("x", options.x, rt);
  checkTensorDType("x", x, ["f32"]);
  const out = options.out === undefined ? x : checkTensor("out", options.out, rt);
  checkTensorDType("out", out, ["f32"]);
  sameShape("out", out, x);
  const eps = checkNumber("eps", options.eps, { min: 0 });
  const xm = asMatrix("x", x);
  const om = asMatrix("out", out);
  checkDistinctRows("out", om);
  for (const name of ["weight", "bias"] as const) {
    const t = checkTensor(name, options[name], rt);
    checkTensorDType(name, t, ["f32"]);
    if (t.rank !== 1 || t.shape[0] !== xm.cols || !t.isContiguous()) {
      throw new ArgumentError(`${name}.shape`, `must be [${xm.cols}] (x's last dimension), contiguous, got ${show(t.shape)}`);
    }
    checkNoOverlap("out", out, name, t);
  }
  checkSameOrDisjoint("out", out, "x", x);
  let dm: MatrixView | undefined;
  if (deltaIn !== undefined) {
    const delta = checkTensor("delta", deltaIn, rt);
    checkTensorDType("delta", delta, ["f32"]);
    sameShape("delta", delta, x);
    dm = asMatrix("delta", delta);
    checkSameOrDisjoint("out", out, "delta", delta);
  }
  if (xm.rows === 0 || xm.cols === 0) return;
  const rowsPerItem = Math.max(1, Math.floor(ELEMENTS_PER_ITEM / xm.cols));
  const args = rt
    .args()
    .ptr(x.ptr)
    .i32(xm.rowStride * 4)
    .ptr(deltaIn === undefined ? 0 : deltaIn.ptr)
    .i32(dm === undefined ? 0 : dm.rowStride * 4)
    .ptr(out.ptr)
    .i32(om.rowStride * 4)
    .ptr(options.weight.ptr)
    .ptr(options.bias.ptr)
    .i32(xm.cols)
    .i32(xm.rows)
    .i32(rowsPerItem)
    .f32(eps)
    .end();
  rt.parallelFor("task_layernorm", Math.ceil(xm.rows / rowsPerItem), args);
}

/** out = (x − mean) / sqrt(var + eps) ⊙ weight + bias, row by row. */
export function layerNorm(rt: Runtime, options: LayerNormOptions): void {
  launch(rt, options, undefined);
}

/** out = layerNorm(x + delta): post-LN BERT's residual add and norm in one pass. */
export function addLayerNorm(rt: Runtime, options: AddLayerNormOptions): void {
  launch(rt, options, options.delta);
}

/**
 * linear: out[T, rows] = x[T, cols] · Wᵀ (+ bias) — every projection of a
 * decoder layer and the LM head. T = 1 runs the GEMV kernels (decode), T > 1
 * the register-blocked GEMM kernels (prefill, batched decode); both threaded
 * over row groups, both giving bit-identical rows (a token's output does not
 * depend on the batch it is in, nor on the thread count).
 *
 * q8/q4 weights: x is first quantized per block of 32 like GGUF Q8_0 (int8
 * codes with one f32 scale, d = max|x|/127), once per call, and the kernels
 * take exact int32 dot products of the codes (i32x4.dot_i16x8_s) before
 * scaling, as llama.cpp's Q8_0 × Q8_0 / Q4_0 × Q8_0 dots do; q5 (GGUF Q5_0
 * kept natively) likewise. Native K-quant weights and stacks of several
 * formats go to kquant-linear.ts.
 */
import { ArgumentError, show } from "../errors.js";
import { type Int8DotMode, v8Major } from "../runtime/module.js";
import type { Runtime } from "../runtime/runtime.js";
import type { Tensor } from "../tensor/tensor.js";
import { asMatrix, checkDistinctRows, checkNoOverlap, checkTensor, checkTensorDType } from "./check.js";
import { eachStackPart, kquantLinear } from "./kquant-linear.js";
import { workItems } from "./partition.js";
import { WEIGHT_BLOCK, WEIGHT_TILE_BYTES, type Weight, WeightStack, checkWeight, isKquantFormat } from "./weight.js";
import { opsWorkspace } from "./workspace.js";

export interface LinearOptions {
  /**
   * f32 [T, cols] (any rank: leading dimensions are tokens), rows possibly
   * strided, each row contiguous.
   */
  x: Tensor;
  /** W [rows, cols] in any format. */
  weight: Weight;
  /** f32 [T, rows] (same leading dimensions as x), rows possibly strided; must not overlap x or bias. */
  out: Tensor;
  /** f32 [rows], added to every output row (Qwen2's q/k/v projections). */
  bias?: Tensor;
}

/**
 * Below this much work (weight bytes × tokens) a linear runs on the calling
 * thread alone, as one work item: a fork–join costs ≈ 5–20 µs on an idle
 * machine and milliseconds when other processes hold the cores (the woken
 * worker waits for a time slice), while a 128 KiB q8 matrix streams in
 * ≈ 10 µs. The small projections of tiny models (hidden 256: 74–590 KB each)
 * then cost no fork–join per decode step. The item split does not change the
 * arithmetic, so outputs stay bit-identical.
 */
const INLINE_WORK = 256 << 10;

/** The kernels' code for each integer dot (assembly/runtime/flavor.ts DOT_I16, DOT_I7, DOT_U8). */
const DOT_CODES: Readonly<Record<Int8DotMode, number>> = { i16: 0, i7: 1, u8: 2 };

/** From this many tokens (baseline flavor: above 16) q8 on the int16 dot widens each row group's codes in thread scratch (assembly/linalg/linear.ts WIDEN_TOKENS). */
const WIDEN_TOKENS = 8;
/**
 * Whether the baseline flavor's q8 also widens at 16 tokens where rows are
 * long (assembly/linalg/linear.ts WIDEN_FEW_NB): under V8 12 (Node 22) and 11
 * (Node 20), whose 8-row tiles it beats there (1.07–1.14×); V8 13 (Node 24)
 * runs those tiles faster than the widened ones (0.92–0.95×).
 */
const BASELINE_WIDENS_FEW = v8Major() < 13;

/** Bytes of one widened q8 tile: int16 codes and the f32 scales (assembly/linalg/gemm.ts TILE_Q8_I16). */
const TILE_Q8_I16_BYTES = 544;

/** From this many tokens a q5 linear runs the q8 GEMMs on unpacked row groups (assembly/linalg/linear.ts Q5_GEMM_TOKENS). */
const Q5_GEMM_TOKENS = 4;

export function linear(rt: Runtime, options: LinearOptions): void {
  const weight = checkWeight("weight", options.weight, rt);
  const x = checkTensor("x", options.x, rt);
  const out = checkTensor("out", options.out, rt);
  checkTensorDType("x", x, ["f32"]);
  checkTensorDType("out", out, ["f32"]);
  const xm = asMatrix("x", x);
  const om = asMatrix("out", out);
  if (xm.cols !== weight.cols) {
    throw new ArgumentError(`x.shape[${x.rank - 1}]`, `must be ${weight.cols} (weight cols), got ${xm.cols}`);
  }
  if (om.cols !== weight.rows) {
    throw new ArgumentError(`out.shape[${out.rank - 1}]`, `must be ${weight.rows} (weight rows), got ${om.cols}`);
  }
  if (out.rank !== x.rank || out.shape.some((d, i) => i < x.rank - 1 && d !== x.shape[i])) {
    throw new ArgumentError("out.shape", `must be ${show([...x.shape.slice(0, -1), weight.rows])} for x of shape ${show(x.shape)}, got ${show(out.shape)}`);
  }
  checkDistinctRows("out", om);
  checkNoOverlap("out", out, "x", x);
  let bias = 0;
  if (options.bias !== undefined) {
    const b = checkTensor("bias", options.bias, rt);
    checkTensorDType("bias", b, ["f32"]);
    if (b.rank !== 1 || b.shape[0] !== weight.rows) {
      throw new ArgumentError("bias.shape", `must be [${weight.rows}] (weight rows), got ${show(b.shape)}`);
    }
    if (!b.isContiguous()) throw new ArgumentError("bias", `must be contiguous, got strides ${show(b.strides)}`);
    checkNoOverlap("out", out, "bias", b);
    bias = b.ptr;
  }
  const T = xm.rows;
  if (T === 0) return;
  if (weight instanceof WeightStack) {
    eachStackPart(weight, out, options.bias, (part, o, b) => linear(rt, { x, weight: part, out: o, ...(b ? { bias: b } : {}) }));
    return;
  }
  if (isKquantFormat(weight.format)) {
    kquantLinear(rt, weight, xm, om, bias);
    return;
  }

  // Prepare the activation: quantized codes (q8, q4) or zero-padded rows (f32, bf16).
  // The codes' form follows the integer dot (runtime/module.ts Int8DotMode;
  // assembly/runtime/flavor.ts DOT_I16 = 0, DOT_I7 = 1, DOT_U8 = 2): q8 takes
  // the runtime's mode; q4 the relaxed dot only in the u8 mode with T > 1 (its
  // GEMM, assembly/linalg/gemm.ts gemmQ4U8: codes + 128, each 8 in the q4
  // chunks' column order, activation.ts Q4_ORDER), else int16 codes; q5 the
  // runtime's mode from Q5_GEMM_TOKENS tokens (its row groups unpacked to q8
  // for the q8 kernels, assembly/linalg/linear.ts task_linear_q5), else int16
  // codes (its GEMV, q5.ts gemvQ5x2).
  const dot = weight.format === "q8" || (weight.format === "q5" && T >= Q5_GEMM_TOKENS) ? DOT_CODES[rt.int8Dot]
    : weight.format === "q4" && rt.int8Dot === "u8" && T > 1 ? DOT_CODES.u8 : DOT_CODES.i16;
  const q4 = weight.format === "q4" && dot === DOT_CODES.u8 ? 1 : 0;
  const nb = weight.blocks;
  const padded = nb * WEIGHT_BLOCK;
  let xPtr = x.ptr;
  let xStride = xm.rowStride * 4;
  let xs = 0;
  if (weight.format === "q8" || weight.format === "q4" || weight.format === "q5") {
    const codeBytes = T * padded * 2;
    const ws = opsWorkspace(rt, codeBytes + T * nb * 4 + 64);
    xs = ws + Math.ceil(codeBytes / 64) * 64;
    const args = rt.args().ptr(x.ptr).i32(xm.rowStride * 4).i32(xm.cols).i32(nb).ptr(ws).i32(padded * 2).ptr(xs).i32(dot).i32(q4).end();
    rt.parallelFor("task_act_quantize_q8", T, args);
    xPtr = ws;
    xStride = padded * 2;
  } else if (xm.cols !== padded || (T > 1 && xm.rowStride !== padded)) {
    const ws = opsWorkspace(rt, T * padded * 4);
    const args = rt.args().ptr(x.ptr).i32(xm.rowStride * 4).i32(xm.cols).i32(nb).ptr(ws).i32(padded * 4).ptr(0).i32(0).i32(0).end();
    rt.parallelFor("task_act_pad", T, args);
    xPtr = ws;
    xStride = padded * 4;
  }

  const items = weight.byteLength * T < INLINE_WORK ? Int32Array.of(0, weight.groups) : workItems(weight.groups, weight.byteLength, rt.threads);
  // The kernels' per-thread results: up to 5 tokens × 8 rows of f32 (assembly/linalg/gemm-few.ts gemmQ8Rows8x5U8);
  // q5: then, from byte 256, one row group unpacked to q8 tiles, or 16·Σx per token and block (linear.ts Q5_SCRATCH);
  // q8 and q5 on the int16 dot: then a row group's codes widened to int16 (gemm.ts TILE_Q8_I16, linear.ts WIDEN_TOKENS).
  // (The baseline flavor widens two q8 row groups at once for its 16-row tiles: gemm.ts gemmQ8I16Rows16x2; q5 one.)
  const widenedGroups = weight.format === "q8" && rt.kernels === "baseline" ? 2 : 1;
  const widened = dot === DOT_CODES.i16 && T >= WIDEN_TOKENS && (weight.format === "q8" || weight.format === "q5") ? nb * TILE_Q8_I16_BYTES * widenedGroups : 0;
  const scratch = rt.threadScratch(weight.format === "q5" ? 256 + nb * WEIGHT_TILE_BYTES.q8 + widened : widened ? 256 + widened : 160);
  const writer = rt.args();
  const starts = writer.i32Array(items);
  const args = writer
    .ptr(weight.ptr)
    .i32(nb)
    .i32(weight.groups)
    .i32(weight.rows)
    .ptr(xPtr)
    .i32(xStride)
    .ptr(xs)
    .i32(T)
    .ptr(out.ptr)
    .i32(om.rowStride * 4)
    .ptr(bias)
    .ptr(starts)
    .ptr(scratch.ptr)
    .i32(scratch.stride)
    .i32(dot)
    .i32(rt.kernels === "baseline" && BASELINE_WIDENS_FEW ? 1 : 0)
    .end();
  rt.parallelFor(`task_linear_${weight.format}`, items.length - 1, args);
}

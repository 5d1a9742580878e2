/**
 * linear() for native K-quant weights (q2_k, q3_k, q4_k, q5_k, q6_k,
 * iq4_xs) and for stacks of weights of several formats; linear.ts
 * validates, then hands over here.
 *
 * K-quants follow llama.cpp's ggml_vec_dot_q{2..6}_K_q8_K / iq4_xs_q8_K: the
 * activation is quantized once per call per superblock of 256 like ggml's
 * Q8_K (d = max|x|/127, int8 codes — int16 on the baseline flavor — and the
 * sums of the codes per 16), and the
 * kernels take exact int32 dot products of the codes, weighted by the integer
 * sub-block scales, before one or two f32 multiply-adds per superblock
 * (assembly/linalg/kquant-dot.ts). Threaded like the q8 linear: runs of quads
 * (4 rows) per work item (partition.ts).
 */
import type { Runtime } from "../runtime/runtime.js";
import { Tensor } from "../tensor/tensor.js";
import type { MatrixView } from "./check.js";
import { KQUANT_BLOCK, KQUANT_ROW_GROUP, type Weight, WeightStack } from "./weight.js";
import { workItems } from "./partition.js";
import { opsWorkspace } from "./workspace.js";

const align64 = (n: number): number => Math.ceil(n / 64) * 64;

/** From this many tokens Q4_K, Q5_K and Q6_K widen each quad once in thread scratch (the Runtime's kquantWide; assembly/linalg/kquant-linear.ts args.wide): one decode of a quad for all its 4-token tiles. */
const WIDEN_KQUANT_TOKENS = 8;
/** Bytes of one widened superblock (assembly/linalg/kquant-dot.ts): Q6_K's int16 codes sc·(q − 32) and d (TILE_Q6_K_I16); Q4_K's and Q5_K's sc·q, d, dmin and mins (TILE_Q45_K_I16). */
const WIDE_TILE_BYTES: Partial<Record<Weight["format"], number>> = { q6_k: 2064, q4_k: 2208, q5_k: 2208 };

/** out = x · Wᵀ (+ bias) for a validated K-quant weight; x rows of weight.cols = nsb · 256 f32. */
export function kquantLinear(rt: Runtime, weight: Weight, x: MatrixView, out: MatrixView, bias: number): void {
  const T = x.rows;
  const nsb = weight.cols / KQUANT_BLOCK;
  // Bytes of a widened superblock: with kquantWide, Q4_K, Q5_K and Q6_K from WIDEN_KQUANT_TOKENS tokens (0: no widening).
  const wideTile = rt.kquantWide && T >= WIDEN_KQUANT_TOKENS ? (WIDE_TILE_BYTES[weight.format] ?? 0) : 0;
  const codeBytes = align64(T * weight.cols * 2); // int8 codes (relaxed) or int16 (baseline)
  const scaleBytes = align64(T * nsb * 4);
  const sumBytes = align64(T * nsb * 64);
  // The widened kernels read int16 codes: the baseline's own; on relaxed a copy the quantizer writes beside its int8 codes.
  const copy16 = wideTile && rt.kernels === "relaxed" ? codeBytes : 0;
  const ws = opsWorkspace(rt, codeBytes + scaleBytes + sumBytes + copy16);
  const xd = ws + codeBytes;
  const xsum = xd + scaleBytes;
  const xq16 = !wideTile ? 0 : copy16 ? xsum + sumBytes : ws;
  rt.parallelFor("task_act_quantize_q8k", T, rt.args().ptr(x.tensor.ptr).i32(x.rowStride * 4).i32(nsb).ptr(ws).ptr(xd).ptr(xsum).ptr(copy16 ? xq16 : 0).end());

  const quads = Math.ceil(weight.rows / KQUANT_ROW_GROUP);
  const items = workItems(quads, weight.byteLength, rt.threads);
  // The kernels' results (128 bytes), then two quads widened to int16 (assembly/linalg/kquant-linear.ts: the two-quad
  // widened tiles); unwidened, relaxed Q4_K's two-quad tile's sums in those next 128 bytes (kquant-dot.ts gemmQ4KPairOfQuads).
  const scratch = rt.threadScratch(Math.max(256, 128 + 2 * nsb * wideTile));
  const writer = rt.args();
  const starts = writer.i32Array(items);
  const args = writer
    .ptr(weight.ptr)
    .i32(nsb)
    .i32(quads)
    .i32(weight.rows)
    .ptr(ws)
    .ptr(xd)
    .ptr(xsum)
    .i32(T)
    .ptr(out.tensor.ptr)
    .i32(out.rowStride * 4)
    .ptr(bias)
    .ptr(starts)
    .ptr(scratch.ptr)
    .i32(scratch.stride)
    // Q2_K … Q6_K sum their dots in int16 pairs where the relaxed dot is pmaddubsw (kquant-dot.ts gemvQ4KPairs): the same exact sums.
    .i32(rt.kquantPairs ? 1 : 0)
    // Bytes of a widened superblock (0: no widening).
    .i32(wideTile)
    // The int16 activation codes the widened kernels read (0: no widening).
    .ptr(xq16)
    .end();
  rt.parallelFor(`task_linear_${weight.format}`, items.length - 1, args);
}

/** The slice of columns [c0, c0 + n) of every row of a [.., cols] f32 tensor (out or bias), as a tensor. */
export function columnSlice(t: Tensor, c0: number, n: number): Tensor {
  return new Tensor(t.memory, t.ptr + c0 * 4, t.dtype, [...t.shape.slice(0, -1), n], t.strides);
}

/** Runs `part` for each part of a stack over its slice of out's columns (and of bias). */
export function eachStackPart(stack: WeightStack, out: Tensor, bias: Tensor | undefined, run: (part: Weight, out: Tensor, bias: Tensor | undefined) => void): void {
  let row = 0;
  for (const part of stack.parts) {
    run(part, columnSlice(out, row, part.rows), bias ? columnSlice(bias, row, part.rows) : undefined);
    row += part.rows;
  }
}

/**
 * Validation shared by the attention operators: turns the caller's tensors and
 * options into an AttentionProblem (dims, element strides, per-sequence
 * extents, normalized score options) or throws an ArgumentError naming the
 * argument and the value — always before any kernel runs or anything is
 * allocated.
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { broadcastStrides, checkBoolean, checkInt, checkNumber } from "../tensor/check.js";
import type { DType } from "../tensor/dtype.js";
import { Tensor, checkTensor } from "../tensor/tensor.js";
import type { AttentionLayout, AttentionOptions } from "./types.js";

export const MAX_HEAD_DIM = 256;
export const KV_DTYPES: readonly DType[] = ["f32", "f16", "bf16"];
export const LAYOUTS: readonly AttentionLayout[] = ["BNSD", "BSND", "TND"];

/** Element strides of a [batch, head, token, dim] operand (dim stride is 1). */
export interface Operand {
  ptr: number;
  sB: number;
  sH: number;
  sS: number;
}

/** A broadcast [B, H, Sq, Sk] operand: element strides, 0 on broadcast dims. */
export interface Broadcast4 {
  ptr: number;
  sB: number;
  sH: number;
  sI: number;
  sJ: number;
}

export interface ScoreOptions {
  scale: number;
  softcap: number;
  causal: boolean;
  winLeft: number;
  winRight: number;
  alibi?: { ptr: number; sB: number };
  bias?: Broadcast4;
  mask?: Broadcast4;
}

/** One sequence's extents: first query token and key (along the S/T axis) and counts. */
export interface SeqExtent {
  q0: number;
  sq: number;
  k0: number;
  sk: number;
}

/** A paged cache's addressing (k/v operands then hold sS = the slot stride, sH = D). */
export interface PagedOperands {
  /** Address of the int32 block table [B, maxBlocksPerSeq]. */
  blockTable: number;
  maxBlocksPerSeq: number;
  blockSize: number;
}

/** How stored K/V decode (assembly/attention/args.ts AttnArgs.quant …). */
export interface KvDequant {
  /** KV_QUANT_CODE of src/kv/kv-quant.ts. */
  quant: number;
  kScalar: number;
  vScalar: number;
  /** Addresses of the f32 scale/offset arrays (0 when absent). */
  kScale: number;
  vScale: number;
  kOffset: number;
  vOffset: number;
  /** int8: 0 = dequantize tiles; 2 | 3 = the integer path with that many int8 rows. */
  intRows: number;
}

export interface AttentionProblem {
  layout: AttentionLayout;
  B: number;
  H: number;
  Hkv: number;
  G: number;
  D: number;
  q: Operand;
  k: Operand;
  v: Operand;
  kvDtype: DType;
  seqs: readonly SeqExtent[];
  score: ScoreOptions;
  out: Tensor;
  outOp: Operand;
  lse?: Tensor;
  lseOp: Operand;
  /** Tensors this call allocated (freed again if a later step throws). */
  allocated: Tensor[];
  /** Paged K/V (pagedAttention). */
  paged?: PagedOperands;
  /** Quantized K/V (pagedAttention). */
  dequant?: KvDequant;
}

/** Shape of one q/k/v/out tensor read through a layout. */
export interface LayoutDims {
  /** Batch (undefined for TND). */
  B?: number;
  N: number;
  /** Tokens per sequence (BNSD/BSND) or in total (TND). */
  S: number;
  D: number;
  op: Operand;
}

/** Re-exported for the ops that import their checks from here. */
export { checkTensor };

export function checkLayout(argument: string, value: unknown, allowed: readonly AttentionLayout[]): AttentionLayout {
  if (typeof value !== "string" || !(allowed as readonly string[]).includes(value)) {
    throw new ArgumentError(argument, `must be one of ${allowed.map((l) => JSON.stringify(l)).join(" | ")}, got ${show(value)}`);
  }
  return value as AttentionLayout;
}

/** Reads [B, N, S, D] (or [T, N, D] for TND) of `t` through `layout`; the head dim must be contiguous. */
export function readLayout(argument: string, t: Tensor, layout: AttentionLayout): LayoutDims {
  const names = layout === "BNSD" ? "[B, N, S, D]" : layout === "BSND" ? "[B, S, N, D]" : "[T, N, D]";
  const rank = layout === "TND" ? 3 : 4;
  if (t.rank !== rank) throw new ArgumentError(`${argument}.shape`, `must have rank ${rank} ${names} for layout ${layout}, got ${show(t.shape)}`);
  const D = t.shape[rank - 1]!;
  if (D > 1 && t.strides[rank - 1] !== 1) {
    throw new ArgumentError(`${argument}.strides`, `must have a contiguous head dim (last stride 1), got ${show(t.strides)}`);
  }
  const s = t.strides;
  if (layout === "BNSD") return { B: t.shape[0]!, N: t.shape[1]!, S: t.shape[2]!, D, op: { ptr: t.ptr, sB: s[0]!, sH: s[1]!, sS: s[2]! } };
  if (layout === "BSND") return { B: t.shape[0]!, S: t.shape[1]!, N: t.shape[2]!, D, op: { ptr: t.ptr, sB: s[0]!, sS: s[1]!, sH: s[2]! } };
  return { N: t.shape[1]!, S: t.shape[0]!, D, op: { ptr: t.ptr, sB: 0, sS: s[0]!, sH: s[1]! } };
}

/** The lse shape for an output of `layout`: out's shape without D. */
export function lseShape(layout: AttentionLayout, B: number, H: number, S: number): number[] {
  return layout === "BNSD" ? [B, H, S] : layout === "BSND" ? [B, S, H] : [S, H];
}

function lseOperand(layout: AttentionLayout, t: Tensor): Operand {
  const s = t.strides;
  if (layout === "BNSD") return { ptr: t.ptr, sB: s[0]!, sH: s[1]!, sS: s[2]! };
  if (layout === "BSND") return { ptr: t.ptr, sB: s[0]!, sS: s[1]!, sH: s[2]! };
  return { ptr: t.ptr, sB: 0, sS: s[0]!, sH: s[1]! };
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** q, k and v of a dense attention call, read through `layout`, with their dtypes and head counts checked. */
export function readQkv(rt: Runtime, options: AttentionOptions & { q: unknown; k: unknown; v: unknown }, layout: AttentionLayout) {
  const q = checkTensor("q", options.q, rt);
  const k = checkTensor("k", options.k, rt);
  const v = checkTensor("v", options.v, rt);
  const qd = readLayout("q", q, layout);
  const kd = readLayout("k", k, layout);
  const vd = readLayout("v", v, layout);
  return { q, qd, kd, vd, ...checkHeads(options, qd, kd, vd, q, k, v) };
}

/** Checks q/k/v dtypes and head counts shared by every layout; returns (H, Hkv, G, D). */
function checkHeads(
  options: AttentionOptions,
  qd: LayoutDims,
  kd: LayoutDims,
  vd: LayoutDims,
  q: Tensor,
  k: Tensor,
  v: Tensor,
): { H: number; Hkv: number; G: number; D: number; kvDtype: DType } {
  if (q.dtype !== "f32") throw new ArgumentError("q.dtype", `must be "f32", got ${show(q.dtype)}`);
  if (!KV_DTYPES.includes(k.dtype)) throw new ArgumentError("k.dtype", `must be one of ${KV_DTYPES.join(" | ")}, got ${show(k.dtype)}`);
  if (v.dtype !== k.dtype) throw new ArgumentError("v.dtype", `must equal k.dtype ${show(k.dtype)}, got ${show(v.dtype)}`);
  const D = qd.D;
  if (D < 1 || D > MAX_HEAD_DIM) throw new ArgumentError("q.shape", `head dim must be in [1, ${MAX_HEAD_DIM}], got ${D}`);
  if (kd.D !== D) throw new ArgumentError("k.shape", `head dim must equal q's ${D}, got ${kd.D}`);
  if (vd.D !== D) throw new ArgumentError("v.shape", `head dim must equal q's ${D}, got ${vd.D}`);
  const H = qd.N;
  const Hkv = kd.N;
  if (vd.N !== Hkv) throw new ArgumentError("v.shape", `KV heads must equal k's ${Hkv}, got ${vd.N}`);
  if (H < 1) throw new ArgumentError("q.shape", `must have at least one head, got ${show(q.shape)}`);
  if (Hkv < 1) throw new ArgumentError("k.shape", `must have at least one KV head, got ${show(k.shape)}`);
  if (options.numHeads !== undefined && checkInt("numHeads", options.numHeads, { min: 1 }) !== H) {
    throw new ArgumentError("numHeads", `must match q's ${H} heads, got ${options.numHeads}`);
  }
  if (options.numKvHeads !== undefined && checkInt("numKvHeads", options.numKvHeads, { min: 1 }) !== Hkv) {
    throw new ArgumentError("numKvHeads", `must match k's ${Hkv} KV heads, got ${options.numKvHeads}`);
  }
  if (H % Hkv !== 0) throw new ArgumentError("numHeads", `must be a multiple of numKvHeads ${Hkv} (GQA), got ${H}`);
  return { H, Hkv, G: H / Hkv, D, kvDtype: k.dtype };
}

function broadcast4(argument: string, t: Tensor, target: readonly number[]): Broadcast4 {
  if (t.rank < 1) throw new ArgumentError(`${argument}.shape`, `must have rank 1 to 4, got ${show(t.shape)}`);
  const strides = broadcastStrides(argument, t.shape, target); // throws naming the dimension that fails
  const offset = target.length - t.rank;
  for (let i = 0; i < t.rank; i++) strides[i + offset] = t.shape[i] === 1 ? 0 : t.strides[i]!;
  return { ptr: t.ptr, sB: strides[0]!, sH: strides[1]!, sI: strides[2]!, sJ: strides[3]! };
}

/**
 * Normalizes the score options. `logical` is the [B, H, Sq, Sk] shape bias and
 * mask broadcast to (TND: the longest Sq and Sk; padded caches: the capacity).
 */
export function resolveScoreOptions(rt: Runtime, options: AttentionOptions, D: number, logical: readonly [number, number, number, number]): ScoreOptions {
  const [B, H] = logical;
  const scale = options.scale === undefined ? 1 / Math.sqrt(D) : checkNumber("scale", options.scale);
  const softcap = options.softcap === undefined ? 0 : checkNumber("softcap", options.softcap, { min: 0 });
  const causal = options.causal === undefined ? false : checkBoolean("causal", options.causal);
  let winLeft = -1;
  let winRight = -1;
  if (options.window !== undefined) {
    const w = options.window as unknown;
    if (!Array.isArray(w) || w.length !== 2) throw new ArgumentError("window", `must be [left, right], got ${show(w)}`);
    winLeft = checkInt("window[0]", w[0], { min: -1 });
    winRight = checkInt("window[1]", w[1], { min: -1 });
  }
  const score: ScoreOptions = { scale, softcap, causal, winLeft, winRight };
  if (options.alibiSlopes !== undefined) {
    const t = checkTensor("alibiSlopes", options.alibiSlopes, rt);
    if (t.dtype !== "f32") throw new ArgumentError("alibiSlopes.dtype", `must be "f32", got ${show(t.dtype)}`);
    if (t.rank === 1 && t.shape[0] === H) score.alibi = { ptr: t.ptr, sB: 0 };
    else if (t.rank === 2 && t.shape[0] === B && t.shape[1] === H) score.alibi = { ptr: t.ptr, sB: t.strides[0]! };
    else throw new ArgumentError("alibiSlopes.shape", `must be [${H}] or [${B}, ${H}], got ${show(t.shape)}`);
    if (t.strides[t.rank - 1] !== 1 && H > 1) throw new ArgumentError("alibiSlopes.strides", `must be contiguous over heads, got ${show(t.strides)}`);
  }
  if (options.bias !== undefined) {
    const t = checkTensor("bias", options.bias, rt);
    if (t.dtype !== "f32") throw new ArgumentError("bias.dtype", `must be "f32", got ${show(t.dtype)}`);
    score.bias = broadcast4("bias", t, logical);
  }
  if (options.mask !== undefined) {
    const t = checkTensor("mask", options.mask, rt);
    if (t.dtype !== "uint8") throw new ArgumentError("mask.dtype", `must be "uint8" (nonzero = masked out), got ${show(t.dtype)}`);
    score.mask = broadcast4("mask", t, logical);
  }
  return score;
}

/** Validates (or allocates) out and lse for an output shaped like q. Allocations are recorded in `allocated`. */
export function resolveOutputs(
  rt: Runtime,
  options: AttentionOptions,
  q: Tensor,
  layout: AttentionLayout,
  B: number,
  H: number,
  S: number,
  allocated: Tensor[],
): { out: Tensor; outOp: Operand; lse?: Tensor; lseOp: Operand } {
  const wantLse = options.lse !== undefined || (options.returnLse !== undefined && checkBoolean("returnLse", options.returnLse));
  const shapeL = lseShape(layout, B, H, S);
  let out: Tensor | undefined;
  if (options.out !== undefined) {
    out = checkTensor("out", options.out, rt);
    if (out.dtype !== "f32") throw new ArgumentError("out.dtype", `must be "f32", got ${show(out.dtype)}`);
    if (!sameShape(out.shape, q.shape)) throw new ArgumentError("out.shape", `must equal q.shape ${show(q.shape)}, got ${show(out.shape)}`);
    readLayout("out", out, layout);
  }
  let lse: Tensor | undefined;
  if (options.lse !== undefined) {
    lse = checkTensor("lse", options.lse, rt);
    if (lse.dtype !== "f32") throw new ArgumentError("lse.dtype", `must be "f32", got ${show(lse.dtype)}`);
    if (!sameShape(lse.shape, shapeL)) throw new ArgumentError("lse.shape", `must be ${show(shapeL)} for layout ${layout}, got ${show(lse.shape)}`);
  }
  if (!out) {
    out = rt.tensor("f32", q.shape, "attention out");
    allocated.push(out);
  }
  if (wantLse && !lse) {
    lse = rt.tensor("f32", shapeL, "attention lse");
    allocated.push(lse);
  }
  const outOp = readLayout("out", out, layout).op;
  const lseOp = lse ? lseOperand(layout, lse) : { ptr: 0, sB: 0, sH: 0, sS: 0 };
  return lse ? { out, outOp, lse, lseOp } : { out, outOp, lseOp };
}

/** Per-sequence lengths: integers in [0, max], one per sequence. */
export function checkLengths(argument: string, value: unknown, B: number, max: number, maxName: string): Int32Array {
  if (!isArrayLike(value)) throw new ArgumentError(argument, `must be an array of ${B} integers, got ${show(value)}`);
  if (value.length !== B) throw new ArgumentError(argument, `must have ${B} entries (one per sequence), got ${value.length}`);
  const out = new Int32Array(B);
  for (let b = 0; b < B; b++) {
    const n = value[b];
    if (typeof n !== "number" || !Number.isInteger(n)) throw new ArgumentError(`${argument}[${b}]`, `must be an integer, got ${show(n)}`);
    if (n < 0) throw new ArgumentError(`${argument}[${b}]`, `must be ≥ 0, got ${n}`);
    if (n > max) throw new ArgumentError(`${argument}[${b}]`, `must be ≤ ${max} (${maxName}), got ${n}`);
    out[b] = n;
  }
  return out;
}

/** cuSeqlens: B + 1 non-decreasing integers from 0; the last one bounded by the tensor's T. */
export function checkCuSeqlens(argument: string, value: unknown, total: number, exact: boolean, tensorName: string): Int32Array {
  if (!isArrayLike(value) || value.length < 1) throw new ArgumentError(argument, `must be an array of B + 1 offsets, got ${show(value)}`);
  const out = new Int32Array(value.length);
  for (let b = 0; b < value.length; b++) {
    const n = value[b];
    if (typeof n !== "number" || !Number.isInteger(n)) throw new ArgumentError(`${argument}[${b}]`, `must be an integer, got ${show(n)}`);
    if (b === 0 && n !== 0) throw new ArgumentError(`${argument}[0]`, `must be 0, got ${n}`);
    if (b > 0 && n < out[b - 1]!) throw new ArgumentError(`${argument}[${b}]`, `must be ≥ ${argument}[${b - 1}] = ${out[b - 1]} (offsets are non-decreasing), got ${n}`);
    out[b] = n;
  }
  const last = out[out.length - 1]!;
  if (exact ? last !== total : last > total) {
    throw new ArgumentError(`${argument}[${out.length - 1}]`, `must ${exact ? "equal" : "be ≤"} ${tensorName}'s ${total} tokens, got ${last}`);
  }
  return out;
}

function isArrayLike(value: unknown): value is ArrayLike<unknown> {
  return Array.isArray(value) || (ArrayBuffer.isView(value) && !(value instanceof DataView));
}

/** Sequence table as the kernels read it: int32 [B, 4] = (q0, sq, k0, sk). */
export function seqTable(seqs: readonly SeqExtent[]): Int32Array {
  const t = new Int32Array(seqs.length * 4);
  seqs.forEach((s, b) => t.set([s.q0, s.sq, s.k0, s.sk], b * 4));
  return t;
}

/**
 * Argument checks shared by the ops: row-major f32 matrices whose rows may be
 * strided (views into a wider buffer, e.g. q out of a fused QKV output) but
 * whose elements within a row are contiguous, and output/input overlap.
 */
import { ArgumentError, show } from "../errors.js";
import type { DType } from "../tensor/dtype.js";
import { Tensor, checkTensor } from "../tensor/tensor.js";

/** A [rows, cols] view: rows `rowStride` elements apart, columns contiguous. */
export interface MatrixView {
  tensor: Tensor;
  rows: number;
  cols: number;
  /** Elements between consecutive rows. */
  rowStride: number;
}

/** Re-exported for the ops that import their checks from here. */
export { checkTensor };

export function checkTensorDType(argument: string, t: Tensor, allowed: readonly DType[]): void {
  if (!allowed.includes(t.dtype)) throw new ArgumentError(`${argument}.dtype`, `must be ${allowed.join(" | ")}, got ${show(t.dtype)}`);
}

/**
 * Reads `t` as a matrix: every dimension but the last flattens into rows
 * (which must then be evenly strided), the last is the columns and must be
 * contiguous. A rank-1 tensor is one row.
 */
export function asMatrix(argument: string, t: Tensor): MatrixView {
  const rank = t.rank;
  if (rank < 1) throw new ArgumentError(`${argument}.shape`, `must have rank ≥ 1, got ${show(t.shape)}`);
  const { shape, strides } = t;
  const cols = shape[rank - 1]!;
  if (cols > 1 && strides[rank - 1] !== 1) {
    throw new ArgumentError(`${argument}.strides`, `must be 1 in the last dimension (contiguous rows), got ${show(strides)}`);
  }
  const flat = evenRows(t);
  if (flat === null) throw new ArgumentError(`${argument}.strides`, `must flatten to evenly strided rows, got ${show(strides)} for shape ${show(shape)}`);
  return { tensor: t, rows: flat.rows, cols, rowStride: flat.rowStride };
}

/**
 * The leading dimensions of size > 1, outermost first, collapsed into one
 * evenly strided row index: rows and the elements between them (the last
 * dimension's size for one row), or null where they do not collapse. Plain
 * loops: every op calls this per operand per step.
 */
function evenRows(t: Tensor): { rows: number; rowStride: number } | null {
  const { shape, strides, rank } = t;
  let rows = 1;
  let rowStride = shape[rank - 1]!;
  let prev = -1; // the previous leading dimension of size > 1
  for (let i = 0; i < rank - 1; i++) {
    const d = shape[i]!;
    rows *= d;
    if (d <= 1) continue;
    if (prev >= 0 && strides[prev] !== strides[i]! * d) return null;
    prev = i;
    rowStride = strides[i]!;
  }
  return { rows, rowStride };
}

/** Output rows must not overlap each other (each is written by one work item). */
export function checkDistinctRows(argument: string, m: MatrixView): void {
  if (m.rows > 1 && m.rowStride < m.cols) {
    throw new ArgumentError(`${argument}.strides`, `rows overlap: row stride ${m.rowStride} < ${m.cols} columns`);
  }
}

/** Byte range [start, end) a tensor's elements span. */
function span(t: Tensor): [number, number] {
  return [t.ptr, t.ptr + t.byteLength];
}

/** Start addresses (bytes) of every run of the last dimension, sorted. */
function runStarts(t: Tensor): Float64Array {
  const lead = t.shape.slice(0, -1);
  const strides = t.strides.slice(0, -1);
  const n = lead.reduce((a, d) => a * d, 1);
  const starts = new Float64Array(n);
  const idx = new Array<number>(lead.length).fill(0);
  for (let k = 0; k < n; k++) {
    let off = 0;
    for (let d = 0; d < lead.length; d++) off += idx[d]! * strides[d]!;
    starts[k] = t.ptr + off * t.elementBytes;
    for (let d = lead.length - 1; d >= 0; d--) {
      if (++idx[d]! < lead[d]!) break;
      idx[d] = 0;
    }
  }
  return starts.sort();
}

/**
 * Whether runs [a0 + i·s, a0 + i·s + la), i < ra, and [b0 + j·s, b0 + j·s + lb),
 * j < rb, share a byte, for one stride s ≥ la, lb > 0 (two column slices of one
 * row-major buffer: gate and up of a fused gate_up output). O(1): with
 * b0 − a0 = q·s + r (0 ≤ r < s), b's run j can only meet a's run q + j (iff
 * r < la) or q + j + 1 (iff r + lb > s), so it is whether some j in [0, rb)
 * puts that run in [0, ra).
 */
export function stridedRunsOverlap(a0: number, la: number, ra: number, b0: number, lb: number, rb: number, s: number): boolean {
  const q = Math.floor((b0 - a0) / s);
  const r = b0 - a0 - q * s;
  const someJ = (k: number) => Math.max(0, -k) < Math.min(rb, ra - k); // some j < rb with 0 ≤ k + j < ra
  return (r < la && someJ(q)) || (r + lb > s && someJ(q + 1));
}

/**
 * Whether two tensors share a byte. Exact for tensors whose last dimension is
 * contiguous (interleaved views of one buffer, like the column slices of a
 * fused QKV output, do not overlap); otherwise by their spans.
 */
export function overlaps(a: Tensor, b: Tensor): boolean {
  const [a0, a1] = span(a);
  const [b0, b1] = span(b);
  if (!(a0 < b1 && b0 < a1) || a.numel === 0 || b.numel === 0) return false;
  const contiguousRuns = (t: Tensor) => t.rank >= 1 && (t.shape[t.rank - 1]! <= 1 || t.strides[t.rank - 1] === 1);
  if (!contiguousRuns(a) || !contiguousRuns(b)) return true;
  const la = a.shape[a.rank - 1]! * a.elementBytes;
  const lb = b.shape[b.rank - 1]! * b.elementBytes;
  // Row views with one stride (every op's column slices): O(1), where the sweep below sorts every run.
  const ra = evenRows(a);
  const rb = evenRows(b);
  const s = ra === null ? -1 : ra.rowStride * a.elementBytes; // bytes between rows
  if (ra !== null && rb !== null && s === rb.rowStride * b.elementBytes && s >= Math.max(la, lb)) {
    return stridedRunsOverlap(a.ptr, la, ra.rows, b.ptr, lb, rb.rows, s);
  }
  const sa = runStarts(a);
  const sb = runStarts(b);
  // Sweep two sorted lists of intervals; runs of one tensor may themselves overlap, which is fine.
  let i = 0;
  let j = 0;
  while (i < sa.length && j < sb.length) {
    if (sa[i]! + la <= sb[j]!) i++;
    else if (sb[j]! + lb <= sa[i]!) j++;
    else return true;
  }
  return false;
}

/** Throws if `out` shares any byte with `input` (an op that cannot work in place). */
export function checkNoOverlap(outName: string, out: Tensor, inName: string, input: Tensor): void {
  if (overlaps(out, input)) {
    const [a0, a1] = span(out);
    const [b0, b1] = span(input);
    throw new ArgumentError(outName, `must not overlap ${inName} (bytes [${a0}, ${a1}) and [${b0}, ${b1}))`);
  }
}

/** Throws unless `out` and `input` are the very same elements or disjoint (in-place ops). */
export function checkSameOrDisjoint(outName: string, out: Tensor, inName: string, input: Tensor): void {
  const same = out.ptr === input.ptr && out.strides.every((s, i) => s === input.strides[i]) && out.rank === input.rank;
  if (!same) checkNoOverlap(outName, out, inName, input);
}

/**
 * Rows of a tensor [..., R, C] with contiguous columns: row r lives at
 * floor(r / inner)·outerStride + (r mod inner)·innerStride (elements), where
 * inner = R and the dimensions before R flatten evenly into the outer index.
 * Covers per-head rows of a fused QKV slice ([T, H, D] with token stride ≠ H·D).
 */
export interface RowGrid {
  rows: number;
  cols: number;
  inner: number;
  innerStride: number;
  outerStride: number;
}

export function asRowGrid(argument: string, t: Tensor): RowGrid {
  if (t.rank <= 2) {
    const m = asMatrix(argument, t);
    return { rows: m.rows, cols: m.cols, inner: Math.max(m.rows, 1), innerStride: m.rowStride, outerStride: m.rowStride * Math.max(m.rows, 1) };
  }
  const cols = t.shape[t.rank - 1]!;
  if (cols > 1 && t.strides[t.rank - 1] !== 1) {
    throw new ArgumentError(`${argument}.strides`, `must be 1 in the last dimension (contiguous rows), got ${show(t.strides)}`);
  }
  const inner = t.shape[t.rank - 2]!;
  const innerStride = t.strides[t.rank - 2]!;
  // The outer dimensions collapse like a matrix's rows.
  const outerView = new Tensor(t.memory, t.ptr, t.dtype, [...t.shape.slice(0, -2), 1], [...t.strides.slice(0, -2), 1]);
  const outer = asMatrix(argument, outerView);
  return { rows: outer.rows * inner, cols, inner: Math.max(inner, 1), innerStride, outerStride: outer.rowStride };
}

/** Rows must not overlap (each is written by one work item). */
export function checkDistinctGridRows(argument: string, g: RowGrid): void {
  const overlapInner = g.inner > 1 && g.innerStride < g.cols;
  const outerRows = g.rows / g.inner;
  const overlapOuter = outerRows > 1 && g.outerStride < (g.inner - 1) * g.innerStride + g.cols;
  if (overlapInner || overlapOuter) {
    throw new ArgumentError(`${argument}.strides`, `rows overlap: strides leave fewer than ${g.cols} elements per row`);
  }
}

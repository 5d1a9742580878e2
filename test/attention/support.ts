// Shared helpers of the attention conformance suite: seeded inputs, poisoned
// outputs, the two implementations behind one interface, and the tolerances.
//
// Tolerances (against the float64 reference; for f16/bf16 K/V the reference
// reads the decoded values, so storage rounding is not counted as error):
//   out: per query row, max_d |o − ref| / max_d |ref| ≤ 1e-5; a row whose
//        reference is all zero (no kept key) must be exactly 0.
//   lse: |lse − ref| / max(1, |ref|) ≤ 1e-5; −Infinity must match exactly.
import assert from "node:assert/strict";
import {
  type AttentionResult,
  type DType,
  type FlashAttentionOptions,
  type IncreFlashAttentionOptions,
  type Runtime,
  type Tensor,
  convert,
  flashAttention,
  increFlashAttention,
  referenceFlashAttention,
  referenceIncreFlashAttention,
} from "../../src/ops-entry.js";

export const OUT_TOL = 1e-5;
export const LSE_TOL = 1e-5;

export { rng } from "../helpers/random.js";

/** Uniform values in [lo, hi). */
export function uniform(n: number, random: () => number, lo = -1, hi = 1): Float64Array {
  return Float64Array.from({ length: n }, () => lo + (hi - lo) * random());
}

export function tensorOf(rt: Runtime, dtype: DType, shape: readonly number[], values: ArrayLike<number>): Tensor {
  return rt.tensor(dtype, shape).set(values);
}

export function randomTensor(rt: Runtime, dtype: DType, shape: readonly number[], random: () => number, lo = -1, hi = 1): Tensor {
  return tensorOf(rt, dtype, shape, uniform(shape.reduce((a, b) => a * b, 1), random, lo, hi));
}

/** Frees every tensor-valued field of an options object. */
export function freeAll(rt: Runtime, ...things: unknown[]): void {
  const seen = new Set<number>();
  for (const thing of things) {
    if (!thing || typeof thing !== "object") continue;
    for (const v of Object.values(thing)) {
      const t = v as Tensor;
      if (t && typeof t === "object" && "ptr" in t && "dtype" in t && !seen.has(t.ptr)) {
        seen.add(t.ptr);
        rt.free(t);
      }
    }
  }
}

/** Checks out (row-relative) and lse against the reference, within `tol` (default OUT_TOL, LSE_TOL); `what` names the case. */
export function assertClose(what: string, got: { out: ArrayLike<number>; lse?: ArrayLike<number> }, ref: { out: ArrayLike<number>; lse: ArrayLike<number> }, D: number, tol: { out: number; lse: number } = { out: OUT_TOL, lse: LSE_TOL }): void {
  assert.equal(got.out.length, ref.out.length, `${what}: out length`);
  for (let r = 0; r < ref.out.length / D; r++) {
    let err = 0;
    let scale = 0;
    for (let d = 0; d < D; d++) {
      const g = got.out[r * D + d]!;
      const e = ref.out[r * D + d]!;
      if (Number.isNaN(g)) assert.fail(`${what}: out row ${r} dim ${d} is NaN (reference ${e})`);
      err = Math.max(err, Math.abs(g - e));
      scale = Math.max(scale, Math.abs(e));
    }
    if (scale === 0) {
      if (err !== 0) assert.fail(`${what}: out row ${r} must be exactly 0 (no kept key), max |o| = ${err}`);
    } else if (err / scale > tol.out) {
      assert.fail(`${what}: out row ${r} relative error ${(err / scale).toExponential(2)} > ${tol.out} (max |ref| ${scale})`);
    }
  }
  const gotLse = got.lse;
  if (gotLse) {
    assert.equal(gotLse.length, ref.lse.length, `${what}: lse length`);
    for (let i = 0; i < ref.lse.length; i++) {
      const g: number = gotLse[i]!;
      const e: number = ref.lse[i]!;
      if (e === -Infinity || g === -Infinity) {
        if (g !== e) assert.fail(`${what}: lse[${i}] = ${g}, reference ${e}`);
        continue;
      }
      if (!(Math.abs(g - e) / Math.max(1, Math.abs(e)) <= tol.lse)) assert.fail(`${what}: lse[${i}] = ${g}, reference ${e}`);
    }
  }
}

/** Asserts two runs agree bit for bit (NaN-free). */
export function assertIdentical(what: string, a: ArrayLike<number>, b: ArrayLike<number>): void {
  assert.equal(a.length, b.length, `${what}: lengths`);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i])) assert.fail(`${what}: element ${i} differs: ${a[i]} vs ${b[i]}`);
  }
}

/** A result read back as plain arrays. */
export interface Result {
  out: Float64Array | Float32Array;
  lse: Float64Array | Float32Array;
}

/**
 * One implementation of the operators as the conformance properties see it.
 * The wasm implementation writes into out/lse it poisons with NaN first.
 */
export interface Implementation {
  name: string;
  flash(rt: Runtime, options: FlashAttentionOptions): Result;
  decode(rt: Runtime, options: IncreFlashAttentionOptions): Result;
}

function runPoisoned(rt: Runtime, q: Tensor, lseShape: number[], call: (out: Tensor, lse: Tensor) => AttentionResult): Result {
  const out = rt.tensor("f32", q.shape).fill(NaN);
  const lse = rt.tensor("f32", lseShape).fill(NaN);
  try {
    const r = call(out, lse);
    assert.equal(r.out, out, "the preallocated out is the result");
    assert.equal(r.lse, lse, "the preallocated lse is the result");
    return { out: out.toFloat32(), lse: lse.toFloat32() };
  } finally {
    rt.free(out);
    rt.free(lse);
  }
}

export function lseShapeOf(layout: string | undefined, q: Tensor): number[] {
  const s = q.shape;
  if (layout === "TND") return [s[0]!, s[1]!];
  if (layout === "BSND") return [s[0]!, s[1]!, s[2]!];
  return [s[0]!, s[1]!, s[2]!];
}

export const wasm: Implementation = {
  name: "wasm",
  flash: (rt, o) => runPoisoned(rt, o.q, lseShapeOf(o.layout, o.q), (out, lse) => flashAttention(rt, { ...o, out, lse })),
  decode: (rt, o) => runPoisoned(rt, o.q, lseShapeOf(o.layout, o.q), (out, lse) => increFlashAttention(rt, { ...o, out, lse })),
};

export const reference: Implementation = {
  name: "reference",
  flash: (_rt, o) => referenceFlashAttention(o),
  decode: (_rt, o) => referenceIncreFlashAttention(o),
};

export const IMPLEMENTATIONS: readonly Implementation[] = [reference, wasm];

/** A tensor's contents on the host, to materialize in any runtime. */
export interface HostTensor {
  dtype: DType;
  shape: number[];
  /** Row-major values (NaN allowed: padding that must never be read). */
  values: Float32Array;
}

export function host(dtype: DType, shape: number[], values: Float32Array | ((i: number) => number)): HostTensor {
  const n = shape.reduce((a, b) => a * b, 1);
  return { dtype, shape, values: typeof values === "function" ? Float32Array.from({ length: n }, (_, i) => values(i)) : values };
}

/** Creates the tensor in `rt` (f16/bf16 encoded by the kernels' convert: fast for big caches). */
export function toDevice(rt: Runtime, h: HostTensor): Tensor {
  if (h.dtype === "f16" || h.dtype === "bf16") {
    const src = rt.tensor("f32", h.shape).set(h.values);
    const dst = rt.tensor(h.dtype, h.shape);
    convert(rt, src, dst);
    rt.free(src);
    return dst;
  }
  return rt.tensor(h.dtype, h.shape).set(h.values);
}

/** Materializes every HostTensor field of `spec` in `rt`; other fields are copied as they are. */
export function materialize<T extends object>(rt: Runtime, spec: T): { [K in keyof T]: T[K] extends HostTensor ? Tensor : T[K] } {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(spec)) {
    out[key] = value && typeof value === "object" && "values" in value && "shape" in value ? toDevice(rt, value as HostTensor) : value;
  }
  return out as { [K in keyof T]: T[K] extends HostTensor ? Tensor : T[K] };
}

/** A KV cache [B, Hkv, Smax, D] (BNSD) or [B, Smax, Hkv, D] (BSND) with random rows below each length and NaN above. */
export function hostCache(dtype: DType, layout: "BNSD" | "BSND", B: number, Hkv: number, Smax: number, D: number, lengths: readonly number[], random: () => number): HostTensor {
  const values = new Float32Array(B * Hkv * Smax * D).fill(NaN);
  for (let b = 0; b < B; b++) {
    for (let h = 0; h < Hkv; h++) {
      for (let s = 0; s < lengths[b]!; s++) {
        const row = layout === "BNSD" ? ((b * Hkv + h) * Smax + s) * D : ((b * Smax + s) * Hkv + h) * D;
        for (let d = 0; d < D; d++) values[row + d] = 2 * random() - 1;
      }
    }
  }
  return { dtype, shape: layout === "BNSD" ? [B, Hkv, Smax, D] : [B, Smax, Hkv, D], values };
}

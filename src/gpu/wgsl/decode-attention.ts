/**
 * WGSL IncreFlashAttention for decode steps (the seeds' IFA; one FlashDecoding
 * chunk per work item), laid out for memory bandwidth as FlashDecoding's and
 * llama.cpp's Vulkan flash_attn split-K decode kernels are: a decode step
 * reads every key and value once and does ~1 FMA per byte, so the kernel's
 * job is coalesced K/V reads with many loads in flight and no barrier in the
 * key loop.
 *
 *   lanes   L consecutive invocations (a "row group", inside one subgroup)
 *           cooperate on one key row: lane ln owns EPL = DMAX / L elements of
 *           the row, as whole 32-bit words w = ln + L·i (f32: 1 element a
 *           word, f16/bf16: 2, 1-byte dtypes: 4), so each load instruction of
 *           the group reads L consecutive words (f32 D = 128, L = 32: 4
 *           loads of 128 contiguous bytes per row; f16: 2; int8/fp8: 1)
 *   groups  NG = 4 row groups a workgroup (WG = 4·L invocations), each with
 *           its own online-softmax state (m, l, acc) over R rows; per loop
 *           iteration group g takes keys j0 + g·U + u, u < U = 4, and issues
 *           all U K rows and U V rows of loads before using any of them:
 *           per invocation and iteration U·EPL·2 elements, i.e. f32 D = 128:
 *           128 bytes, f16: 64 bytes, int8/fp8: 32 bytes in flight
 *   scores  per (key, row) a partial dot over the lane's EPL elements, summed
 *           over the L lanes by a subgroupShuffleXor butterfly (every lane
 *           ends with the same bits: a + b = b + a); without subgroups
 *           (or subgroups narrower than L) by workgroup memory with two
 *           barriers an iteration
 *   softmax online per group (all lanes of a group hold the same m, l);
 *           P·V into the lane's EPL accumulators per row, registers only
 *   end     the NG group states merge by log-sum-exp through workgroup
 *           memory (NG barriers), then the R rows are written (compact out or
 *           the item's FlashDecoding partial, with lse)
 *
 * R (rows a work item: positions × group heads) is a compile-time constant,
 * so every loop over rows and elements unrolls and the state stays in
 * registers. The dtype decode is the one of kv-load.ts: the word loads here
 * decode f32, f16, bf16, int8 (per-token scales, code 3; per-channel scales
 * and offsets, code 6) and the fp8s in place when rows are 4-element
 * aligned; any other case (and any other cache code) reads element by
 * element through loadK / loadV, with the same lane layout.
 *
 * Work items, exclusions, outputs and partials are those of
 * flash-attention.ts (the same plan tables, BR = R).
 */
import { attentionBindingsWgsl, attentionScoreWgsl, workItemWgsl } from "./attention-common.js";
import { attnParamsStruct } from "./params.js";
import { f16PairToF32, f16ToF32 } from "./f16-bits.js";

/** Most query rows (positions × group heads) of one work item. */
export const DECODE_RMAX = 8;
/** Row groups a workgroup and keys a group takes per iteration. */
export const DECODE_GROUPS = 4;
export const DECODE_UNROLL = 4;

export interface DecodeKernelSpec {
  DMAX: number;
  /** Rows a work item (a power of two ≤ DECODE_RMAX). */
  R: number;
  /** Lanes a key row (a power of two; DMAX / L ≥ 4). */
  L: number;
  /** Reduce with subgroupShuffleXor (needs every subgroup ≥ L invocations); else workgroup memory. */
  subgroups: boolean;
}

/** Lanes a key row for DMAX: 32, fewer when the rows are short (each lane owns ≥ 4 elements) or subgroups narrower. */
export function decodeLanes(DMAX: number, subgroupMin: number | null): number {
  const want = Math.min(32, DMAX / 4);
  return subgroupMin === null ? want : Math.min(want, subgroupMin);
}

/** Rows a work item for the problem's largest sq·G: the next power of two, at most DECODE_RMAX. */
export function decodeRows(maxRows: number): number {
  let r = 1;
  while (r < Math.min(DECODE_RMAX, maxRows)) r *= 2;
  return r;
}

/** Workgroup memory the kernel declares, in bytes (the caller keeps it within the adapter's limit). */
export function decodeWorkgroupBytes({ DMAX, R, L, subgroups }: DecodeKernelSpec): number {
  const NG = DECODE_GROUPS;
  const floats = 2 * NG * R + R * DMAX + (subgroups ? 0 : DECODE_UNROLL * R * NG * L + DECODE_UNROLL * R * NG);
  return 4 * floats;
}

function rowLoadFn(name: string, buf: string, scalar: string): string {
  return `// Lane ln's EPL elements of the row at element a (element k of the lane: elem(k)).
fn ${name}(a: u32, ln: u32, fast: bool, epw: u32) -> array<f32, EPL> {
  var x: array<f32, EPL>;
  if (!fast) {
    for (var k = 0u; k < EPL; k++) {
      let e = elem(k, ln, epw);
      if (e < P.D) { x[k] = ${scalar}(a + e); }
    }
    return x;
  }
  if (P.kvDtype == 0u) {
    for (var i = 0u; i < EPL; i++) {
      let e = ln + L * i;
      if (e < P.D) { x[i] = bitcast<f32>(${buf}[a + e]); }
    }
  } else if (P.kvDtype <= 2u) {
    for (var i = 0u; i < EPL / 2u; i++) {
      let e = 2u * (ln + L * i);
      if (e < P.D) {
        let w = ${buf}[(a + e) >> 1u];
        if (P.kvDtype == 1u) {
          let h = ${f16PairToF32("w")};
          x[2u * i] = h.x;
          x[2u * i + 1u] = h.y;
        } else {
          x[2u * i] = bitcast<f32>(w << 16u);
          x[2u * i + 1u] = bitcast<f32>(w & 0xffff0000u);
        }
      }
    }
  } else {
    for (var i = 0u; i < EPL / 4u; i++) {
      let e = 4u * (ln + L * i);
      if (e < P.D) {
        let w = ${buf}[(a + e) >> 2u];
        let s = select(1.0, bitcast<f32>(${buf}[P.kvScaleOff + (a + e) / P.D]), P.kvDtype == 3u);
        for (var h = 0u; h < 4u; h++) {
          let byte = (w >> (8u * h)) & 0xffu;
          var v: f32;
          let q = f32(bitcast<i32>(byte << 24u) >> 24u);
          if (P.kvDtype == 3u) { v = q * s; }
          else if (P.kvDtype == 6u) {
            let c = P.kvScaleOff + (a + e + h) % (P.Hkv * P.D);
            v = (q + bitcast<f32>(${buf}[c + P.Hkv * P.D])) * bitcast<f32>(${buf}[c]);
          }
          else if (P.kvDtype == 4u) { v = fp8e4m3(byte); }
          else { v = ${f16ToF32("byte << 8u")}; }
          x[4u * i + h] = v;
        }
      }
    }
  }
  return x;
}`;
}

export function decodeAttentionWgsl({ DMAX, R, L, subgroups }: DecodeKernelSpec): string {
  const NG = DECODE_GROUPS;
  const U = DECODE_UNROLL;
  const WG = NG * L;
  if (DMAX % (4 * L) !== 0 || R < 1 || R > DECODE_RMAX) throw new RangeError(`decode kernel: DMAX ${DMAX}, L ${L}, R ${R} do not fit`);
  // Sum of v over the L lanes of a row group, on every lane of it.
  const reduce = subgroups
    ? `fn groupSum(v: ptr<function, array<f32, UR>>, lid: u32) {
  for (var i = 0u; i < UR; i++) {
    var x = (*v)[i];
    for (var m = L / 2u; m > 0u; m >>= 1u) { x += subgroupShuffleXor(x, m); }
    (*v)[i] = x;
  }
}`
    : `var<workgroup> red: array<f32, ${U * R * WG}>;
var<workgroup> sums: array<f32, ${U * R * NG}>;
fn groupSum(v: ptr<function, array<f32, UR>>, lid: u32) {
  for (var i = 0u; i < UR; i++) { red[i * WG + lid] = (*v)[i]; }
  workgroupBarrier();
  let g = lid / L;
  for (var i = lid % L; i < UR; i += L) {
    var x = 0.0;
    for (var c = 0u; c < L; c++) { x += red[i * WG + g * L + c]; }
    sums[g * UR + i] = x;
  }
  workgroupBarrier();
  for (var i = 0u; i < UR; i++) { (*v)[i] = sums[g * UR + i]; }
}`;
  return `${subgroups ? "enable subgroups;\n" : ""}// IncreFlashAttention decode, DMAX = ${DMAX}, R = ${R}, L = ${L}${subgroups ? ", subgroups" : ""}
${attnParamsStruct()}
const DMAX: u32 = ${DMAX}u;
const R: u32 = ${R}u;
const L: u32 = ${L}u;
const NG: u32 = ${NG}u;
const U: u32 = ${U}u;
const UR: u32 = ${U * R}u;
const WG: u32 = ${WG}u;
const EPL: u32 = ${DMAX / L}u;
${attentionBindingsWgsl()}

var<workgroup> gm: array<f32, ${NG * R}>;
var<workgroup> gl: array<f32, ${NG * R}>;
var<workgroup> obuf: array<f32, ${R * DMAX}>;

${attentionScoreWgsl()}

// The row element of lane ln's k-th value: whole words w = ln + L·i of epw elements each.
fn elem(k: u32, ln: u32, epw: u32) -> u32 { return epw * (ln + L * (k / epw)) + k % epw; }

${rowLoadFn("rowK", "kb", "loadK")}

${rowLoadFn("rowV", "vb", "loadV")}

${reduce}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
${workItemWgsl()}
  let rows = min(R, sq * P.G - r0);
  let off = i32(sk) - i32(sq);
  let g = lid / L;
  let ln = lid % L;
  // Word loads need 4-element aligned rows (every stride and offset) and a dtype they decode.
  let strides = P.kOff | P.ksB | P.ksH | P.ksS | P.vOff | P.vsB | P.vsH | P.vsS | P.D;
  let fast = P.kvDtype <= 6u && (strides & 3u) == 0u;
  let epw = select(select(4u, 2u, P.kvDtype == 1u || P.kvDtype == 2u), 1u, P.kvDtype == 0u);

  var qr: array<f32, ${R * (DMAX / L)}>;
  for (var r = 0u; r < R; r++) {
    let f = r0 + r;
    let qa = P.qOff + b * P.qsB + (kvh * P.G + f % P.G) * P.qsH + (q0 + f / P.G) * P.qsS;
    for (var k = 0u; k < EPL; k++) {
      let e = elem(k, ln, epw);
      if (r < rows && e < P.D) { qr[r * EPL + k] = qb[qa + e]; }
    }
  }

  let posLo = i32(r0 / P.G);
  let posHi = i32((r0 + rows - 1u) / P.G);
  var jLo = i32(kv0);
  var jHi = i32(kv1);
  if (P.causal != 0u) { jHi = min(jHi, posHi + off + 1); }
  if (P.winR >= 0) { jHi = min(jHi, posHi + off + P.winR + 1); }
  if (P.winL >= 0) { jLo = max(jLo, posLo + off - P.winL); }

  var m: array<f32, R>;
  var l: array<f32, R>;
  var acc: array<f32, ${R * (DMAX / L)}>;
  for (var r = 0u; r < R; r++) { m[r] = EXCLUDED; }
  for (var j0 = jLo; j0 < jHi; j0 += i32(NG * U)) {
    // All U K rows and V rows of the group's keys are loaded before any is used.
    var kx: array<array<f32, EPL>, U>;
    var vx: array<array<f32, EPL>, U>;
    for (var u = 0u; u < U; u++) {
      let j = j0 + i32(g * U + u);
      if (j < jHi) {
        kx[u] = rowK(kAddr(b, kvh, u32(j), k0), ln, fast, epw);
        vx[u] = rowV(vAddr(b, kvh, u32(j), k0), ln, fast, epw);
      }
    }
    var s: array<f32, UR>;
    for (var u = 0u; u < U; u++) {
      for (var r = 0u; r < R; r++) {
        var dot = 0.0;
        for (var k = 0u; k < EPL; k++) { dot += qr[r * EPL + k] * kx[u][k]; }
        s[u * R + r] = dot;
      }
    }
    groupSum(&s, lid);
    for (var u = 0u; u < U; u++) {
      let j = j0 + i32(g * U + u);
      for (var r = 0u; r < R; r++) {
        let f = r0 + r;
        let pos = f / P.G;
        var x = EXCLUDED;
        if (j < jHi && r < rows) { x = score(b, kvh * P.G + f % P.G, pos, i32(pos) + off, u32(j), s[u * R + r]); }
        s[u * R + r] = x;
      }
    }
    for (var r = 0u; r < R; r++) {
      var mNew = m[r];
      for (var u = 0u; u < U; u++) { mNew = max(mNew, s[u * R + r]); }
      let alpha = select(0.0, exp(m[r] - mNew), l[r] > 0.0);
      var p: array<f32, U>;
      var ps = 0.0;
      for (var u = 0u; u < U; u++) {
        let x = s[u * R + r];
        p[u] = select(0.0, exp(x - mNew), x > -1.0e38);
        ps += p[u];
      }
      l[r] = l[r] * alpha + ps;
      m[r] = mNew;
      for (var k = 0u; k < EPL; k++) {
        var a = acc[r * EPL + k] * alpha;
        for (var u = 0u; u < U; u++) { a += p[u] * vx[u][k]; }
        acc[r * EPL + k] = a;
      }
    }
  }

  // Merge the NG group states (log-sum-exp), then write the rows.
  if (ln == 0u) {
    for (var r = 0u; r < R; r++) {
      gm[g * R + r] = m[r];
      gl[g * R + r] = l[r];
    }
  }
  workgroupBarrier();
  var M: array<f32, R>;
  var Ls: array<f32, R>;
  for (var r = 0u; r < R; r++) {
    var mx = EXCLUDED;
    for (var c = 0u; c < NG; c++) { if (gl[c * R + r] > 0.0) { mx = max(mx, gm[c * R + r]); } }
    var sum = 0.0;
    for (var c = 0u; c < NG; c++) {
      if (gl[c * R + r] > 0.0) { sum += exp(gm[c * R + r] - mx) * gl[c * R + r]; }
    }
    M[r] = mx;
    Ls[r] = sum;
  }
  for (var c = 0u; c < NG; c++) {
    if (g == c) {
      for (var r = 0u; r < R; r++) {
        let w = select(0.0, exp(m[r] - M[r]), l[r] > 0.0);
        for (var k = 0u; k < EPL; k++) {
          let e = elem(k, ln, epw);
          if (e < DMAX) {
            let prev = select(obuf[r * DMAX + e], 0.0, c == 0u);
            obuf[r * DMAX + e] = prev + acc[r * EPL + k] * w;
          }
        }
      }
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < rows; r++) {
    let f = r0 + r;
    let pos = f / P.G;
    let h = kvh * P.G + f % P.G;
    let inv = select(0.0, 1.0 / Ls[r], Ls[r] > 0.0);
    let lse = select(NEG_INF_BITS, bitcast<u32>(M[r] + log(Ls[r])), Ls[r] > 0.0);
    var oBase: u32;
    if (slot < 0) {
      let t = t0 + pos;
      oBase = (t * P.H + h) * P.D;
      if (lid == 0u) { lb[t * P.H + h] = lse; }
    } else {
      let ps2 = (u32(slot) * P.H + h) * P.partSq + pos;
      oBase = P.partOOff + ps2 * P.D;
      if (lid == 0u) { lb[P.partLOff + ps2] = lse; }
    }
    for (var d = lid; d < P.D; d += WG) { ob[oBase + d] = obuf[r * DMAX + d] * inv; }
  }
}
`;
}

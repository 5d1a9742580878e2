/**
 * WGSL IncreFlashAttention for decode steps (the seeds' IFA; one FlashDecoding
 * chunk per work item): when a KV head has few query rows (sq·G ≤ RMAX, as
 * in decode), FlashAttention-2's row tiles would idle most invocations, so
 * here the 64 invocations of a workgroup split the keys instead:
 *
 *   scores  key tile of 64: invocation t scores key j0 + t against all R ≤
 *           RMAX rows (q rows in workgroup memory, K read once per KV head)
 *   softmax per row, the tile's max and sum are workgroup reductions; with the
 *           adapter's `subgroups`, subgroupMax / subgroupAdd first reduce
 *           inside each subgroup, and the workgroup step reads one value per
 *           subgroup (this assumes subgroups are consecutive invocations of
 *           the 1-D workgroup, as Vulkan drivers lay them out); without it,
 *           every invocation reads all 64 partials
 *   P·V     invocation t holds dims t, t + 64, … of all R rows in registers
 *           and walks the tile's keys (V rows read coalesced)
 *
 * Work items, exclusions, outputs and partials are those of
 * flash-attention.ts (the same plan tables, BR = RMAX).
 */
import { attentionBindingsWgsl, attentionScoreWgsl, workItemWgsl } from "./attention-common.js";
import { attnParamsStruct } from "./params.js";

/** Most query rows (positions × group heads) of one work item. */
export const DECODE_RMAX = 8;
const WG = 64;

export interface DecodeKernelSpec {
  DMAX: number;
  subgroups: boolean;
}

export function decodeAttentionWgsl({ DMAX, subgroups }: DecodeKernelSpec): string {
  const reduce = subgroups
    ? `// Subgroup reduction, then one partial per subgroup through workgroup memory.
fn reduceRows(v: ptr<function, array<f32, RMAX>>, isMax: bool, lid: u32, sgSize: u32) {
  for (var r = 0u; r < RMAX; r++) {
    let x = (*v)[r];
    let s = select(subgroupAdd(x), subgroupMax(x), isMax);
    red[r * WG + lid] = s;
  }
  workgroupBarrier();
  for (var r = 0u; r < RMAX; r++) {
    var acc = select(0.0, EXCLUDED, isMax);
    for (var i = 0u; i < WG; i += sgSize) {
      let y = red[r * WG + i];
      acc = select(acc + y, max(acc, y), isMax);
    }
    (*v)[r] = acc;
  }
  workgroupBarrier();
}`
    : `// Workgroup reduction: every invocation reads all 64 partials.
fn reduceRows(v: ptr<function, array<f32, RMAX>>, isMax: bool, lid: u32, sgSize: u32) {
  for (var r = 0u; r < RMAX; r++) { red[r * WG + lid] = (*v)[r]; }
  workgroupBarrier();
  for (var r = 0u; r < RMAX; r++) {
    var acc = select(0.0, EXCLUDED, isMax);
    for (var i = 0u; i < WG; i++) {
      let y = red[r * WG + i];
      acc = select(acc + y, max(acc, y), isMax);
    }
    (*v)[r] = acc;
  }
  workgroupBarrier();
}`;
  const sgParam = subgroups ? ", @builtin(subgroup_size) sgSize: u32" : "";
  const sgArg = subgroups ? "sgSize" : "1u";
  return `${subgroups ? "enable subgroups;\n" : ""}// IncreFlashAttention decode, DMAX = ${DMAX}, RMAX = ${DECODE_RMAX}${subgroups ? ", subgroups" : ""}
${attnParamsStruct()}
const DMAX: u32 = ${DMAX}u;
const RMAX: u32 = ${DECODE_RMAX}u;
const WG: u32 = ${WG}u;
const DPT: u32 = DMAX / WG;
${attentionBindingsWgsl()}

var<workgroup> qs: array<f32, ${DECODE_RMAX * DMAX}>;
var<workgroup> ps: array<f32, ${DECODE_RMAX * WG}>;
var<workgroup> red: array<f32, ${DECODE_RMAX * WG}>;

${attentionScoreWgsl()}

${reduce}

@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32${sgParam}) {
${workItemWgsl()}
  let rows = min(RMAX, sq * P.G - r0);
  let off = i32(sk) - i32(sq);

  for (var e = lid; e < RMAX * P.D; e += WG) {
    let r = e / P.D;
    var x = 0.0;
    if (r < rows) {
      let f = r0 + r;
      x = qb[P.qOff + b * P.qsB + (kvh * P.G + f % P.G) * P.qsH + (q0 + f / P.G) * P.qsS + e % P.D];
    }
    qs[e] = x;
  }
  workgroupBarrier();

  let posLo = i32(r0 / P.G);
  let posHi = i32((r0 + rows - 1u) / P.G);
  var jLo = i32(kv0);
  var jHi = i32(kv1);
  if (P.causal != 0u) { jHi = min(jHi, posHi + off + 1); }
  if (P.winR >= 0) { jHi = min(jHi, posHi + off + P.winR + 1); }
  if (P.winL >= 0) { jLo = max(jLo, posLo + off - P.winL); }

  var m: array<f32, RMAX>;
  var l: array<f32, RMAX>;
  var acc: array<f32, ${DECODE_RMAX * (DMAX / WG)}>;
  for (var r = 0u; r < RMAX; r++) { m[r] = EXCLUDED; }
  for (var j0 = jLo; j0 < jHi; j0 += i32(WG)) {
    let j = j0 + i32(lid);
    var s: array<f32, RMAX>;
    for (var r = 0u; r < RMAX; r++) { s[r] = EXCLUDED; }
    if (j < jHi) {
      let ka = kAddr(b, kvh, u32(j), k0);
      for (var r = 0u; r < rows; r++) {
        var dot = 0.0;
        for (var d = 0u; d < P.D; d++) { dot += qs[r * P.D + d] * loadK(ka + d); }
        let f = r0 + r;
        let pos = f / P.G;
        s[r] = score(b, kvh * P.G + f % P.G, pos, i32(pos) + off, u32(j), dot);
      }
    }
    var tmax = s;
    reduceRows(&tmax, true, lid, ${sgArg});
    var p: array<f32, RMAX>;
    var alpha: array<f32, RMAX>;
    for (var r = 0u; r < RMAX; r++) {
      let mNew = max(m[r], tmax[r]);
      alpha[r] = select(0.0, exp(m[r] - mNew), l[r] > 0.0);
      p[r] = select(0.0, exp(s[r] - mNew), s[r] > -1.0e38);
      m[r] = mNew;
      ps[r * WG + lid] = p[r];
    }
    reduceRows(&p, false, lid, ${sgArg});
    let nk = u32(min(i32(WG), jHi - j0));
    for (var r = 0u; r < RMAX; r++) {
      l[r] = l[r] * alpha[r] + p[r];
      for (var k = 0u; k < DPT; k++) { acc[r * DPT + k] *= alpha[r]; }
    }
    for (var c = 0u; c < nk; c++) {
      let va = vAddr(b, kvh, u32(j0) + c, k0);
      for (var k = 0u; k < DPT; k++) {
        let d = lid + k * WG;
        if (d < P.D) {
          let x = loadV(va + d);
          for (var r = 0u; r < rows; r++) { acc[r * DPT + k] += ps[r * WG + c] * x; }
        }
      }
    }
    workgroupBarrier();
  }
  for (var r = 0u; r < rows; r++) {
    let f = r0 + r;
    let pos = f / P.G;
    let h = kvh * P.G + f % P.G;
    let inv = select(0.0, 1.0 / l[r], l[r] > 0.0);
    let lse = select(NEG_INF_BITS, bitcast<u32>(m[r] + log(l[r])), l[r] > 0.0);
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
    for (var k = 0u; k < DPT; k++) {
      let d = lid + k * WG;
      if (d < P.D) { ob[oBase + d] = acc[r * DPT + k] * inv; }
    }
  }
}
`;
}

/**
 * WGSL FlashAttention-2 (Dao 2023, Algorithm 1) for prefill and decode, over
 * dense (BNSD/BSND/TND strides) or paged K/V (a block table). One workgroup
 * of 64 invocations runs one work item (b, kvHead, r0, kv0, kv1, slot) of the
 * CPU-built plan (./../attention-plan.ts):
 *
 *   rows   BR rows of the flattened (position, group head) index r0 … r0+BR−1
 *          of KV head kvHead: all G query heads of a KV head share each K/V
 *          tile they load (GQA without repeating KV).
 *   keys   [kv0, kv1) of the sequence, in tiles of BC keys; a FlashDecoding
 *          chunk when slot ≥ 0 (partial o and lse go to the slot, merged by
 *          merge-states.ts), the whole sequence otherwise.
 *
 * Workgroup memory: Q tile [BR, D], one K-or-V tile [BC, D] (V overwrites K
 * once the scores are taken), scores [BR, BC], sized for DMAX ≥ D. Each row
 * belongs to TPR = 64 / BR invocations that each hold DPT = DMAX / TPR output
 * dims (d ≡ part mod TPR) in registers with the row's running max m and sum l
 * (online softmax).
 *
 * Compile-time: only DMAX (128 or 256) and the tile. D, the KV dtype and
 * dense-or-paged addressing are uniforms (branches every invocation takes the
 * same way): one pipeline per DMAX class, because on SwiftShader, where the
 * tests run, each compile costs seconds.
 * Tiles outside the causal / window band of the whole row tile are skipped
 * (the key loop bounds); keys inside it are masked per element. Scores
 * follow ARCHITECTURE.md: scale, softcap, bias, ALiBi, then the masks.
 */
import { attentionBindingsWgsl, attentionScoreWgsl, workItemWgsl } from "./attention-common.js";
import { attnParamsStruct } from "./params.js";

export const WORKGROUP = 64;

/** Tile shape of one pipeline: BR query rows × BC keys. */
export interface FlashTile {
  BR: number;
  BC: number;
}

const TILES: readonly FlashTile[] = [
  { BR: 16, BC: 16 },
  { BR: 8, BC: 16 },
  { BR: 8, BC: 8 },
  { BR: 4, BC: 8 },
  { BR: 4, BC: 4 },
];

/** Workgroup bytes a tile takes at head dim D. */
export function tileBytes(t: FlashTile, D: number): number {
  return 4 * (t.BR * D + t.BC * D + t.BR * t.BC);
}

/** The largest tile that fits `maxWorkgroupBytes` at head dim D (D ≤ 256 always fits the 16 KiB WebGPU minimum). */
export function chooseTile(D: number, maxWorkgroupBytes: number): FlashTile {
  const t = TILES.find((c) => tileBytes(c, D) <= maxWorkgroupBytes);
  if (!t) throw new RangeError(`head dim ${D} needs ${tileBytes(TILES[TILES.length - 1]!, D)} bytes of workgroup memory, the adapter has ${maxWorkgroupBytes}`);
  return t;
}

/** Head-dim class of a pipeline: workgroup arrays and registers are sized for it. */
export function dmaxFor(D: number): number {
  // 64 for the D = 64 models (Qwen2.5-0.5B, Llama 3.2 1B): half the registers and
  // workgroup memory of the 128 class, and half the shader compile time (seconds on SwiftShader).
  return D <= 64 ? 64 : D <= 128 ? 128 : 256;
}

export interface FlashKernelSpec {
  DMAX: number;
  tile: FlashTile;
}

export function flashAttentionWgsl({ DMAX, tile: { BR, BC } }: FlashKernelSpec): string {
  return `// FlashAttention-2, DMAX = ${DMAX}, BR = ${BR}, BC = ${BC}
${attnParamsStruct()}
const DMAX: u32 = ${DMAX}u;
const BR: u32 = ${BR}u;
const BC: u32 = ${BC}u;
const WG: u32 = ${WORKGROUP}u;
const TPR: u32 = WG / BR;
const DPT: u32 = DMAX / TPR;

${attentionBindingsWgsl()}
var<workgroup> qs: array<f32, ${BR * DMAX}>;
var<workgroup> kvs: array<f32, ${BC * DMAX}>;
var<workgroup> ss: array<f32, ${BR * BC}>;

${attentionScoreWgsl()}
@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
${workItemWgsl()}
  let rowsInSeq = sq * P.G;

  let row = lid / TPR;
  let part = lid % TPR;
  let flat = r0 + row;
  let valid = flat < rowsInSeq;
  let pos = min(flat, rowsInSeq - 1u) / P.G;
  let h = kvh * P.G + min(flat, rowsInSeq - 1u) % P.G;
  let off = i32(sk) - i32(sq);
  let diag = i32(pos) + off;

  let qAddr = P.qOff + b * P.qsB + h * P.qsH + (q0 + pos) * P.qsS;
  for (var c = 0u; c < DPT; c++) {
    let d = part + c * TPR;
    if (d < P.D) { qs[row * P.D + d] = select(0.0, qb[qAddr + d], valid); }
  }

  // Causal / window tile skip: the key band of the tile's first and last rows.
  let posLo = i32(r0 / P.G);
  let posHi = i32((min(r0 + BR, rowsInSeq) - 1u) / P.G);
  var jLo = i32(kv0);
  var jHi = i32(kv1);
  if (P.causal != 0u) { jHi = min(jHi, posHi + off + 1); }
  if (P.winR >= 0) { jHi = min(jHi, posHi + off + P.winR + 1); }
  if (P.winL >= 0) { jLo = max(jLo, posLo + off - P.winL); }

  var m = EXCLUDED;
  var l = 0.0;
  var acc: array<f32, DPT>;
  for (var j0 = jLo; j0 < jHi; j0 += i32(BC)) {
    workgroupBarrier();
    for (var e = lid; e < BC * P.D; e += WG) {
      let j = j0 + i32(e / P.D);
      var x = 0.0;
      if (j < jHi) { x = loadK(kAddr(b, kvh, u32(j), k0) + e % P.D); }
      kvs[e] = x;
    }
    workgroupBarrier();
    for (var e = lid; e < BR * BC; e += WG) {
      let r = e / BC;
      let j = j0 + i32(e % BC);
      let f = r0 + r;
      var s = EXCLUDED;
      if (f < rowsInSeq && j < jHi) {
        var dot = 0.0;
        for (var d = 0u; d < P.D; d++) { dot += qs[r * P.D + d] * kvs[(e % BC) * P.D + d]; }
        let p = f / P.G;
        s = score(b, kvh * P.G + f % P.G, p, i32(p) + off, u32(j), dot);
      }
      ss[e] = s;
    }
    workgroupBarrier();
    for (var e = lid; e < BC * P.D; e += WG) {
      let j = j0 + i32(e / P.D);
      var x = 0.0;
      if (j < jHi) { x = loadV(vAddr(b, kvh, u32(j), k0) + e % P.D); }
      kvs[e] = x;
    }
    workgroupBarrier();
    // Online softmax (FlashAttention-2): rescale by e^(m_old − m_new) only when the max moves.
    var mt = EXCLUDED;
    for (var c = 0u; c < BC; c++) { mt = max(mt, ss[row * BC + c]); }
    if (mt > -1.0e38) {
      let mNew = max(m, mt);
      let alpha = select(0.0, exp(m - mNew), l > 0.0);
      l *= alpha;
      for (var c = 0u; c < DPT; c++) { acc[c] *= alpha; }
      for (var c = 0u; c < BC; c++) {
        let s = ss[row * BC + c];
        if (s > -1.0e38) {
          let p = exp(s - mNew);
          l += p;
          for (var k = 0u; k < DPT; k++) {
            let d = part + k * TPR;
            if (d < P.D) { acc[k] += p * kvs[c * P.D + d]; }
          }
        }
      }
      m = mNew;
    }
  }
  if (!valid) { return; }
  let inv = select(0.0, 1.0 / l, l > 0.0);
  let lse = select(NEG_INF_BITS, bitcast<u32>(m + log(l)), l > 0.0);
  var oBase: u32;
  if (slot < 0) {
    let t = t0 + pos;
    oBase = (t * P.H + h) * P.D;
    if (part == 0u) { lb[t * P.H + h] = lse; }
  } else {
    let ps = (u32(slot) * P.H + h) * P.partSq + pos;
    oBase = P.partOOff + ps * P.D;
    if (part == 0u) { lb[P.partLOff + ps] = lse; }
  }
  for (var c = 0u; c < DPT; c++) {
    let d = part + c * TPR;
    if (d < P.D) { ob[oBase + d] = acc[c] * inv; }
  }
}
`;
}

/**
 * WGSL FlashAttention-2 (Dao 2023, Algorithm 1) for prefill, over dense
 * (BNSD/BSND/TND strides) or paged K/V (a block table). One workgroup of
 * 256 invocations (a 16 × 16 grid, tx along keys / head dims, ty along
 * rows) runs one work item (b, kvHead, r0, kv0, kv1, slot) of the CPU-built
 * plan (./../attention-plan.ts):
 *
 *   rows   BR rows of the flattened (position, group head) index r0 … r0+BR−1
 *          of KV head kvHead: all G query heads of a KV head share each K/V
 *          tile they load (GQA without repeating KV).
 *   keys   [kv0, kv1) of the sequence, in tiles of BC keys; a FlashDecoding
 *          chunk when slot ≥ 0 (partial o and lse go to the slot, merged by
 *          merge-states.ts), the whole sequence otherwise.
 *
 * Per key tile (the register tiling of CUTLASS's SIMT GEMM, applied to both
 * products of FlashAttention-2):
 *   S = Q·Kᵀ   invocation (tx, ty) owns the RM × CN scores rows ty + 16i, keys
 *              tx + 16j in registers; the head dim runs in slabs of DK = 32:
 *              Q [BR][32] and K [BC][32] staged as f32 vec4 (K decoded from
 *              f16 | bf16 | int8 | fp8 as it stages; rows padded to 36 floats
 *              so the 16 key rows a step reads sit in distinct banks), then
 *              8 steps of RM × CN vec4 dot products.
 *   softmax    the scores of ARCHITECTURE.md (scale, softcap, bias, ALiBi,
 *              masks); each row's tile max from its 16 owners through
 *              workgroup memory; P = exp(S − m) to workgroup memory (vec4
 *              along keys); each invocation keeps a partial row sum l,
 *              rescaled with the accumulators (online softmax), summed over
 *              the 16 owners once at the end.
 *   O += P·V   invocation (tx, ty) owns rows ty + 16i × head dims 64c + 4tx
 *              … + 3 (vec4 registers, c < DMAX / 64); V staged 64 dims at a
 *              time, [BC][64] f32; P stored a word per invocation (its CN
 *              keys tx + 16j as one vecCN: whole-word stores, no two
 *              invocations write parts of one word), so per word q RM vecCN
 *              of P and CN vec4 of V (keys q + 16j) for 4·RM·CN FMAs.
 *
 * Workgroup memory: the slab area max((BR + BC)·36, BC·64) floats (Q and K
 * slabs, then V), P [BR][BC] and the row reduction [BR][16]. FLOPs per byte
 * of workgroup reads an invocation issues: S = 2·RM·CN·4 / ((RM + CN)·16),
 * P·V = 2·4·RM·CN / ((RM + CN)·16) (1.0 and 1.0 at RM = CN = 4); the Q and P
 * reads are broadcasts across the 16 invocations of a grid row.
 *
 * Compile-time: DMAX (64, 128 or 256) and the tile. D, the KV dtype and
 * dense-or-paged addressing are uniforms (branches every invocation takes the
 * same way): one pipeline per DMAX class, because on SwiftShader, where the
 * tests run, each compile costs seconds.
 * Tiles outside the causal / window band of the whole row tile are skipped
 * (the key loop bounds); keys inside it are masked per element.
 */
import { attentionBindingsWgsl, attentionScoreWgsl, workItemWgsl } from "./attention-common.js";
import { attnParamsStruct } from "./params.js";

/** Invocations of the other kernels that share this file's launch arithmetic (kv append: paged-attention-step.ts, attention-run.ts). */
export const WORKGROUP = 64;
/** Invocations of a FlashAttention-2 workgroup: 16 × 16 (WebGPU's guaranteed minimum is 256). */
export const FLASH_WORKGROUP = 256;

/** Tile shape of one pipeline: BR query rows × BC keys (multiples of 16, BC of 64 → 4 keys a vec4 as well). */
export interface FlashTile {
  BR: number;
  BC: number;
}

/**
 * Largest first: 64 × 64 (38 KiB) where 48 KiB of workgroup memory allows
 * (NVIDIA, AMD); 32 × 64 (26 KiB) within 32 KiB (SwiftShader, Apple, Intel:
 * the same FLOPs per byte as 64 × 32, twice the workgroups for short prompts,
 * and the 4-key P words of the 64 × 64 tile, so the tests on SwiftShader run
 * that code); 32 × 32 within 16 KiB (WebGPU's minimum).
 */
const TILES: readonly FlashTile[] = [
  { BR: 64, BC: 64 },
  { BR: 32, BC: 64 },
  { BR: 32, BC: 32 },
  { BR: 32, BC: 16 },
  { BR: 16, BC: 16 },
];

/** Head-dim slab of S = Q·Kᵀ, its padded row (floats), and V's slab of head dims. */
const DK = 32;
const DKP = DK + 4;
const VCH = 64;

/** Floats of the slab area (Q and K slabs, or a V slab). */
function slabFloats(t: FlashTile): number {
  return Math.max((t.BR + t.BC) * DKP, t.BC * VCH);
}

/** Workgroup bytes a tile takes: slab area, P [BR][BC], row reduction [BR][16] (the head dim enters through the slabs only). */
export function tileBytes(t: FlashTile, _D?: number): number {
  return 4 * (slabFloats(t) + t.BR * t.BC + t.BR * 16);
}

/** The largest tile that fits `maxWorkgroupBytes` (the smallest, 16 × 16, takes 6.5 KiB; WebGPU guarantees 16 KiB). */
export function chooseTile(D: number, maxWorkgroupBytes: number): FlashTile {
  const t = TILES.find((c) => tileBytes(c, D) <= maxWorkgroupBytes);
  if (!t) throw new RangeError(`head dim ${D} needs ${tileBytes(TILES[TILES.length - 1]!, D)} bytes of workgroup memory, the adapter has ${maxWorkgroupBytes}`);
  return t;
}

/** Head-dim class of a pipeline: accumulator registers are sized for it. */
export function dmaxFor(D: number): number {
  // 64 for the D = 64 models (Qwen2.5-0.5B, Llama 3.2 1B): a quarter of the accumulators of the 256 class.
  return D <= 64 ? 64 : D <= 128 ? 128 : 256;
}

export interface FlashKernelSpec {
  DMAX: number;
  tile: FlashTile;
}

export function flashAttentionWgsl({ DMAX, tile: { BR, BC } }: FlashKernelSpec): string {
  const RM = BR / 16;
  const CN = BC / 16;
  const NVC = DMAX / VCH;
  // P's row as 16 words of CN keys each: word q of a row holds keys q, q + 16, … (one invocation's scores, one store).
  const PT = CN === 1 ? "f32" : `vec${CN}<f32>`;
  const pAt = (j: number) => (CN === 1 ? "p" : `p[${j}]`);
  const pvTerms = Array.from({ length: CN }, (_, j) => `${pAt(j)} * slab[(q + ${16 * j}u) * 16u + tx]`).join(" + ");
  return `// FlashAttention-2, DMAX = ${DMAX}, BR = ${BR}, BC = ${BC}, 16 × 16 invocations
${attnParamsStruct()}
const BR: u32 = ${BR}u;
const BC: u32 = ${BC}u;
const RM: u32 = ${RM}u;           // rows an invocation: ty + 16i
const CN: u32 = ${CN}u;           // keys an invocation in S: tx + 16j
const NVC: u32 = ${NVC}u;         // V slabs of 64 head dims
const DK4: u32 = ${DK / 4}u;      // vec4 of a Q / K slab row
const DKP4: u32 = ${DKP / 4}u;    // its padded stride

${attentionBindingsWgsl()}
var<workgroup> slab: array<vec4<f32>, ${slabFloats({ BR, BC }) / 4}>;
var<workgroup> ps: array<${PT}, ${BR * 16}>;
var<workgroup> red: array<f32, ${BR * 16}>;

${attentionScoreWgsl()}
@compute @workgroup_size(${FLASH_WORKGROUP})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
${workItemWgsl()}
  let rowsInSeq = sq * P.G;
  let tx = lid % 16u;
  let ty = lid / 16u;
  let off = i32(sk) - i32(sq);

  // Causal / window tile skip: the key band of the tile's first and last rows.
  let posLo = i32(r0 / P.G);
  let posHi = i32((min(r0 + BR, rowsInSeq) - 1u) / P.G);
  var jLo = i32(kv0);
  var jHi = i32(kv1);
  if (P.causal != 0u) { jHi = min(jHi, posHi + off + 1); }
  if (P.winR >= 0) { jHi = min(jHi, posHi + off + P.winR + 1); }
  if (P.winL >= 0) { jLo = max(jLo, posLo + off - P.winL); }
  let nSlabs = (P.D + ${DK - 1}u) / ${DK}u;
  let nV = (P.D + ${VCH - 1}u) / ${VCH}u;

  var m: array<f32, ${RM}>;
  var l: array<f32, ${RM}>;
  var acc: array<vec4<f32>, ${RM * NVC}>;   // acc[i·NVC + c] = o[row ty + 16i, dims 64c + 4tx … + 3]
  for (var i = 0u; i < RM; i++) { m[i] = EXCLUDED; }

  for (var j0 = jLo; j0 < jHi; j0 += i32(BC)) {
    // S = Q·Kᵀ over head-dim slabs of 32.
    var s: array<f32, ${RM * CN}>;
    for (var i = 0u; i < RM * CN; i++) { s[i] = 0.0; }
    for (var sl = 0u; sl < nSlabs; sl++) {
      workgroupBarrier();
      for (var e = lid; e < (BR + BC) * DK4; e += ${FLASH_WORKGROUP}u) {
        let r = e / DK4;
        let d = sl * ${DK}u + 4u * (e % DK4);
        var v = vec4<f32>(0.0);
        if (r < BR) {
          let f = r0 + r;
          if (f < rowsInSeq) {
            let pos = f / P.G;
            let h = kvh * P.G + f % P.G;
            let a = P.qOff + b * P.qsB + h * P.qsH + (q0 + pos) * P.qsS + d;
            for (var c = 0u; c < 4u; c++) { if (d + c < P.D) { v[c] = qb[a + c]; } }
          }
        } else {
          let j = j0 + i32(r - BR);
          if (j < jHi) {
            let a = kAddr(b, kvh, u32(j), k0) + d;
            for (var c = 0u; c < 4u; c++) { if (d + c < P.D) { v[c] = loadK(a + c); } }
          }
        }
        slab[r * DKP4 + e % DK4] = v;
      }
      workgroupBarrier();
      for (var d4 = 0u; d4 < DK4; d4++) {
        var kv: array<vec4<f32>, ${CN}>;
        for (var j = 0u; j < CN; j++) { kv[j] = slab[(BR + tx + 16u * j) * DKP4 + d4]; }
        for (var i = 0u; i < RM; i++) {
          let qv = slab[(ty + 16u * i) * DKP4 + d4];
          for (var j = 0u; j < CN; j++) { s[i * CN + j] += dot(qv, kv[j]); }
        }
      }
    }
    // Scores, then each row's tile max over its 16 owners.
    for (var i = 0u; i < RM; i++) {
      let f = r0 + ty + 16u * i;
      var mx = EXCLUDED;
      for (var j = 0u; j < CN; j++) {
        let key = j0 + i32(tx + 16u * j);
        var x = EXCLUDED;
        if (f < rowsInSeq && key < jHi) {
          let p = f / P.G;
          x = score(b, kvh * P.G + f % P.G, p, i32(p) + off, u32(key), s[i * CN + j]);
        }
        s[i * CN + j] = x;
        mx = max(mx, x);
      }
      red[(ty + 16u * i) * 16u + tx] = mx;
    }
    workgroupBarrier();
    // Online softmax (FlashAttention-2): P = e^(s − m_new); l and O rescaled by e^(m_old − m_new).
    for (var i = 0u; i < RM; i++) {
      let row = ty + 16u * i;
      var mt = EXCLUDED;
      for (var c = 0u; c < 16u; c++) { mt = max(mt, red[row * 16u + c]); }
      let mNew = max(m[i], mt);
      let alpha = select(1.0, exp(m[i] - mNew), m[i] > -1.0e38);
      l[i] *= alpha;
      for (var c = 0u; c < NVC; c++) { acc[i * NVC + c] *= alpha; }
      m[i] = mNew;
      var pw: array<f32, ${CN}>;
      for (var j = 0u; j < CN; j++) {
        let x = s[i * CN + j];
        let p = select(0.0, exp(x - mNew), x > -1.0e38);
        l[i] += p;
        pw[j] = p;
      }
      ps[row * 16u + tx] = ${CN === 1 ? "pw[0]" : `${PT}(${Array.from({ length: CN }, (_, j) => `pw[${j}]`).join(", ")})`};
    }
    // O += P·V, V staged 64 head dims at a time. The loop runs to the compile-time NVC (skipping slabs past D)
    // so that acc's index is a constant once unrolled: a runtime index would put acc in local memory.
    for (var c = 0u; c < NVC; c++) {
      if (c >= nV) { break; }
      workgroupBarrier();
      for (var e = lid; e < BC * 16u; e += ${FLASH_WORKGROUP}u) {
        let j = j0 + i32(e / 16u);
        let d = c * ${VCH}u + 4u * (e % 16u);
        var v = vec4<f32>(0.0);
        if (j < jHi) {
          let a = vAddr(b, kvh, u32(j), k0) + d;
          for (var k = 0u; k < 4u; k++) { if (d + k < P.D) { v[k] = loadV(a + k); } }
        }
        slab[e] = v;
      }
      workgroupBarrier();
      for (var q = 0u; q < 16u; q++) {
        for (var i = 0u; i < RM; i++) {
          let p = ps[(ty + 16u * i) * 16u + q];
          acc[i * NVC + c] += ${pvTerms};
        }
      }
    }
  }
  // Row sums over the 16 owners.
  workgroupBarrier();
  for (var i = 0u; i < RM; i++) { red[(ty + 16u * i) * 16u + tx] = l[i]; }
  workgroupBarrier();
  for (var i = 0u; i < RM; i++) {
    let row = ty + 16u * i;
    let f = r0 + row;
    if (f >= rowsInSeq) { continue; }
    var lt = 0.0;
    for (var c = 0u; c < 16u; c++) { lt += red[row * 16u + c]; }
    let pos = f / P.G;
    let h = kvh * P.G + f % P.G;
    let inv = select(0.0, 1.0 / lt, lt > 0.0);
    let lse = select(NEG_INF_BITS, bitcast<u32>(m[i] + log(lt)), lt > 0.0);
    var oBase: u32;
    if (slot < 0) {
      let t = t0 + pos;
      oBase = (t * P.H + h) * P.D;
      if (tx == 0u) { lb[t * P.H + h] = lse; }
    } else {
      let q = (u32(slot) * P.H + h) * P.partSq + pos;
      oBase = P.partOOff + q * P.D;
      if (tx == 0u) { lb[P.partLOff + q] = lse; }
    }
    for (var c = 0u; c < NVC; c++) {
      if (c >= nV) { break; }
      let o = acc[i * NVC + c] * inv;
      for (var k = 0u; k < 4u; k++) {
        let d = c * ${VCH}u + 4u * tx + k;
        if (d < P.D) { ob[oBase + d] = o[k]; }
      }
    }
  }
}
`;
}

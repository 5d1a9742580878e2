/**
 * WGSL FlashDecoding combine: the partial (o, lse) of a split sequence's KV
 * chunks merge by log-sum-exp into its final o and lse (ggml's split-KV
 * reduce; FlashInfer's merge_state over n states):
 *   M = max_c lse_c,  w_c = e^(lse_c − M),  o = Σ w_c o_c / Σ w_c,  lse = M + ln Σ w_c
 * A chunk with lse = −∞ (no kept key) weighs 0; all −∞ gives o = 0, lse = −∞.
 *
 * One workgroup per (row = (b, h, position), block of MERGE_DIMS dims): its
 * MERGE_WG invocations first reduce (M, Σ w) over the row's n chunks as
 * online-softmax pairs (each invocation folds chunks c ≡ lid mod MERGE_WG,
 * then a tree in workgroup memory), then invocation (cl, dl) sums w_c · o_c
 * of dim dl over the chunks c ≡ cl mod MERGE_CL (MERGE_DIMS consecutive dims
 * of one chunk: a contiguous read), and the MERGE_CL partial sums of a dim
 * add up in workgroup memory. Sequences that were not split were written
 * whole by the attention kernel and are skipped.
 * Partials: o [slot, H, partSq, D] at partOOff of the out buffer, lse
 * [slot, H, partSq] at partLOff of the lse buffer; chunks: int32 [B, 2] =
 * (first slot or −1, count) at chunksOff of the plan. Dispatch: nItems =
 * B·H·partSq rows × ceil(D / MERGE_DIMS) workgroups (params.wgX wide).
 */
import { attnParamsStruct } from "./params.js";

export const MERGE_DIMS = 16;
const MERGE_CL = 16;
const MERGE_WG = MERGE_DIMS * MERGE_CL;

/** Workgroups of the merge for `rows` (b, h, position) rows of D dims. */
export function mergeWorkgroups(rows: number, D: number): number {
  return rows * Math.ceil(D / MERGE_DIMS);
}

export function mergeStatesWgsl(): string {
  return `// FlashDecoding merge
${attnParamsStruct()}
const NEG_INF_BITS: u32 = 0xff800000u;
const DIMS: u32 = ${MERGE_DIMS}u;
const CL: u32 = ${MERGE_CL}u;
const WG: u32 = ${MERGE_WG}u;

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(4) var<storage, read> plan: array<u32>;
@group(0) @binding(6) var<storage, read_write> ob: array<f32>;
@group(0) @binding(7) var<storage, read_write> lb: array<u32>;  // lse as f32 bits

var<workgroup> rm: array<f32, WG>;
var<workgroup> rs: array<f32, WG>;
var<workgroup> part: array<f32, WG>;

fn finite(x: u32) -> bool { return x != NEG_INF_BITS; }

@compute @workgroup_size(${MERGE_WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wgi = wid.x + wid.y * P.wgX;
  let dBlocks = (P.D + DIMS - 1u) / DIMS;
  let idx = wgi / dBlocks;        // the (b, h, position) row
  let d0 = (wgi % dBlocks) * DIMS;
  if (idx >= P.nItems) { return; } // nItems = B * H * partSq
  let pos = idx % P.partSq;
  let h = (idx / P.partSq) % P.H;
  let b = idx / (P.partSq * P.H);
  let slot0 = bitcast<i32>(plan[P.chunksOff + 2u * b]);
  let n = plan[P.chunksOff + 2u * b + 1u];
  let sqo = P.seqsOff + b * 5u;
  let sq = plan[sqo + 1u];
  if (slot0 < 0 || pos >= sq) { return; }
  let lse0 = P.partLOff + u32(slot0) * P.H * P.partSq + h * P.partSq + pos;
  let cStride = P.H * P.partSq;    // from one chunk's (h, pos) to the next's

  // (M, Σ e^(lse − M)) over the chunks, as online-softmax pairs; M = −3e38 while none is finite.
  var m = -3.0e38;
  var s = 0.0;
  for (var c = lid; c < n; c += WG) {
    let x = lb[lse0 + c * cStride];
    if (finite(x)) {
      let y = bitcast<f32>(x);
      let mn = max(m, y);
      s = s * exp(m - mn) + exp(y - mn);
      m = mn;
    }
  }
  rm[lid] = m;
  rs[lid] = s;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w >>= 1u) {
    if (lid < w) {
      let m2 = rm[lid + w];
      let s2 = rs[lid + w];
      let mn = max(m, m2);
      s = select(0.0, s * exp(m - mn), s > 0.0) + select(0.0, s2 * exp(m2 - mn), s2 > 0.0);
      m = mn;
      rm[lid] = m;
      rs[lid] = s;
    }
    workgroupBarrier();
  }
  let M = rm[0];
  let S = rs[0];

  let cl = lid / DIMS;
  let d = d0 + lid % DIMS;
  var o = 0.0;
  if (S > 0.0 && d < P.D) {
    for (var c = cl; c < n; c += CL) {
      let x = lb[lse0 + c * cStride];
      if (finite(x)) { o += exp(bitcast<f32>(x) - M) * ob[P.partOOff + (lse0 - P.partLOff + c * cStride) * P.D + d]; }
    }
  }
  part[lid] = o;
  workgroupBarrier();
  let t = plan[sqo + 4u] + pos;
  if (lid < DIMS && d < P.D) {
    var sum = 0.0;
    for (var c = 0u; c < CL; c++) { sum += part[c * DIMS + lid]; }
    ob[(t * P.H + h) * P.D + d] = select(0.0, sum / S, S > 0.0);
  }
  if (lid == 0u && d0 == 0u) { lb[t * P.H + h] = select(NEG_INF_BITS, bitcast<u32>(M + log(S)), S > 0.0); }
}
`;
}

/**
 * WGSL FlashDecoding combine: the partial (o, lse) of a split sequence's KV
 * chunks merge by log-sum-exp into its final o and lse (ggml's split-KV
 * reduce; FlashInfer's merge_state over n states):
 *   M = max_c lse_c,  w_c = e^(lse_c − M),  o = Σ w_c o_c / Σ w_c,  lse = M + ln Σ w_c
 * A chunk with lse = −∞ (no kept key) weighs 0; all −∞ gives o = 0, lse = −∞.
 * One invocation per (b, h, position) of the batch; sequences that were not
 * split were written whole by the attention kernel and are skipped.
 * Partials: o [slot, H, partSq, D] at partOOff of the out buffer, lse
 * [slot, H, partSq] at partLOff of the lse buffer; chunks: int32 [B, 2] =
 * (first slot or −1, count) at chunksOff of the plan.
 */
import { attnParamsStruct } from "./params.js";

export function mergeStatesWgsl(): string {
  return `// FlashDecoding merge
${attnParamsStruct()}
const NEG_INF_BITS: u32 = 0xff800000u;

@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(4) var<storage, read> plan: array<u32>;
@group(0) @binding(6) var<storage, read_write> ob: array<f32>;
@group(0) @binding(7) var<storage, read_write> lb: array<u32>;  // lse as f32 bits

fn finite(x: u32) -> bool { return x != NEG_INF_BITS; }

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = gid.x + gid.y * P.wgX * 64u;
  let rows = P.nItems;           // B * H * partSq
  if (idx >= rows) { return; }
  let pos = idx % P.partSq;
  let h = (idx / P.partSq) % P.H;
  let b = idx / (P.partSq * P.H);
  let slot0 = bitcast<i32>(plan[P.chunksOff + 2u * b]);
  let n = plan[P.chunksOff + 2u * b + 1u];
  let sqo = P.seqsOff + b * 5u;
  let sq = plan[sqo + 1u];
  if (slot0 < 0 || pos >= sq) { return; }
  var M = -3.0e38;
  var seen = false;
  for (var c = 0u; c < n; c++) {
    let x = lb[P.partLOff + (( u32(slot0) + c) * P.H + h) * P.partSq + pos];
    if (finite(x)) { M = max(M, bitcast<f32>(x)); seen = true; }
  }
  let t = plan[sqo + 4u] + pos;
  let oBase = (t * P.H + h) * P.D;
  if (!seen) {
    for (var d = 0u; d < P.D; d++) { ob[oBase + d] = 0.0; }
    lb[t * P.H + h] = NEG_INF_BITS;
    return;
  }
  var sum = 0.0;
  for (var c = 0u; c < n; c++) {
    let x = lb[P.partLOff + ((u32(slot0) + c) * P.H + h) * P.partSq + pos];
    if (finite(x)) { sum += exp(bitcast<f32>(x) - M); }
  }
  for (var d = 0u; d < P.D; d++) {
    var o = 0.0;
    for (var c = 0u; c < n; c++) {
      let ps = (u32(slot0) + c) * P.H + h;
      let x = lb[P.partLOff + ps * P.partSq + pos];
      if (finite(x)) { o += exp(bitcast<f32>(x) - M) * ob[P.partOOff + (ps * P.partSq + pos) * P.D + d]; }
    }
    ob[oBase + d] = o / sum;
  }
  lb[t * P.H + h] = bitcast<u32>(M + log(sum));
}
`;
}

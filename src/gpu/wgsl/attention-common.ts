/**
 * WGSL shared by the attention kernels (flash-attention.ts, decode-attention.ts):
 * the bindings, K/V loads (kv-load.ts), dense-or-paged key addressing and
 * the score of ARCHITECTURE.md ("Attention semantics"): scale, softcap,
 * bias, ALiBi, then the causal / window / mask exclusions.
 *
 * Bindings: 0 Params (uniform, params.ts); 1 q f32; 2 k, 3 v as u32 words;
 * 4 plan (int32 tables, attention-plan.ts); 5 aux (bias f32, mask u8, ALiBi
 * f32 as words); 6 out f32 (compact [T, H, D], then the split partials);
 * 7 lse as f32 bits ([T, H], then the partials).
 */
import { FP8_E4M3_DECODE_WGSL, cacheLoadFn } from "./kv-load.js";

/** Marks an excluded key's score; any real score is above −1e38. */
export const EXCLUDED_WGSL = "const EXCLUDED: f32 = -3.0e38;\nconst NEG_INF_BITS: u32 = 0xff800000u;\n";

export function attentionBindingsWgsl(): string {
  return `${EXCLUDED_WGSL}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> qb: array<f32>;
@group(0) @binding(2) var<storage, read> kb: array<u32>;
@group(0) @binding(3) var<storage, read> vb: array<u32>;
@group(0) @binding(4) var<storage, read> plan: array<u32>;
@group(0) @binding(5) var<storage, read> aux: array<u32>;
@group(0) @binding(6) var<storage, read_write> ob: array<f32>;
@group(0) @binding(7) var<storage, read_write> lb: array<u32>;  // lse as f32 bits (−∞ written as bits)`;
}

/**
 * The start of a kernel's main: its work item (b, kvh, first row r0, keys
 * [kv0, kv1), split slot) from the plan's item table (6 words an item), and
 * the item's sequence (q0, sq, k0, sk, t0) from the sequence table (5 words).
 * Returns early past the last item.
 */
export function workItemWgsl(): string {
  return `  let item = wid.x + wid.y * P.wgX;
  if (item >= P.nItems) { return; }
  let it = P.itemsOff + item * 6u;
  let b = plan[it];
  let kvh = plan[it + 1u];
  let r0 = plan[it + 2u];
  let kv0 = plan[it + 3u];
  let kv1 = plan[it + 4u];
  let slot = bitcast<i32>(plan[it + 5u]);
  let sqo = P.seqsOff + b * 5u;
  let q0 = plan[sqo];
  let sq = plan[sqo + 1u];
  let k0 = plan[sqo + 2u];
  let sk = plan[sqo + 3u];
  let t0 = plan[sqo + 4u];`;
}

export function attentionScoreWgsl(): string {
  return `${FP8_E4M3_DECODE_WGSL}${cacheLoadFn("loadK", "kb")}
${cacheLoadFn("loadV", "vb")}
// Element index of key row j (0-based in the sequence) of KV head kvh: dense strides or the block table.
fn keySlot(b: u32, j: u32, k0: u32) -> u32 {
  let t = k0 + j;
  if (P.paged == 0u) { return t; }
  let blk = plan[P.tableOff + b * P.maxBlocks + t / P.blockSize];
  return blk * P.blockSize + t % P.blockSize;
}
fn kAddr(b: u32, kvh: u32, j: u32, k0: u32) -> u32 { return P.kOff + b * P.ksB + kvh * P.ksH + keySlot(b, j, k0) * P.ksS; }
fn vAddr(b: u32, kvh: u32, j: u32, k0: u32) -> u32 { return P.vOff + b * P.vsB + kvh * P.vsH + keySlot(b, j, k0) * P.vsS; }
fn maskedOut(b: u32, h: u32, i: u32, j: u32) -> bool {
  let e = P.maskOff + b * P.msB + h * P.msH + i * P.msI + j * P.msJ;
  return ((aux[e >> 2u] >> (8u * (e & 3u))) & 0xffu) != 0u;
}

// s_j of ARCHITECTURE.md for query (b, h, position i, diagonal diag) and key j, or EXCLUDED.
fn score(b: u32, h: u32, i: u32, diag: i32, j: u32, dot: f32) -> f32 {
  let jj = i32(j);
  if (P.causal != 0u && jj > diag) { return EXCLUDED; }
  if (P.winL >= 0 && jj < diag - P.winL) { return EXCLUDED; }
  if (P.winR >= 0 && jj > diag + P.winR) { return EXCLUDED; }
  if ((P.flags & 2u) != 0u && maskedOut(b, h, i, j)) { return EXCLUDED; }
  var s = P.scale * dot;
  if (P.softcap > 0.0) { s = P.softcap * tanh(clamp(s / P.softcap, -15.0, 15.0)); }
  if ((P.flags & 1u) != 0u) { s += bitcast<f32>(aux[P.biasOff + b * P.bsB + h * P.bsH + i * P.bsI + j * P.bsJ]); }
  if ((P.flags & 4u) != 0u) { s -= bitcast<f32>(aux[P.alibiOff + b * P.asB + h]) * f32(abs(diag - jj)); }
  return s;
}`;
}

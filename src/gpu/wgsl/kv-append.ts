/**
 * WGSL KV append (vLLM's reshape_and_cache): the new tokens' K and V rows
 * f32 [T, Hkv, D] (token stride free) into their slots of a paged cache
 * [numBlocks, blockSize, Hkv, D] (K and V rows each at their own token stride) stored f32, f16 or bf16 (`P.dtype`: the
 * codes of kv-load.ts), slot = blockId · blockSize + offset, −1 skips a token.
 * One invocation writes one 32-bit word of the cache — one f32, or two
 * adjacent 16-bit elements packed (f16 by pack2x16float, bf16 rounded to
 * nearest even) — so no two invocations share a word (D even for 16-bit
 * caches). K and V in one dispatch: the second half of the invocations write V.
 */
export function kvAppendWgsl(): string {
  return `// KV append
struct Params { tokens: u32, hkv: u32, d: u32, dtype: u32, kOff: u32, vOff: u32, tokenStride: u32, wgX: u32, vTokenStride: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> newK: array<f32>;
@group(0) @binding(2) var<storage, read> newV: array<f32>;
@group(0) @binding(3) var<storage, read> slots: array<i32>;
@group(0) @binding(4) var<storage, read_write> cacheK: array<u32>;
@group(0) @binding(5) var<storage, read_write> cacheV: array<u32>;

fn bf16(x: f32) -> u32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) { return (u >> 16u) | 0x40u; }   // NaN stays a quiet NaN
  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}

fn word(isV: bool, t: u32, e: u32) -> u32 {
  let src = t * select(P.tokenStride, P.vTokenStride, isV) + e;   // e: element within the token's [Hkv, D] row
  var a: f32;
  var b: f32;
  if (isV) { a = newV[P.vOff + src]; } else { a = newK[P.kOff + src]; }
  if (P.dtype == 0u) { return bitcast<u32>(a); }
  if (isV) { b = newV[P.vOff + src + 1u]; } else { b = newK[P.kOff + src + 1u]; }
  if (P.dtype == 1u) { return pack2x16float(vec2<f32>(a, b)); }
  return bf16(a) | (bf16(b) << 16u);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let perElem = select(2u, 1u, P.dtype == 0u);    // elements per word
  let wordsPerToken = P.hkv * P.d / perElem;
  let total = P.tokens * wordsPerToken;
  var idx = gid.x + gid.y * P.wgX * 64u;
  if (idx >= 2u * total) { return; }
  let isV = idx >= total;
  if (isV) { idx -= total; }
  let t = idx / wordsPerToken;
  let w = idx % wordsPerToken;
  let slot = slots[t];
  if (slot < 0) { return; }
  let dst = u32(slot) * wordsPerToken + w;
  let value = word(isV, t, w * perElem);
  if (isV) { cacheV[dst] = value; } else { cacheK[dst] = value; }
}
`;
}

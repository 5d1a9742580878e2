/**
 * WGSL KV append (vLLM's reshape_and_cache): the new tokens' K and V rows
 * f32 [T, Hkv, D] (token stride free) into their slots of a paged cache
 * [numBlocks, blockSize, Hkv, D] (K and V rows each at their own token stride) stored f32, f16 or bf16 (`P.dtype`: the
 * codes of kv-load.ts), slot = blockId · blockSize + offset, −1 skips a token.
 * One invocation writes one 32-bit word of the cache — one f32, or two
 * adjacent 16-bit elements packed (f16 by pack2x16float, bf16 rounded to
 * nearest even) — so no two invocations share a word (D even for 16-bit
 * caches). K and V in one dispatch: the second half of the invocations write V.
 *
 * The 1-byte dtypes (codes ≥ 3, the CPU's assembly/kv/append.ts modes as
 * loadModel makes them) take one invocation per (token, KV head) row of D
 * values (D % 4 == 0, so rows own their words):
 *   int8      per-token: s = max|x| / 127 stored at word scaleOff + slot · Hkv + h,
 *             q = round-half-even(x / s) clamped to [−128, 127] (0 when s = 0)
 *   int8, per-channel (code 6): q = round-half-even(x / scale[h, i] − offset[h, i])
 *             clamped to [−128, 127], NaN → 0, with the static scale and offset
 *             f32 [Hkv, D] each read from word scaleOff of the same buffer (kv-load.ts)
 *   fp8e4m3   fp8(x), round to nearest even, saturating (OCP), per-tensor scale 1
 *   fp8e5m2   likewise
 * WGSL's f32 division is within 2.5 ULP, not correctly rounded as wasm's is:
 * a code may differ by one from the CPU's where x / s lies at a half.
 *
 * RoPE fused (P.half = rotaryDim / 2 > 0): K is rotated (rotate-half, cos and
 * sin from the cos/sin cache [maxPos, 2·half] at the token's position, as
 * decoder-ops.ts's RoPE did it) as it is read, so the cache holds rotated keys
 * and the k rows are left as they were; invocations past the append's rotate
 * q's heads in place (one per (token, head, i < half)), so one dispatch does
 * RoPE of q and k and the append. Without append (P.flags bit 2 clear) the
 * kernel is RoPE of q alone. q is in binding `a` (read_write), K and V in `a`
 * or `b` (P.flags bits 0, 1): WebGPU binds no buffer for writing and reading
 * at once, and q, k, v of qkv share one buffer (disjoint columns).
 */
export function kvAppendWgsl(): string {
  return `// KV append
struct Params { tokens: u32, hkv: u32, d: u32, dtype: u32, kOff: u32, vOff: u32, tokenStride: u32, wgX: u32, vTokenStride: u32, scaleOff: u32, half: u32, qHeads: u32, qOff: u32, qTokenStride: u32, flags: u32, pad0: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read> slots: array<i32>;
@group(0) @binding(4) var<storage, read_write> cacheK: array<u32>;
@group(0) @binding(5) var<storage, read_write> cacheV: array<u32>;
@group(0) @binding(6) var<storage, read> positions: array<i32>;
@group(0) @binding(7) var<storage, read> cosSin: array<f32>;

fn ld(inA: bool, i: u32) -> f32 {
  if (inA) { return a[i]; }
  return b[i];
}

// Element e of token t's [Hkv, D] row: V as stored, K rotated (when P.half > 0).
fn src(isV: bool, t: u32, e: u32) -> f32 {
  if (isV) { return ld((P.flags & 2u) != 0u, P.vOff + t * P.vTokenStride + e); }
  let kInA = (P.flags & 1u) != 0u;
  let at = P.kOff + t * P.tokenStride + e;
  let x = ld(kInA, at);
  let i = e % P.d;
  if (i >= 2u * P.half) { return x; }
  let row = u32(positions[t]) * 2u * P.half;
  let j = i % P.half;
  let c = cosSin[row + j];
  let s = cosSin[row + P.half + j];
  if (i < P.half) { return x * c - ld(kInA, at + P.half) * s; }
  return x * c + ld(kInA, at - P.half) * s;
}

// RoPE of q in place: item = (token, head, i < half).
fn ropeQ(item: u32) {
  if (item >= P.tokens * P.qHeads * P.half) { return; }
  let i = item % P.half;
  let h = (item / P.half) % P.qHeads;
  let t = item / (P.half * P.qHeads);
  let row = u32(positions[t]) * 2u * P.half;
  let c = cosSin[row + i];
  let s = cosSin[row + P.half + i];
  let base = P.qOff + t * P.qTokenStride + h * P.d;
  let x1 = a[base + i];
  let x2 = a[base + i + P.half];
  a[base + i] = x1 * c - x2 * s;
  a[base + i + P.half] = x2 * c + x1 * s;
}

fn bf16(x: f32) -> u32 {
  let u = bitcast<u32>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) { return (u >> 16u) | 0x40u; }   // NaN stays a quiet NaN
  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;
}

fn word(isV: bool, t: u32, e: u32) -> u32 {
  let x0 = src(isV, t, e);   // e: element within the token's [Hkv, D] row
  if (P.dtype == 0u) { return bitcast<u32>(x0); }
  let x1 = src(isV, t, e + 1u);
  if (P.dtype == 1u) { return pack2x16float(vec2<f32>(x0, x1)); }
  return bf16(x0) | (bf16(x1) << 16u);
}

// f32 → a small float (E exponent bits, M mantissa bits, bias BIAS), nearest even, saturating:
// assembly/tensor/dtype.ts encodeSmallFloat with sat, step for step.
fn smallFloat(x: f32, E: u32, M: u32, BIAS: i32, MAXCODE: u32, NANCODE: u32) -> u32 {
  let b = bitcast<u32>(x);
  let a = b & 0x7fffffffu;
  if (a > 0x7f800000u) { return NANCODE; }
  let sign = (b >> 31u) << (E + M);
  if (a == 0x7f800000u) { return sign | MAXCODE; }
  var code: u32;
  if (a < (u32(128 - BIAS) << 23u)) {
    let magic = bitcast<f32>(u32(151 - BIAS - i32(M)) << 23u);   // adding it rounds to the subnormal quantum
    code = bitcast<u32>(bitcast<f32>(a) + magic) - bitcast<u32>(magic);
  } else {
    let s = 23u - M;
    code = (a + bitcast<u32>(BIAS - 127) * 0x800000u + ((1u << (s - 1u)) - 1u) + ((a >> s) & 1u)) >> s;
  }
  return select(sign | code, sign | MAXCODE, code > MAXCODE);
}

fn put(isV: bool, i: u32, value: u32) {
  if (isV) { cacheV[i] = value; } else { cacheK[i] = value; }
}

fn channelParam(isV: bool, i: u32) -> f32 {
  if (isV) { return bitcast<f32>(cacheV[i]); }
  return bitcast<f32>(cacheK[i]);
}

// int8 per-channel: x / scale − offset, round half to even, clamp; NaN → 0 (by its bits: WGSL may assume no NaN).
fn channelCode(isV: bool, x: f32, c: u32) -> u32 {
  let y = x / channelParam(isV, P.scaleOff + c) - channelParam(isV, P.scaleOff + P.hkv * P.d + c);
  if ((bitcast<u32>(y) & 0x7fffffffu) > 0x7f800000u) { return 0u; }
  return bitcast<u32>(i32(clamp(round(y), -128.0, 127.0))) & 0xffu;
}

// One (token, KV head) row of a 1-byte cache: D / 4 words (and int8's scale).
fn byteRow(isV: bool, t: u32, h: u32, slot: u32) {
  let x0 = h * P.d;
  let row = slot * P.hkv + h;
  var s = 0.0;
  if (P.dtype == 3u) {
    var amax = 0.0;
    for (var i = 0u; i < P.d; i++) { amax = max(amax, abs(src(isV, t, x0 + i))); }
    s = amax / 127.0;
    put(isV, P.scaleOff + row, bitcast<u32>(s));
  }
  for (var w = 0u; w < P.d / 4u; w++) {
    var packed = 0u;
    for (var k = 0u; k < 4u; k++) {
      let x = src(isV, t, x0 + 4u * w + k);
      var code: u32;
      if (P.dtype == 3u) {
        code = select(0u, bitcast<u32>(i32(clamp(round(x / s), -128.0, 127.0))) & 0xffu, s > 0.0);
      } else if (P.dtype == 6u) {
        code = channelCode(isV, x, h * P.d + 4u * w + k);
      } else if (P.dtype == 4u) {
        code = smallFloat(x, 4u, 3u, 7, 0x7eu, 0x7fu);
      } else {
        code = smallFloat(x, 5u, 2u, 15, 0x7bu, 0x7eu);
      }
      packed |= code << (8u * k);
    }
    put(isV, row * (P.d / 4u) + w, packed);
  }
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let g = gid.x + gid.y * P.wgX * 64u;
  // The append's invocations first (none without it), then q's RoPE.
  let perElem = select(2u, 1u, P.dtype == 0u);    // elements per word (float dtypes)
  let rows = P.tokens * P.hkv;
  let appendItems = select(0u, select(2u * rows * P.d / perElem, 2u * rows, P.dtype >= 3u), (P.flags & 4u) != 0u);
  if (g >= appendItems) {
    ropeQ(g - appendItems);
    return;
  }
  if (P.dtype >= 3u) {
    var r = g;
    let isV = r >= rows;
    if (isV) { r -= rows; }
    let slot = slots[r / P.hkv];
    if (slot < 0) { return; }
    byteRow(isV, r / P.hkv, r % P.hkv, u32(slot));
    return;
  }
  let wordsPerToken = P.hkv * P.d / perElem;
  let total = P.tokens * wordsPerToken;
  var idx = g;
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

/**
 * WGSL GEMV over ggml weight blocks kept as the file stores them
 * (quant-blocks.ts): out[t, r] = Σ_c x[t, c] · W[r, c] (+ bias[r]), W
 * decoded in the kernel, f32 activations. The decode path of the WebGPU
 * runner (the GEMM takes over from GEMM_MIN_TOKENS tokens), after llama.cpp
 * Vulkan's mul_mat_vec_q4_k.comp (one row per workgroup, a superblock split
 * over invocations, the sub-block scale and min factored out of the sum):
 *
 *   workgroup  64 invocations own one row r and up to TOKENS = 4 tokens, so a
 *              weight is decoded once for 4 tokens
 *   unit       one u32 of codes: 8 values, two runs of 4 columns (ca…ca+3,
 *              cb…cb+3), each w = s · q + m with one scale s and offset m a run
 *              (d·sc and −dmin·m of its sub-block); the row's units are
 *              strided over the invocations: lane k of a 32-unit superblock
 *              reads word k of its codes, so 32 lanes read 128 bytes in a row
 *   sum        acc[t] += sa·(xa · qa) + ma·Σxa + sb·(xb · qb) + mb·Σxb, then a
 *              workgroup tree reduction of the 4 token sums
 *
 *   type  units a block   unit k
 *   q4_0   4              qs word k: values 4k…4k+3 (low nibbles), 16+4k… (high)
 *   q4_k  32              qs word k (i = k/8, m = k%8): 64i+4m… (low, sub-block 2i), 64i+32+4m… (high, 2i+1)
 *   q5_k  32              q4_k's, bit 4 from qh word m (bits 2i / 2i+1 of its bytes)
 *   q6_k  32              ql word at 64n+32j+4m (n = k/16, j = k/8%2): 128n+32j+4m… (low, qh bits 2j),
 *                         the same + 64 (high nibbles, qh bits 2j+4); scales (v/16) of each run
 *   q2_k  32              qs word w = k/2 (n = w/8, l = 4·(w%8), p = k%2): 128n+64p+l… (bits 4p), the
 *                         same + 32 (bits 4p+2); scale and min bytes (v/16) of each run
 *   q3_k  32              q2_k's, qs at 32 and bit 2 from the hmask word at l (bits 4n+2p / 4n+2p+1
 *                         of its bytes), c − 4; 6-bit scales (v/16) of each run
 *   iq4_xs 32             qs word k (ib = k/4, l = 4·(k%4)): 32ib+l… (low nibbles), 32ib+16+l… (high),
 *                         through kvalues_iq4nl; one scale a unit (sub-block ib)
 *
 * Columns past `cols` (a q4_0 row padded to whole blocks) are read as x = 0.
 * Its float64 twin: the weights decoded by tensor/ggml-dequantize.ts (through
 * ops/reference/block-linear.ts) times x, in linearReference.
 */
import type { GpuBlockType } from "../quant-blocks.js";
import { BLOCK_READERS, BYTE_LANES, GPU_BLOCK } from "./quant-blocks.js";

/** Tokens a workgroup multiplies each decoded weight by. */
export const GEMV_BLOCK_TOKENS = 4;
const WG = 64;

/** The block kernels' uniform block (GEMV, GEMM, embedding share the first 12 words' meaning with the f32 GEMV): 16 words. */
export const BLOCK_PARAMS = "struct Params { tokens: u32, rows: u32, cols: u32, xOff: u32, wOff: u32, oOff: u32, wgX: u32, blockType: u32, oStride: u32, bOff: u32, hasBias: u32, blocks: u32, blockBytes: u32, blockValues: u32, pad0: u32, pad1: u32 }";

/** Units of 8 values per block, and the WGSL that decodes unit k of the block at byte o into qa, qb, sa, sb, ma, mb, ca, cb. */
const UNITS: Readonly<Record<GpuBlockType, { units: number; decode: string }>> = {
  q4_0: {
    units: 4,
    decode: `let word = qw[(o >> 2u) + 1u + k];
    let d = bitcast<f32>(qw[o >> 2u]);
    let qa = lanes(word, 0u, 15u) - 8.0;
    let qb = lanes(word, 4u, 15u) - 8.0;
    let sa = d; let sb = d; let ma = 0.0; let mb = 0.0;
    let ca = 4u * k; let cb = 16u + 4u * k;`,
  },
  q4_k: {
    units: 32,
    decode: `let i = k >> 3u;
    let word = qw[(o >> 2u) + 4u + k];
    let d = qF16(o); let dmin = qF16(o + 2u);
    let s1 = scaleMinK4(o + 4u, 2u * i); let s2 = scaleMinK4(o + 4u, 2u * i + 1u);
    let qa = lanes(word, 0u, 15u);
    let qb = lanes(word, 4u, 15u);
    let sa = d * s1.x; let sb = d * s2.x; let ma = -(dmin * s1.y); let mb = -(dmin * s2.y);
    let ca = 64u * i + 4u * (k & 7u); let cb = ca + 32u;`,
  },
  q5_k: {
    units: 32,
    decode: `let i = k >> 3u;
    let word = qw[(o >> 2u) + 12u + k];
    let high = qw[(o >> 2u) + 4u + (k & 7u)];
    let d = qF16(o); let dmin = qF16(o + 2u);
    let s1 = scaleMinK4(o + 4u, 2u * i); let s2 = scaleMinK4(o + 4u, 2u * i + 1u);
    let qa = lanes(word, 0u, 15u) + 16.0 * lanes(high, 2u * i, 1u);
    let qb = lanes(word, 4u, 15u) + 16.0 * lanes(high, 2u * i + 1u, 1u);
    let sa = d * s1.x; let sb = d * s2.x; let ma = -(dmin * s1.y); let mb = -(dmin * s2.y);
    let ca = 64u * i + 4u * (k & 7u); let cb = ca + 32u;`,
  },
  q6_k: {
    units: 32,
    decode: `let n = k >> 4u;
    let j = (k >> 3u) & 1u;
    let m = k & 7u;
    let low = qWord(o + 64u * n + 32u * j + 4u * m);
    let high = qWord(o + 128u + 32u * n + 4u * m);
    let d = qF16(o + 208u);
    let ca = 128u * n + 32u * j + 4u * m; let cb = ca + 64u;
    let qa = lanes(low, 0u, 15u) + 16.0 * lanes(high, 2u * j, 3u) - 32.0;
    let qb = lanes(low, 4u, 15u) + 16.0 * lanes(high, 2u * j + 4u, 3u) - 32.0;
    let sa = d * f32(bitcast<i32>(qByte(o + 192u + (ca >> 4u)) << 24u) >> 24u);
    let sb = d * f32(bitcast<i32>(qByte(o + 192u + (cb >> 4u)) << 24u) >> 24u);
    let ma = 0.0; let mb = 0.0;`,
  },
  q2_k: {
    units: 32,
    decode: `let p = k & 1u;
    let word = qw[(o >> 2u) + 4u + (k >> 1u)];
    let ca = 128u * (k >> 4u) + 64u * p + 4u * ((k >> 1u) & 7u); let cb = ca + 32u;
    let d = qF16(o + 80u); let dmin = qF16(o + 82u);
    let s1 = qByte(o + (ca >> 4u)); let s2 = qByte(o + (cb >> 4u));
    let qa = lanes(word, 4u * p, 3u);
    let qb = lanes(word, 4u * p + 2u, 3u);
    let sa = d * f32(s1 & 15u); let sb = d * f32(s2 & 15u); let ma = -(dmin * f32(s1 >> 4u)); let mb = -(dmin * f32(s2 >> 4u));`,
  },
  q3_k: {
    units: 32,
    decode: `let p = k & 1u;
    let n = k >> 4u;
    let l = 4u * ((k >> 1u) & 7u);
    let low = qWord(o + 32u + 32u * n + l);
    let high = qWord(o + l);
    let ca = 128u * n + 64u * p + l; let cb = ca + 32u;
    let d = qF16(o + 108u);
    let qa = lanes(low, 4u * p, 3u) + 4.0 * lanes(high, 4u * n + 2u * p, 1u) - 4.0;
    let qb = lanes(low, 4u * p + 2u, 3u) + 4.0 * lanes(high, 4u * n + 2u * p + 1u, 1u) - 4.0;
    let sa = d * scaleQ3K(o + 96u, ca >> 4u); let sb = d * scaleQ3K(o + 96u, cb >> 4u);
    let ma = 0.0; let mb = 0.0;`,
  },
  iq4_xs: {
    units: 32,
    decode: `let word = qw[(o >> 2u) + 2u + k];
    let ca = 32u * (k >> 2u) + 4u * (k & 3u); let cb = ca + 16u;
    let qa = iq4nlLanes(word, 0u);
    let qb = iq4nlLanes(word, 4u);
    let sa = qF16(o) * scaleIq4Xs(o, k >> 2u); let sb = sa;
    let ma = 0.0; let mb = 0.0;`,
  },
};

export function gemvBlocksWgsl(type: GpuBlockType): string {
  const { units, decode } = UNITS[type];
  const { bytes, values } = GPU_BLOCK[type];
  return `// GEMV over ${type} blocks (${values} values, ${bytes} bytes), ${GEMV_BLOCK_TOKENS} tokens a workgroup
${BLOCK_PARAMS}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> qw: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
var<workgroup> red: array<vec4<f32>, ${WG}>;
${BLOCK_READERS}
${BYTE_LANES}
// x[t, c … c + 3], zero past cols.
fn x4(t: u32, c: u32) -> vec4<f32> {
  let b = P.xOff + t * P.cols + c;
  if (c + 4u <= P.cols) { return vec4<f32>(x[b], x[b + 1u], x[b + 2u], x[b + 3u]); }
  var v = vec4<f32>(0.0);
  for (var e = 0u; e < 4u; e++) { if (c + e < P.cols) { v[e] = x[b + e]; } }
  return v;
}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let item = wid.x + wid.y * P.wgX;
  let groups = (P.tokens + ${GEMV_BLOCK_TOKENS - 1}u) / ${GEMV_BLOCK_TOKENS}u;
  if (item >= P.rows * groups) { return; }
  let r = item % P.rows;
  let t0 = (item / P.rows) * ${GEMV_BLOCK_TOKENS}u;
  let nt = min(${GEMV_BLOCK_TOKENS}u, P.tokens - t0);
  let rowByte = r * P.blocks * ${bytes}u;
  var acc = vec4<f32>(0.0);
  for (var u = lid; u < P.blocks * ${units}u; u += ${WG}u) {
    let b = u / ${units}u;
    let k = u % ${units}u;
    let o = rowByte + b * ${bytes}u;
    ${decode}
    let c0 = b * ${values}u;
    for (var t = 0u; t < nt; t++) {
      let xa = x4(t0 + t, c0 + ca);
      let xb = x4(t0 + t, c0 + cb);
      acc[t] += sa * dot(xa, qa) + ma * dot(xa, vec4<f32>(1.0)) + sb * dot(xb, qb) + mb * dot(xb, vec4<f32>(1.0));
    }
  }
  red[lid] = acc;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  if (lid == 0u) {
    let total = red[0];
    for (var t = 0u; t < nt; t++) {
      var y = total[t];
      if (P.hasBias != 0u) { y += bias[P.bOff + r]; }
      out[P.oOff + (t0 + t) * P.oStride + r] = y;
    }
  }
}
`;
}

/** The embedding gather over block rows: out[t, :] = W[ids[t], :] decoded (ids outside [r0, r0 + rows) left for another part). */
export function embeddingBlocksWgsl(dequantValue: string): string {
  return `// Embedding gather over ggml blocks
struct Params { tokens: u32, cols: u32, blockType: u32, blocks: u32, oOff: u32, wgX: u32, r0: u32, rows: u32, blockBytes: u32, blockValues: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read> qw: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
${BLOCK_READERS}
${dequantValue}
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = gid.x + gid.y * P.wgX * ${WG}u;
  if (idx >= P.tokens * P.cols) { return; }
  let t = idx / P.cols;
  let c = idx % P.cols;
  let id = u32(ids[t]);
  if (id < P.r0 || id >= P.r0 + P.rows) { return; }
  let row = id - P.r0;
  out[P.oOff + idx] = dequantValue((row * P.blocks + c / P.blockValues) * P.blockBytes, c % P.blockValues);
}
`;
}

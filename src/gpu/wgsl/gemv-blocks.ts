/**
 * WGSL GEMV over ggml blocks kept as the file stores them
 * (quant-blocks.ts): out[t, r] = Σ_c x[t, c] · W[r, c] (+ bias[r]), W
 * decoded in the kernel, f32 activations. The decode path of the WebGPU
 * runner (the GEMM takes over from GEMM_MIN_TOKENS tokens), tiled as
 * gemv-tiling.ts after llama.cpp Vulkan's mul_mat_vec_q*_k.comp (NUM_ROWS
 * rows a workgroup, a superblock split over invocations, the sub-block scale
 * and min factored out of the sum, B read once and reused for every row):
 *
 *   workgroup  WG = 64 invocations own R = 8 rows and up to 4 tokens
 *   group      4 consecutive u32 of codes (16 bytes) of one block: 32 values
 *              in two runs of 16 columns (ca … ca + 15, cb … cb + 15), each
 *              run with one scale s and offset m (w = s · q + m); a 256-value
 *              superblock is 8 groups (q4_0's 32-value block: 1). Invocation
 *              lid takes groups lid, lid + WG, … of the row, so 8 neighbours
 *              read a superblock's codes back to back; for each group it
 *              loads x's two runs once (8 vec4 a token) and decodes the group
 *              of each of its R rows: acc[rr][t] += sa·(xa · qa) + ma·Σxa +
 *              sb·(xb · qb) + mb·Σxb, x loaded once a token for the R rows
 *              (the tokens a loop, acc's lane t picked by selects: one copy
 *              of the R decodes in the shader, which keeps its compile short;
 *              with 2 or 3 tokens a group is decoded again per token, from L1)
 *   loads      q4_k, q5_k (144, 176-byte blocks: 16-byte aligned): the block
 *              header (d, dmin, 12 scale bytes) and the 16 code bytes as one
 *              vec4<u32> each (q5_k: the 16 qh bytes too) from `qv` (the
 *              blocks bound as array<vec4<u32>>); the others four u32
 *              (q6_k, q3_k at even offsets: qWords4 funnel-shifts five)
 *
 *   type   group g (0 … 7)                 codes: words e = 0 … 3 and the columns their bytes hold
 *   q4_0   the block (g = 0)               qs words 0…3: values 4e… (low nibbles), 16 + 4e… (high)
 *   q4_k   i = g/2, h = g%2                qs words 8i + 4h + e: 64i + 16h + 4e… (low, sub-block 2i), + 32 (high, 2i+1)
 *   q5_k   as q4_k                         bit 4 from qh word 4h + e (bits 2i / 2i+1 of its bytes)
 *   q6_k   n = g/4, j = g/2%2, h = g%2     ql at 64n + 32j + 16h: 128n + 32j + 16h… (low nibbles, qh bits 2j),
 *                                          + 64 (high nibbles, qh bits 2j + 4); qh at 128 + 32n + 16h
 *   q2_k   n = g/4, p = g/2%2, h = g%2     qs words 8n + 4h + e: 128n + 64p + 16h + 4e… (bits 4p), + 32 (bits 4p + 2)
 *   q3_k   as q2_k, qs at byte 32          bit 2 from hmask bytes 16h… (bits 4n + 2p / 4n + 2p + 1), c − 4
 *   iq4_xs ib = g                          qs words 4ib + e: 32ib + 4e… (low nibbles), 32ib + 16 + 4e… (high), kvalues_iq4nl
 *
 * Columns past `cols` (a q4_0 row padded to whole blocks) are read as x = 0.
 * Its float64 twin: the weights decoded by tensor/ggml-dequantize.ts (through
 * ops/reference/block-linear.ts) times x, in linearReference.
 */
import type { GpuBlockType } from "../quant-blocks.js";
import { type GemvTiling, GEMV_X_PARAMS, forRows, gemvEntryWgsl, gemvWriteWgsl, reduceRowsWgsl, xLoadsWgsl } from "./gemv-tiling.js";
import { BLOCK_READERS, BYTE_LANES, GPU_BLOCK } from "./quant-blocks.js";

/** The block GEMV's tile: rows a workgroup, invocations a workgroup. */
export const GEMV_BLOCK_R = 8;
const WG = 64;

/** The block GEMV's and GEMM's uniform block (the first 12 words' meaning the f32 GEMV's, then the x-load prologue's, gemv-tiling.ts): 24 words. */
export const BLOCK_PARAMS = `struct Params { tokens: u32, rows: u32, cols: u32, xOff: u32, wOff: u32, oOff: u32, wgX: u32, blockType: u32, oStride: u32, bOff: u32, hasBias: u32, blocks: u32, blockBytes: u32, blockValues: u32, pad0: u32, pad1: u32, ${GEMV_X_PARAMS} }`;
/** BLOCK_PARAMS with word 14 the GEMV's x-as-vec4 switch. */
const GEMV_BLOCK_PARAMS = BLOCK_PARAMS.replace("pad0: u32", "xVec: u32");

/** Groups a block, whether `qv` (vec4 view) is bound, and the WGSL of grpCols(g) (the two runs' first columns) and grp(o, g) (the group of the block at byte o). */
const GROUPS: Readonly<Record<GpuBlockType, { groups: number; vec: boolean; code: string }>> = {
  q4_0: {
    groups: 1,
    vec: false,
    code: `fn grpCols(g: u32) -> vec2<u32> { return vec2<u32>(0u, 16u); }
fn grp(o: u32, g: u32) -> Grp {
  let i = o >> 2u;
  let d = bitcast<f32>(qw[i]);
  let q = vec4<u32>(qw[i + 1u], qw[i + 2u], qw[i + 3u], qw[i + 4u]);
  let m8 = mat4x4<f32>(vec4<f32>(8.0), vec4<f32>(8.0), vec4<f32>(8.0), vec4<f32>(8.0));
  return Grp(nib(q, 0u) - m8, nib(q, 4u) - m8, vec4<f32>(d, d, 0.0, 0.0));
}`,
  },
  q4_k: {
    groups: 8,
    vec: true,
    code: `fn grpCols(g: u32) -> vec2<u32> { let c = 64u * (g >> 1u) + 16u * (g & 1u); return vec2<u32>(c, c + 32u); }
fn grp(o: u32, g: u32) -> Grp {
  let hdr = qv[o >> 4u];
  let q = qv[(o >> 4u) + 1u + g];
  return Grp(nib(q, 0u), nib(q, 4u), scalesK4(hdr, g >> 1u));
}`,
  },
  q5_k: {
    groups: 8,
    vec: true,
    code: `fn grpCols(g: u32) -> vec2<u32> { let c = 64u * (g >> 1u) + 16u * (g & 1u); return vec2<u32>(c, c + 32u); }
fn grp(o: u32, g: u32) -> Grp {
  let i = g >> 1u;
  let hdr = qv[o >> 4u];
  let q = qv[(o >> 4u) + 3u + g];
  let h = qv[(o >> 4u) + 1u + (g & 1u)];
  return Grp(nib(q, 0u) + 16.0 * bits(h, 2u * i, 1u), nib(q, 4u) + 16.0 * bits(h, 2u * i + 1u, 1u), scalesK4(hdr, i));
}`,
  },
  q6_k: {
    groups: 8,
    vec: false,
    code: `fn grpCols(g: u32) -> vec2<u32> { let c = 128u * (g >> 2u) + 32u * ((g >> 1u) & 1u) + 16u * (g & 1u); return vec2<u32>(c, c + 64u); }
fn grp(o: u32, g: u32) -> Grp {
  let n = g >> 2u;
  let j = (g >> 1u) & 1u;
  let h = g & 1u;
  let low = qWords4(o + 64u * n + 32u * j + 16u * h);
  let high = qWords4(o + 128u + 32u * n + 16u * h);
  let cc = grpCols(g);
  let d = qF16(o + 208u);
  let sa = d * f32(bitcast<i32>(qByte(o + 192u + (cc.x >> 4u)) << 24u) >> 24u);
  let sb = d * f32(bitcast<i32>(qByte(o + 192u + (cc.y >> 4u)) << 24u) >> 24u);
  let m32 = mat4x4<f32>(vec4<f32>(32.0), vec4<f32>(32.0), vec4<f32>(32.0), vec4<f32>(32.0));
  return Grp(nib(low, 0u) + 16.0 * bits(high, 2u * j, 3u) - m32, nib(low, 4u) + 16.0 * bits(high, 2u * j + 4u, 3u) - m32, vec4<f32>(sa, sb, 0.0, 0.0));
}`,
  },
  q2_k: {
    groups: 8,
    vec: false,
    code: `fn grpCols(g: u32) -> vec2<u32> { let c = 128u * (g >> 2u) + 64u * ((g >> 1u) & 1u) + 16u * (g & 1u); return vec2<u32>(c, c + 32u); }
fn grp(o: u32, g: u32) -> Grp {
  let p = (g >> 1u) & 1u;
  let i = (o >> 2u) + 4u + 8u * (g >> 2u) + 4u * (g & 1u);
  let q = vec4<u32>(qw[i], qw[i + 1u], qw[i + 2u], qw[i + 3u]);
  let dd = qw[(o >> 2u) + 20u];
  let d = f16Value(dd & 0xffffu); let dmin = f16Value(dd >> 16u);
  let cc = grpCols(g);
  let s1 = qByte(o + (cc.x >> 4u)); let s2 = qByte(o + (cc.y >> 4u));
  return Grp(bits(q, 4u * p, 3u), bits(q, 4u * p + 2u, 3u), vec4<f32>(d * f32(s1 & 15u), d * f32(s2 & 15u), -(dmin * f32(s1 >> 4u)), -(dmin * f32(s2 >> 4u))));
}`,
  },
  q3_k: {
    groups: 8,
    vec: false,
    code: `fn grpCols(g: u32) -> vec2<u32> { let c = 128u * (g >> 2u) + 64u * ((g >> 1u) & 1u) + 16u * (g & 1u); return vec2<u32>(c, c + 32u); }
fn grp(o: u32, g: u32) -> Grp {
  let n = g >> 2u;
  let p = (g >> 1u) & 1u;
  let low = qWords4(o + 32u + 32u * n + 16u * (g & 1u));
  let high = qWords4(o + 16u * (g & 1u));
  let cc = grpCols(g);
  let d = qF16(o + 108u);
  let m4 = mat4x4<f32>(vec4<f32>(4.0), vec4<f32>(4.0), vec4<f32>(4.0), vec4<f32>(4.0));
  return Grp(bits(low, 4u * p, 3u) + 4.0 * bits(high, 4u * n + 2u * p, 1u) - m4, bits(low, 4u * p + 2u, 3u) + 4.0 * bits(high, 4u * n + 2u * p + 1u, 1u) - m4,
    vec4<f32>(d * scaleQ3K(o + 96u, cc.x >> 4u), d * scaleQ3K(o + 96u, cc.y >> 4u), 0.0, 0.0));
}`,
  },
  iq4_xs: {
    groups: 8,
    vec: false,
    code: `fn grpCols(g: u32) -> vec2<u32> { return vec2<u32>(32u * g, 32u * g + 16u); }
fn grp(o: u32, g: u32) -> Grp {
  let i = (o >> 2u) + 2u + 4u * g;
  let q = vec4<u32>(qw[i], qw[i + 1u], qw[i + 2u], qw[i + 3u]);
  let s = qF16(o) * scaleIq4Xs(o, g);
  return Grp(mat4x4<f32>(iq4nlLanes(q.x, 0u), iq4nlLanes(q.y, 0u), iq4nlLanes(q.z, 0u), iq4nlLanes(q.w, 0u)),
    mat4x4<f32>(iq4nlLanes(q.x, 4u), iq4nlLanes(q.y, 4u), iq4nlLanes(q.z, 4u), iq4nlLanes(q.w, 4u)), vec4<f32>(s, s, 0.0, 0.0));
}`,
  },
};

/** The group decoders' shared pieces: Grp, the lanes of four words as a mat4x4 (column e = word e's bytes), qWords4, and Q4_K/Q5_K's scales from the vec4 header. */
const GROUP_HELPERS = `struct Grp { qa: mat4x4<f32>, qb: mat4x4<f32>, s: vec4<f32> }   // runs a, b: columns = 4 values each; s = (sa, sb, ma, mb)
fn bits(q: vec4<u32>, shift: u32, mask: u32) -> mat4x4<f32> { return mat4x4<f32>(lanes(q.x, shift, mask), lanes(q.y, shift, mask), lanes(q.z, shift, mask), lanes(q.w, shift, mask)); }
fn nib(q: vec4<u32>, shift: u32) -> mat4x4<f32> { return bits(q, shift, 15u); }
// The four u32 at even byte offset a (two-byte aligned: five words funnel-shifted).
fn qWords4(a: u32) -> vec4<u32> {
  let i = a >> 2u;
  let v = vec4<u32>(qw[i], qw[i + 1u], qw[i + 2u], qw[i + 3u]);
  if ((a & 2u) == 0u) { return v; }
  return (v >> vec4<u32>(16u)) | (vec4<u32>(v.yzw, qw[i + 4u]) << vec4<u32>(16u));
}
// Q4_K / Q5_K's (d·sc, d·sc', −dmin·m, −dmin·m') of sub-blocks 2i, 2i + 1 from the header words (d | dmin, scales[12]): get_scale_min_k4.
fn hdrByte(h: vec4<u32>, b: u32) -> u32 { return (h[1u + (b >> 2u)] >> ((b & 3u) << 3u)) & 0xffu; }
fn scaleMinK4h(h: vec4<u32>, j: u32) -> vec2<f32> {
  if (j < 4u) { return vec2<f32>(f32(hdrByte(h, j) & 63u), f32(hdrByte(h, j + 4u) & 63u)); }
  let b = hdrByte(h, j + 4u);
  return vec2<f32>(f32((b & 15u) | ((hdrByte(h, j - 4u) >> 6u) << 4u)), f32((b >> 4u) | ((hdrByte(h, j) >> 6u) << 4u)));
}
fn scalesK4(h: vec4<u32>, i: u32) -> vec4<f32> {
  let d = f16Value(h.x & 0xffffu);
  let dmin = f16Value(h.x >> 16u);
  let s1 = scaleMinK4h(h, 2u * i);
  let s2 = scaleMinK4h(h, 2u * i + 1u);
  return vec4<f32>(d * s1.x, d * s2.x, -(dmin * s1.y), -(dmin * s2.y));
}`;

export function gemvBlocksWgsl(type: GpuBlockType, subgroups: boolean): string {
  const { groups, vec, code } = GROUPS[type];
  const { bytes, values } = GPU_BLOCK[type];
  const R = GEMV_BLOCK_R;
  const tiling: GemvTiling = { R, WG, subgroups };
  // x's two runs of token t (xa0…3, xb0…3) and their sums; the masked loads only where a row may end inside a block (q4_0).
  const load = type === "q4_0" ? "x4m" : "x4";
  const xRuns = (t: string) => `let xa0 = ${load}(${t}, ca); let xa1 = ${load}(${t}, ca + 4u); let xa2 = ${load}(${t}, ca + 8u); let xa3 = ${load}(${t}, ca + 12u);
        let xb0 = ${load}(${t}, cb); let xb1 = ${load}(${t}, cb + 4u); let xb2 = ${load}(${t}, cb + 8u); let xb3 = ${load}(${t}, cb + 12u);
        let sxa = dot(xa0 + xa1 + xa2 + xa3, vec4<f32>(1.0)); let sxb = dot(xb0 + xb1 + xb2 + xb3, vec4<f32>(1.0));`;
  const fma = (rr: number) => `let v${rr} = q${rr}.s.x * (dot(xa0, q${rr}.qa[0]) + dot(xa1, q${rr}.qa[1]) + dot(xa2, q${rr}.qa[2]) + dot(xa3, q${rr}.qa[3])) + q${rr}.s.z * sxa
          + q${rr}.s.y * (dot(xb0, q${rr}.qb[0]) + dot(xb1, q${rr}.qb[1]) + dot(xb2, q${rr}.qb[2]) + dot(xb3, q${rr}.qb[3])) + q${rr}.s.w * sxb;`;
  return `${subgroups ? "enable subgroups;\n" : ""}// GEMV over ${type} blocks (${values} values, ${bytes} bytes), ${R} rows × ${WG} invocations a workgroup${subgroups ? ", subgroups" : ""}
${GEMV_BLOCK_PARAMS}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> xv: array<vec4<f32>>;
${vec ? "@group(0) @binding(3) var<storage, read> qv: array<vec4<u32>>;\n@group(0) @binding(6) var<storage, read> qw: array<u32>;   // unread (BLOCK_READERS name it): not in the layout" : "@group(0) @binding(3) var<storage, read> qw: array<u32>;"}
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(7) var<storage, read> nw: array<f32>;
${BLOCK_READERS}
${BYTE_LANES}
${GROUP_HELPERS}
${code}
${xLoadsWgsl(tiling)}
${reduceRowsWgsl(tiling)}
${gemvEntryWgsl(tiling)}
${forRows(R, (rr) => `  let o${rr} = r${rr} * P.blocks * ${bytes}u;`)}
  for (var u = lid; u < P.blocks * ${groups}u; u += ${WG}u) {
    let b = u / ${groups}u;
    let g = u % ${groups}u;
    let cc = grpCols(g) + vec2<u32>(b * ${values}u);
    let ca = cc.x;
    let cb = cc.y;
    for (var t = 0u; t < nt; t++) {
      ${xRuns("t0 + t")}
      let lane = vec4<u32>(t) == vec4<u32>(0u, 1u, 2u, 3u);   // token t's lane of acc: selects, no dynamic register index
${forRows(R, (rr) => `      { let q${rr} = grp(o${rr} + b * ${bytes}u, g);
        ${fma(rr)}
        acc[${rr}] += select(vec4<f32>(0.0), vec4<f32>(v${rr}), lane); }`)}
    }
  }
${gemvWriteWgsl(tiling, "out")}
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

/**
 * WGSL tiled GEMM for prefill steps (many tokens a step), the matrix product
 * of a linear layer: out[t, r] = Σ_c x[t, c] · W[r, c] (+ bias[r]), W [rows,
 * cols] f32 | f16 | bf16 (decoded by kv-load.ts), Q8_0 codes × scales (the
 * q8 GEMV's layout) or ggml blocks (q4_0, q2_k … q6_k, iq4_xs: decoded a value at
 * a time by quant-blocks.ts's dequantValue as the tile loads, the type a
 * uniform branch). The classic shared-memory tiling (as in CUTLASS's and
 * llama.cpp Vulkan's mul_mm, much simplified):
 *
 *   workgroup   64 invocations (8 × 8) own a tile of TM = 32 tokens × TN = 32
 *               rows of out; each invocation 4 tokens × 4 rows in registers
 *   K loop      steps of TK = 16 columns: the x tile [32][16] and the W tile
 *               [32][16] go to workgroup memory (W decoded to f32 as it loads),
 *               then 16 rank-1 updates of the 4 × 4 accumulators
 *
 * Each W element is read once per 32 tokens (the GEMV reads it once per
 * token). Out rows are `oStride` apart, as the GEMV's (row-split matrices).
 * Its float64 twin is linearReference (src/ops/reference/linear.ts).
 */
import { BLOCK_PARAMS } from "./gemv-blocks.js";
import { kvLoadFn } from "./kv-load.js";
import { BLOCK_READERS, DEQUANT_VALUE } from "./quant-blocks.js";

export const GEMM_TM = 32;
export const GEMM_TN = 32;
const TK = 16;

/** The GEMM's uniform block: the GEMVs' fields (wgsl/decoder-ops.ts) in the same order. */
const PARAMS = "struct Params { tokens: u32, rows: u32, cols: u32, xOff: u32, wOff: u32, oOff: u32, wgX: u32, kvDtype: u32, oStride: u32, bOff: u32, hasBias: u32, blocks: u32 }";

/** What W is stored as: f32 | f16 | bf16 words, q8 codes and scales, or ggml blocks. */
export type GemmWeights = "float" | "q8" | "blocks";

export function gemmWgsl(weights: GemmWeights): string {
  const blockBindings = `@group(0) @binding(2) var<storage, read> qw: array<u32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
${BLOCK_READERS}
${DEQUANT_VALUE}
fn loadWeight(r: u32, c: u32) -> f32 { return dequantValue((r * P.blocks + c / P.blockValues) * P.blockBytes, c % P.blockValues); }`;
  const weightBindings = weights === "blocks" ? blockBindings : weights === "q8"
    ? `@group(0) @binding(2) var<storage, read> codes: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
fn loadWeight(r: u32, c: u32) -> f32 {
  let w = codes[r * P.blocks * 8u + c / 4u];
  let code = bitcast<i32>(w << (24u - 8u * (c % 4u))) >> 24u;
  return f32(code) * scales[r * P.blocks + c / 32u];
}`
    : `@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
${kvLoadFn("loadW", "w")}
fn loadWeight(r: u32, c: u32) -> f32 { return loadW(P.wOff + r * P.cols + c); }`;
  return `// tiled GEMM ${weights === "blocks" ? "ggml block" : weights === "q8" ? "Q8_0" : "f32 | f16 | bf16"} weights, ${GEMM_TM} × ${GEMM_TN} tiles
${weights === "blocks" ? BLOCK_PARAMS : PARAMS}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
${weightBindings}
const TM: u32 = ${GEMM_TM}u;
const TN: u32 = ${GEMM_TN}u;
const TK: u32 = ${TK}u;
var<workgroup> xs: array<f32, ${GEMM_TM * TK}>;
var<workgroup> ws: array<f32, ${GEMM_TN * TK}>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r0 = wid.x * TN;                 // rows of W (columns of out)
  let t0 = wid.y * TM;                 // tokens
  let tx = lid % 8u;                   // this invocation's rows r0 + tx + 8j
  let ty = lid / 8u;                   // and tokens t0 + ty + 8i
  var acc: array<f32, 16>;
  for (var k0 = 0u; k0 < P.cols; k0 += TK) {
    for (var e = lid; e < TM * TK; e += 64u) {
      let row = e / TK;
      let c = k0 + e % TK;
      var xv = 0.0;
      if (t0 + row < P.tokens && c < P.cols) { xv = x[P.xOff + (t0 + row) * P.cols + c]; }
      xs[e] = xv;
      var wv = 0.0;
      if (r0 + row < P.rows && c < P.cols) { wv = loadWeight(r0 + row, c); }
      ws[e] = wv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < TK; kk++) {
      var a: array<f32, 4>;
      var b: array<f32, 4>;
      for (var i = 0u; i < 4u; i++) { a[i] = xs[(ty + 8u * i) * TK + kk]; b[i] = ws[(tx + 8u * i) * TK + kk]; }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) { acc[i * 4u + j] += a[i] * b[j]; }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let t = t0 + ty + 8u * i;
    for (var j = 0u; j < 4u; j++) {
      let r = r0 + tx + 8u * j;
      if (t < P.tokens && r < P.rows) {
        var y = acc[i * 4u + j];
        if (P.hasBias != 0u) { y += bias[P.bOff + r]; }
        o[P.oOff + t * P.oStride + r] = y;
      }
    }
  }
}
`;
}

/**
 * WGSL tiled GEMM for prefill steps (many tokens a step), the matrix product
 * of a linear layer: out[t, r] = Σ_c x[t, c] · W[r, c] (+ bias[r]), W [rows,
 * cols] f32 | f16 | bf16 (decoded by kv-load.ts), Q8_0 codes × scales (the
 * q8 GEMV's layout) or ggml blocks (q4_0, q2_k … q6_k, iq4_xs: decoded a value at
 * a time by quant-blocks.ts's dequantValue as the tile loads, the type a
 * uniform branch). The classic shared-memory tiling with register
 * micro-tiles (as in CUTLASS's SIMT GEMM and llama.cpp Vulkan's mul_mm):
 *
 *   workgroup   256 invocations (16 × 16) own a tile of TM = 64 tokens ×
 *               TN = 128 rows of out; invocation (tx, ty) holds the 4 × 8
 *               micro-tile tokens t0 + 4ty … + 3 × rows r0 + 8tx … + 7 in
 *               32 f32 registers
 *   K loop      slabs of TK = 16 columns: x [64][16] and W [128][16] (W
 *               decoded to f32 as it stages: f16, bf16, Q8_0 and every ggml
 *               block type) go to workgroup memory transposed, as vec4 along
 *               tokens (xs) and rows (ws); then 16 rank-1 updates, each one
 *               vec4 of xs and two of ws (48 bytes) for 32 FMAs
 *
 * Workgroup memory 12 KiB, 256 invocations: within WebGPU's guaranteed
 * minimums (16 KiB, 256), so every adapter runs the one shape. Each W element
 * is read from global memory once per 64 tokens, each x element once per 128
 * rows; 64 FLOPs per 48 bytes of workgroup reads (≈ 1.3 FLOP/B, and the xs
 * loads are broadcasts across the 16 invocations of a row of the grid).
 * Out rows are `oStride` apart, as the GEMV's (row-split matrices); with
 * P.accumulate the product is added to out (the residual add, as the GEMVs).
 * Its float64 twin is linearReference (src/ops/reference/linear.ts).
 */
import { BLOCK_PARAMS } from "./gemv-blocks.js";
import { GEMV_X_PARAMS } from "./gemv-tiling.js";
import { kvLoadFn } from "./kv-load.js";
import { BLOCK_READERS, DEQUANT_VALUE } from "./quant-blocks.js";

/** Tokens a workgroup (out rows). */
export const GEMM_TM = 64;
/** Rows of W a workgroup (out columns). */
export const GEMM_TN = 128;
const TK = 16;

/** The GEMM's uniform block: the GEMVs' fields (wgsl/gemv.ts) in the same order, 24 words; of the x-load prologue's only `accumulate` (x is read as stored). */
const PARAMS = `struct Params { tokens: u32, rows: u32, cols: u32, xOff: u32, wOff: u32, oOff: u32, wgX: u32, kvDtype: u32, oStride: u32, bOff: u32, hasBias: u32, blocks: u32, pad0: u32, pad1: u32, pad2: u32, pad3: u32, ${GEMV_X_PARAMS} }`;

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
// Transposed slabs: xs[k][t/4] holds tokens t … t+3 of column k; ws[k][r/4] rows r … r+3.
var<workgroup> xs: array<vec4<f32>, ${TK * GEMM_TM / 4}>;
var<workgroup> ws: array<vec4<f32>, ${TK * GEMM_TN / 4}>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r0 = wid.x * TN;                 // rows of W (columns of out)
  let t0 = wid.y * TM;                 // tokens
  let tx = lid % 16u;                  // this invocation's rows r0 + 8tx … + 7
  let ty = lid / 16u;                  // and tokens t0 + 4ty … + 3
  var acc: array<vec4<f32>, 8>;        // acc[2i + h][c] = out[t0 + 4ty + i, r0 + 8tx + 4h + c]
  for (var k0 = 0u; k0 < P.cols; k0 += TK) {
    // x slab: 64 × 16, an invocation 4 tokens of one column (whole vec4 stores: no two invocations write one vec4).
    for (var e = lid; e < TM * TK / 4u; e += 256u) {
      let k = e % TK;
      let tq = e / TK;
      let c = k0 + k;
      var xv = vec4<f32>(0.0);
      for (var i = 0u; i < 4u; i++) {
        let t = t0 + 4u * tq + i;
        if (t < P.tokens && c < P.cols) { xv[i] = x[P.xOff + t * P.cols + c]; }
      }
      xs[k * (TM / 4u) + tq] = xv;
    }
    // W slab: 128 × 16, an invocation 4 rows of one column twice, decoded to f32.
    for (var e = lid; e < TN * TK / 4u; e += 256u) {
      let k = e % TK;
      let rq = e / TK;
      let c = k0 + k;
      var wv = vec4<f32>(0.0);
      for (var i = 0u; i < 4u; i++) {
        let r = r0 + 4u * rq + i;
        if (r < P.rows && c < P.cols) { wv[i] = loadWeight(r, c); }
      }
      ws[k * (TN / 4u) + rq] = wv;
    }
    workgroupBarrier();
    for (var k = 0u; k < TK; k++) {
      let a = xs[k * (TM / 4u) + ty];
      let b0 = ws[k * (TN / 4u) + 2u * tx];
      let b1 = ws[k * (TN / 4u) + 2u * tx + 1u];
      for (var i = 0u; i < 4u; i++) {
        acc[2u * i] += a[i] * b0;
        acc[2u * i + 1u] += a[i] * b1;
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let t = t0 + 4u * ty + i;
    if (t >= P.tokens) { break; }
    for (var j = 0u; j < 8u; j++) {
      let r = r0 + 8u * tx + j;
      if (r < P.rows) {
        var y = acc[2u * i + j / 4u][j % 4u];
        if (P.hasBias != 0u) { y += bias[P.bOff + r]; }
        let i = P.oOff + t * P.oStride + r;
        if (P.accumulate != 0u) { y = o[i] + y; }
        o[i] = y;
      }
    }
  }
}
`;
}

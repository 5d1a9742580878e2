/**
 * The decode GEMVs over float and Q8_0 weights: out[t, r] = Σ_c x[t, c] ·
 * W[r, c] (+ bias[r]), tiled as gemv-tiling.ts (R rows a workgroup, the
 * columns split over WG invocations, x loaded once per invocation and step
 * and reused for the R rows, subgroup or tree reduction), after llama.cpp
 * Vulkan's mul_mat_vec.comp / mul_mat_vec_q8_0 (16-byte loads of A):
 *
 *   f32|f16|bf16  W [rows, cols] (kv-load.ts dtypes), out rows oStride apart.
 *                 Fast path (P.wVec: row starts 16-byte aligned: wOff and
 *                 cols multiples of 4 (f32) or 8 (2-byte)): invocation lid
 *                 reads chunk i = lid, lid + WG, … of each row as one
 *                 vec4<u32> (16 bytes: 4 f32 or 8 f16/bf16 values) from `wv`
 *                 (the weight buffer bound again as array<vec4<u32>>, chunk
 *                 P.wChunk + r · rowChunks + i), so a step of the workgroup
 *                 reads WG · 16 contiguous bytes of each of its R rows.
 *                 Otherwise one element per invocation and step (loadW).
 *   q8            int8 codes [rows, ⌈cols/32⌉·32] (16-byte aligned rows: the
 *                 codes buffer bound as array<vec4<u32>>) and f32 scales
 *                 [rows, ⌈cols/32⌉]: chunk i = 16 codes (half a block, scale
 *                 i / 2), w = code · scale; the last chunk, when cols is not
 *                 a multiple of 16, is read once after the loop with x
 *                 zero past cols.
 *
 * Tokens: a loop over the group's nt, the R rows' sums of token t added to
 * lane t of acc (ADD_TOKEN: selects, no dynamic index into registers), which
 * keeps the shaders a quarter the size of a loop unrolled over 4 tokens.
 *
 * The float64 twin is linearReference (ops/reference/linear.ts) over the
 * decoded weights.
 */
import { kvLoadFn } from "./kv-load.js";
import { type GemvTiling, ADD_TOKEN, GEMV_X_PARAMS, forRows, gemvEntryWgsl, gemvWriteWgsl, reduceRowsWgsl, xLoadsWgsl } from "./gemv-tiling.js";
import { f16PairToF32 } from "./f16-bits.js";

/** The float and q8 GEMVs' tiles: rows a workgroup, invocations a workgroup. */
export const GEMV_R = 4;
export const GEMV_WG = 128;

/** The GEMVs' uniform block: GEMV_PARAMS's 12 words (the GEMM's), the vector-path switches, then the x-load prologue's (gemv-tiling.ts GEMV_X_PARAMS): 24 words. */
export const GEMV_TILED_PARAMS = `struct Params { tokens: u32, rows: u32, cols: u32, xOff: u32, wOff: u32, oOff: u32, wgX: u32, kvDtype: u32, oStride: u32, bOff: u32, hasBias: u32, blocks: u32, xVec: u32, wVec: u32, wChunk: u32, pad0: u32, ${GEMV_X_PARAMS} }`;

/** f32 | f16 | bf16 words of a vec4<u32> chunk → its 4 or 8 values as vec4s. */
const CHUNK_VALUES: Record<"f32" | "f16" | "bf16", { values: number; lo: (w: string) => string; hi: (w: string) => string }> = {
  f32: { values: 4, lo: (w) => `bitcast<vec4<f32>>(${w})`, hi: () => "" },
  f16: { values: 8, lo: (w) => `vec4<f32>(${f16PairToF32(`${w}.x`)}, ${f16PairToF32(`${w}.y`)})`, hi: (w) => `vec4<f32>(${f16PairToF32(`${w}.z`)}, ${f16PairToF32(`${w}.w`)})` },
  bf16: {
    values: 8,
    lo: (w) => `bitcast<vec4<f32>>(vec4<u32>(${w}.x << 16u, ${w}.x & 0xffff0000u, ${w}.y << 16u, ${w}.y & 0xffff0000u))`,
    hi: (w) => `bitcast<vec4<f32>>(vec4<u32>(${w}.z << 16u, ${w}.z & 0xffff0000u, ${w}.w << 16u, ${w}.w & 0xffff0000u))`,
  },
};

export function gemvWgsl(subgroups: boolean): string {
  const tiling: GemvTiling = { R: GEMV_R, WG: GEMV_WG, subgroups };
  const R = GEMV_R;
  const vecLoop = (dtype: "f32" | "f16" | "bf16") => {
    const { values, lo, hi } = CHUNK_VALUES[dtype];
    return `for (var i = lid; i < rowChunks; i += ${GEMV_WG}u) {
${forRows(R, (rr) => `      let w${rr} = wv[b${rr} + i];`)}
      let c = ${values}u * i;
      for (var t = 0u; t < nt; t++) {
        let xa = x4(t0 + t, c);${values === 8 ? " let xb = x4(t0 + t, c + 4u);" : ""}
        addToken(&acc, t, vec4<f32>(${forRows(R, (rr) => `dot(xa, ${lo(`w${rr}`)})${values === 8 ? ` + dot(xb, ${hi(`w${rr}`)})` : ""}`).split("\n").join(", ")}));
      }
    }`;
  };
  return `${subgroups ? "enable subgroups;\n" : ""}// GEMV f32 | f16 | bf16 weights, ${R} rows × ${GEMV_WG} invocations a workgroup${subgroups ? ", subgroups" : ""}
${GEMV_TILED_PARAMS}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> xv: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> wv: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read> bias: array<f32>;
@group(0) @binding(7) var<storage, read> nw: array<f32>;
${kvLoadFn("loadW", "w")}
${xLoadsWgsl(tiling)}
${ADD_TOKEN}
${reduceRowsWgsl(tiling)}
${gemvEntryWgsl(tiling)}
  if (P.wVec != 0u) {
    let rowChunks = P.cols / select(8u, 4u, P.kvDtype == 0u);
${forRows(R, (rr) => `    let b${rr} = P.wChunk + r${rr} * rowChunks;`)}
    if (P.kvDtype == 0u) {
      ${vecLoop("f32")}
    } else if (P.kvDtype == 1u) {
      ${vecLoop("f16")}
    } else {
      ${vecLoop("bf16")}
    }
  } else {
    for (var c = lid; c < P.cols; c += ${GEMV_WG}u) {
${forRows(R, (rr) => `      let w${rr} = loadW(P.wOff + r${rr} * P.cols + c);`)}
      for (var t = 0u; t < nt; t++) { addToken(&acc, t, x1(t0 + t, c) * vec4<f32>(${forRows(R, (rr) => `w${rr}`).split("\n").join(", ")})); }
    }
  }
${gemvWriteWgsl(tiling)}
`;
}

/** The four sign-extended bytes of a u32 as f32. */
const I8X4 = `fn i8x4(w: u32) -> vec4<f32> {
  return vec4<f32>(vec4<i32>(bitcast<i32>(w << 24u), bitcast<i32>(w << 16u), bitcast<i32>(w << 8u), bitcast<i32>(w)) >> vec4<u32>(24u));
}`;

export function gemvQ8Wgsl(subgroups: boolean): string {
  const tiling: GemvTiling = { R: GEMV_R, WG: GEMV_WG, subgroups };
  const R = GEMV_R;
  // Chunk i of every row: 16 codes (one vec4<u32>) and their block's scale, times x[t, 16i …] for each token.
  const chunk = (load: string) => `${forRows(R, (rr) => `      let q${rr} = cv[b${rr} + i]; let s${rr} = scales[sb${rr} + (i >> 1u)];`)}
      let c = 16u * i;
      for (var t = 0u; t < nt; t++) {
        let xa = ${load}(t0 + t, c); let xb = ${load}(t0 + t, c + 4u); let xc = ${load}(t0 + t, c + 8u); let xd = ${load}(t0 + t, c + 12u);
        addToken(&acc, t, vec4<f32>(${forRows(R, (rr) => `s${rr} * (dot(xa, i8x4(q${rr}.x)) + dot(xb, i8x4(q${rr}.y)) + dot(xc, i8x4(q${rr}.z)) + dot(xd, i8x4(q${rr}.w)))`).split("\n").join(",\n          ")}));
      }`;
  return `${subgroups ? "enable subgroups;\n" : ""}// GEMV Q8_0 (f32 scales), ${R} rows × ${GEMV_WG} invocations a workgroup${subgroups ? ", subgroups" : ""}
${GEMV_TILED_PARAMS}
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> xv: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> cv: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> scales: array<f32>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read> bias: array<f32>;
@group(0) @binding(7) var<storage, read> nw: array<f32>;
${I8X4}
${xLoadsWgsl(tiling)}
${ADD_TOKEN}
${reduceRowsWgsl(tiling)}
${gemvEntryWgsl(tiling)}
  let rowChunks = P.blocks * 2u;
  let full = P.cols / 16u;
${forRows(R, (rr) => `  let b${rr} = r${rr} * rowChunks; let sb${rr} = r${rr} * P.blocks;`)}
  for (var i = lid; i < full; i += ${GEMV_WG}u) {
${chunk("x4")}
  }
  if (full * 16u < P.cols && lid == full % ${GEMV_WG}u) {
    let i = full;
${chunk("x4m")}
  }
${gemvWriteWgsl(tiling)}
`;
}

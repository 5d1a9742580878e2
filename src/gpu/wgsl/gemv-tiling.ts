/**
 * The tiling every decode GEMV shares (gemv.ts: f32 / f16 / bf16 and Q8_0;
 * gemv-blocks.ts: ggml blocks), after llama.cpp Vulkan's mul_mat_vec*.comp
 * (NUM_ROWS rows a workgroup, the K dimension split over its invocations,
 * B read once per invocation and reused for every row, a subgroupAdd
 * reduction where the device has subgroups, else a shared-memory tree):
 *
 *   item       workgroup (wid.x + wid.y · wgX) → row group rg and token group:
 *              rows rg·R … rg·R + R − 1 and tokens t0 … t0 + nt − 1 (nt ≤ 4);
 *              the last row group's rows past `rows` load row rows − 1 (no
 *              bounds branch in the inner loop) and are not written
 *   acc        acc[rr][t]: invocation-partial sums of row rr, token t (a vec4
 *              over the token group), all R · 4 in registers: the code is
 *              unrolled over rows (forRows), the tokens a loop whose sums
 *              reach lane t by selects (ADD_TOKEN), never a dynamic index
 *   reduce     subgroups: subgroupAdd per row, one partial per subgroup
 *              through workgroup memory (subgroups are assumed to be
 *              consecutive invocations, as decode-attention.ts assumes);
 *              else a tree over the WG invocations in workgroup memory
 *   write      invocation rr < R writes row rg·R + rr's nt outputs
 *              (+ bias) at out[oOff + t · oStride + r]
 *
 * x is read as vec4 (`xv`, the same buffer bound as array<vec4<f32>>) when
 * xOff, cols and xStride (and a GLU's gate → up offset) are multiples of 4
 * (P.xVec), else as four f32; every load goes through xLoadsWgsl, which fuses
 * the RMSNorm before a projection or the gated activation before the down
 * projection into it (P.xMode), and the write adds into out when P.accumulate
 * (the residual add).
 */

/** Tokens a workgroup multiplies each weight it loads by. */
export const GEMV_TOKENS = 4;

export interface GemvTiling {
  /** Rows a workgroup. */
  R: number;
  /** Invocations a workgroup. */
  WG: number;
  subgroups: boolean;
}

/** `f(rr)` for every row of the tile, joined. */
export function forRows(R: number, f: (rr: number) => string): string {
  return Array.from({ length: R }, (_, rr) => f(rr)).join("\n");
}

/**
 * The x-load prologue's uniform fields, after each GEMV's (and GEMM's) first 16
 * words: 8 words, so every matrix kernel's block is 24 words.
 *   xMode       0: x as stored; 1: RMSNorm'd (x · rsqrt(mean(x²) + eps) · nw[aux + c],
 *               the attention and FFN norms fused into the projections after them);
 *               2: silu(gate) · up, 3: gelu_tanh(gate) · up (SwiGLU / GeGLU fused into
 *               the down projection: gate at x's columns, up `aux` elements further on)
 *   xStride     elements between x's token rows (cols, or 2·I for gate_up)
 *   aux         mode 1: the norm weight's first element in nw; modes 2, 3: gate → up
 *   eps         mode 1's epsilon
 *   accumulate  1: out += the product (the residual add fused: x += o)
 */
export const GEMV_X_PARAMS = "xMode: u32, xStride: u32, aux: u32, eps: f32, accumulate: u32, xp0: u32, xp1: u32, xp2: u32";

/** Words of the matrix kernels' uniform block (16 + GEMV_X_PARAMS). */
export const MATRIX_PARAM_WORDS = 24;

/**
 * The GEMVs' one x-load path (bindings x, xv, nw, workgroup array red of ≥ WG vec4; P.xOff,
 * P.cols, P.xVec and GEMV_X_PARAMS): x4(t, c) (vec4 of token t's loaded x at columns
 * c … c + 3, all < cols), x4m (zero past cols), x1 (one value), and xPrologue, which
 * mode 1 runs before the loop: the workgroup's nt tokens' sums of squares (every workgroup
 * recomputes them: hidden is a few thousand floats, read from cache), reduced by
 * subgroupAdd and one pass over the subgroups' partials (two barriers), or without
 * subgroups a tree over WG, into xInv. The products are the unfused RMSNorm's ((w · x) · inv) and GLU's.
 */
export function xLoadsWgsl({ WG, subgroups }: Omit<GemvTiling, "R">): string {
  return `var<private> xInv: vec4<f32>;
var<private> xT0: u32;
fn xRaw4(e: u32) -> vec4<f32> {
  if (P.xVec != 0u) { return xv[e >> 2u]; }
  return vec4<f32>(x[e], x[e + 1u], x[e + 2u], x[e + 3u]);
}
fn gluAct(a: vec4<f32>) -> vec4<f32> {
  if (P.xMode == 2u) { return a / (1.0 + exp(-a)); }
  let u2 = a * 1.5957691216057308 * (1.0 + 0.044715 * a * a);
  return a / (1.0 + exp(clamp(-u2, vec4<f32>(-87.0), vec4<f32>(87.0))));
}
fn x4(t: u32, c: u32) -> vec4<f32> {
  let e = P.xOff + t * P.xStride + c;
  let a = xRaw4(e);
  if (P.xMode == 0u) { return a; }
  if (P.xMode == 1u) { let n = P.aux + c; return vec4<f32>(nw[n], nw[n + 1u], nw[n + 2u], nw[n + 3u]) * a * xInv[t - xT0]; }
  return gluAct(a) * xRaw4(e + P.aux);
}
fn x1(t: u32, c: u32) -> f32 {
  let e = P.xOff + t * P.xStride + c;
  let a = x[e];
  if (P.xMode == 0u) { return a; }
  if (P.xMode == 1u) { return nw[P.aux + c] * a * xInv[t - xT0]; }
  return gluAct(vec4<f32>(a)).x * x[e + P.aux];
}
fn x4m(t: u32, c: u32) -> vec4<f32> {
  if (c + 4u <= P.cols) { return x4(t, c); }
  var v = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i++) { if (c + i < P.cols) { v[i] = x1(t, c + i); } }
  return v;
}
fn xPrologue(t0: u32, nt: u32, lid: u32, sgSize: u32) {
  if (P.xMode != 1u) { return; }
  xT0 = t0;
  var ss = vec4<f32>(0.0);
  for (var t = 0u; t < nt; t++) {
    let b = P.xOff + (t0 + t) * P.xStride;
    var s = 0.0;
    for (var c = lid; c < P.cols; c += ${WG}u) { let v = x[b + c]; s += v * v; }
    ss[t] = s;
  }
${subgroups ? `  red[lid] = subgroupAdd(ss);
  workgroupBarrier();
  var total = vec4<f32>(0.0);
  for (var i = 0u; i < ${WG}u; i += sgSize) { total += red[i]; }
  xInv = inverseSqrt(total / f32(P.cols) + P.eps);` : `  red[lid] = ss;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  xInv = inverseSqrt(red[0] / f32(P.cols) + P.eps);`}
  workgroupBarrier();
}`;
}

/** addToken(&acc, t, v): lane t of acc[rr] += v[rr] for the R = 4 rows of the float and q8 GEMVs (selects, so t may be a loop variable without a dynamic register index; a NaN of one token stays in its lane). */
export const ADD_TOKEN = `fn addToken(acc: ptr<function, array<vec4<f32>, 4>>, t: u32, v: vec4<f32>) {
  let lane = vec4<u32>(t) == vec4<u32>(0u, 1u, 2u, 3u);
  (*acc)[0] += select(vec4<f32>(0.0), vec4<f32>(v.x), lane);
  (*acc)[1] += select(vec4<f32>(0.0), vec4<f32>(v.y), lane);
  (*acc)[2] += select(vec4<f32>(0.0), vec4<f32>(v.z), lane);
  (*acc)[3] += select(vec4<f32>(0.0), vec4<f32>(v.w), lane);
}`;

/** Workgroup memory and reduceRows(acc, lid, sgSize) → the totals of row lid (for lid < R). */
export function reduceRowsWgsl({ R, WG, subgroups }: GemvTiling): string {
  const head = `var<workgroup> red: array<vec4<f32>, ${R * WG}>;
fn reduceRows(acc: array<vec4<f32>, ${R}>, lid: u32, sgSize: u32) -> vec4<f32> {`;
  if (subgroups) {
    return `${head}
  for (var r = 0u; r < ${R}u; r++) { red[r * ${WG}u + lid] = subgroupAdd(acc[r]); }
  workgroupBarrier();
  var total = vec4<f32>(0.0);
  if (lid < ${R}u) { for (var i = 0u; i < ${WG}u; i += sgSize) { total += red[lid * ${WG}u + i]; } }
  return total;
}`;
  }
  return `${head}
  for (var r = 0u; r < ${R}u; r++) { red[r * ${WG}u + lid] = acc[r]; }
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { for (var r = 0u; r < ${R}u; r++) { red[r * ${WG}u + lid] += red[r * ${WG}u + lid + s]; } }
    workgroupBarrier();
  }
  if (lid < ${R}u) { return red[lid * ${WG}u]; }
  return vec4<f32>(0.0);
}`;
}

/** The entry point's signature, the item → (rg, t0, nt) mapping, and the clamped row indices r0 … r{R−1}. */
export function gemvEntryWgsl({ R, WG, subgroups }: GemvTiling): string {
  return `@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32${subgroups ? ", @builtin(subgroup_size) sgSize: u32" : ""}) {
  let item = wid.x + wid.y * P.wgX;
  let rowGroups = (P.rows + ${R - 1}u) / ${R}u;
  if (item >= rowGroups * ((P.tokens + ${GEMV_TOKENS - 1}u) / ${GEMV_TOKENS}u)) { return; }
  let rg = item % rowGroups;
  let t0 = (item / rowGroups) * ${GEMV_TOKENS}u;
  let nt = min(${GEMV_TOKENS}u, P.tokens - t0);
${forRows(R, (rr) => `  let r${rr} = min(rg * ${R}u + ${rr}u, P.rows - 1u);`)}
  var acc: array<vec4<f32>, ${R}>;
  xPrologue(t0, nt, lid, ${subgroups ? "sgSize" : "1u"});`;
}

/** The end of main: reduce, then invocation rr < R writes its row's outputs (+ bias; added to out's value with P.accumulate) into `out` (a binding's name). */
export function gemvWriteWgsl({ R, subgroups }: GemvTiling, out = "o"): string {
  return `  let total = reduceRows(acc, lid, ${subgroups ? "sgSize" : "1u"});
  let r = rg * ${R}u + lid;
  if (lid < ${R}u && r < P.rows) {
    var b = 0.0;
    if (P.hasBias != 0u) { b = bias[P.bOff + r]; }
    for (var t = 0u; t < nt; t++) {
      let i = P.oOff + (t0 + t) * P.oStride + r;
      var y = total[t] + b;
      if (P.accumulate != 0u) { y = ${out}[i] + y; }
      ${out}[i] = y;
    }
  }
}`;
}

/** Workgroups of a GEMV over `rows` × `tokens` with R rows a workgroup. */
export function gemvGroups(rows: number, tokens: number, R: number): number {
  return Math.ceil(rows / R) * Math.ceil(tokens / GEMV_TOKENS);
}

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
 * xOff and cols are multiples of 4 (P.xVec), else as four f32.
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

/** Bindings-independent helpers: x4 (vec4 of x at token t, columns c … c + 3, all < cols) and x4m (zero past cols). Need P.xOff, P.cols, P.xVec, x, xv. */
export const X_LOADS = `fn x4(t: u32, c: u32) -> vec4<f32> {
  let e = P.xOff + t * P.cols + c;
  if (P.xVec != 0u) { return xv[e >> 2u]; }
  return vec4<f32>(x[e], x[e + 1u], x[e + 2u], x[e + 3u]);
}
fn x4m(t: u32, c: u32) -> vec4<f32> {
  if (c + 4u <= P.cols) { return x4(t, c); }
  let e = P.xOff + t * P.cols + c;
  var v = vec4<f32>(0.0);
  for (var i = 0u; i < 4u; i++) { if (c + i < P.cols) { v[i] = x[e + i]; } }
  return v;
}`;

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
  var acc: array<vec4<f32>, ${R}>;`;
}

/** The end of main: reduce, then invocation rr < R writes its row's outputs (+ bias) into `out` (a binding's name). */
export function gemvWriteWgsl({ R, subgroups }: GemvTiling, out = "o"): string {
  return `  let total = reduceRows(acc, lid, ${subgroups ? "sgSize" : "1u"});
  let r = rg * ${R}u + lid;
  if (lid < ${R}u && r < P.rows) {
    var b = 0.0;
    if (P.hasBias != 0u) { b = bias[P.bOff + r]; }
    for (var t = 0u; t < nt; t++) { ${out}[P.oOff + (t0 + t) * P.oStride + r] = total[t] + b; }
  }
}`;
}

/** Workgroups of a GEMV over `rows` × `tokens` with R rows a workgroup. */
export function gemvGroups(rows: number, tokens: number, R: number): number {
  return Math.ceil(rows / R) * Math.ceil(tokens / GEMV_TOKENS);
}

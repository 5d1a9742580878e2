/**
 * WGSL kernels of a decoder layer besides attention, for the WebGPU
 * ModelRunner to come (llama2.c's forward(): rmsnorm, matmul, swiglu), each
 * with its float64 twin in src/ops/reference/:
 *
 *   rmsnorm  one workgroup per row (rows in groups of `group`, cols apart, the
 *            groups xStride apart: Qwen3's per-head norm of q inside qkv):
 *            (x ← x + delta, when fused as vLLM's
 *            fused_add_rms_norm), sum of squares reduced over the workgroup,
 *            out = w ⊙ x / sqrt(mean(x²) + eps); weight f32 | f16 | bf16
 *   swiglu   out = silu(gate) · up, silu(g) = g / (1 + e^(−g)), elementwise over
 *            rows of n (gate and up rows `inStride` apart: the halves of gate_up)
 *   geglu    the same with Gemma's tanh GELU: gelu(g) = ½g(1 + tanh(u)) =
 *            g / (1 + e^(−2u)), u = √(2/π)(g + 0.044715g³) (PyTorch's
 *            gelu(approximate="tanh"), the CPU's task_geglu), e^'s argument
 *            clamped to [−87, 87] so finite inputs give finite outputs
 *   scale    x ← s · x in place (Gemma's embedding × √hidden), one f32 product
 *            as on the CPU: the same bits
 *   softcap  x ← cap · tanh(x · (1/cap)) in place (Gemma 2's final-logit
 *            softcap), tanh as the CPU's tanh4: sign(y)(1 − t)/(1 + t),
 *            t = e^(−2|y|), and below |y| = 1/16 (where 1 − t cancels) the
 *            series y − y³/3 + 2y⁵/15 − 17y⁷/315, so small logits keep their
 *            relative precision (WGSL's tanh promises only sinh/cosh's)
 *   rope     in kv-append.ts (fused with the KV append): rotate-half RoPE
 *            in place on x [T, heads, headDim] (token stride free), θ's cos
 *            and sin gathered from a cos/sin cache [maxPos, rotaryDim] built
 *            on the CPU (vLLM's cos_sin_cache): WGSL's sin/cos promise 2⁻¹¹
 *            only inside [−π, π], the table is exact to f32 at any position,
 *            and llama3 scaling is in its θ
 *   gemv     (f32 | f16 | bf16 and q8 weights): in gemv.ts, re-exported here
 *   embed    out[t, :] = W[ids[t], :] decoded (f32 | f16 | bf16 words, or
 *            q8 codes × scales): one invocation per output element; W may
 *            hold rows [r0, r0 + rows) only (one part of a split matrix), and
 *            tokens whose id is outside them are left for another part
 *
 * Every kernel takes element offsets into its buffers from a uniform, so one
 * buffer can hold many tensors.
 */
import { kvLoadFn } from "./kv-load.js";

export { gemvQ8Wgsl, gemvWgsl } from "./gemv.js";

const WG = 64;

/** The workgroup sum of `v` into red[0] (every invocation reads it after). */
const REDUCE = `fn reduceSum(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}`;

export function rmsNormWgsl(): string {
  return `// RMSNorm (+ residual add)
struct Params { rows: u32, cols: u32, eps: f32, hasDelta: u32, xOff: u32, xStride: u32, dOff: u32, dStride: u32, oOff: u32, oStride: u32, wOff: u32, kvDtype: u32, group: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> delta: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;
var<workgroup> red: array<f32, ${WG}>;
${kvLoadFn("loadW", "w")}
${REDUCE}
@compute @workgroup_size(${WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wid.x;
  if (row >= P.rows) { return; }
  let xb = P.xOff + (row / P.group) * P.xStride + (row % P.group) * P.cols;   // group rows of cols a stride (per-head norms)
  var ss = 0.0;
  for (var i = lid; i < P.cols; i += ${WG}u) {
    var v = x[xb + i];
    if (P.hasDelta != 0u) {
      v += delta[P.dOff + row * P.dStride + i];
      x[xb + i] = v;
    }
    ss += v * v;
  }
  let inv = inverseSqrt(reduceSum(ss, lid) / f32(P.cols) + P.eps);
  let ob = P.oOff + row * P.oStride;
  for (var i = lid; i < P.cols; i += ${WG}u) { o[ob + i] = loadW(P.wOff + i) * x[xb + i] * inv; }
}
`;
}

/** The gated activations of the MLP: SwiGLU (Llama, Qwen, …) and GeGLU with tanh GELU (Gemma). */
export type GluActivation = "silu" | "gelu_tanh";

const GLU_ACT: Record<GluActivation, string> = {
  silu: "fn act(a: f32) -> f32 { return a / (1.0 + exp(-a)); }",
  // 2u = 2√(2/π)·a·(1 + 0.044715·a²), as the CPU's gelu4.
  gelu_tanh: "fn act(a: f32) -> f32 { let u2 = a * 1.5957691216057308 * (1.0 + 0.044715 * a * a); return a / (1.0 + exp(clamp(-u2, -87.0, 87.0))); }",
};

/** out = act(gate) · up over rows of n (swiglu: silu, geglu: gelu_tanh). */
export function gluWgsl(activation: GluActivation): string {
  return `// GLU (${activation})
struct Params { n: u32, gOff: u32, uOff: u32, oOff: u32, wgX: u32, rows: u32, inStride: u32, pad0: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> u: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
${GLU_ACT[activation]}
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = gid.x + gid.y * P.wgX * ${WG}u;     // rows of n: gate and up rows inStride apart, out compact
  if (idx >= P.n * P.rows) { return; }
  let i = (idx / P.n) * P.inStride + idx % P.n;
  o[P.oOff + idx] = act(g[P.gOff + i]) * u[P.uOff + i];
}
`;
}

/** The in-place elementwise maps of a Gemma step: x ← s · x, or x ← cap · tanh(x / cap). */
export type PointwiseOp = "scale" | "softcap";

const POINTWISE: Record<PointwiseOp, string> = {
  scale: "fn f(v: f32) -> f32 { return v * P.k; }",
  softcap: `fn f(v: f32) -> f32 {
  let y = v * (1.0 / P.k);
  let ay = abs(y);
  let t = exp(-2.0 * ay);
  let y2 = ay * ay;
  let series = ay + ((-17.0 / 315.0 * y2 + 2.0 / 15.0) * y2 - 1.0 / 3.0) * y2 * ay;
  let th = select((1.0 - t) / (1.0 + t), series, ay < 0.0625);
  return P.k * select(th, -th, y < 0.0);
}`,
};

/** x[i] ← f(x[i]) for i < n, in place (POINTWISE; k is s or cap). */
export function pointwiseWgsl(op: PointwiseOp): string {
  return `// ${op} in place
struct Params { n: u32, xOff: u32, wgX: u32, k: f32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
${POINTWISE[op]}
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = gid.x + gid.y * P.wgX * ${WG}u;
  if (idx >= P.n) { return; }
  x[P.xOff + idx] = f(x[P.xOff + idx]);
}
`;
}

/** The embedding's weight codes: the kv-load.ts dtype codes, and 3 for q8 (codes and scales as the q8 GEMV reads them). */
export const EMBED_Q8 = 3;

export function embeddingWgsl(): string {
  return `// Embedding gather
struct Params { tokens: u32, cols: u32, kvDtype: u32, blocks: u32, oOff: u32, wgX: u32, r0: u32, rows: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> ids: array<i32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;
${kvLoadFn("loadW", "w")}
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = gid.x + gid.y * P.wgX * ${WG}u;
  if (idx >= P.tokens * P.cols) { return; }
  let t = idx / P.cols;
  let c = idx % P.cols;
  let id = u32(ids[t]);
  if (id < P.r0 || id >= P.r0 + P.rows) { return; }   // another part's row (a matrix split by rows)
  let row = id - P.r0;
  var v: f32;
  if (P.kvDtype == ${EMBED_Q8}u) {
    let word = w[row * P.blocks * 8u + c / 4u];
    let code = bitcast<i32>(word << (24u - 8u * (c % 4u))) >> 24u;
    v = f32(code) * scales[row * P.blocks + c / 32u];
  } else {
    v = loadW(row * P.cols + c);
  }
  o[P.oOff + idx] = v;
}
`;
}

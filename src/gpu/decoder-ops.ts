/**
 * The decoder kernels of wgsl/decoder-ops.ts on GPU buffers: what the WebGPU
 * ModelRunner will record per layer, with its weights, activations and KV
 * resident on the GPU (buffers, element offsets). Each `encode*` checks its
 * sizes against the buffers, naming the argument and the value, and records
 * one dispatch into the caller's compute pass; nothing is read back;
 * a dispatch's uniform parameters and bind group come from the device's
 * bind-group cache (reused while shapes and buffers repeat, as in decode);
 * recycle() ends the step once its submission has run.
 * Pipelines come from the device's cache: `GpuDecoderOps.create` compiles
 * the kernels every decoder step records, and the matrix kernels (GEMV, tiled
 * GEMM, embedding gather: one per weight format) it is given or prepare()
 * adds — a shader compile costs up to seconds on SwiftShader, so a model
 * compiles only those its weights use (gpu-weights.ts matrixKernels).
 *
 *   const ops = await GpuDecoderOps.create(gpu);        // + the float and q8 matrix kernels
 *   ops.rmsNorm(pass, { x, weight, out, rows: T, cols: hidden, eps, delta });
 *   ops.gemv(pass, { x, weight: wq, out: q, tokens: T, rows: qDim, cols: hidden });
 *   ops.geglu(pass, { gate, up, out, n: I, rows: T });     // Gemma; swiglu for the others
 *   ops.softcap(pass, { x: logits, n: S * V, cap: 30 });    // Gemma 2's final logits; scale(): its embedding
 *   await ops.prepare(["gemv q4_k", "gemm blocks"]);     // more matrix kernels, on demand
 *   ops.gemvBlocks(pass, { x, weight: { buffer: blocks }, type: "q4_k", out, tokens: T, rows, cols });
 */
import { ArgumentError, show } from "../errors.js";
import { quantizeQ8 } from "../ops/reference/quantize.js";
import type { GpuDevice } from "./device.js";
import { EMBED_Q8, type GluActivation, embeddingWgsl, gemvQ8Wgsl, gemvWgsl, gluWgsl, pointwiseWgsl, rmsNormWgsl } from "./wgsl/decoder-ops.js";
import { GEMM_TM, GEMM_TN, gemmWgsl } from "./wgsl/gemm.js";
import { GEMV_BLOCK_R, embeddingBlocksWgsl, gemvBlocksWgsl } from "./wgsl/gemv-blocks.js";
import { GEMV_R } from "./wgsl/gemv.js";
import { MATRIX_PARAM_WORDS, gemvGroups } from "./wgsl/gemv-tiling.js";
import { DEQUANT_VALUE, GPU_BLOCK, GPU_BLOCK_CODE } from "./wgsl/quant-blocks.js";
import type { GpuBlockType } from "./quant-blocks.js";
import { kvAppendWgsl } from "./wgsl/kv-append.js";
import { GPU_KV_DTYPE_CODE, type GpuCacheDtype, type GpuInt8Mode, type GpuKvDtype, cacheCode, cacheLayout } from "./wgsl/kv-load.js";

/** A tensor in a GPU buffer: `offset` elements in (f32 elements; for f16/bf16 weights, 2-byte elements). */
export interface GpuView {
  buffer: GPUBuffer;
  offset?: number;
}

export interface GpuRmsNormArgs {
  /** f32 [rows, cols] (row stride `xStride`, default cols); the residual stream, updated in place with delta. */
  x: GpuView;
  xStride?: number;
  /**
   * Rows of x in groups of `group` rows, cols apart, the groups xStride apart
   * (per-head norms of q [T, H, D] inside qkv: group H, xStride the token
   * stride). Default 1. Only without delta.
   */
  group?: number;
  /** f32 [rows, cols], added into x first (fused residual add). */
  delta?: GpuView;
  /** [cols], f32 | f16 | bf16. */
  weight: GpuView;
  weightDtype?: GpuKvDtype;
  /** f32 [rows, cols]; a buffer other than x's. */
  out: GpuView;
  rows: number;
  cols: number;
  eps: number;
}

export interface GpuSwigluArgs {
  /** f32 [rows, n] each, rows `inStride` apart (default n). */
  gate: GpuView;
  up: GpuView;
  inStride?: number;
  /** f32 [rows, n], compact; a buffer other than gate's and up's. */
  out: GpuView;
  n: number;
  /** Default 1. */
  rows?: number;
}

export interface GpuPointwiseArgs {
  /** f32 [n], rewritten in place. */
  x: GpuView;
  n: number;
}

export interface GpuRopeArgs {
  /** f32 [tokens, heads, headDim], rotated in place; tokens `tokenStride` elements apart (default heads · headDim). */
  x: GpuView;
  tokenStride?: number;
  /** int32 [tokens]: each token's position, in [0, maxPos). */
  positions: GpuView;
  /** ropeCosSinCache's table f32 [maxPos, rotaryDim]. */
  cosSin: GpuView;
  maxPos: number;
  tokens: number;
  heads: number;
  headDim: number;
  /** Even, ≤ headDim; dims past it pass through. */
  rotaryDim: number;
}

/**
 * The cos/sin cache of RoPE (vLLM's cos_sin_cache): f32 [maxPos, rotaryDim],
 * row p = cos θ_i then sin θ_i for i < rotaryDim / 2, with θ_i = f32(f32(p) ·
 * invFreq[i]) as the CPU kernel and transformers compute it, cos and sin in
 * float64 rounded once. `invFreq` carries any scaling (llama3's included).
 */
export function ropeCosSinCache(invFreq: ArrayLike<number>, maxPos: number): Float32Array {
  const half = invFreq.length;
  const table = new Float32Array(maxPos * 2 * half);
  for (let p = 0; p < maxPos; p++) {
    for (let i = 0; i < half; i++) {
      const theta = Math.fround(Math.fround(p) * Math.fround(invFreq[i]!));
      table[p * 2 * half + i] = Math.cos(theta);
      table[p * 2 * half + half + i] = Math.sin(theta);
    }
  }
  return table;
}

export interface GpuKvAppendArgs {
  /** f32 [tokens, Hkv, D] each, tokens `tokenStride` elements apart (default Hkv · D), at the same offsets pattern. */
  k: GpuView;
  v: GpuView;
  tokenStride?: number;
  /** V's token stride when it differs from K's (Qwen3: k normed into its own buffer). Default tokenStride. */
  vTokenStride?: number;
  /** int32 [tokens]: blockId · blockSize + offset, or −1 to skip the token. Checked on the CPU (checkSlotMapping) before upload. */
  slots: GpuView;
  /**
   * The cache's K and V [numSlots, Hkv, D] in `dtype` (int8: the per-token scales after the codes, or the
   * per-channel scales and offsets the quantization reads; wgsl/kv-load.ts cacheLayout).
   */
  cacheK: GpuView;
  cacheV: GpuView;
  dtype: GpuCacheDtype;
  /** int8: per-token scales computed on write (default), or the per-channel ones stored in the cache buffers. */
  int8Mode?: GpuInt8Mode;
  numSlots: number;
  tokens: number;
  numKvHeads: number;
  headDim: number;
  /**
   * RoPE fused into the append: K rotated as it is written (the cache holds rotated keys; the k
   * rows are left unrotated) and, with `q`, q's heads rotated in place in the same dispatch.
   */
  rope?: GpuKvRope;
}

/** appendKv's fused RoPE: GpuRopeArgs's tables, and the q rows to rotate in place (in k's or v's buffer). */
export interface GpuKvRope {
  positions: GpuView;
  cosSin: GpuView;
  maxPos: number;
  rotaryDim: number;
  q?: { x: GpuView; tokenStride?: number; heads: number };
}

/** Q8_0 weights as the q8 GEMV reads them: int8 codes [rows, blocks · 32] and f32 scales [rows, blocks], blocks = ⌈cols / 32⌉. */
export interface GpuQ8Weight {
  codes: GpuView;
  scales: GpuView;
}

/**
 * Quantizes f32 W [rows, cols] to the q8 GEMV's layout: each row as the CPU's
 * Q8_0 quantizer does it (quantizeQ8: d = max|w| / 127 per block of 32,
 * codes round-half-even of w / d), so GPU and CPU q8 weights hold the same codes.
 */
export function packQ8Weight(w: ArrayLike<number>, rows: number, cols: number): { codes: Int8Array; scales: Float32Array } {
  const blocks = Math.ceil(cols / 32);
  const codes = new Int8Array(rows * blocks * 32);
  const scales = new Float32Array(rows * blocks);
  const row = new Float64Array(cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) row[c] = w[r * cols + c]!;
    const q = quantizeQ8(row);
    codes.set(q.codes, r * blocks * 32);
    scales.set(q.scales, r * blocks);
  }
  return { codes, scales };
}

/**
 * How a matrix kernel loads x and writes out: the decoder's fusions (wgsl/gemv-tiling.ts
 * xLoadsWgsl), so the norm before a projection, the GLU before the down projection and the
 * residual add after it need no dispatch of their own.
 */
export interface GpuXLoad {
  /** Elements between x's token rows. Default cols (gate_up under xGlu: 2 · cols). */
  xStride?: number;
  /** GEMV only: x loads RMSNorm'd, (weight ⊙ x) / sqrt(mean(x²) + eps) per token (each workgroup recomputes the sum of squares); weight f32 [cols]. */
  xNorm?: { weight: GpuView; eps: number };
  /** GEMV only: x loads as act(gate) · up, gate at x's columns and up `up` elements further along the row (gate_up [T, 2n]: up = n). */
  xGlu?: { act: GluActivation; up: number };
  /** out += the product (+ bias): the residual add x += o. */
  accumulate?: boolean;
}

export interface GpuGemvArgs extends GpuXLoad {
  /** f32 [tokens, cols] (rows xStride apart). */
  x: GpuView;
  /** [rows, cols], row-major, in `weightDtype` (offset in its elements). */
  weight: GpuView;
  /** f32 | f16 | bf16. Default f32. */
  weightDtype?: GpuKvDtype;
  /** f32 [tokens, outStride]: row t's outputs at t · outStride + r. */
  out: GpuView;
  /** Elements between out rows (≥ rows; a matrix split by rows writes its slice of a wider out). Default rows. */
  outStride?: number;
  /** f32 [rows], added to every output row. */
  bias?: GpuView;
  tokens: number;
  rows: number;
  cols: number;
}

export interface GpuEmbeddingArgs {
  /** int32 [tokens], each < the weight's rows (checked on the CPU before upload). */
  ids: GpuView;
  /** [rows, cols] in `dtype` (offset 0), or q8 codes and scales. */
  weight: GpuView | GpuQ8Weight;
  dtype: GpuKvDtype | "q8";
  /** f32 [tokens, cols]. */
  out: GpuView;
  tokens: number;
  /** Rows the weight buffer holds: ids in [firstRow, firstRow + rows) are written, others left (another part's). */
  rows: number;
  /** The first row id this part holds. Default 0. */
  firstRow?: number;
  cols: number;
}

/** W [rows, cols] as ggml blocks (wgsl/quant-blocks.ts): row r's ⌈cols / values⌉ blocks back to back, from byte 0 of the buffer. */
export interface GpuBlockWeight {
  weight: GpuView;
  type: GpuBlockType;
}

function fits(argument: string, view: GpuView, elements: number, elementBytes = 4): number {
  const offset = view.offset ?? 0;
  if (!Number.isInteger(offset) || offset < 0) throw new ArgumentError(`${argument}.offset`, `must be an integer ≥ 0, got ${show(view.offset)}`);
  const need = (offset + elements) * elementBytes;
  if (need > view.buffer.size) throw new ArgumentError(argument, `needs ${need} bytes (offset ${offset} + ${elements} elements), its buffer has ${view.buffer.size}`);
  return offset;
}

function count(argument: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) throw new ArgumentError(argument, `must be an integer ≥ 1, got ${show(value)}`);
  return value;
}

/**
 * The matrix kernels by name: GEMV and tiled GEMM per weight format (f32 and
 * bf16 share theirs; every ggml block type has its GEMV and shares one GEMM)
 * and the embedding gathers (float and q8 share one).
 */
export type GpuMatrixKernel = "gemv f32" | "gemm" | "gemv q8" | "gemm q8" | "embedding" | "gemm blocks" | "embedding blocks" | `gemv ${GpuBlockType}`;

/** What create() compiles unless told otherwise: the float and q8 matrix kernels and the embedding (callers that record them directly). */
export const DEFAULT_MATRIX_KERNELS: readonly GpuMatrixKernel[] = ["gemv f32", "gemm", "gemv q8", "gemm q8", "embedding"];

/** The WGSL of a matrix kernel, or an ArgumentError for a name that is none. */
function matrixKernelWgsl(name: GpuMatrixKernel, subgroups: boolean): string {
  switch (name) {
    case "gemv f32": return gemvWgsl(subgroups);
    case "gemm": return gemmWgsl("float");
    case "gemv q8": return gemvQ8Wgsl(subgroups);
    case "gemm q8": return gemmWgsl("q8");
    case "embedding": return embeddingWgsl();
    case "gemm blocks": return gemmWgsl("blocks");
    case "embedding blocks": return embeddingBlocksWgsl(DEQUANT_VALUE);
  }
  const type = typeof name === "string" && name.startsWith("gemv ") ? name.slice(5) : "";
  if (!Object.hasOwn(GPU_BLOCK, type)) throw new ArgumentError("kernels", `must name matrix kernels (${DEFAULT_MATRIX_KERNELS.join(", ")}, gemm blocks, embedding blocks, gemv <block type>), got ${show(name)}`);
  return gemvBlocksWgsl(type as GpuBlockType, subgroups);
}

/** The kernels only Gemma's layers record (compiled with the others: three small shaders). */
interface GemmaPipelines {
  geglu: GPUComputePipeline;
  scale: GPUComputePipeline;
  softcap: GPUComputePipeline;
}

export class GpuDecoderOps {
  readonly #gpu: GpuDevice;
  readonly #rms: GPUComputePipeline;
  readonly #swiglu: GPUComputePipeline;
  /** KV append with RoPE of q and k fused, and RoPE alone (wgsl/kv-append.ts). */
  readonly #append: GPUComputePipeline;
  /** GeGLU and the in-place maps scale and softcap (Gemma). */
  readonly #gemma: GemmaPipelines;
  readonly #dummy: GPUBuffer;
  /** The cache bindings of RoPE alone (two: WebGPU binds no buffer twice for writing). */
  readonly #dummyCaches: [GPUBuffer, GPUBuffer];
  /** The matrix kernels compiled so far (create's list, prepare). */
  readonly #matrix: Map<GpuMatrixKernel, GPUComputePipeline>;
  /** #dispatch's [binding, buffer] list, reused (the bind-group cache copies what it keeps). */
  readonly #entries: [number, GPUBuffer][] = [];

  private constructor(gpu: GpuDevice, rms: GPUComputePipeline, swiglu: GPUComputePipeline, append: GPUComputePipeline, gemma: GemmaPipelines, matrix: Map<GpuMatrixKernel, GPUComputePipeline>) {
    this.#gpu = gpu;
    this.#matrix = matrix;
    this.#gemma = gemma;
    this.#append = append;
    this.#rms = rms;
    this.#swiglu = swiglu;
    this.#dummy = gpu.pool.acquire(4, "absent operand");
    this.#dummyCaches = [gpu.pool.acquire(4, "absent cache K"), gpu.pool.acquire(4, "absent cache V")];
  }

  /**
   * Compiles the kernels every decoder step records (norms, RoPE, KV append, the
   * activations) and the matrix kernels `kernels` (default DEFAULT_MATRIX_KERNELS);
   * prepare() adds others.
   */
  static async create(gpu: GpuDevice, kernels: Iterable<GpuMatrixKernel> = DEFAULT_MATRIX_KERNELS): Promise<GpuDecoderOps> {
    const sources = [...new Set(kernels)].map((k) => [k, matrixKernelWgsl(k, gpu.features.has("subgroups"))] as const); // a bad name fails before any compile
    const stepKernels = Promise.all([
      gpu.pipeline(rmsNormWgsl(), "rmsnorm"),
      gpu.pipeline(gluWgsl("silu"), "swiglu"),
      gpu.pipeline(kvAppendWgsl(), "kv append"),
      gpu.pipeline(gluWgsl("gelu_tanh"), "geglu"),
      gpu.pipeline(pointwiseWgsl("scale"), "scale"),
      gpu.pipeline(pointwiseWgsl("softcap"), "softcap"),
    ]);
    const matrixKernels = Promise.all(sources.map(async ([k, code]) => [k, await gpu.pipeline(code, k)] as const));
    const [[rms, swiglu, append, geglu, scale, softcap], matrix] = await Promise.all([stepKernels, matrixKernels]);
    return new GpuDecoderOps(gpu, rms, swiglu, append, { geglu, scale, softcap }, new Map(matrix));
  }

  /** Compiles the matrix kernels `kernels` not compiled yet (GpuMatrixKernel names; a bad name is an ArgumentError). */
  async prepare(kernels: Iterable<GpuMatrixKernel>): Promise<void> {
    const want = [...new Set(kernels)].map((k) => [k, matrixKernelWgsl(k, this.#gpu.features.has("subgroups"))] as const).filter(([k]) => !this.#matrix.has(k));
    await Promise.all(want.map(async ([k, code]) => this.#matrix.set(k, await this.#gpu.pipeline(code, k))));
  }

  /** The ggml-block kernels for `types`: a GEMV each, the block GEMM and the block embedding (prepare's names). */
  async prepareBlocks(types: Iterable<GpuBlockType>): Promise<void> {
    await this.prepare([...[...types].map((t): GpuMatrixKernel => `gemv ${t}`), "gemm blocks", "embedding blocks"]);
  }

  /** The matrix kernels compiled so far, sorted. */
  get kernels(): GpuMatrixKernel[] {
    return [...this.#matrix.keys()].sort();
  }

  #kernel(name: GpuMatrixKernel): GPUComputePipeline {
    const p = this.#matrix.get(name);
    if (p === undefined) throw new Error(`the ${name} kernel is not compiled: await prepare(["${name}"]) first (GpuDecoderOps compiles matrix kernels on demand)`);
    return p;
  }

  /** Records one dispatch: `params` at binding 0, buffers[i] at binding i + 1 (null: a binding the shader does not declare). */
  #dispatch(pass: GPUComputePassEncoder, pipeline: GPUComputePipeline, params: Uint32Array | ArrayBuffer, buffers: (GPUBuffer | null)[], groups: number | [number, number]): number {
    const bytes = params instanceof Uint32Array ? (params.buffer as ArrayBuffer) : params;
    const entries = this.#entries;
    entries.length = 0;
    for (let i = 0; i < buffers.length; i++) {
      const b = buffers[i];
      if (b) entries.push([i + 1, b]);
    }
    const bind = this.#gpu.bindGroups.get(pipeline, bytes, entries, "op params");
    if (Array.isArray(groups)) {
      this.#gpu.dispatch(pass, pipeline, bind, groups[0], groups[1]);
      return groups[0];
    }
    const x = Math.max(1, Math.min(groups, this.#gpu.limits.maxComputeWorkgroupsPerDimension));
    this.#gpu.dispatch(pass, pipeline, bind, x, Math.ceil(groups / x));
    return x;
  }

  /** out = weight ⊙ x / sqrt(mean(x²) + eps) per row, after x ← x + delta when delta is given. */
  rmsNorm(pass: GPUComputePassEncoder, a: GpuRmsNormArgs): void {
    const rows = count("rows", a.rows);
    const cols = count("cols", a.cols);
    if (rows > this.#gpu.limits.maxComputeWorkgroupsPerDimension) throw new ArgumentError("rows", `must be ≤ ${this.#gpu.limits.maxComputeWorkgroupsPerDimension}, got ${rows}`);
    if (!(a.eps >= 0)) throw new ArgumentError("eps", `must be a number ≥ 0, got ${show(a.eps)}`);
    const xStride = a.xStride ?? cols;
    const group = a.group ?? 1;
    if (!Number.isInteger(group) || group < 1 || rows % group !== 0) throw new ArgumentError("group", `must be an integer ≥ 1 dividing rows ${rows}, got ${show(a.group)}`);
    if (group > 1 && a.delta) throw new ArgumentError("group", `must be 1 with a delta, got ${group}`);
    const dtype = a.weightDtype ?? "f32";
    const xOff = fits("x", a.x, (rows / group - 1) * xStride + group * cols);
    const dOff = a.delta ? fits("delta", a.delta, rows * cols) : 0;
    const wOff = fits("weight", a.weight, cols, dtype === "f32" ? 4 : 2);
    const oOff = fits("out", a.out, rows * cols);
    if (a.out.buffer === a.x.buffer) throw new ArgumentError("out", "must be a buffer other than x's (WebGPU binds no buffer twice for writing)");
    const p = new ArrayBuffer(64);
    const u = new Uint32Array(p);
    u.set([rows, cols, 0, a.delta ? 1 : 0, xOff, xStride, dOff, cols, oOff, cols, wOff, GPU_KV_DTYPE_CODE[dtype], group, 0, 0, 0]);
    new Float32Array(p)[2] = a.eps;
    this.#dispatch(pass, this.#rms, p, [a.x.buffer, a.delta?.buffer ?? this.#dummy, a.weight.buffer, a.out.buffer], rows);
  }

  /** out = silu(gate) · up, elementwise. */
  swiglu(pass: GPUComputePassEncoder, a: GpuSwigluArgs): void {
    this.#glu(pass, this.#swiglu, a);
  }

  /** out = gelu_tanh(gate) · up, elementwise (Gemma's GeGLU; swiglu's arguments). */
  geglu(pass: GPUComputePassEncoder, a: GpuSwigluArgs): void {
    this.#glu(pass, this.#gemma.geglu, a);
  }

  /** x ← s · x in place, f32 products (Gemma's embedding scale √hidden). */
  scale(pass: GPUComputePassEncoder, a: GpuPointwiseArgs & { s: number }): void {
    if (!Number.isFinite(a.s)) throw new ArgumentError("s", `must be a finite number, got ${show(a.s)}`);
    this.#pointwise(pass, this.#gemma.scale, a, a.s);
  }

  /** x ← cap · tanh(x / cap) in place (Gemma 2's final-logit softcap). */
  softcap(pass: GPUComputePassEncoder, a: GpuPointwiseArgs & { cap: number }): void {
    if (!(typeof a.cap === "number" && a.cap > 0 && Number.isFinite(a.cap))) throw new ArgumentError("cap", `must be a finite number > 0, got ${show(a.cap)}`);
    this.#pointwise(pass, this.#gemma.softcap, a, a.cap);
  }

  #pointwise(pass: GPUComputePassEncoder, pipeline: GPUComputePipeline, a: GpuPointwiseArgs, k: number): void {
    const n = count("n", a.n);
    const xOff = fits("x", a.x, n);
    const groups = Math.ceil(n / 64);
    const wgX = Math.max(1, Math.min(groups, this.#gpu.limits.maxComputeWorkgroupsPerDimension));
    const p = new ArrayBuffer(16);
    new Uint32Array(p).set([n, xOff, wgX]);
    new Float32Array(p)[3] = k;
    this.#dispatch(pass, pipeline, p, [a.x.buffer], groups);
  }

  #glu(pass: GPUComputePassEncoder, pipeline: GPUComputePipeline, a: GpuSwigluArgs): void {
    const n = count("n", a.n);
    const rows = count("rows", a.rows ?? 1);
    const inStride = a.inStride ?? n;
    if (!Number.isInteger(inStride) || inStride < n) throw new ArgumentError("inStride", `must be an integer ≥ n ${n}, got ${show(a.inStride)}`);
    if (a.out.buffer === a.gate.buffer || a.out.buffer === a.up.buffer) throw new ArgumentError("out", "must be a buffer other than gate's and up's (WebGPU binds no buffer for reading and writing at once)");
    const span = (rows - 1) * inStride + n;
    const groups = Math.ceil((n * rows) / 64);
    const x = Math.max(1, Math.min(groups, this.#gpu.limits.maxComputeWorkgroupsPerDimension));
    this.#dispatch(pass, pipeline, new Uint32Array([n, fits("gate", a.gate, span), fits("up", a.up, span), fits("out", a.out, n * rows), x, rows, inStride, 0]), [a.gate.buffer, a.up.buffer, a.out.buffer], groups);
  }

  /**
   * Rotate-half RoPE of x in place. Positions must lie in [0, maxPos) (the caller's plan checks them; the kernel trusts them).
   * The decoder fuses it into the KV append (appendKv's `rope`); this is the same kernel without the append.
   */
  rope(pass: GPUComputePassEncoder, a: GpuRopeArgs): void {
    const tokens = count("tokens", a.tokens);
    const heads = count("heads", a.heads);
    const headDim = count("headDim", a.headDim);
    const rotaryDim = count("rotaryDim", a.rotaryDim);
    const maxPos = count("maxPos", a.maxPos);
    if (rotaryDim % 2 !== 0 || rotaryDim > headDim) throw new ArgumentError("rotaryDim", `must be even and ≤ headDim ${headDim}, got ${rotaryDim}`);
    const stride = a.tokenStride ?? heads * headDim;
    const xOff = fits("x", a.x, (tokens - 1) * stride + heads * headDim);
    if (fits("positions", a.positions, tokens) !== 0) throw new ArgumentError("positions.offset", `must be 0, got ${a.positions.offset}`);
    if (fits("cosSin", a.cosSin, maxPos * rotaryDim) !== 0) throw new ArgumentError("cosSin.offset", `must be 0, got ${a.cosSin.offset}`);
    const params = new Uint32Array([tokens, 1, headDim, 0, 0, 0, 0, 0, 0, 0, rotaryDim / 2, heads, xOff, stride, 0, 0]);
    const [ck, cv] = this.#dummyCaches;
    this.#appendDispatch(pass, params, [a.x.buffer, this.#dummy, this.#dummy, ck, cv, a.positions.buffer, a.cosSin.buffer], Math.ceil((tokens * heads * (rotaryDim / 2)) / 64));
  }

  /** Records the append kernel: wgX into params[7], then the dispatch. */
  #appendDispatch(pass: GPUComputePassEncoder, params: Uint32Array, buffers: GPUBuffer[], groups: number): void {
    params[7] = Math.max(1, Math.min(groups, this.#gpu.limits.maxComputeWorkgroupsPerDimension));
    this.#dispatch(pass, this.#append, params, buffers, groups);
  }

  /** Writes the tokens' K and V rows into their cache slots (vLLM's reshape_and_cache), encoding to the cache's dtype. */
  appendKv(pass: GPUComputePassEncoder, a: GpuKvAppendArgs): void {
    const tokens = count("tokens", a.tokens);
    const hkv = count("numKvHeads", a.numKvHeads);
    const d = count("headDim", a.headDim);
    const numSlots = count("numSlots", a.numSlots);
    if (a.dtype !== "f32" && d % 2 !== 0) throw new ArgumentError("headDim", `must be even for a ${a.dtype} cache on the GPU (two elements a word), got ${d}`);
    const bytes = a.dtype === "f32" ? 4 : a.dtype === "f16" || a.dtype === "bf16" ? 2 : 1;
    if (bytes === 1 && d % 4 !== 0) throw new ArgumentError("headDim", `must be a multiple of 4 for a ${a.dtype} cache on the GPU (four elements a word), got ${d}`);
    const stride = a.tokenStride ?? hkv * d;
    const vStride = a.vTokenStride ?? stride;
    const kOff = fits("k", a.k, (tokens - 1) * stride + hkv * d);
    const vOff = fits("v", a.v, (tokens - 1) * vStride + hkv * d);
    if (fits("slots", a.slots, tokens) !== 0) throw new ArgumentError("slots.offset", `must be 0, got ${a.slots.offset}`);
    const int8Mode = a.int8Mode ?? "per-token";
    if (int8Mode !== "per-token" && int8Mode !== "per-channel") throw new ArgumentError("int8Mode", `must be "per-token" or "per-channel", got ${show(a.int8Mode)}`);
    if (a.int8Mode !== undefined && a.dtype !== "int8") throw new ArgumentError("int8Mode", `applies to an int8 cache only, got dtype ${show(a.dtype)}`);
    const layout = cacheLayout(numSlots, hkv, d, a.dtype, int8Mode);
    for (const name of ["cacheK", "cacheV"] as const) {
      if (fits(name, a[name], layout.bytes, 1) !== 0) throw new ArgumentError(`${name}.offset`, `must be 0, got ${a[name].offset}`);
    }
    // One invocation per word (float dtypes) or per (token, KV head) row (1-byte dtypes); then, with RoPE, one per (token, q head, i < rotaryDim / 2).
    const items = 2 * (bytes === 1 ? tokens * hkv : (tokens * hkv * d * bytes) / 4);
    const r = a.rope ? this.#ropeOperands(a.rope, tokens, d) : null;
    const q = a.rope?.q;
    const qHeads = q ? count("rope.q.heads", q.heads) : 0;
    const qStride = q ? (q.tokenStride ?? qHeads * d) : 0;
    const qOff = q ? fits("rope.q.x", q.x, (tokens - 1) * qStride + qHeads * d) : 0;
    // Binding a (read_write) holds q, or k; k and v are read from a when they share its buffer, else from b.
    const aBuf = q ? q.x.buffer : a.k.buffer;
    const others = [a.k.buffer, a.v.buffer].filter((buf) => buf !== aBuf);
    if (new Set(others).size > 1) throw new ArgumentError("rope.q.x", "must share its buffer with k or v (the kernel binds q's buffer and one other)");
    if ([a.cacheK.buffer, a.cacheV.buffer].some((buf) => buf === aBuf || others.includes(buf))) throw new ArgumentError("cacheK", "must be a buffer other than q's, k's and v's");
    const flags = (a.k.buffer === aBuf ? 1 : 0) | (a.v.buffer === aBuf ? 2 : 0) | 4;
    const half = r ? r.half : 0;
    const params = new Uint32Array([tokens, hkv, d, cacheCode(a.dtype, int8Mode), kOff, vOff, stride, 0, vStride, layout.scaleOff, half, qHeads, qOff, qStride, flags, 0]);
    this.#appendDispatch(pass, params, [aBuf, others[0] ?? this.#dummy, a.slots.buffer, a.cacheK.buffer, a.cacheV.buffer, r?.positions ?? this.#dummy, r?.cosSin ?? this.#dummy], Math.ceil((items + tokens * qHeads * half) / 64));
  }

  /** appendKv's rope operands checked: its half rotary dim and buffers. */
  #ropeOperands(r: GpuKvRope, tokens: number, headDim: number): { half: number; positions: GPUBuffer; cosSin: GPUBuffer } {
    const rotaryDim = count("rope.rotaryDim", r.rotaryDim);
    const maxPos = count("rope.maxPos", r.maxPos);
    if (rotaryDim % 2 !== 0 || rotaryDim > headDim) throw new ArgumentError("rope.rotaryDim", `must be even and ≤ headDim ${headDim}, got ${rotaryDim}`);
    if (fits("rope.positions", r.positions, tokens) !== 0) throw new ArgumentError("rope.positions.offset", `must be 0, got ${r.positions.offset}`);
    if (fits("rope.cosSin", r.cosSin, maxPos * rotaryDim) !== 0) throw new ArgumentError("rope.cosSin.offset", `must be 0, got ${r.cosSin.offset}`);
    return { half: rotaryDim / 2, positions: r.positions.buffer, cosSin: r.cosSin.buffer };
  }

  /**
   * The matrix kernels' 24-word uniform (wgsl/gemv.ts GEMV_TILED_PARAMS, gemv-tiling.ts
   * GEMV_X_PARAMS) after the shared checks of x, out, bias, the counts and the x-load
   * fusions; `nw` is what the norm weight's binding gets, `xVec` whether x may be read as vec4.
   */
  #gemvParams(a: Omit<GpuGemvArgs, "weight">, wOff: number, dtype: number, blocks: number, kernel: "gemv" | "gemm"): { params: Uint32Array; bias: GPUBuffer; nw: GPUBuffer; xVec: boolean } {
    const tokens = count("tokens", a.tokens);
    const rows = count("rows", a.rows);
    const cols = count("cols", a.cols);
    const oStride = a.outStride ?? rows;
    if (!Number.isInteger(oStride) || oStride < rows) throw new ArgumentError("outStride", `must be an integer ≥ rows ${rows}, got ${show(a.outStride)}`);
    const oOff = fits("out", a.out, (tokens - 1) * oStride + rows);
    const bOff = a.bias ? fits("bias", a.bias, rows) : 0;
    if (a.out.buffer === a.x.buffer) throw new ArgumentError("out", "must be a buffer other than x's (WebGPU binds no buffer for reading and writing at once)");
    if (a.xNorm && a.xGlu) throw new ArgumentError("xGlu", "and xNorm exclude each other (one x-load fusion a product)");
    if (kernel === "gemm" && (a.xNorm || a.xGlu)) throw new ArgumentError(a.xNorm ? "xNorm" : "xGlu", "applies to the GEMV only: the tiled GEMM reads x as stored (record rmsNorm or the GLU first)");
    const xStride = a.xStride ?? cols;
    if (!Number.isInteger(xStride) || xStride < cols) throw new ArgumentError("xStride", `must be an integer ≥ cols ${cols}, got ${show(a.xStride)}`);
    let mode = 0;
    let aux = 0;
    let eps = 0;
    let nw = this.#dummy;
    let width = cols;
    if (a.xNorm) {
      if (!(a.xNorm.eps >= 0)) throw new ArgumentError("xNorm.eps", `must be a number ≥ 0, got ${show(a.xNorm.eps)}`);
      aux = fits("xNorm.weight", a.xNorm.weight, cols);
      if (a.xNorm.weight.buffer === a.out.buffer) throw new ArgumentError("xNorm.weight", "must be a buffer other than out's");
      [mode, eps, nw] = [1, a.xNorm.eps, a.xNorm.weight.buffer];
    } else if (a.xGlu) {
      const acts = { silu: 2, gelu_tanh: 3 } as const;
      if (!Object.hasOwn(acts, a.xGlu.act)) throw new ArgumentError("xGlu.act", `must be "silu" or "gelu_tanh", got ${show(a.xGlu.act)}`);
      aux = a.xGlu.up;
      if (!Number.isInteger(aux) || aux < cols) throw new ArgumentError("xGlu.up", `must be an integer ≥ cols ${cols} (gate and up apart), got ${show(a.xGlu.up)}`);
      mode = acts[a.xGlu.act];
      width = aux + cols;
    }
    const xOff = fits("x", a.x, (tokens - 1) * xStride + width);
    const xVec = xOff % 4 === 0 && cols % 4 === 0 && xStride % 4 === 0 && (mode < 2 || aux % 4 === 0) && a.x.buffer.size >= 16;
    const groups = rows * tokens;
    const x = Math.max(1, Math.min(groups, this.#gpu.limits.maxComputeWorkgroupsPerDimension));
    const params = new Uint32Array(MATRIX_PARAM_WORDS);
    params.set([tokens, rows, cols, xOff, wOff, oOff, x, dtype, oStride, bOff, a.bias ? 1 : 0, blocks]);
    params.set([mode, xStride, aux, 0, a.accumulate ? 1 : 0], 16);
    new Float32Array(params.buffer)[19] = eps;
    return { params, bias: a.bias?.buffer ?? this.#dummy, nw, xVec };
  }

  /**
   * A tiled GEMV's uniform from #gemvParams's: wgX for ⌈rows / R⌉ · ⌈tokens / 4⌉
   * workgroups, the x-as-vec4 switch at word `xVecAt` (12; the block GEMV's 14) and
   * the float GEMV's weight switches; xv is what the vec4 view of x binds.
   */
  #tiled(g: { params: Uint32Array; xVec: boolean }, x: GpuView, R: number, xVecAt: number, w?: { wVec: boolean; wChunk: number }): { xv: GPUBuffer; groups: number } {
    const p = g.params;
    const groups = gemvGroups(p[1]!, p[0]!, R);
    p[6] = Math.max(1, Math.min(groups, this.#gpu.limits.maxComputeWorkgroupsPerDimension));
    p[xVecAt] = g.xVec ? 1 : 0;
    if (w) p.set([w.wVec ? 1 : 0, w.wChunk], 13);
    return { xv: g.xVec ? x.buffer : this.#dummy, groups };
  }

  /** out[t, r] = Σ_c x[t, c] · code[r, c] · scale[r, c / 32] (+ bias[r]) (Q8_0 weights, f32 activations; x loaded and out written as GpuXLoad says). */
  gemvQ8(pass: GPUComputePassEncoder, a: Omit<GpuGemvArgs, "weight" | "weightDtype"> & { weight: GpuQ8Weight }): void {
    const rows = count("rows", a.rows);
    const blocks = Math.ceil(count("cols", a.cols) / 32);
    if (fits("weight.codes", a.weight.codes, rows * blocks * 32, 1) !== 0) throw new ArgumentError("weight.codes.offset", `must be 0, got ${a.weight.codes.offset}`);
    if (fits("weight.scales", a.weight.scales, rows * blocks) !== 0) throw new ArgumentError("weight.scales.offset", `must be 0, got ${a.weight.scales.offset}`);
    const g = this.#gemvParams(a, 0, 0, blocks, "gemv");
    const t = this.#tiled(g, a.x, GEMV_R, 12);
    this.#dispatch(pass, this.#kernel("gemv q8"), g.params, [a.x.buffer, t.xv, a.weight.codes.buffer, a.weight.scales.buffer, a.out.buffer, g.bias, g.nw], t.groups);
  }

  /** out[t, r] = Σ_c x[t, c] · weight[r, c] (+ bias[r]), weight f32 | f16 | bf16 (x loaded and out written as GpuXLoad says). */
  gemv(pass: GPUComputePassEncoder, a: GpuGemvArgs): void {
    const dtype = a.weightDtype ?? "f32";
    const wOff = fits("weight", a.weight, count("rows", a.rows) * count("cols", a.cols), dtype === "f32" ? 4 : 2);
    const g = this.#gemvParams(a, wOff, GPU_KV_DTYPE_CODE[dtype], 0, "gemv");
    // The 16-byte path: row starts (wOff + r · cols elements) on 16-byte boundaries.
    const per = dtype === "f32" ? 4 : 8;
    const wVec = wOff % per === 0 && a.cols % per === 0 && a.weight.buffer.size >= 16;
    const t = this.#tiled(g, a.x, GEMV_R, 12, { wVec, wChunk: wVec ? wOff / per : 0 });
    this.#dispatch(pass, this.#kernel("gemv f32"), g.params, [a.x.buffer, t.xv, a.weight.buffer, wVec ? a.weight.buffer : this.#dummy, a.out.buffer, g.bias, g.nw], t.groups);
  }

  /** The tiled GEMM's workgroups: (row tiles, token tiles), each within the adapter's per-dimension limit. */
  #gemmGroups(rows: number, tokens: number): [number, number] {
    const g: [number, number] = [Math.ceil(rows / GEMM_TN), Math.ceil(tokens / GEMM_TM)];
    const max = this.#gpu.limits.maxComputeWorkgroupsPerDimension;
    if (g[0] > max) throw new ArgumentError("rows", `must be ≤ ${max * GEMM_TN} for the tiled GEMM, got ${rows}`);
    if (g[1] > max) throw new ArgumentError("tokens", `must be ≤ ${max * GEMM_TM} for the tiled GEMM, got ${tokens}`);
    return g;
  }

  /** gemv's product as the tiled GEMM (wgsl/gemm.ts): the same arguments and result, for many tokens. */
  gemm(pass: GPUComputePassEncoder, a: GpuGemvArgs): void {
    const dtype = a.weightDtype ?? "f32";
    const wOff = fits("weight", a.weight, count("rows", a.rows) * count("cols", a.cols), dtype === "f32" ? 4 : 2);
    const { params, bias } = this.#gemvParams(a, wOff, GPU_KV_DTYPE_CODE[dtype], 0, "gemm");
    this.#dispatch(pass, this.#kernel("gemm"), params, [a.x.buffer, a.weight.buffer, a.out.buffer, bias], this.#gemmGroups(a.rows, a.tokens));
  }

  /** gemvQ8's product as the tiled GEMM. */
  gemmQ8(pass: GPUComputePassEncoder, a: Omit<GpuGemvArgs, "weight" | "weightDtype"> & { weight: GpuQ8Weight }): void {
    const rows = count("rows", a.rows);
    const blocks = Math.ceil(count("cols", a.cols) / 32);
    if (fits("weight.codes", a.weight.codes, rows * blocks * 32, 1) !== 0) throw new ArgumentError("weight.codes.offset", `must be 0, got ${a.weight.codes.offset}`);
    if (fits("weight.scales", a.weight.scales, rows * blocks) !== 0) throw new ArgumentError("weight.scales.offset", `must be 0, got ${a.weight.scales.offset}`);
    const { params, bias } = this.#gemvParams(a, 0, 0, blocks, "gemm");
    this.#dispatch(pass, this.#kernel("gemm q8"), params, [a.x.buffer, a.weight.codes.buffer, a.weight.scales.buffer, a.out.buffer, bias], this.#gemmGroups(rows, a.tokens));
  }

  /** Checks a ggml-block weight [rows, cols] (its type, columns, buffer): its block geometry and blocks a row. */
  #blockGeometry(a: GpuBlockWeight & { rows: number; cols: number }): { bytes: number; values: number; blocks: number } {
    const geometry = Object.hasOwn(GPU_BLOCK, a.type) ? GPU_BLOCK[a.type] : undefined;
    if (geometry === undefined) throw new ArgumentError("type", `must be one of ${Object.keys(GPU_BLOCK).join(" | ")}, got ${show(a.type)}`);
    const cols = count("cols", a.cols);
    if (a.type !== "q4_0" && cols % geometry.values !== 0) throw new ArgumentError("cols", `must be a multiple of ${a.type}'s ${geometry.values} values a block, got ${cols}`);
    const blocks = Math.ceil(cols / geometry.values);
    if (fits("weight", a.weight, count("rows", a.rows) * blocks * geometry.bytes, 1) !== 0) throw new ArgumentError("weight.offset", `must be 0, got ${a.weight.offset}`);
    return { ...geometry, blocks };
  }

  /** The block GEMV's and GEMM's 24-word uniform (wgsl/gemv-blocks.ts BLOCK_PARAMS). */
  #blockParams(a: Omit<GpuGemvArgs, "weight" | "weightDtype"> & GpuBlockWeight, kernel: "gemv" | "gemm"): { params: Uint32Array; bias: GPUBuffer; nw: GPUBuffer; xVec: boolean } {
    const g = this.#blockGeometry(a);
    const p = this.#gemvParams(a, 0, GPU_BLOCK_CODE[a.type], g.blocks, kernel);
    p.params.set([g.bytes, g.values], 12);
    return p;
  }

  /** out[t, r] = Σ_c x[t, c] · W[r, c] (+ bias[r]), W in ggml blocks decoded in the kernel (wgsl/gemv-blocks.ts); x loaded and out written as GpuXLoad says. */
  gemvBlocks(pass: GPUComputePassEncoder, a: Omit<GpuGemvArgs, "weight" | "weightDtype"> & GpuBlockWeight): void {
    const g = this.#blockParams(a, "gemv");
    const pipeline = this.#kernel(`gemv ${a.type}`);
    const t = this.#tiled(g, a.x, GEMV_BLOCK_R, 14); // xVec (BLOCK_PARAMS's pad0)
    this.#dispatch(pass, pipeline, g.params, [a.x.buffer, t.xv, a.weight.buffer, a.out.buffer, g.bias, null, g.nw], t.groups);
  }

  /** gemvBlocks's product as the tiled GEMM. */
  gemmBlocks(pass: GPUComputePassEncoder, a: Omit<GpuGemvArgs, "weight" | "weightDtype"> & GpuBlockWeight): void {
    const { params, bias } = this.#blockParams(a, "gemm");
    this.#dispatch(pass, this.#kernel("gemm blocks"), params, [a.x.buffer, a.weight.buffer, a.out.buffer, bias], this.#gemmGroups(a.rows, a.tokens));
  }

  /** embedding's gather over a matrix in ggml blocks. */
  embeddingBlocks(pass: GPUComputePassEncoder, a: Omit<GpuEmbeddingArgs, "weight" | "dtype"> & GpuBlockWeight): void {
    const tokens = count("tokens", a.tokens);
    const g = this.#blockGeometry(a);
    if (fits("ids", a.ids, tokens) !== 0) throw new ArgumentError("ids.offset", `must be 0, got ${a.ids.offset}`);
    const firstRow = a.firstRow ?? 0;
    if (!Number.isInteger(firstRow) || firstRow < 0) throw new ArgumentError("firstRow", `must be an integer ≥ 0, got ${show(a.firstRow)}`);
    const groups = Math.ceil((tokens * a.cols) / 64);
    const wgX = Math.max(1, Math.min(groups, this.#gpu.limits.maxComputeWorkgroupsPerDimension));
    const params = new Uint32Array([tokens, a.cols, GPU_BLOCK_CODE[a.type], g.blocks, fits("out", a.out, tokens * a.cols), wgX, firstRow, a.rows, g.bytes, g.values, 0, 0]);
    this.#dispatch(pass, this.#kernel("embedding blocks"), params, [a.ids.buffer, a.weight.buffer, a.out.buffer], groups);
  }

  /** out[t, :] = weight[ids[t], :], decoded to f32 (ids trusted: checked on the CPU before upload). */
  embedding(pass: GPUComputePassEncoder, a: GpuEmbeddingArgs): void {
    const tokens = count("tokens", a.tokens);
    const rows = count("rows", a.rows);
    const cols = count("cols", a.cols);
    const blocks = Math.ceil(cols / 32);
    if (fits("ids", a.ids, tokens) !== 0) throw new ArgumentError("ids.offset", `must be 0, got ${a.ids.offset}`);
    let w: GPUBuffer;
    let scales = this.#dummy;
    if (a.dtype === "q8") {
      const q = a.weight as GpuQ8Weight;
      if (fits("weight.codes", q.codes, rows * blocks * 32, 1) !== 0) throw new ArgumentError("weight.codes.offset", `must be 0, got ${q.codes.offset}`);
      if (fits("weight.scales", q.scales, rows * blocks) !== 0) throw new ArgumentError("weight.scales.offset", `must be 0, got ${q.scales.offset}`);
      w = q.codes.buffer;
      scales = q.scales.buffer;
    } else {
      const v = a.weight as GpuView;
      if (fits("weight", v, rows * cols, a.dtype === "f32" ? 4 : 2) !== 0) throw new ArgumentError("weight.offset", `must be 0, got ${v.offset}`);
      w = v.buffer;
    }
    const code = a.dtype === "q8" ? EMBED_Q8 : GPU_KV_DTYPE_CODE[a.dtype];
    const groups = Math.ceil((tokens * cols) / 64);
    const wgX = Math.max(1, Math.min(groups, this.#gpu.limits.maxComputeWorkgroupsPerDimension));
    const firstRow = a.firstRow ?? 0;
    if (!Number.isInteger(firstRow) || firstRow < 0) throw new ArgumentError("firstRow", `must be an integer ≥ 0, got ${show(a.firstRow)}`);
    const params = new Uint32Array([tokens, cols, code, blocks, fits("out", a.out, tokens * cols), wgX, firstRow, rows]);
    this.#dispatch(pass, this.#kernel("embedding"), params, [a.ids.buffer, w, scales, a.out.buffer], groups);
  }

  /** Frees the uniforms of the dispatches recorded so far: call it once the submissions that ran them have completed. */
  recycle(): void {
    this.#gpu.bindGroups.endStep();
  }

  /** recycle(), then the buffer bound where a dispatch has no operand of its own goes back to the pool. */
  dispose(): void {
    this.recycle();
    this.#gpu.pool.release(this.#dummy);
    for (const b of this.#dummyCaches) this.#gpu.pool.release(b);
  }
}

/**
 * The WebGPU ModelRunner (ARCHITECTURE.md: "a GPU backend is a second
 * ModelRunner, not a second engine"): the decoder forward of decoder.ts —
 * llama2.c's forward() over a ragged, paged batch — with the weights
 * (gpu-weights.ts), the paged KV cache and the activations in GPU buffers.
 * One step is one submission:
 *
 *   x = embed(tokens)                                   ids, positions, slots uploaded once
 *   x = √hidden · x                                     (Gemma's embedding scale, f32 as the CPU's)
 *   for each layer:
 *     qkv = rmsnorm(x) · Wqkvᵀ (+ bias)                 [T, (H + 2·Hkv)·D]; the norm fused into the GEMV's x load
 *     q, k = rmsnorm_per_head(q), rmsnorm_per_head(k)    (Qwen3: into qn [T, H, D], kn [T, Hkv, D])
 *     q = rope(q); cache[layer][slots] = rope(k), v      one dispatch; cos/sin tables (one per layer RoPE; none on NoPE layers) uploaded
 *                                                        at creation (int8: quantized per token, or with the static per-channel scales)
 *     att = pagedAttention(q, cache[layer])              the step's plan, uploaded once (paged-attention-step.ts);
 *                                                        the layer's window, the model's scale and score softcap
 *     x += att · Woᵀ                                     the add fused into the GEMV's write (Gemma's sandwich: o = att · Woᵀ,
 *                                                        on = rmsnorm(o), x += on and xb = rmsnorm(x) by rmsNorm, xb the next input)
 *     gate_up = rmsnorm(x) · Wgate_upᵀ                   the norm fused
 *     x += down(act(gate) ⊙ up)                          act (silu, or Gemma's tanh GELU) fused into the load, the add into the write
 *   last = x[logitIndices];  logits = rmsnorm(last) · Wlmᵀ   the final norm fused into the head
 *
 * A decode step's layer is 5 dispatches and the attention's (GEMM steps, from
 * GEMM_MIN_TOKENS tokens, record the norms and the GLU into scratch first).
 *   logits = cap · tanh(logits / cap)                    (Gemma 2's final-logit softcap)
 *
 * and only logits [S, V] come back to the CPU. Every architecture the CPU
 * decoder runs runs here, with its semantics (Gemma's (1 + w) norm weights
 * come folded by the loader, decoder-weights.ts). forward() is asynchronous
 * (the readback is); the engine awaits it. The batch is checked as the CPU
 * decoder checks it (checkForwardBatch) and the attention plan is the CPU's
 * AttentionPlan, built in `rt` (a small wasm runtime) and disposed each step.
 *
 *   const gpu = await GpuDevice.open({ device: "webgpu" });
 *   const runner = await GpuModelRunner.create(gpu, rt, { config, weights, numBlocks, blockSize, kvDtype });
 *   const logits = await runner.forward(batch);
 */
import { ArgumentError, show } from "../errors.js";
import { checkForwardBatch } from "../model/check-batch.js";
import type { ModelConfig } from "../model/config.js";
import type { DecoderWeights } from "../model/decoder-weights.js";
import type { ForwardBatch } from "../model/forward-batch.js";
import type { KvCacheGeometry, ModelRunner } from "../model/model-runner.js";
import { ropeAttentionFactor, ropeInvFreq } from "../ops/rope.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt, checkOneOf } from "../tensor/check.js";
import { type Int8ChannelParams, type Int8Scaling, int8ChannelParams } from "../kv/kv-quant.js";
import { GpuDecoderOps, ropeCosSinCache } from "./decoder-ops.js";
import type { GpuDevice } from "./device.js";
import { type GpuDecoderWeights, type GpuMatrix, type LinearInput, encodeLinear, matrixKernels, uploadDecoderWeights } from "./gpu-weights.js";
import type { GluActivation } from "./wgsl/decoder-ops.js";
import { PagedAttentionStep } from "./paged-attention-step.js";
import { GpuStepProfiler, type KernelTime } from "./step-profiler.js";
import { modelLengthLimit } from "../model/max-model-len.js";
import { GPU_CACHE_DTYPES, type GpuCacheDtype, type GpuInt8Mode, cacheLayout } from "./wgsl/kv-load.js";
import { BufferUsage, MapMode } from "./constants.js";

export interface GpuModelRunnerOptions {
  config: ModelConfig;
  /** Weights built by the loaders in `rt`'s memories; uploaded, then left to the caller (free them after create). */
  weights: DecoderWeights;
  /** Blocks of the paged KV cache and tokens per block (the engine's KvCacheManager uses the same). */
  numBlocks: number;
  blockSize: number;
  /** KV storage: f32 | f16 | bf16 | int8 (per-token scales, or per-channel: `int8`) | fp8e4m3 | fp8e5m2 (scale 1), as the CPU's PagedKvCache stores them. */
  kvDtype: GpuCacheDtype;
  /**
   * int8 only, as PagedKvCacheOptions.int8: { mode: "per-token" } (the default) or
   * { mode: "per-channel", kScale, vScale, kOffset?, vOffset? } — static scales and
   * offsets f32 [Hkv, D] (every layer's) or [numLayers, Hkv, D], uploaded once into
   * each layer's cache buffers; the append quantizes with them, the attention
   * dequantizes x = (q + offset) · scale.
   */
  int8?: Int8Scaling;
  /** Longest sequence accepted (loadGpuModel: the memory plan's). Default min(the model's limit, numBlocks · blockSize). */
  maxModelLen?: number;
  /** dispose() destroys the device too (a loader opened it for this runner). Default false. */
  ownDevice?: boolean;
  /** For tests: split weight matrices into buffers of at most this many bytes (default: the adapter's maxStorageBufferBindingSize). */
  maxBindingBytes?: number;
}

/** What the last forward cost on the host, and with `profile` on, on the GPU kernel by kernel. */
export interface GpuStepStats {
  /** Host milliseconds recording the step's passes. */
  recordMs: number;
  /** Host milliseconds from submit to the logits on the CPU. */
  waitMs: number;
  /** Compute dispatches recorded. */
  dispatches: number;
  /** With `profile` on: GPU time by kernel (pipeline label), most first; each dispatch timed in a pass of its own. */
  kernels?: KernelTime[];
}

/** The step's activation buffers (pooled), sized for T tokens and S logit rows. */
interface StepBuffers {
  ids: GPUBuffer; // int32 [T]
  positions: GPUBuffer; // int32 [T]
  slots: GPUBuffer; // int32 [T]
  x: GPUBuffer; // [T, h] the residual stream
  xb: GPUBuffer; // [T, h] normed
  qkv: GPUBuffer; // [T, (H + 2·Hkv)·D]
  qn: GPUBuffer; // [T, H·D + Hkv·D] Qwen3's normed q then k
  att: GPUBuffer; // attention out + split partials
  lse: GPUBuffer;
  o: GPUBuffer; // [T, h]
  on: GPUBuffer; // [T, h] Gemma's normed o (sandwich norms)
  gateUp: GPUBuffer; // [T, 2·I]
  act: GPUBuffer; // [T, I]
  last: GPUBuffer; // [S, h]
  lastN: GPUBuffer; // [S, h]
  logits: GPUBuffer; // [S, V]
}

/** options.int8 checked as the CPU's PagedKvCache checks it: per layer the per-channel scales and offsets, or null (per-token). */
function resolveInt8(options: GpuModelRunnerOptions, c: ModelConfig): Int8ChannelParams[] | null {
  const int8 = options.int8;
  if (int8 === undefined) return null;
  if (options.kvDtype !== "int8") throw new ArgumentError("int8", `applies to kvDtype int8 only, got kvDtype ${show(options.kvDtype)}`);
  checkOneOf("int8.mode", int8.mode, ["per-token", "per-channel"] as const);
  return int8.mode === "per-channel" ? int8ChannelParams(int8, c.numLayers, c.numKvHeads, c.headDim) : null;
}

/** The MLP's gated activation per hiddenAct (a new activation fails to compile here until it has a kernel). */
const GLU: Record<ModelConfig["hiddenAct"], GluActivation> = { silu: "silu", gelu_pytorch_tanh: "gelu_tanh" };

export class GpuModelRunner implements ModelRunner {
  readonly config: ModelConfig;
  readonly vocabSize: number;
  readonly maxModelLen: number;
  readonly kvCache: KvCacheGeometry;
  readonly kvDtype: GpuCacheDtype;
  readonly gpu: GpuDevice;
  /** What the GPU holds of the weights ("q8", "bf16", "q4_k, q6_k", "q3_k", "q4_0 (from q4)"), and the bytes uploaded. */
  readonly weightFormat: string;
  readonly weightBytes: number;
  /**
   * The last forward: host milliseconds recording its passes (`recordMs`) and from submit to the logits
   * on the CPU (`waitMs`), and the compute dispatches it recorded (`dispatches`).
   */
  lastStep: GpuStepStats = { recordMs: 0, waitMs: 0, dispatches: 0 };
  /** The per-kernel profiler while `profile` is on (step-profiler.ts). */
  #profiler: GpuStepProfiler | null = null;
  readonly #rt: Runtime;
  readonly #ops: GpuDecoderOps;
  readonly #w: GpuDecoderWeights;
  readonly #destroyWeights: () => void;
  readonly #cache: { k: GPUBuffer; v: GPUBuffer }[];
  /** int8: per-token scales computed on write, or static per-channel ones (options.int8). */
  readonly #int8Mode: GpuInt8Mode;
  /** int8: the word where each K/V buffer's scales start (wgsl/kv-load.ts cacheLayout). */
  readonly #kvScaleOff: number;
  /** Per layer: its RoPE cos/sin table [maxModelLen, R] (layers with the same theta and scaling share one), or null (a NoPE layer). */
  readonly #cosSin: (GPUBuffer | null)[];
  readonly #windows: ([number, number] | undefined)[];
  readonly #ownDevice: boolean;
  #busy = false;
  #disposed = false;

  private constructor(gpu: GpuDevice, rt: Runtime, ops: GpuDecoderOps, options: GpuModelRunnerOptions, w: { weights: GpuDecoderWeights; destroy: () => void }, maxModelLen: number, channels: Int8ChannelParams[] | null) {
    const c = options.config;
    this.gpu = gpu;
    this.#rt = rt;
    this.#ops = ops;
    this.config = c;
    this.vocabSize = c.vocabSize;
    this.maxModelLen = maxModelLen;
    this.kvCache = { numBlocks: options.numBlocks, blockSize: options.blockSize };
    this.kvDtype = options.kvDtype;
    this.#int8Mode = channels ? "per-channel" : "per-token";
    this.#ownDevice = options.ownDevice ?? false;
    this.#w = w.weights;
    this.#destroyWeights = w.destroy;
    this.weightBytes = w.weights.bytes;
    this.weightFormat = [...new Set([w.weights.lmHead, ...w.weights.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])].map((m) => m.format))].join(", ");
    this.#windows = c.layerWindows.map((win) => (win === null ? undefined : [win - 1, 0]));
    const made: GPUBuffer[] = [];
    const buffer = (bytes: number, label: string): GPUBuffer => {
      const b = gpu.device.createBuffer({ size: Math.max(16, Math.ceil(bytes / 4) * 4), usage: BufferUsage.STORAGE | BufferUsage.COPY_DST, label });
      made.push(b);
      return b;
    };
    try {
      // The paged KV cache: per layer K and V [numBlocks · blockSize, Hkv, D] in kvDtype (int8: + scales [numBlocks · blockSize, Hkv],
      // or per-channel: + scales and offsets [Hkv, D], written here once).
      const layout = cacheLayout(options.numBlocks * options.blockSize, c.numKvHeads, c.headDim, options.kvDtype, this.#int8Mode);
      const layerBytes = layout.bytes;
      this.#kvScaleOff = layout.scaleOff;
      const max = gpu.limits.maxStorageBufferBindingSize;
      if (layerBytes > max) throw new ArgumentError("numBlocks", `gives a KV layer of ${layerBytes} bytes, beyond the adapter's maxStorageBufferBindingSize ${max}: lower kvCacheBytes or numBlocks (got ${options.numBlocks})`);
      this.#cache = Array.from({ length: c.numLayers }, (_, l) => ({ k: buffer(layerBytes, `layer ${l} K cache`), v: buffer(layerBytes, `layer ${l} V cache`) }));
      if (channels) {
        const n = c.numKvHeads * c.headDim;
        channels.forEach((p, l) => {
          const k = new Float32Array(2 * n);
          const v = new Float32Array(2 * n);
          k.set(p.kScale);
          k.set(p.kOffset, n);
          v.set(p.vScale);
          v.set(p.vOffset, n);
          gpu.device.queue.writeBuffer(this.#cache[l]!.k, layout.scaleOff * 4, k);
          gpu.device.queue.writeBuffer(this.#cache[l]!.v, layout.scaleOff * 4, v);
        });
      }
      // One table per distinct layer RoPE (Gemma 3's local base, SmolLM3's NoPE layers), built as the CPU Rope builds
      // its own: partial rotary dims, LongRoPE's factors chosen by maxModelLen, cos and sin × its attention factor.
      const tables = new Map<string, GPUBuffer>();
      this.#cosSin = c.layerRope.map((r) => {
        if (r === null) return null;
        const key = JSON.stringify(r);
        let buf = tables.get(key);
        if (buf === undefined) {
          const table = ropeCosSinCache(ropeInvFreq({ headDim: c.headDim, rotaryDim: c.rotaryDim, theta: r.theta, scaling: r.scaling, maxPositions: maxModelLen }), maxModelLen);
          const f = ropeAttentionFactor(r.scaling);
          if (f !== 1) for (let i = 0; i < table.length; i++) table[i] = Math.fround(table[i]! * f);
          buf = buffer(table.byteLength, `rope cos/sin (theta ${r.theta}, ${r.scaling?.type ?? "default"})`);
          gpu.device.queue.writeBuffer(buf, 0, table);
          tables.set(key, buf);
        }
        return buf;
      });
    } catch (e) {
      for (const b of made) b.destroy();
      throw e;
    }
  }

  /** Uploads the weights and allocates the KV cache on `gpu`; `rt` builds each step's attention plan. */
  static async create(gpu: GpuDevice, rt: Runtime, options: GpuModelRunnerOptions): Promise<GpuModelRunner> {
    const c = options.config;
    const numBlocks = checkInt("numBlocks", options.numBlocks, { min: 1 });
    const blockSize = checkInt("blockSize", options.blockSize, { min: 1, max: 256 });
    if (!(GPU_CACHE_DTYPES as readonly string[]).includes(options.kvDtype)) {
      throw new ArgumentError("kvDtype", `must be one of ${GPU_CACHE_DTYPES.join(" | ")} on the webgpu device, got ${show(options.kvDtype)}`);
    }
    if (options.kvDtype !== "f32" && c.headDim % 2 !== 0) throw new ArgumentError("kvDtype", `${options.kvDtype} needs an even head dim on the webgpu device, got ${c.headDim}`);
    if (/^(int8|fp8)/.test(options.kvDtype) && c.headDim % 4 !== 0) throw new ArgumentError("kvDtype", `${options.kvDtype} needs a head dim that is a multiple of 4 on the webgpu device, got ${c.headDim}`);
    const channels = resolveInt8(options, c);
    const limit = Math.min(modelLengthLimit(c).tokens, numBlocks * blockSize); // loadGpuModel passes the plan's maxModelLen, resolved once (model/max-model-len.ts)
    const maxModelLen = options.maxModelLen === undefined ? limit : checkInt("maxModelLen", options.maxModelLen, { min: 1, max: limit });
    let up: { weights: GpuDecoderWeights; destroy: () => void } | null = null;
    let ops: GpuDecoderOps | null = null;
    try {
      up = uploadDecoderWeights(gpu, rt, options.weights, options.maxBindingBytes === undefined ? undefined : checkInt("maxBindingBytes", options.maxBindingBytes, { min: 4 }));
      const u = up;
      // Only the matrix kernels these weights' formats use compile (each up to seconds on SwiftShader).
      const o = (ops = await GpuDecoderOps.create(gpu, matrixKernels(u.weights)));
      return await gpu.scoped("uploading the model", () => new GpuModelRunner(gpu, rt, o, { ...options, numBlocks, blockSize }, u, maxModelLen, channels));
    } catch (e) {
      up?.destroy();
      ops?.dispose();
      throw e;
    }
  }

  /** The step's buffers from the device's pool (reused across steps by size class). */
  #acquire(T: number, S: number, attFloats: number, lseFloats: number): StepBuffers {
    const c = this.config;
    const pool = this.gpu.pool;
    const f = (n: number, label: string) => pool.acquire(Math.max(4, n * 4), label);
    const qkvCols = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    return {
      ids: f(T, "step token ids"),
      positions: f(T, "step positions"),
      slots: f(T, "step slots"),
      x: f(T * c.hiddenSize, "x"),
      xb: f(T * c.hiddenSize, "xb"),
      qkv: f(T * qkvCols, "qkv"),
      qn: f(c.qkNorm ? T * (c.numHeads + c.numKvHeads) * c.headDim : 1, "q/k normed"),
      att: f(attFloats, "attention out"),
      lse: f(lseFloats, "attention lse"),
      o: f(T * c.hiddenSize, "o"),
      on: f(c.sandwichNorms ? T * c.hiddenSize : 1, "o normed"),
      gateUp: f(T * 2 * c.intermediateSize, "gate_up"),
      act: f(T * c.intermediateSize, "act"),
      last: f(Math.max(1, S) * c.hiddenSize, "last"),
      lastN: f(Math.max(1, S) * c.hiddenSize, "last normed"),
      logits: f(Math.max(1, S) * c.vocabSize, "logits"),
    };
  }

  /**
   * Per-kernel GPU time of every later step in `lastStep.kernels` (timestamp
   * queries, step-profiler.ts; each dispatch then runs in a compute pass of its
   * own, so a profiled step is slower than an unprofiled one). Setting it true
   * on an adapter without `timestamp-query` throws an ArgumentError.
   */
  get profile(): boolean {
    return this.#profiler !== null;
  }

  set profile(on: boolean) {
    if (this.#busy) throw new Error("GpuModelRunner.profile changed while a forward is running");
    if (on && this.#profiler === null) this.#profiler = new GpuStepProfiler(this.gpu);
    else if (!on && this.#profiler !== null) (this.#profiler.destroy(), (this.#profiler = null));
  }

  /** The matrix kernels compiled for these weights (GpuDecoderOps.kernels: one GEMV and GEMM per weight format, the embedding's gather). */
  get kernels(): string[] {
    return this.#ops.kernels;
  }

  async forward(batch: ForwardBatch): Promise<Float32Array> {
    if (this.#disposed) throw new Error("GpuModelRunner used after dispose()");
    if (this.#busy) throw new Error("GpuModelRunner.forward called while a forward is running (await each step)");
    const c = this.config;
    checkForwardBatch(batch, { vocabSize: c.vocabSize, maxModelLen: this.maxModelLen, numBlocks: this.kvCache.numBlocks, blockSize: this.kvCache.blockSize });
    this.#busy = true;
    const gpu = this.gpu;
    const T = batch.tokens.length;
    const S = batch.logitIndices.length;
    let attn: PagedAttentionStep | null = null;
    let b: StepBuffers | null = null;
    try {
      attn = await PagedAttentionStep.create(gpu, this.#rt, { H: c.numHeads, Hkv: c.numKvHeads, D: c.headDim, kvDtype: this.kvDtype, int8Mode: this.#int8Mode, kvScaleOff: this.#kvScaleOff, blockSize: this.kvCache.blockSize, scale: c.attentionScale, softcap: c.attnLogitSoftcap }, batch);
      const bufs = (b = this.#acquire(T, S, attn.outFloats, attn.lseFloats));
      const step = attn;
      return await gpu.scoped("running a forward step", async () => {
        const q = gpu.device.queue;
        q.writeBuffer(bufs.ids, 0, Int32Array.from(batch.tokens));
        q.writeBuffer(bufs.positions, 0, Int32Array.from(batch.positions));
        q.writeBuffer(bufs.slots, 0, Int32Array.from(batch.slotMapping));
        const t0 = performance.now();
        const d0 = gpu.dispatches;
        const enc = gpu.device.createCommandEncoder({ label: "forward" });
        const prof = this.#profiler;
        prof?.begin();
        const pass = prof ? prof.pass(enc) : enc.beginComputePass();
        this.#encodeLayers(pass, bufs, step, T);
        pass.end();
        if (S === 0) {
          const t1 = performance.now();
          const dispatches = gpu.dispatches - d0;
          prof?.resolve(enc);
          gpu.device.queue.submit([enc.finish()]);
          await gpu.device.queue.onSubmittedWorkDone();
          const waitMs = performance.now() - t1;
          this.lastStep = { recordMs: t1 - t0, waitMs, dispatches, ...(prof ? { kernels: await prof.read() } : {}) };
          return new Float32Array(0);
        }
        // Only the sampled rows go through the final norm and the head.
        const h = c.hiddenSize;
        for (let i = 0; i < S; i++) enc.copyBufferToBuffer(bufs.x, batch.logitIndices[i]! * h * 4, bufs.last, i * h * 4, h * 4);
        const head = prof ? prof.pass(enc, "lm head") : enc.beginComputePass();
        encodeLinear(this.#ops, head, this.#w.lmHead, { x: { buffer: bufs.last }, norm: { weight: this.#w.finalNorm, eps: c.rmsNormEps }, scratch: bufs.lastN, out: { buffer: bufs.logits }, tokens: S });
        if (c.finalLogitSoftcap > 0) this.#ops.softcap(head, { x: { buffer: bufs.logits }, n: S * c.vocabSize, cap: c.finalLogitSoftcap });
        head.end();
        const bytes = S * c.vocabSize * 4;
        const staging = gpu.device.createBuffer({ size: bytes, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: "logits readback" });
        try {
          enc.copyBufferToBuffer(bufs.logits, 0, staging, 0, bytes);
          const t1 = performance.now();
          const dispatches = gpu.dispatches - d0;
          prof?.resolve(enc);
          gpu.device.queue.submit([enc.finish()]);
          await staging.mapAsync(MapMode.READ);
          const logits = new Float32Array(staging.getMappedRange().slice(0));
          const waitMs = performance.now() - t1;
          this.lastStep = { recordMs: t1 - t0, waitMs, dispatches, ...(prof ? { kernels: await prof.read() } : {}) };
          return logits;
        } finally {
          staging.destroy();
        }
      });
    } finally {
      this.#ops.recycle();
      attn?.release();
      if (b) for (const buf of Object.values(b)) gpu.pool.release(buf);
      this.#busy = false;
    }
  }

  /** Records the embedding and every layer (the module comment's loop) into `pass`. */
  #encodeLayers(pass: GPUComputePassEncoder, b: StepBuffers, attn: PagedAttentionStep, T: number): void {
    const c = this.config;
    const ops = this.#ops;
    const W = this.#w;
    const h = c.hiddenSize;
    const eps = c.rmsNormEps;
    const { numHeads: H, numKvHeads: Hkv, headDim: D } = c;
    const qkvCols = (H + 2 * Hkv) * D;
    for (const p of W.embedding.parts) {
      if (p.kind === "blocks") {
        ops.embeddingBlocks(pass, { ids: { buffer: b.ids }, weight: { buffer: p.buffer }, type: p.type, out: { buffer: b.x }, tokens: T, rows: p.rows, firstRow: p.r0, cols: h });
        continue;
      }
      const weight = p.kind === "q8" ? { codes: { buffer: p.codes }, scales: { buffer: p.scales } } : { buffer: p.buffer };
      ops.embedding(pass, { ids: { buffer: b.ids }, weight, dtype: p.kind, out: { buffer: b.x }, tokens: T, rows: p.rows, firstRow: p.r0, cols: h });
    }
    if (c.embeddingScale !== 1) ops.scale(pass, { x: { buffer: b.x }, n: T * h, s: c.embeddingScale });
    const positions = { buffer: b.positions };
    const glu = GLU[c.hiddenAct];
    /**
     * x += m · input (+ bias), folded into the projection's write; returns the next
     * projection's input: x with the norm `next` fused into its load. Gemma's sandwich
     * (`outNorm`): o = m · input, normed into on, then x += on and xb = next(x) by one
     * rmsNorm; the next projection reads xb.
     */
    const residual = (m: GpuMatrix, bias: GPUBuffer | null, input: LinearInput, outNorm: GPUBuffer | null, next: GPUBuffer): LinearInput => {
      if (outNorm === null) {
        encodeLinear(ops, pass, m, { ...input, out: { buffer: b.x }, bias, tokens: T, accumulate: true });
        return { x: { buffer: b.x }, norm: { weight: next, eps }, scratch: b.xb };
      }
      encodeLinear(ops, pass, m, { ...input, out: { buffer: b.o }, bias, tokens: T });
      ops.rmsNorm(pass, { x: { buffer: b.o }, weight: { buffer: outNorm }, out: { buffer: b.on }, rows: T, cols: h, eps });
      ops.rmsNorm(pass, { x: { buffer: b.x }, delta: { buffer: b.on }, weight: { buffer: next }, out: { buffer: b.xb }, rows: T, cols: h, eps });
      return { x: { buffer: b.xb } };
    };
    let input: LinearInput = { x: { buffer: b.x }, norm: { weight: W.layers[0]!.inputNorm, eps }, scratch: b.xb };
    for (let l = 0; l < c.numLayers; l++) {
      const w = W.layers[l]!;
      encodeLinear(ops, pass, w.qkv, { ...input, out: { buffer: b.qkv }, bias: w.qkvBias, tokens: T });
      // q and k: in qkv, or (Qwen3) normed per head into qn = [T, H·D | Hkv·D].
      let q = { buffer: b.qkv, offset: 0, tokenStride: qkvCols };
      let k = { buffer: b.qkv, offset: H * D, tokenStride: qkvCols };
      if (w.qNorm && w.kNorm) {
        ops.rmsNorm(pass, { x: { buffer: b.qkv }, xStride: qkvCols, group: H, weight: { buffer: w.qNorm }, out: { buffer: b.qn }, rows: T * H, cols: D, eps });
        ops.rmsNorm(pass, { x: { buffer: b.qkv, offset: H * D }, xStride: qkvCols, group: Hkv, weight: { buffer: w.kNorm }, out: { buffer: b.qn, offset: T * H * D }, rows: T * Hkv, cols: D, eps });
        q = { buffer: b.qn, offset: 0, tokenStride: H * D };
        k = { buffer: b.qn, offset: T * H * D, tokenStride: Hkv * D };
      }
      // RoPE of q (in place) and k (as it is written) fused into the KV append (none on a NoPE layer).
      const cosSin = this.#cosSin[l];
      const cache = this.#cache[l]!;
      ops.appendKv(pass, {
        k: { buffer: k.buffer, offset: k.offset },
        tokenStride: k.tokenStride,
        v: { buffer: b.qkv, offset: (H + Hkv) * D },
        vTokenStride: qkvCols,
        slots: { buffer: b.slots },
        cacheK: { buffer: cache.k },
        cacheV: { buffer: cache.v },
        dtype: this.kvDtype,
        ...(this.kvDtype === "int8" ? { int8Mode: this.#int8Mode } : {}),
        numSlots: this.kvCache.numBlocks * this.kvCache.blockSize,
        tokens: T,
        numKvHeads: Hkv,
        headDim: D,
        ...(cosSin ? { rope: { positions, cosSin: { buffer: cosSin }, maxPos: this.maxModelLen, rotaryDim: c.rotaryDim, q: { x: { buffer: q.buffer, offset: q.offset }, tokenStride: q.tokenStride, heads: H } } } : {}),
      });
      attn.encode(pass, { q, k: cache.k, v: cache.v, out: b.att, lse: b.lse, window: this.#windows[l] });
      // x += o (+ Gemma's sandwich norm); the MLP's input: x with post_attention_layernorm fused.
      const mlp = residual(w.o, w.oBias, { x: { buffer: b.att } }, w.attnOutNorm, w.postNorm);
      encodeLinear(ops, pass, w.gateUp, { ...mlp, out: { buffer: b.gateUp }, bias: w.gateUpBias, tokens: T });
      // x += down(act(gate) ⊙ up), the activation fused into the down projection's x load; then the next layer's
      // input norm (after the last layer: the final norm, fused into the head; Gemma's xb unused).
      input = residual(w.down, w.downBias, { x: { buffer: b.gateUp }, glu, scratch: b.act }, w.mlpOutNorm, W.layers[l + 1]?.inputNorm ?? W.finalNorm);
    }
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#profiler?.destroy();
    this.#ops.dispose();
    this.#destroyWeights();
    for (const c of this.#cache) (c.k.destroy(), c.v.destroy());
    for (const b of new Set(this.#cosSin)) b?.destroy();
    if (this.#ownDevice) this.gpu.destroy();
  }

  toString(): string {
    const c = this.config;
    return `GpuModelRunner(${c.architecture}, ${c.numLayers} layers, hidden ${c.hiddenSize}, weights ${this.weightFormat}, KV ${this.kvDtype}${this.#int8Mode === "per-channel" ? " per-channel" : ""} [${this.kvCache.numBlocks}, ${this.kvCache.blockSize}], ${this.gpu.adapter.vendor} ${this.gpu.adapter.architecture})`;
  }
}

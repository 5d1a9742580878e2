/**
 * Runs a checked AttentionProblem (src/attention/problem.ts) on a GpuDevice:
 * the dispatch step of the one operator API, after the entry points have
 * validated and planned. The operands live in the runtime's wasm memory:
 * each tensor's byte span is uploaded once (strides kept, so views work), the
 * plan tables once, the attention kernel (decode or FlashAttention-2) and, for
 * split sequences, the
 * FlashDecoding merge run in one submission, and the compact out [T, H, D]
 * and lse [T, H] come back into the problem's out and lse tensors.
 *
 * A paged cache may be int8 (per-token scales, or per-channel scales and
 * offsets) or fp8 (scale 1): its K (V) buffer on the GPU is the codes then
 * the scales f32 [numSlots, Hkv] (per-channel: the scales then the offsets
 * f32 [Hkv, D]), the layout of the WebGPU ModelRunner's cache
 * (wgsl/kv-load.ts cacheLayout).
 */
import type { AttentionProblem } from "../attention/problem.js";
import { ArgumentError, show } from "../errors.js";
import type { Tensor } from "../tensor/tensor.js";
import { type GpuPlanTables, buildGpuPlan } from "./attention-plan.js";
import type { GpuDevice } from "./device.js";
import { GPU_CACHE_DTYPES, GPU_KV_DTYPES, type GpuCacheDtype, type GpuInt8Mode, cacheCode } from "./wgsl/kv-load.js";
import { chooseTile, dmaxFor, flashAttentionWgsl } from "./wgsl/flash-attention.js";
import { DECODE_RMAX, decodeAttentionWgsl, decodeLanes, decodeRows, decodeWorkgroupBytes } from "./wgsl/decode-attention.js";
import { mergeStatesWgsl, mergeWorkgroups } from "./wgsl/merge-states.js";
import { type AttnParams, FLAG_ALIBI, FLAG_BIAS, FLAG_MASK, packAttnParams } from "./wgsl/params.js";

/** The tensors behind a problem's operands (their spans are uploaded). */
export interface ProblemTensors {
  q: Tensor;
  k: Tensor;
  v: Tensor;
  bias?: Tensor | undefined;
  mask?: Tensor | undefined;
  alibiSlopes?: Tensor | undefined;
  /** An int8 paged cache's per-token scales f32 [numBlocks, blockSize, Hkv], or per-channel ones f32 [Hkv, D] (PagedKvCache's kScale, vScale). */
  kScale?: Tensor | undefined;
  vScale?: Tensor | undefined;
  /** An int8 per-channel cache's offsets f32 [Hkv, D] (PagedKvCache's kOffset, vOffset); their presence selects the per-channel decode. */
  kOffset?: Tensor | undefined;
  vOffset?: Tensor | undefined;
}

/** How the keys are split: per sequence chunk bounds [0, …, sk]; the paged table when paged. */
export interface ProblemSplit {
  bounds: readonly ArrayLike<number>[];
  table: Int32Array | null;
}

/** A tensor's bytes from its first to its last element, from a 4-byte boundary; `base` = its first element's index there. */
function span(t: Tensor): { bytes: Uint8Array; start: number } {
  const start = t.ptr & ~3;
  return { bytes: new Uint8Array(t.memory.buffer, start, t.ptr + t.byteLength - start), start };
}

/** The float dtypes anywhere; the 1-byte cache dtypes only in a paged cache (int8 with its scales: per-token, or per-channel with offsets). */
function checkKvDtype(dtype: string, paged: boolean, t: ProblemTensors): { dtype: GpuCacheDtype; int8Mode: GpuInt8Mode } {
  const allowed = paged ? GPU_CACHE_DTYPES : GPU_KV_DTYPES;
  const where = paged ? "a paged cache" : "dense K/V (int8 and fp8: a paged cache)";
  if (!(allowed as readonly string[]).includes(dtype)) throw new ArgumentError("k.dtype", `must be one of ${allowed.join(" | ")} for ${where} on the webgpu backend, got ${show(dtype)}`);
  if (dtype === "int8" && !(t.kScale && t.vScale)) throw new ArgumentError("cache", "is int8 without scales, which the webgpu backend needs (int8.mode \"per-token\" or \"per-channel\")");
  if (Boolean(t.kOffset) !== Boolean(t.vOffset)) throw new ArgumentError("cache", "must give both K and V per-channel offsets or neither");
  return { dtype: dtype as GpuCacheDtype, int8Mode: t.kOffset ? "per-channel" : "per-token" };
}

/** k's (or v's) span, then for int8 its scales (and per-channel offsets) from a 4-byte boundary: the bytes to upload and the scales' word offset. */
function withScales(x: { bytes: Uint8Array }, ...params: Tensor[]): { bytes: Uint8Array; scaleOff: number } {
  if (params.length === 0) return { bytes: x.bytes, scaleOff: 0 };
  const pad = Math.ceil(x.bytes.byteLength / 4) * 4;
  const parts = params.map((t) => new Uint8Array(t.memory.buffer, t.ptr, t.byteLength));
  const bytes = new Uint8Array(pad + parts.reduce((n, p) => n + p.byteLength, 0));
  bytes.set(x.bytes);
  let at = pad;
  for (const p of parts) {
    bytes.set(p, at);
    at += p.byteLength;
  }
  return { bytes, scaleOff: pad / 4 };
}

/** What follows K's (V's) codes in its GPU buffer: int8's scales, then per-channel offsets. */
function cacheParams(int8Mode: GpuInt8Mode, scale: Tensor | undefined, offset: Tensor | undefined): Tensor[] {
  if (!scale) return [];
  return int8Mode === "per-channel" && offset ? [scale, offset] : [scale];
}

/** The aux buffer: bias (f32), mask (u8) and ALiBi slopes (f32) concatenated at 4-byte boundaries. */
function packAux(p: AttentionProblem, t: ProblemTensors): { bytes: Uint8Array; at: Partial<Record<"bias" | "mask" | "alibi", number>> } {
  const parts: { name: "bias" | "mask" | "alibi"; tensor: Tensor; ptr: number }[] = [];
  if (p.score.bias && t.bias) parts.push({ name: "bias", tensor: t.bias, ptr: p.score.bias.ptr });
  if (p.score.mask && t.mask) parts.push({ name: "mask", tensor: t.mask, ptr: p.score.mask.ptr });
  if (p.score.alibi && t.alibiSlopes) parts.push({ name: "alibi", tensor: t.alibiSlopes, ptr: p.score.alibi.ptr });
  const spans = parts.map((x) => span(x.tensor));
  const total = spans.reduce((n, s) => n + Math.ceil(s.bytes.byteLength / 4) * 4, 0);
  const bytes = new Uint8Array(Math.max(4, total));
  const at: Partial<Record<"bias" | "mask" | "alibi", number>> = {};
  let o = 0;
  parts.forEach((x, i) => {
    const s = spans[i]!;
    bytes.set(s.bytes, o);
    // bias and slopes index words, the mask indexes bytes.
    at[x.name] = x.name === "mask" ? o + (x.ptr - s.start) : (o + (x.ptr - s.start)) / 4;
    o += Math.ceil(s.bytes.byteLength / 4) * 4;
  });
  return { bytes, at };
}

function checkBinding(gpu: GpuDevice, what: string, bytes: number): void {
  const max = gpu.limits.maxStorageBufferBindingSize;
  if (bytes > max) throw new ArgumentError(what, `needs a ${bytes}-byte GPU binding, beyond the adapter's maxStorageBufferBindingSize ${max}`);
}

function dispatchSize(gpu: GpuDevice, groups: number): [number, number] {
  const x = Math.max(1, Math.min(groups, gpu.limits.maxComputeWorkgroupsPerDimension));
  return [x, Math.ceil(groups / x)];
}

/**
 * The kernel for a problem: IncreFlashAttention (decode-attention.ts: keys
 * split over the workgroup) when every sequence has at most DECODE_RMAX
 * query rows per KV head (sq·G, as in decode steps), else FlashAttention-2
 * (flash-attention.ts: query rows split over the workgroup). Both read the
 * same plan tables, with `rows` rows a work item; `decode` says the GPU plan
 * may cut the plan's chunks shorter (attention-plan.ts).
 *
 * The decode kernel's lanes a key row (L) come from the adapter's smallest
 * subgroup: its butterfly needs a row group inside one subgroup. Without
 * subgroups (or with none reported) it reduces through workgroup memory, and
 * L halves until that memory fits the adapter's limit.
 */
export function chooseAttentionKernel(gpu: GpuDevice, p: Pick<AttentionProblem, "seqs" | "G" | "D">): { code: string; label: string; rows: number; decode: boolean } {
  const DMAX = dmaxFor(p.D);
  if (p.seqs.every((s) => s.sq * p.G <= DECODE_RMAX)) {
    const sgMin = gpu.features.has("subgroups") ? subgroupMinSize(gpu) : null;
    const subgroups = sgMin !== null && decodeLanes(DMAX, sgMin) >= 2;
    let L = decodeLanes(DMAX, subgroups ? sgMin : null);
    const R = decodeRows(Math.max(1, ...p.seqs.map((s) => s.sq * p.G)));
    while (L > 1 && decodeWorkgroupBytes({ DMAX, R, L, subgroups }) > gpu.limits.maxComputeWorkgroupStorageSize) L /= 2;
    return { code: decodeAttentionWgsl({ DMAX, R, L, subgroups }), label: `decode attention DMAX=${DMAX} R=${R} L=${L}${subgroups ? " subgroups" : ""}`, rows: R, decode: true };
  }
  const tile = chooseTile(DMAX, gpu.limits.maxComputeWorkgroupStorageSize);
  return { code: flashAttentionWgsl({ DMAX, tile }), label: `flash attention DMAX=${DMAX} BR=${tile.BR} BC=${tile.BC}`, rows: tile.BR, decode: false };
}

/** The adapter's smallest subgroup size (GPUAdapterInfo.subgroupMinSize, as Dawn reports it), or null where not reported. */
function subgroupMinSize(gpu: GpuDevice): number | null {
  const info = (gpu.device as GPUDevice & { adapterInfo?: { subgroupMinSize?: number } }).adapterInfo;
  const n = info?.subgroupMinSize;
  return typeof n === "number" && Number.isInteger(n) && n > 0 ? n : null;
}

/**
 * An attention call uploaded to the GPU (FlashInfer's plan, then run): the
 * operands, the plan tables and the uniforms live in GPU buffers; encode()
 * records the kernels (any number of times: benchmarks repeat it), read()
 * writes the result into the problem's out and lse, release() returns the
 * buffers to the pool.
 */
export interface GpuAttentionLaunch {
  /** Which kernel runs (decode or FlashAttention-2, and its compile-time shape). */
  readonly kernel: string;
  /** Work items (workgroups) of the attention kernel, and whether a merge follows. */
  readonly nItems: number;
  readonly split: boolean;
  encode(pass: GPUComputePassEncoder): void;
  read(): Promise<void>;
  release(): void;
}

/** Checks the GPU limits, compiles (or reuses) the pipelines and uploads everything `p` reads. */
export async function prepareAttentionOnGpu(gpu: GpuDevice, p: AttentionProblem, t: ProblemTensors, split: ProblemSplit): Promise<GpuAttentionLaunch> {
  const { dtype: kvDtype, int8Mode } = checkKvDtype(p.kvDtype, p.paged !== undefined, t);
  const kernel = chooseAttentionKernel(gpu, p);
  const plan = buildGpuPlan(p.seqs, split.bounds, p.Hkv, p.G, kernel.rows, split.table, kernel.decode);
  const paged = p.paged !== undefined;
  const [attend, merge] = await Promise.all([
    gpu.pipeline(kernel.code, kernel.label),
    plan.slots > 0 ? gpu.pipeline(mergeStatesWgsl(), "merge states") : Promise.resolve(null),
  ]);
  const q = span(t.q);
  const k = span(t.k);
  const v = span(t.v);
  const kUp = withScales(k, ...(kvDtype === "int8" ? cacheParams(int8Mode, t.kScale, t.kOffset) : []));
  const vUp = withScales(v, ...(kvDtype === "int8" ? cacheParams(int8Mode, t.vScale, t.vOffset) : []));
  // The scale of element e is at e / D (per-channel: e % (Hkv · D)) from kvScaleOff: K and V start at their span's first word and share the offset.
  if (kvDtype === "int8" && (t.k.ptr !== k.start || t.v.ptr !== v.start || kUp.scaleOff !== vUp.scaleOff)) {
    throw new ArgumentError("cache", "must keep an int8 layer's K and V on 4-byte boundaries and of one size (a PagedKvCache layer does)");
  }
  const aux = packAux(p, t);
  const outFloats = plan.T * p.H * p.D;
  const lseFloats = plan.T * p.H;
  const partO = plan.slots * p.H * plan.partSq * p.D;
  const partL = plan.slots * p.H * plan.partSq;
  for (const [what, n] of [["q", q.bytes.byteLength], ["k", kUp.bytes.byteLength], ["v", vUp.bytes.byteLength], ["out", (outFloats + partO) * 4]] as const) checkBinding(gpu, what, n);

  const [wgX, wgY] = dispatchSize(gpu, plan.nItems);
  const s = p.score;
  const params: AttnParams = {
    H: p.H, Hkv: p.Hkv, G: p.G, nItems: plan.nItems,
    qOff: (t.q.ptr - q.start) / 4, qsB: p.q.sB, qsH: p.q.sH, qsS: p.q.sS,
    kOff: (t.k.ptr - k.start) / t.k.elementBytes, ksB: p.k.sB, ksH: p.k.sH, ksS: p.k.sS,
    vOff: (t.v.ptr - v.start) / t.v.elementBytes, vsB: p.v.sB, vsH: p.v.sH, vsS: p.v.sS,
    scale: s.scale, softcap: s.softcap, causal: s.causal ? 1 : 0, winL: s.winLeft,
    winR: s.winRight, flags: (s.bias ? FLAG_BIAS : 0) | (s.mask ? FLAG_MASK : 0) | (s.alibi ? FLAG_ALIBI : 0), seqsOff: plan.seqsOff, itemsOff: plan.itemsOff,
    tableOff: plan.tableOff, maxBlocks: p.paged?.maxBlocksPerSeq ?? 0, blockSize: p.paged?.blockSize ?? 1, partSq: Math.max(1, plan.partSq),
    biasOff: aux.at.bias ?? 0, bsB: s.bias?.sB ?? 0, bsH: s.bias?.sH ?? 0, bsI: s.bias?.sI ?? 0,
    bsJ: s.bias?.sJ ?? 0, maskOff: aux.at.mask ?? 0, msB: s.mask?.sB ?? 0, msH: s.mask?.sH ?? 0,
    msI: s.mask?.sI ?? 0, msJ: s.mask?.sJ ?? 0, alibiOff: aux.at.alibi ?? 0, asB: s.alibi?.sB ?? 0,
    partOOff: outFloats, partLOff: lseFloats, wgX, chunksOff: plan.chunksOff,
    D: p.D, kvDtype: cacheCode(kvDtype, int8Mode), paged: paged ? 1 : 0, kvScaleOff: kUp.scaleOff,
  };
  const d = gpu.device;
  const owned: GPUBuffer[] = [];
  const pooled: GPUBuffer[] = [];
  const release = () => {
    for (const b of owned.splice(0)) b.destroy();
    for (const b of pooled.splice(0)) gpu.pool.release(b);
  };
  const up = (bytes: Uint8Array, label: string) => {
    const b = gpu.upload(bytes, label);
    pooled.push(b);
    return b;
  };
  const acquire = (bytes: number, label: string) => {
    const b = gpu.pool.acquire(Math.max(4, bytes), label);
    pooled.push(b);
    return b;
  };
  try {
    return await gpu.scoped("uploading an attention call", () => {
      const bufs = {
        q: up(q.bytes, "attention q"),
        k: up(kUp.bytes, "attention k"),
        v: up(vUp.bytes, "attention v"),
        plan: up(new Uint8Array(plan.data.buffer), "attention plan"),
        aux: up(aux.bytes, "attention aux"),
        out: acquire((outFloats + partO) * 4, "attention out"),
        lse: acquire((lseFloats + partL) * 4, "attention lse"),
      };
      const paramsBuf = gpu.uniform(packAttnParams(params), "attention params");
      owned.push(paramsBuf);
      const attendGroup = d.createBindGroup({
        layout: attend.getBindGroupLayout(0),
        entries: [paramsBuf, bufs.q, bufs.k, bufs.v, bufs.plan, bufs.aux, bufs.out, bufs.lse].map((buffer, binding) => ({ binding, resource: { buffer } })),
      });
      let mergeStep: { group: GPUBindGroup; size: [number, number] } | null = null;
      if (merge) {
        const rows = p.B * p.H * plan.partSq;
        const size = dispatchSize(gpu, mergeWorkgroups(rows, p.D));
        const mergeParams = gpu.uniform(packAttnParams({ ...params, nItems: rows, wgX: size[0] }), "merge params");
        owned.push(mergeParams);
        const group = d.createBindGroup({
          layout: merge.getBindGroupLayout(0),
          entries: ([[0, mergeParams], [4, bufs.plan], [6, bufs.out], [7, bufs.lse]] as const).map(([binding, buffer]) => ({ binding, resource: { buffer } })),
        });
        mergeStep = { group, size };
      }
      const encode = (pass: GPUComputePassEncoder) => {
        gpu.dispatch(pass, attend, attendGroup, wgX, wgY);
        if (merge && mergeStep) gpu.dispatch(pass, merge, mergeStep.group, ...mergeStep.size);
      };
      const read = async () => {
        const [o, l] = await Promise.all([gpu.read(bufs.out, outFloats * 4), gpu.read(bufs.lse, lseFloats * 4)]);
        scatter(p, plan, new Float32Array(o), new Float32Array(l));
      };
      return { kernel: kernel.label, nItems: plan.nItems, split: merge !== null, encode, read, release };
    });
  } catch (e) {
    release();
    throw e;
  }
}

/** Runs `p` and writes its out (and lse) tensors. */
export async function runAttentionOnGpu(gpu: GpuDevice, p: AttentionProblem, t: ProblemTensors, split: ProblemSplit): Promise<void> {
  const launch = await prepareAttentionOnGpu(gpu, p, t, split);
  try {
    await gpu.scoped("running attention", async () => {
      const enc = gpu.device.createCommandEncoder({ label: "attention" });
      const pass = enc.beginComputePass();
      launch.encode(pass);
      pass.end();
      gpu.device.queue.submit([enc.finish()]);
      await launch.read();
    });
  } finally {
    launch.release();
  }
}

/** Writes the compact rows back through out's and lse's strides. */
function scatter(p: AttentionProblem, plan: GpuPlanTables, o: Float32Array, lse: Float32Array): void {
  const out = new Float32Array(p.out.memory.buffer);
  const lseT = p.lse ? new Float32Array(p.lse.memory.buffer) : null;
  const { H, D } = p;
  const ob = p.outOp.ptr / 4;
  const lb = p.lseOp.ptr / 4;
  p.seqs.forEach((s, b) => {
    const t0 = plan.data[plan.seqsOff + b * 5 + 4]!;
    for (let i = 0; i < s.sq; i++) {
      for (let h = 0; h < H; h++) {
        const src = ((t0 + i) * H + h) * D;
        const dst = ob + b * p.outOp.sB + h * p.outOp.sH + (s.q0 + i) * p.outOp.sS;
        for (let d = 0; d < D; d++) out[dst + d] = o[src + d]!;
        if (lseT) lseT[lb + b * p.lseOp.sB + h * p.lseOp.sH + (s.q0 + i) * p.lseOp.sS] = lse[(t0 + i) * H + h]!;
      }
    }
  });
}

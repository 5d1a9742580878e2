/**
 * The WebGPU ModelRunner's attention: FlashInfer's plan once per step, run
 * per layer, with everything resident on the GPU. The step's AttentionPlan
 * (src/attention/plan.ts: the split-KV decision, balanced by actual lengths,
 * for GPU_PLAN_SLOTS parallel units) is built on the CPU from the
 * ForwardBatch, turned into the GPU plan tables (attention-plan.ts) and
 * uploaded once; each layer then records the attention kernel
 * (IncreFlashAttention for decode steps, FlashAttention-2 otherwise: the
 * choice of attention-run.ts) and, for split sequences, the FlashDecoding
 * merge, over
 *
 *   q    the layer's q columns of qkv [T, (H + 2·Hkv)·D] (or a normed copy [T, H, D])
 *   k, v the layer's paged cache [numSlots, Hkv, D] in f32 | f16 | bf16 | int8 |
 *        fp8e4m3 | fp8e5m2 (int8: its per-token scales, or its static per-channel
 *        scales and offsets, after the codes: kv-load.ts)
 *   out  att [T, H, D] compact, the split partials after it ([slots, H, partSq, D])
 *   lse  [T, H], partials after it
 *
 * The batch was checked (checkForwardBatch) and the plan validated the
 * lengths and the block table, so the kernels trust them.
 */
import { AttentionPlan } from "../attention/plan.js";
import type { SeqExtent } from "../attention/problem.js";
import type { ForwardBatch } from "../model/forward-batch.js";
import type { Runtime } from "../runtime/runtime.js";
import { GPU_PLAN_SLOTS } from "./attention.js";
import { type GpuPlanTables, buildGpuPlan } from "./attention-plan.js";
import { chooseAttentionKernel } from "./attention-run.js";
import type { GpuDevice } from "./device.js";
import { mergeStatesWgsl, mergeWorkgroups } from "./wgsl/merge-states.js";
import { type GpuCacheDtype, type GpuInt8Mode, cacheCode } from "./wgsl/kv-load.js";
import { type AttnParams, packAttnParams } from "./wgsl/params.js";

export interface AttentionShape {
  H: number;
  Hkv: number;
  D: number;
  kvDtype: GpuCacheDtype;
  /** int8: how the cache scales (default per-token). */
  int8Mode?: GpuInt8Mode;
  /** int8: the word where the scales start in each K and V buffer (kv-load.ts cacheLayout); else 0. */
  kvScaleOff: number;
  blockSize: number;
  /** Softmax scale (the model's: 1/√D, or Gemma's query_pre_attn_scalar^−½). */
  scale: number;
  /** > 0: scores become softcap · tanh(s / softcap); 0: off. */
  softcap: number;
}

/** Where q lives: element offset of token 0, head 0 and the stride between tokens (heads are D apart). */
export interface QuerySource {
  buffer: GPUBuffer;
  offset: number;
  tokenStride: number;
}

/** One step's attention, planned and uploaded; encode() records one layer. */
export class PagedAttentionStep {
  /** Elements the out buffer needs (compact out + partials) and the lse buffer likewise. */
  readonly outFloats: number;
  readonly lseFloats: number;
  readonly #gpu: GpuDevice;
  readonly #shape: AttentionShape;
  readonly #tables: GpuPlanTables;
  readonly #attend: GPUComputePipeline;
  readonly #merge: GPUComputePipeline | null;
  readonly #planBuffer: GPUBuffer;
  readonly #aux: GPUBuffer;
  readonly #seqs: SeqExtent[];
  readonly #split: boolean;
  readonly #maxBlocks: number;

  private constructor(gpu: GpuDevice, shape: AttentionShape, seqs: SeqExtent[], tables: GpuPlanTables, maxBlocks: number, attend: GPUComputePipeline, merge: GPUComputePipeline | null) {
    this.#gpu = gpu;
    this.#maxBlocks = maxBlocks;
    this.#shape = shape;
    this.#seqs = seqs;
    this.#tables = tables;
    this.#attend = attend;
    this.#merge = merge;
    this.#split = tables.slots > 0;
    const { H, D } = shape;
    this.outFloats = tables.T * H * D + tables.slots * H * tables.partSq * D;
    this.lseFloats = tables.T * H + tables.slots * H * tables.partSq;
    this.#planBuffer = gpu.upload(new Uint8Array(tables.data.buffer), "attention plan");
    this.#aux = gpu.pool.acquire(4, "attention aux (unused)");
  }

  /** Plans the step on the CPU (AttentionPlan in `rt`, disposed here) and uploads the tables. */
  static async create(gpu: GpuDevice, rt: Runtime, shape: AttentionShape, batch: ForwardBatch): Promise<PagedAttentionStep> {
    const plan = AttentionPlan.create(rt, {
      actualSeqLengths: batch.seqLens,
      lengthsName: "seqLens",
      numHeads: shape.H,
      numKvHeads: shape.Hkv,
      headDim: shape.D,
      cuSeqlensQ: batch.cuSeqlensQ,
      blockTable: batch.blockTable,
      maxBlocksPerSeq: batch.maxBlocksPerSeq,
      blockSize: shape.blockSize,
      threads: GPU_PLAN_SLOTS,
    });
    let seqs: SeqExtent[];
    let bounds: Int32Array[];
    let table: Int32Array;
    let maxBlocks: number;
    try {
      const cu = plan.cuSeqlensQ!;
      seqs = Array.from(plan.lengths, (sk, b) => ({ q0: cu[b]!, sq: cu[b + 1]! - cu[b]!, k0: plan.keyOffsets[b]!, sk }));
      bounds = [...plan.chunkBounds];
      table = Int32Array.from(plan.paged!.table);
      maxBlocks = plan.paged!.maxBlocksPerSeq;
    } finally {
      plan.dispose();
    }
    const G = shape.H / shape.Hkv;
    const kernel = chooseAttentionKernel(gpu, { seqs, G, D: shape.D });
    const tables = buildGpuPlan(seqs, bounds, shape.Hkv, G, kernel.rows, table, kernel.decode);
    const [attend, merge] = await Promise.all([gpu.pipeline(kernel.code, kernel.label), tables.slots > 0 ? gpu.pipeline(mergeStatesWgsl(), "merge states") : Promise.resolve(null)]);
    return new PagedAttentionStep(gpu, shape, seqs, tables, maxBlocks, attend, merge);
  }

  #groups(n: number): [number, number] {
    const x = Math.max(1, Math.min(n, this.#gpu.limits.maxComputeWorkgroupsPerDimension));
    return [x, Math.ceil(n / x)];
  }

  /** Records one layer: causal attention of q over the layer's cache, `window` [left, right] or none. */
  encode(pass: GPUComputePassEncoder, a: { q: QuerySource; k: GPUBuffer; v: GPUBuffer; out: GPUBuffer; lse: GPUBuffer; window: [number, number] | undefined }): void {
    const { H, Hkv, D, kvDtype, blockSize } = this.#shape;
    const t = this.#tables;
    const [wgX, wgY] = this.#groups(t.nItems);
    const slot = Hkv * D;
    const params: AttnParams = {
      H, Hkv, G: H / Hkv, nItems: t.nItems,
      qOff: a.q.offset, qsB: 0, qsH: D, qsS: a.q.tokenStride,
      kOff: 0, ksB: 0, ksH: D, ksS: slot,
      vOff: 0, vsB: 0, vsH: D, vsS: slot,
      scale: this.#shape.scale, softcap: this.#shape.softcap, causal: 1, winL: a.window?.[0] ?? -1,
      winR: a.window?.[1] ?? -1, flags: 0, seqsOff: t.seqsOff, itemsOff: t.itemsOff,
      tableOff: t.tableOff, maxBlocks: this.#maxBlocks, blockSize, partSq: Math.max(1, t.partSq),
      biasOff: 0, bsB: 0, bsH: 0, bsI: 0,
      bsJ: 0, maskOff: 0, msB: 0, msH: 0,
      msI: 0, msJ: 0, alibiOff: 0, asB: 0,
      partOOff: t.T * H * D, partLOff: t.T * H, wgX, chunksOff: t.chunksOff,
      D, kvDtype: cacheCode(kvDtype, this.#shape.int8Mode), paged: 1, kvScaleOff: this.#shape.kvScaleOff,
    };
    const cache = this.#gpu.bindGroups;
    const group = cache.get(this.#attend, packAttnParams(params), ([a.q.buffer, a.k, a.v, this.#planBuffer, this.#aux, a.out, a.lse] as const).map((b, i) => [i + 1, b] as const), "attention params");
    this.#gpu.dispatch(pass, this.#attend, group, wgX, wgY);
    if (this.#split && this.#merge) {
      const rows = this.#seqs.length * H * t.partSq;
      const size = this.#groups(mergeWorkgroups(rows, D));
      const mg = cache.get(this.#merge, packAttnParams({ ...params, nItems: rows, wgX: size[0] }), [[4, this.#planBuffer], [6, a.out], [7, a.lse]], "merge params");
      this.#gpu.dispatch(pass, this.#merge, mg, ...size);
    }
  }

  /** Frees the step's plan buffers (after the submission that used them completed; the bind groups stay in the device's cache). */
  release(): void {
    this.#gpu.pool.release(this.#planBuffer);
    this.#gpu.pool.release(this.#aux);
  }
}

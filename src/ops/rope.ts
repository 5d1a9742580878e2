/**
 * Rotary position embedding, Hugging Face's rotate-half convention (the one
 * Llama, Mistral and Qwen checkpoints on the Hub are permuted for): within each
 * head, dimension i pairs with i + R/2 (R = rotary dims, the head dim unless
 * `rotaryDim` says fewer; dimensions past R pass through), rotated by
 * θ_i = position · inv_freq[i].
 *
 * inv_freq follows transformers' `ROPE_INIT_FUNCTIONS`: "default"
 * (inv_freq[i] = theta^(−2i/R)), "linear" (÷ factor), "llama3" (Llama 3.1's
 * wavelength-dependent interpolation) and "longrope" (Phi-3/Phi-4: ÷ a
 * per-frequency factor, the long set when the sequences served may pass
 * original_max_position_embeddings, else the short set — llama.cpp's choice
 * by context size; cos and sin both times the attention factor). Angles are f32(position) · f32(inv_freq)
 * rounded to f32, as transformers and vLLM compute them in f32, then cos/sin in
 * f64 → f32.
 *
 *   const rope = new Rope(rt, { headDim: 64, theta: 1e6 });
 *   table = rope.table(batch.positions, table);     // once per step
 *   rope.apply({ q, k, table });                    // every layer, in place
 */
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { checkInt, checkNumber } from "../tensor/check.js";
import { Tensor } from "../tensor/tensor.js";
import { checkTensor, checkTensorDType } from "./check.js";

/** RoPE frequency scaling, as ModelConfig.ropeScaling carries it (parsed from rope_scaling by model/config.ts). */
export type RopeScaling =
  | { type: "default" }
  /** Position interpolation: every frequency divided by `factor`. */
  | { type: "linear"; factor: number }
  /** Llama 3.1: low frequencies divided by `factor`, high ones kept, a smooth ramp between. */
  | {
      type: "llama3";
      factor: number;
      lowFreqFactor: number;
      highFreqFactor: number;
      originalMaxPositionEmbeddings: number;
    }
  /** Phi-3 LongRoPE ("longrope" / "su"): inv_freq[i] ÷ shortFactor[i] or longFactor[i]; cos and sin × attentionFactor. */
  | {
      type: "longrope";
      shortFactor: readonly number[];
      longFactor: readonly number[];
      originalMaxPositionEmbeddings: number;
      attentionFactor: number;
    };

export interface RopeOptions {
  /** Dimensions of one attention head. */
  headDim: number;
  /** The config's rope_theta. Default 10000. */
  theta?: number;
  /** Rotated dimensions per head, even, ≤ headDim. Default headDim. */
  rotaryDim?: number;
  /** ModelConfig.ropeScaling, or none. */
  scaling?: RopeScaling | null;
  /** The longest sequence served: "longrope" takes its long factors iff this exceeds originalMaxPositionEmbeddings. Default 0 (short). */
  maxPositions?: number;
}

/** The factor cos and sin are multiplied by (LongRoPE's attention factor; 1 otherwise). */
export function ropeAttentionFactor(scaling: RopeScaling | null | undefined): number {
  return scaling?.type === "longrope" ? scaling.attentionFactor : 1;
}

function checkScaling(scaling: RopeScaling): RopeScaling {
  if (scaling.type === "default") {
    // No scaling.
  } else if (scaling.type === "linear") {
    checkNumber("scaling.factor", scaling.factor, { minExclusive: 0 });
  } else if (scaling.type === "llama3") {
    checkNumber("scaling.factor", scaling.factor, { minExclusive: 0 });
    checkNumber("scaling.lowFreqFactor", scaling.lowFreqFactor, { minExclusive: 0 });
    checkNumber("scaling.highFreqFactor", scaling.highFreqFactor, { minExclusive: scaling.lowFreqFactor });
    checkNumber("scaling.originalMaxPositionEmbeddings", scaling.originalMaxPositionEmbeddings, { minExclusive: 0 });
  } else if (scaling.type === "longrope") {
    checkNumber("scaling.originalMaxPositionEmbeddings", scaling.originalMaxPositionEmbeddings, { minExclusive: 0 });
    checkNumber("scaling.attentionFactor", scaling.attentionFactor, { minExclusive: 0 });
    for (const key of ["shortFactor", "longFactor"] as const) scaling[key].forEach((f, i) => checkNumber(`scaling.${key}[${i}]`, f, { minExclusive: 0 }));
  } else {
    throw new ArgumentError("scaling.type", `must be "default" | "linear" | "llama3" | "longrope", got ${show((scaling as { type: unknown }).type)}`);
  }
  return scaling;
}

/**
 * inv_freq [R/2] as transformers computes it (here in f64; the kernels use it
 * rounded to f32, as transformers holds it).
 */
export function ropeInvFreq(options: RopeOptions): Float64Array {
  const headDim = checkInt("headDim", options.headDim, { min: 2 });
  const rotaryDim = checkInt("rotaryDim", options.rotaryDim ?? headDim, { min: 2, max: headDim });
  if (rotaryDim % 2 !== 0) throw new ArgumentError("rotaryDim", `must be even, got ${rotaryDim}`);
  const theta = checkNumber("theta", options.theta ?? 10000, { minExclusive: 1 });
  const half = rotaryDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / Math.pow(theta, (2 * i) / rotaryDim);
  const scaling = options.scaling ? checkScaling(options.scaling) : null;
  if (scaling?.type === "linear") {
    for (let i = 0; i < half; i++) inv[i]! /= scaling.factor;
  } else if (scaling?.type === "longrope") {
    // transformers' _compute_longrope_parameters: 1 / (ext_factors · theta^(2i/R)).
    const long = (options.maxPositions ?? 0) > scaling.originalMaxPositionEmbeddings;
    const factors = long ? scaling.longFactor : scaling.shortFactor;
    if (factors.length !== half) throw new ArgumentError(`scaling.${long ? "longFactor" : "shortFactor"}`, `must hold rotaryDim / 2 = ${half} factors, got ${factors.length}`);
    for (let i = 0; i < half; i++) inv[i] = 1 / (factors[i]! * Math.pow(theta, (2 * i) / rotaryDim));
  } else if (scaling?.type === "llama3") {
    // transformers' _compute_llama3_parameters.
    const { factor, lowFreqFactor, highFreqFactor, originalMaxPositionEmbeddings: oldLen } = scaling;
    const lowFreqWavelen = oldLen / lowFreqFactor;
    const highFreqWavelen = oldLen / highFreqFactor;
    for (let i = 0; i < half; i++) {
      const f = inv[i]!;
      const wavelen = (2 * Math.PI) / f;
      if (wavelen > lowFreqWavelen) {
        inv[i] = f / factor; // low frequencies: interpolate fully
      } else if (wavelen >= highFreqWavelen) {
        const smooth = (oldLen / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
        inv[i] = ((1 - smooth) * f) / factor + smooth * f; // medium: blend
      } // high frequencies: unchanged
    }
  }
  return inv;
}

/** Positions and their cos/sin, f32 [tokens, R/2] each, computed once per step and reused by every layer. */
export class RopeTable {
  readonly half: number;
  /** Byte addresses in the runtime memory. */
  readonly positionsPtr: number;
  readonly cosPtr: number;
  readonly sinPtr: number;
  readonly capacity: number;
  readonly #rt: Runtime;
  readonly #block: number;
  #tokens: number;
  #freed = false;

  /** @internal use Rope.table() */
  constructor(rt: Runtime, block: number, capacity: number, half: number, tokens: number) {
    this.#rt = rt;
    this.#block = block;
    this.capacity = capacity;
    this.half = half;
    this.#tokens = tokens;
    this.positionsPtr = block;
    this.cosPtr = block + Math.ceil((capacity * 4) / 64) * 64;
    this.sinPtr = this.cosPtr + Math.ceil((capacity * half * 4) / 64) * 64;
  }

  static bytes(capacity: number, half: number): number {
    return Math.ceil((capacity * 4) / 64) * 64 + 2 * Math.ceil((capacity * half * 4) / 64) * 64;
  }

  /** Tokens (positions) the table holds now. */
  get tokens(): number {
    return this.#tokens;
  }

  /** @internal reuse for another step's tokens (≤ capacity). */
  reset(tokens: number): this {
    this.#tokens = tokens;
    return this;
  }

  get freed(): boolean {
    return this.#freed;
  }

  get cos(): Tensor {
    return new Tensor(this.#rt.memory, this.cosPtr, "f32", [this.tokens, this.half]);
  }

  get sin(): Tensor {
    return new Tensor(this.#rt.memory, this.sinPtr, "f32", [this.tokens, this.half]);
  }

  free(): void {
    if (this.#freed) throw new ArgumentError("table", "was already freed");
    this.#freed = true;
    this.#rt.heap.free(this.#block);
  }
}

export interface ApplyRopeOptions {
  /** f32 [T, H, headDim], rotated in place; tokens may be strided, heads packed (stride headDim), dims contiguous. */
  q: Tensor;
  /** f32 [T, Hkv, headDim], rotated in place, same layout rules; optional. */
  k?: Tensor;
  /** cos/sin for the T tokens' positions, from table(). */
  table: RopeTable;
}

/** Checks a [T, heads, D] view: returns the token stride in elements. */
function checkHeads(name: string, t: Tensor, tokens: number, headDim: number): number {
  checkTensorDType(name, t, ["f32"]);
  if (t.rank !== 3) throw new ArgumentError(`${name}.shape`, `must be [T, heads, ${headDim}], got ${show(t.shape)}`);
  if (t.shape[0] !== tokens) throw new ArgumentError(`${name}.shape[0]`, `must be ${tokens} (the table's tokens), got ${t.shape[0]}`);
  if (t.shape[2] !== headDim) throw new ArgumentError(`${name}.shape[2]`, `must be ${headDim} (headDim), got ${t.shape[2]}`);
  const [sT, sH, sD] = t.strides as [number, number, number];
  if ((headDim > 1 && sD !== 1) || (t.shape[1]! > 1 && sH !== headDim)) {
    throw new ArgumentError(`${name}.strides`, `must be [any, ${headDim}, 1] (heads packed, dims contiguous), got ${show(t.strides)}`);
  }
  if (tokens > 1 && sT < t.shape[1]! * headDim) {
    throw new ArgumentError(`${name}.strides`, `token rows overlap: stride ${sT} < ${t.shape[1]! * headDim}`);
  }
  return sT;
}

export class Rope {
  readonly headDim: number;
  readonly rotaryDim: number;
  readonly theta: number;
  readonly scaling: RopeScaling | null;
  /** inv_freq [rotaryDim / 2] as f32, the values the kernels use. */
  readonly invFreq: Float32Array;
  /** cos and sin are multiplied by this (ropeAttentionFactor). */
  readonly attentionFactor: number;
  readonly #rt: Runtime;
  readonly #invPtr: number;

  constructor(rt: Runtime, options: RopeOptions) {
    const inv = ropeInvFreq(options);
    this.#rt = rt;
    this.headDim = options.headDim;
    this.rotaryDim = options.rotaryDim ?? options.headDim;
    this.theta = options.theta ?? 10000;
    this.scaling = options.scaling ?? null;
    this.attentionFactor = ropeAttentionFactor(this.scaling);
    this.invFreq = Float32Array.from(inv);
    this.#invPtr = rt.heap.alloc(this.invFreq.byteLength, "rope inv_freq");
    new Float32Array(rt.memory.buffer, this.#invPtr, inv.length).set(this.invFreq);
  }

  /**
   * cos/sin of every (position, frequency) for this step's tokens, in the
   * kernels. Pass last step's table as `into` to reuse it: it is refilled and
   * returned when large enough, else freed and replaced.
   */
  table(positions: Int32Array | readonly number[] | Tensor, into?: RopeTable): RopeTable {
    const rt = this.#rt;
    let values: ArrayLike<number>;
    if (positions instanceof Tensor) {
      checkTensor("positions", positions, rt);
      checkTensorDType("positions", positions, ["int32"]);
      if (positions.rank !== 1 || !positions.isContiguous()) throw new ArgumentError("positions", `must be a contiguous rank-1 tensor, got shape ${show(positions.shape)}`);
      values = positions.data();
    } else if (positions instanceof Int32Array || Array.isArray(positions)) {
      values = positions;
    } else {
      throw new ArgumentError("positions", `must be an int32 Tensor, an Int32Array or an array of numbers, got ${show(positions)}`);
    }
    const T = values.length;
    for (let i = 0; i < T; i++) {
      const p = values[i]!;
      if (!Number.isInteger(p) || p < 0 || p > 0x7fffffff) throw new ArgumentError(`positions[${i}]`, `must be an integer in [0, 2^31), got ${show(p)}`);
    }
    const half = this.rotaryDim / 2;
    let table: RopeTable;
    if (into !== undefined) {
      if (!(into instanceof RopeTable) || into.freed) throw new ArgumentError("into", `must be a live RopeTable, got ${show(into)}`);
    }
    if (into && into.half === half && into.capacity >= T) {
      table = into.reset(T);
    } else {
      if (into) into.free();
      const capacity = Math.max(T, 1, into ? into.capacity * 2 : 0);
      table = new RopeTable(rt, rt.heap.alloc(RopeTable.bytes(capacity, half), "rope table"), capacity, half, T);
    }
    if (T === 0) return table;
    new Int32Array(rt.memory.buffer, table.positionsPtr, T).set(values);
    const args = rt.args().ptr(table.positionsPtr).ptr(this.#invPtr).i32(half).ptr(table.cosPtr).ptr(table.sinPtr).end();
    rt.parallelFor("task_rope_table", T, args);
    if (this.attentionFactor !== 1) {
      // LongRoPE: cos and sin × the attention factor ([T, R/2] each, once per step).
      for (const ptr of [table.cosPtr, table.sinPtr]) {
        const v = new Float32Array(rt.memory.buffer, ptr, T * half);
        for (let i = 0; i < v.length; i++) v[i]! *= this.attentionFactor;
      }
    }
    return table;
  }

  /** Rotates q (and k) in place by the positions of `table`. */
  apply(options: ApplyRopeOptions): void {
    const rt = this.#rt;
    const table = options.table;
    if (!(table instanceof RopeTable) || table.freed) throw new ArgumentError("table", `must be a live RopeTable from Rope.table(), got ${show(table)}`);
    if (table.half !== this.rotaryDim / 2) throw new ArgumentError("table", `was made for rotaryDim ${2 * table.half}, this Rope has ${this.rotaryDim}`);
    const T = table.tokens;
    const q = checkTensor("q", options.q, rt);
    const qStride = checkHeads("q", q, T, this.headDim);
    let kStride = 0;
    const k = options.k === undefined ? undefined : checkTensor("k", options.k, rt);
    if (k) kStride = checkHeads("k", k, T, this.headDim);
    if (T === 0) return;
    const args = rt
      .args()
      .ptr(q.ptr)
      .i32(qStride * 4)
      .i32(q.shape[1]!)
      .ptr(k ? k.ptr : 0)
      .i32(kStride * 4)
      .i32(k ? k.shape[1]! : 0)
      .i32(this.headDim)
      .i32(table.half)
      .ptr(table.cosPtr)
      .ptr(table.sinPtr)
      .end();
    rt.parallelFor("task_rope", T, args);
  }

  /** Returns inv_freq's memory to the heap (tables are freed on their own). */
  free(): void {
    this.#rt.heap.free(this.#invPtr);
  }
}

/**
 * GPU time of each kernel in a step, from WebGPU timestamp queries (the
 * `timestamp-query` feature): where a decode step's GPU time goes, kernel by
 * kernel, on the machine it runs on. A GPU session has minutes of device
 * time; this is the one measurement that splits a step's "submit to logits"
 * into its kernels (BENCHMARKS.md "webgpu": 5.6 ms waited against 3.8 ms
 * estimated from the kernel rows, on an H200).
 *
 * WebGPU writes timestamps only at compute-pass boundaries
 * (GPUComputePassTimestampWrites), so a profiled step records every dispatch
 * in a pass of its own: ProfiledPass stands in for the step's pass, keeps the
 * pipeline and bind group set on it, and at each dispatchWorkgroups opens a
 * real pass with two timestamp writes (begin, end), sets both, dispatches
 * and ends it. Every dispatch of src/gpu goes through GpuDevice.dispatch
 * (setPipeline, setBindGroup(0), dispatchWorkgroups), which is all a
 * ProfiledPass implements.
 *
 *   const prof = new GpuStepProfiler(gpu);          // throws without timestamp-query
 *   prof.begin();                                   // each step
 *   const pass = prof.pass(encoder);                // instead of encoder.beginComputePass() (a section name optional)
 *   … record the step into pass …; pass.end();
 *   prof.resolve(encoder);                          // before encoder.finish()
 *   submit; const kernels = await prof.read();      // [{ kernel, dispatches, ms }], most time first
 *
 * What it measures: GPU time between each dispatch's pass begin and end, by
 * pipeline label. A pass per dispatch adds a barrier between dispatches that
 * an unprofiled step may overlap, so the sum can exceed the unprofiled step's
 * GPU time; the shares are what it is for. Timestamps may be quantized by the
 * implementation (Chrome rounds to 100 µs unless told not to; Dawn's Node
 * binding does not). A pass whose end reads before its begin (a reset
 * counter) counts 0 ms. Dispatches past `capacity` run untimed and are
 * counted in `untimed`.
 */
import { ArgumentError, show } from "../errors.js";
import { BufferUsage, MapMode } from "./constants.js";
import { GpuError, type GpuDevice } from "./device.js";

/** One kernel's share of a profiled step. */
export interface KernelTime {
  /** The pipeline's label (GpuDevice.pipeline's `label`: "gemv q8", "paged attention …"). */
  kernel: string;
  dispatches: number;
  /** GPU milliseconds, summed over its dispatches. */
  ms: number;
}

/** The most dispatches one profiled step times (a query set holds at most 4096 queries, two a dispatch). */
export const PROFILE_CAPACITY = 2048;

export class GpuStepProfiler {
  readonly capacity: number;
  readonly #queries: GPUQuerySet;
  readonly #resolved: GPUBuffer;
  readonly #staging: GPUBuffer;
  #labels: string[] = [];
  #untimed = 0;
  #state: "idle" | "recording" | "resolved" = "idle";

  constructor(gpu: GpuDevice, capacity = PROFILE_CAPACITY) {
    if (!gpu.features.has("timestamp-query")) {
      throw new ArgumentError("profile", `needs the adapter's timestamp-query feature, which ${show(gpu.adapter.device || gpu.adapter.vendor)} does not offer`);
    }
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > PROFILE_CAPACITY) throw new ArgumentError("capacity", `must be an integer in [1, ${PROFILE_CAPACITY}], got ${show(capacity)}`);
    this.capacity = capacity;
    const d = gpu.device;
    this.#queries = d.createQuerySet({ type: "timestamp", count: 2 * capacity, label: "step profile" });
    this.#resolved = d.createBuffer({ size: 16 * capacity, usage: BufferUsage.QUERY_RESOLVE | BufferUsage.COPY_SRC, label: "step profile timestamps" });
    this.#staging = d.createBuffer({ size: 16 * capacity, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: "step profile readback" });
  }

  /** Dispatches of the last step that ran untimed (past `capacity`). */
  get untimed(): number {
    return this.#untimed;
  }

  /** Starts a step: forgets whatever an earlier step recorded (one that failed before read()). */
  begin(): void {
    this.#labels = [];
    this.#untimed = 0;
    this.#state = "recording";
  }

  /**
   * A stand-in for `encoder.beginComputePass()` that times each dispatch; any
   * number per step. `section` prefixes its dispatches' kernel names (the
   * model runner's "lm head: gemv q8" apart from the layers' "gemv q8").
   */
  pass(encoder: GPUCommandEncoder, section = ""): GPUComputePassEncoder {
    if (this.#state !== "recording") throw new GpuError("GpuStepProfiler.pass: begin() the step first");
    return new ProfiledPass(encoder, this, section ? `${section}: ` : "") as unknown as GPUComputePassEncoder;
  }

  /** The timestamp writes for the next dispatch labelled `label`, or undefined past capacity. */
  claim(label: string): GPUComputePassTimestampWrites | undefined {
    const i = this.#labels.length;
    if (i >= this.capacity) {
      this.#untimed++;
      return undefined;
    }
    this.#labels.push(label);
    return { querySet: this.#queries, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
  }

  /** Records the copy of the step's timestamps for read(); call once, after the step's passes and before `encoder.finish()`. */
  resolve(encoder: GPUCommandEncoder): void {
    if (this.#state !== "recording") throw new GpuError("GpuStepProfiler.resolve: begin() the step first");
    const n = 2 * this.#labels.length;
    if (n > 0) {
      encoder.resolveQuerySet(this.#queries, 0, n, this.#resolved, 0);
      encoder.copyBufferToBuffer(this.#resolved, 0, this.#staging, 0, 8 * n);
    }
    this.#state = "resolved";
  }

  /** The step's kernels, most GPU time first; after the submission that holds resolve()'s commands. */
  async read(): Promise<KernelTime[]> {
    if (this.#state !== "resolved") throw new GpuError("GpuStepProfiler.read: resolve() the step first");
    const labels = this.#labels;
    this.#state = "idle";
    const by = new Map<string, KernelTime>();
    if (labels.length > 0) {
      await this.#staging.mapAsync(MapMode.READ, 0, 16 * labels.length);
      try {
        const ns = new BigUint64Array(this.#staging.getMappedRange(0, 16 * labels.length));
        labels.forEach((kernel, i) => {
          const dt = ns[2 * i + 1]! > ns[2 * i]! ? Number(ns[2 * i + 1]! - ns[2 * i]!) / 1e6 : 0;
          const k = by.get(kernel) ?? { kernel, dispatches: 0, ms: 0 };
          k.dispatches++;
          k.ms += dt;
          by.set(kernel, k);
        });
      } finally {
        this.#staging.unmap();
      }
    }
    return [...by.values()].sort((a, b) => b.ms - a.ms || a.kernel.localeCompare(b.kernel));
  }

  destroy(): void {
    this.#queries.destroy();
    this.#resolved.destroy();
    this.#staging.destroy();
  }
}

/**
 * The part of GPUComputePassEncoder that GpuDevice.dispatch uses, with every
 * dispatch in a real pass of its own carrying timestamp writes.
 */
class ProfiledPass {
  readonly #encoder: GPUCommandEncoder;
  readonly #profiler: GpuStepProfiler;
  readonly #prefix: string;
  #pipeline: GPUComputePipeline | null = null;
  #group: GPUBindGroup | null = null;
  #ended = false;

  constructor(encoder: GPUCommandEncoder, profiler: GpuStepProfiler, prefix: string) {
    this.#encoder = encoder;
    this.#profiler = profiler;
    this.#prefix = prefix;
  }

  setPipeline(pipeline: GPUComputePipeline): void {
    this.#pipeline = pipeline;
  }

  setBindGroup(index: number, group: GPUBindGroup): void {
    if (index !== 0) throw new GpuError(`ProfiledPass: bind group ${index} (kernels here bind group 0 only)`);
    this.#group = group;
  }

  dispatchWorkgroups(x: number, y = 1, z = 1): void {
    if (this.#ended) throw new GpuError("ProfiledPass: dispatch after end()");
    if (this.#pipeline === null || this.#group === null) throw new GpuError("ProfiledPass: dispatch before setPipeline and setBindGroup");
    const timestampWrites = this.#profiler.claim(this.#prefix + this.#pipeline.label);
    const pass = this.#encoder.beginComputePass(timestampWrites ? { timestampWrites } : {});
    pass.setPipeline(this.#pipeline);
    pass.setBindGroup(0, this.#group);
    pass.dispatchWorkgroups(x, y, z);
    pass.end();
  }

  end(): void {
    this.#ended = true;
  }
}

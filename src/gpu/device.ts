/**
 * GpuDevice: one WebGPU device and what every kernel launch needs from it —
 * limits read from the adapter, the optional features it has (shader-f16,
 * subgroups: each kernel has a path without them; timestamp-query: the step
 * profiler, step-profiler.ts, needs it), a pipeline cache keyed by
 * WGSL source, a buffer pool, a bind-group cache, error scopes turned into GpuError, and device
 * loss surfaced as a GpuError on every later call. Beside src/runtime (the
 * wasm side); the operators in ./attention.ts dispatch through it.
 *
 *   const gpu = await GpuDevice.open({ device: "webgpu" });
 *   console.log(gpu.describe());
 *   …
 *   gpu.destroy();
 */
/// <reference types="@webgpu/types" />
import { type AdapterDescription, type DeviceKind, describeAdapter, formatAdapter, requestAdapter } from "./adapter.js";
import { BindGroupCache } from "./bind-group-cache.js";
import { GpuBufferPool } from "./buffer-pool.js";
import { BufferUsage, MapMode } from "./constants.js";

/** A WebGPU validation, out-of-memory or internal error, or a lost device. */
export class GpuError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GpuError";
  }
}

export interface GpuDeviceOptions {
  /** "webgpu": any adapter (software included); "auto": a real GPU only, else open() answers null. Default "webgpu". */
  device?: Exclude<DeviceKind, "cpu">;
  /** Turn features off although the adapter has them (tests run the fallback paths). */
  disable?: readonly GpuFeature[];
}

/** Optional features the kernels (and the step profiler) use where the adapter has them. */
export type GpuFeature = "shader-f16" | "subgroups" | "timestamp-query";
const OPTIONAL_FEATURES: readonly GpuFeature[] = ["shader-f16", "subgroups", "timestamp-query"];

/** The limits the kernels plan with, as the adapter reports them (requested at their maximum). */
export interface GpuLimits {
  maxStorageBufferBindingSize: number;
  maxBufferSize: number;
  maxComputeWorkgroupStorageSize: number;
  maxComputeInvocationsPerWorkgroup: number;
  maxComputeWorkgroupSizeX: number;
  maxComputeWorkgroupsPerDimension: number;
  maxStorageBuffersPerShaderStage: number;
}

export class GpuDevice {
  readonly device: GPUDevice;
  readonly adapter: AdapterDescription;
  readonly limits: Readonly<GpuLimits>;
  readonly features: ReadonlySet<GpuFeature>;
  readonly pool: GpuBufferPool;
  /** Dispatch bind groups (uniform params + buffers) reused across steps: bind-group-cache.ts. */
  readonly bindGroups: BindGroupCache;
  /** WGSL source → its pipeline, in flight or compiled: concurrent requests for one source share one compilation. */
  readonly #pipelines = new Map<string, Promise<GPUComputePipeline>>();
  /** The pass and pipeline of the last dispatch() (setPipeline is skipped while they repeat). */
  #lastPass: GPUComputePassEncoder | null = null;
  #lastPipeline: GPUComputePipeline | null = null;
  #dispatches = 0;
  #lost: GpuError | null = null;
  #destroyed = false;

  private constructor(device: GPUDevice, adapter: AdapterDescription, limits: GpuLimits, features: Set<GpuFeature>) {
    this.device = device;
    this.adapter = adapter;
    this.limits = Object.freeze(limits);
    this.features = features;
    this.pool = new GpuBufferPool(device);
    this.bindGroups = new BindGroupCache(device);
    void device.lost.then((info) => {
      if (!this.#destroyed) this.#lost = new GpuError(`the WebGPU device was lost (${info.reason}): ${info.message}`);
    });
    device.addEventListener("uncapturederror", (ev) => {
      const error = (ev as GPUUncapturedErrorEvent).error;
      this.#lost ??= new GpuError(`uncaptured WebGPU error: ${error.message}`);
    });
  }

  /**
   * Opens a device on the adapter `options.device` picks. Returns null for
   * "auto" without a real GPU; throws WebGpuUnavailableError (saying what to
   * install) for "webgpu" without any adapter.
   */
  static async open(options: GpuDeviceOptions = {}): Promise<GpuDevice | null> {
    const adapter = await requestAdapter(options.device ?? "webgpu");
    if (adapter === null) return null;
    const features = new Set<GpuFeature>(OPTIONAL_FEATURES.filter((f) => adapter.features.has(f) && !options.disable?.includes(f)));
    const a = adapter.limits;
    const limits: GpuLimits = {
      maxStorageBufferBindingSize: a.maxStorageBufferBindingSize,
      maxBufferSize: a.maxBufferSize,
      maxComputeWorkgroupStorageSize: a.maxComputeWorkgroupStorageSize,
      maxComputeInvocationsPerWorkgroup: a.maxComputeInvocationsPerWorkgroup,
      maxComputeWorkgroupSizeX: a.maxComputeWorkgroupSizeX,
      maxComputeWorkgroupsPerDimension: a.maxComputeWorkgroupsPerDimension,
      maxStorageBuffersPerShaderStage: a.maxStorageBuffersPerShaderStage,
    };
    const device = await adapter.requestDevice({ requiredFeatures: [...features], requiredLimits: { ...limits } });
    return new GpuDevice(device, describeAdapter(adapter), limits, features);
  }

  /** The startup line: vendor, architecture, driver, features. */
  describe(): string {
    const f = this.features.size ? [...this.features].join(", ") : "no optional features";
    return `${formatAdapter(this.adapter)}; ${f}`;
  }

  /** Throws the loss (or an uncaptured error) if the device can no longer be trusted. */
  checkAlive(): void {
    if (this.#destroyed) throw new GpuError("the GpuDevice was destroyed");
    if (this.#lost) throw this.#lost;
  }

  /**
   * The compute pipeline for a WGSL source (entry point `main`), compiled once
   * and cached. Requests that arrive while the source compiles wait for that
   * compilation (two requests of one server, or a model's layers preparing
   * their kernels together, would otherwise compile it twice); a failed
   * compilation is dropped from the cache, so a later request tries again.
   */
  pipeline(code: string, label: string): Promise<GPUComputePipeline> {
    try {
      this.checkAlive();
    } catch (e) {
      return Promise.reject(e);
    }
    const hit = this.#pipelines.get(code);
    if (hit) return hit;
    const compiled = this.scoped(`compiling ${label}`, () => {
      // Both calls before the first await, inside the scopes (see scoped()).
      const module = this.device.createShaderModule({ code, label });
      const info = module.getCompilationInfo();
      const pipeline = this.device.createComputePipelineAsync({ layout: "auto", compute: { module, entryPoint: "main" }, label });
      return (async () => {
        const errors = (await info).messages.filter((m) => m.type === "error");
        if (errors.length) {
          pipeline.catch(() => {}); // its rejection says less than the compiler's messages
          throw new GpuError(`WGSL ${label} does not compile: ${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join("; ")}`);
        }
        return pipeline;
      })();
    });
    this.#pipelines.set(code, compiled);
    compiled.catch(() => {
      if (this.#pipelines.get(code) === compiled) this.#pipelines.delete(code);
    });
    return compiled;
  }

  /**
   * Records one dispatch of `pipeline` with bind group 0 `group` into `pass`, and
   * setPipeline only when the pass's last dispatch (through here) used another
   * pipeline: a decode layer's consecutive projections share theirs, and each call
   * into Dawn's Node binding costs host time. Every kernel dispatch of src/gpu goes
   * through here, so the tracked pipeline is the pass's.
   */
  dispatch(pass: GPUComputePassEncoder, pipeline: GPUComputePipeline, group: GPUBindGroup, x: number, y = 1): void {
    if (pass !== this.#lastPass || pipeline !== this.#lastPipeline) {
      pass.setPipeline(pipeline);
      this.#lastPass = pass;
      this.#lastPipeline = pipeline;
    }
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(x, y);
    this.#dispatches++;
  }

  /** Dispatches recorded through dispatch() since creation (a runner reads the difference over a step: GpuModelRunner.lastStep.dispatches). */
  get dispatches(): number {
    return this.#dispatches;
  }

  /** Pipelines compiled or compiling (one per WGSL source). */
  get pipelineCount(): number {
    return this.#pipelines.size;
  }

  /**
   * Runs `fn` inside validation, out-of-memory and internal error scopes;
   * the first error any of them caught becomes a GpuError naming `what`.
   *
   * The scopes cover the calls `fn` makes before its first await: they are
   * pushed, `fn` is called, and they are popped at once, before any other
   * code can push its own. WebGPU's error scopes are one stack per device, so
   * scopes held open across an await would interleave with those of another
   * scoped() call running meanwhile (two requests compiling kernels, a step
   * and a readback) and one call's error would be reported under the other's
   * name. A scope still receives the errors of the work its calls queued,
   * whenever the GPU runs it (popErrorScope resolves after them). GPU calls
   * after fn's first await are outside the scopes: every user here makes its
   * calls up front and only awaits their results (mapAsync,
   * onSubmittedWorkDone, createComputePipelineAsync), which reject by
   * themselves.
   */
  async scoped<T>(what: string, fn: () => T | Promise<T>): Promise<T> {
    this.checkAlive();
    const d = this.device;
    d.pushErrorScope("internal");
    d.pushErrorScope("out-of-memory");
    d.pushErrorScope("validation");
    let pending: T | Promise<T> | undefined;
    let thrown: unknown;
    try {
      pending = fn();
    } catch (e) {
      thrown = e;
    }
    const pops = [d.popErrorScope(), d.popErrorScope(), d.popErrorScope()];
    let result: T | undefined;
    if (thrown === undefined) {
      try {
        result = await pending;
      } catch (e) {
        thrown = e;
      }
    }
    let scopes: (GPUError | null)[];
    try {
      scopes = await Promise.all(pops);
    } catch (e) {
      thrown ??= e;
      scopes = [null, null, null];
    }
    if (thrown !== undefined) await this.#settleLoss();
    const [validation, oom, internal] = scopes;
    const error = validation ?? oom ?? internal;
    if (error) {
      const kind = error === validation ? "validation" : error === oom ? "out-of-memory" : "internal";
      throw new GpuError(`WebGPU ${kind} error while ${what}: ${error.message}`);
    }
    if (thrown !== undefined) {
      // A loss during fn (a mapAsync or a submit that failed with it) reads as the loss, not as its symptom.
      if (this.#lost) throw this.#lost;
      throw thrown;
    }
    this.checkAlive();
    return result as T;
  }

  /** Gives a loss that is under way a moment to be reported (device.lost resolves after the failed call). */
  async #settleLoss(): Promise<void> {
    if (this.#lost || this.#destroyed) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.device.lost.then(() => undefined), new Promise<void>((r) => (timer = setTimeout(r, 100)))]);
    clearTimeout(timer);
    await new Promise<void>((r) => setImmediate(r));
  }

  /** A uniform buffer holding `data` (created per call: uniforms are small). */
  uniform(data: ArrayBuffer, label: string): GPUBuffer {
    const size = Math.max(16, Math.ceil(data.byteLength / 16) * 16);
    const b = this.device.createBuffer({ size, usage: BufferUsage.UNIFORM | BufferUsage.COPY_DST, label });
    this.device.queue.writeBuffer(b, 0, data);
    return b;
  }

  /** A pooled storage buffer holding a copy of `bytes` (padded to 4 bytes). */
  upload(bytes: Uint8Array, label: string): GPUBuffer {
    const padded = Math.max(4, Math.ceil(bytes.byteLength / 4) * 4);
    const buffer = this.pool.acquire(padded, label);
    const copy = new Uint8Array(padded);
    copy.set(bytes);
    this.device.queue.writeBuffer(buffer, 0, copy);
    return buffer;
  }

  /** Reads `bytes` bytes from the start of `buffer` back to the CPU. */
  async read(buffer: GPUBuffer, bytes: number): Promise<ArrayBuffer> {
    const size = Math.max(4, Math.ceil(bytes / 4) * 4);
    const staging = this.device.createBuffer({ size, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: "readback" });
    try {
      const enc = this.device.createCommandEncoder();
      enc.copyBufferToBuffer(buffer, 0, staging, 0, size);
      this.device.queue.submit([enc.finish()]);
      await staging.mapAsync(MapMode.READ);
      return staging.getMappedRange().slice(0, bytes);
    } finally {
      staging.destroy();
    }
  }

  /** Frees everything; later calls throw. Idempotent. */
  destroy(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.pool.clear();
    this.bindGroups.clear();
    this.#pipelines.clear();
    this.device.destroy();
  }
}

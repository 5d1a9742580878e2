/**
 * Bind groups (a dispatch's uniform parameters at binding 0 plus its storage
 * buffers) kept across steps, keyed by pipeline, buffers and the parameters'
 * bytes. A decode step records some 10 dispatches a layer with the same
 * shapes and buffers as the step before; creating a uniform buffer and a bind
 * group for each costs tens of microseconds of host time through Dawn's Node
 * binding (tools/gpu-device/overheads.mjs measures it), which on a real GPU
 * was most of the step (BENCHMARKS.md, webgpu). A hit costs a string key.
 *
 * Lifetime: an entry's uniform buffer is written once, at creation, before the
 * submission that first uses it. endStep() (called once the step's
 * submission has completed: GpuDecoderOps.recycle) evicts, when more than
 * CAPACITY entries are held, those not used since the previous endStep, so
 * nothing the step just recorded is destroyed. Buffers are named by ids
 * handed out once per GPUBuffer object: a destroyed buffer's entries never
 * hit again, they only wait for eviction.
 */
import { BufferUsage } from "./constants.js";

/** Entries kept before endStep() evicts the stale ones. */
const CAPACITY = 4096;

interface Entry {
  group: GPUBindGroup;
  uniform: GPUBuffer;
  lastUse: number;
}

export class BindGroupCache {
  readonly #device: GPUDevice;
  readonly #entries = new Map<string, Entry>();
  readonly #ids = new WeakMap<GPUBuffer | GPUComputePipeline, number>();
  #nextId = 1;
  #generation = 0;
  #created = 0;

  constructor(device: GPUDevice) {
    this.#device = device;
  }

  #id(o: GPUBuffer | GPUComputePipeline): number {
    let id = this.#ids.get(o);
    if (id === undefined) this.#ids.set(o, (id = this.#nextId++));
    return id;
  }

  /** The bind group of `pipeline` with `params` (padded to 16 bytes) as the uniform at binding 0 and each [binding, buffer] of `buffers`. */
  get(pipeline: GPUComputePipeline, params: ArrayBuffer, buffers: readonly (readonly [number, GPUBuffer])[], label: string): GPUBindGroup {
    const words = new Uint32Array(params, 0, params.byteLength >>> 2);
    let key = `${this.#id(pipeline)}|`;
    for (const [binding, buffer] of buffers) key += `${binding}:${this.#id(buffer)},`;
    key += `|${words.join(",")}`;
    const hit = this.#entries.get(key);
    if (hit) {
      hit.lastUse = this.#generation;
      return hit.group;
    }
    const uniform = this.#device.createBuffer({ size: Math.max(16, Math.ceil(params.byteLength / 16) * 16), usage: BufferUsage.UNIFORM | BufferUsage.COPY_DST, label });
    this.#device.queue.writeBuffer(uniform, 0, params);
    const group = this.#device.createBindGroup({
      label,
      layout: pipeline.getBindGroupLayout(0),
      entries: [{ binding: 0, resource: { buffer: uniform } }, ...buffers.map(([binding, buffer]) => ({ binding, resource: { buffer } }))],
    });
    this.#entries.set(key, { group, uniform, lastUse: this.#generation });
    this.#created++;
    return group;
  }

  /** Marks the end of a step whose submissions have completed; evicts stale entries once over capacity. */
  endStep(): void {
    if (this.#entries.size > CAPACITY) {
      for (const [key, e] of this.#entries) {
        if (e.lastUse < this.#generation) {
          e.uniform.destroy();
          this.#entries.delete(key);
        }
      }
    }
    this.#generation++;
  }

  /** Entries held and bind groups created so far (a steady decode creates only its attention's). */
  get stats(): { held: number; created: number } {
    return { held: this.#entries.size, created: this.#created };
  }

  clear(): void {
    for (const e of this.#entries.values()) e.uniform.destroy();
    this.#entries.clear();
  }
}

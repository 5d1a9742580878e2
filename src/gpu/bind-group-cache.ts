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
 *
 * The key: the pipeline's id, then each binding and buffer id, then the
 * parameter words, as one Uint32Array; looked up by its 32-bit FNV-1a hash
 * and compared word for word (no string is built per dispatch).
 */
import { BufferUsage } from "./constants.js";

/** Entries kept before endStep() evicts the stale ones. */
const CAPACITY = 4096;

interface Entry {
  key: Uint32Array;
  group: GPUBindGroup;
  uniform: GPUBuffer;
  lastUse: number;
}

function fnv1a(words: Uint32Array, n: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < n; i++) h = Math.imul(h ^ words[i]!, 0x01000193);
  return h >>> 0;
}

function sameKey(a: Uint32Array, b: Uint32Array, n: number): boolean {
  if (a.length !== n) return false;
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}

export class BindGroupCache {
  readonly #device: GPUDevice;
  /** Entries by key hash (a collision keeps both, compared in full). */
  readonly #entries = new Map<number, Entry[]>();
  #held = 0;
  /** Scratch for the key under construction (grown as needed). */
  #scratch = new Uint32Array(128);
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
    const n = 1 + 2 * buffers.length + words.length;
    if (this.#scratch.length < n) this.#scratch = new Uint32Array(2 * n);
    const key = this.#scratch;
    key[0] = this.#id(pipeline);
    let k = 1;
    for (const [binding, buffer] of buffers) {
      key[k++] = binding;
      key[k++] = this.#id(buffer);
    }
    key.set(words, k);
    const hash = fnv1a(key, n);
    const bucket = this.#entries.get(hash);
    if (bucket) {
      for (const e of bucket) {
        if (sameKey(e.key, key, n)) {
          e.lastUse = this.#generation;
          return e.group;
        }
      }
    }
    const uniform = this.#device.createBuffer({ size: Math.max(16, Math.ceil(params.byteLength / 16) * 16), usage: BufferUsage.UNIFORM | BufferUsage.COPY_DST, label });
    this.#device.queue.writeBuffer(uniform, 0, params);
    const group = this.#device.createBindGroup({
      label,
      layout: pipeline.getBindGroupLayout(0),
      entries: [{ binding: 0, resource: { buffer: uniform } }, ...buffers.map(([binding, buffer]) => ({ binding, resource: { buffer } }))],
    });
    const entry: Entry = { key: key.slice(0, n), group, uniform, lastUse: this.#generation };
    if (bucket) bucket.push(entry);
    else this.#entries.set(hash, [entry]);
    this.#held++;
    this.#created++;
    return group;
  }

  /** Marks the end of a step whose submissions have completed; evicts stale entries once over capacity. */
  endStep(): void {
    if (this.#held > CAPACITY) {
      for (const [hash, bucket] of this.#entries) {
        const kept = bucket.filter((e) => e.lastUse >= this.#generation);
        for (const e of bucket) if (e.lastUse < this.#generation) e.uniform.destroy();
        this.#held -= bucket.length - kept.length;
        if (kept.length) this.#entries.set(hash, kept);
        else this.#entries.delete(hash);
      }
    }
    this.#generation++;
  }

  /** Entries held and bind groups created so far (a steady decode creates only its attention's). */
  get stats(): { held: number; created: number } {
    return { held: this.#held, created: this.#created };
  }

  clear(): void {
    for (const bucket of this.#entries.values()) for (const e of bucket) e.uniform.destroy();
    this.#entries.clear();
    this.#held = 0;
  }
}

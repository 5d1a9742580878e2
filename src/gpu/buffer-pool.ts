/**
 * Storage buffers reused across calls, by size class (powers of two from
 * 256 bytes), as a caching allocator does (PyTorch's CUDA caching allocator,
 * much simplified): acquire() returns a free buffer of the class or creates
 * one; release() puts it back. Buffers are STORAGE | COPY_DST | COPY_SRC.
 */
import { BufferUsage } from "./constants.js";

export class GpuBufferPool {
  readonly #device: GPUDevice;
  readonly #free = new Map<number, GPUBuffer[]>();
  readonly #sizeOf = new WeakMap<GPUBuffer, number>();
  #created = 0;
  #bytes = 0;

  constructor(device: GPUDevice) {
    this.#device = device;
  }

  /** A storage buffer of at least `bytes` bytes (contents undefined: a reused buffer keeps what it held). */
  acquire(bytes: number, label: string): GPUBuffer {
    const size = sizeClass(bytes);
    const list = this.#free.get(size);
    const reused = list?.pop();
    if (reused) return reused;
    const buffer = this.#device.createBuffer({ size, usage: BufferUsage.STORAGE | BufferUsage.COPY_DST | BufferUsage.COPY_SRC, label });
    this.#sizeOf.set(buffer, size);
    this.#created++;
    this.#bytes += size;
    return buffer;
  }

  release(buffer: GPUBuffer): void {
    const size = this.#sizeOf.get(buffer);
    if (size === undefined) throw new Error(`buffer ${buffer.label} was not made by this pool`);
    let list = this.#free.get(size);
    if (!list) this.#free.set(size, (list = []));
    list.push(buffer);
  }

  /** Buffers created so far and their total bytes (reuse keeps these flat). */
  get stats(): { created: number; bytes: number } {
    return { created: this.#created, bytes: this.#bytes };
  }

  /** Destroys the free buffers (the device's destroy() takes the rest). */
  clear(): void {
    for (const list of this.#free.values()) for (const b of list) b.destroy();
    this.#free.clear();
  }
}

/** The pooled size for a request: the next power of two ≥ max(bytes, 256). */
export function sizeClass(bytes: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(256, bytes)));
}

/**
 * Allocation over the one shared WebAssembly memory.
 *
 * `Allocator` holds long-lived blocks (weights, the KV pool, workspaces): a
 * first-fit free list sorted by address with coalescing, a bump pointer above
 * the highest block, and on-demand growth of the memory up to the wasm32
 * ceiling of 4 GiB. `StepArena` is the per-step scratch: bump allocation in
 * chunks taken from the Allocator, reset in O(1) at the start of each step.
 * Every address handed out is 64-byte aligned (a cache line, and v128-safe).
 */
import { ArgumentError, OutOfMemoryError, show } from "../errors.js";
import { MAX_MEMORY_BYTES, WASM_PAGE } from "./module.js";

export const ALIGN = 64;

interface Block {
  ptr: number;
  size: number;
}

interface Live {
  size: number;
  label: string;
}

export function formatBytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(2)} MiB`;
  if (n >= 2 ** 10) return `${(n / 2 ** 10).toFixed(1)} KiB`;
  return `${n} B`;
}

const alignUp = (n: number, a: number): number => Math.ceil(n / a) * a;

export class Allocator {
  readonly memory: WebAssembly.Memory;
  /** First address the allocator may use (above the module's static data). */
  readonly base: number;
  #top: number;
  #free: Block[] = [];
  #live = new Map<number, Live>();
  #inUse = 0;

  constructor(memory: WebAssembly.Memory, base: number) {
    this.memory = memory;
    this.base = alignUp(base, ALIGN);
    this.#top = this.base;
  }

  /** Bytes held by live allocations (rounded up to 64). */
  get inUse(): number {
    return this.#inUse;
  }

  /** Bytes of the memory as it stands now. */
  get capacity(): number {
    return this.memory.buffer.byteLength;
  }

  get liveCount(): number {
    return this.#live.size;
  }

  /** Size of the live block at `ptr` (as allocated, rounded up to 64), or undefined. */
  sizeOf(ptr: number): number | undefined {
    return this.#live.get(ptr)?.size;
  }

  /**
   * Allocates `bytes` aligned to `align` (a power of two ≥ 64). `label` names the
   * allocation in out-of-memory errors. Contents are not zeroed.
   */
  alloc(bytes: number, label = "allocation", align = ALIGN): number {
    if (!Number.isInteger(bytes) || bytes < 0) throw new ArgumentError("bytes", `must be a non-negative integer, got ${show(bytes)}`);
    if (!Number.isInteger(align) || align < ALIGN || (align & (align - 1)) !== 0) {
      throw new ArgumentError("align", `must be a power of two ≥ ${ALIGN}, got ${show(align)}`);
    }
    const size = Math.max(ALIGN, alignUp(bytes, ALIGN));
    const ptr = this.#takeFree(size, align) ?? this.#bump(size, align, label, bytes);
    this.#live.set(ptr, { size, label });
    this.#inUse += size;
    return ptr;
  }

  /** Returns a block to the free list; `ptr` must be a live allocation of this allocator. */
  free(ptr: number): void {
    const live = this.#live.get(ptr);
    if (!live) throw new ArgumentError("ptr", `is not a live allocation of this allocator, got ${show(ptr)}`);
    this.#live.delete(ptr);
    this.#inUse -= live.size;
    this.#insertFree({ ptr, size: live.size });
  }

  /** Live allocations grouped by label, largest first (for diagnostics). */
  usageByLabel(): { label: string; bytes: number; count: number }[] {
    const m = new Map<string, { label: string; bytes: number; count: number }>();
    for (const { size, label } of this.#live.values()) {
      const e = m.get(label) ?? { label, bytes: 0, count: 0 };
      e.bytes += size;
      e.count++;
      m.set(label, e);
    }
    return [...m.values()].sort((a, b) => b.bytes - a.bytes);
  }

  #takeFree(size: number, align: number): number | undefined {
    for (let i = 0; i < this.#free.length; i++) {
      const b = this.#free[i]!;
      const start = alignUp(b.ptr, align);
      const pad = start - b.ptr;
      if (b.size < pad + size) continue;
      const rest = b.size - pad - size;
      const replacement: Block[] = [];
      if (pad > 0) replacement.push({ ptr: b.ptr, size: pad });
      if (rest > 0) replacement.push({ ptr: start + size, size: rest });
      this.#free.splice(i, 1, ...replacement);
      return start;
    }
    return undefined;
  }

  #bump(size: number, align: number, label: string, asked: number): number {
    const start = alignUp(this.#top, align);
    const end = start + size;
    if (end > MAX_MEMORY_BYTES) {
      const freeBytes = this.#free.reduce((s, b) => s + b.size, 0);
      const top = this.usageByLabel()
        .slice(0, 4)
        .map((u) => `${u.label} ${formatBytes(u.bytes)}`)
        .join(", ");
      throw new OutOfMemoryError(
        `cannot allocate ${formatBytes(asked)} for ${label}: ${formatBytes(this.#inUse)} already in use` +
          (top ? ` (${top})` : "") +
          (freeBytes ? `, ${formatBytes(freeBytes)} free but fragmented` : "") +
          `; one wasm32 memory is capped at 4 GiB`,
      );
    }
    if (start > this.#top) this.#insertFree({ ptr: this.#top, size: start - this.#top });
    this.#ensureCapacity(end);
    this.#top = end;
    return start;
  }

  #ensureCapacity(end: number): void {
    const have = this.memory.buffer.byteLength;
    if (end <= have) return;
    // Grow by at least an eighth of the current size so a run of small
    // allocations does not grow page by page.
    const want = Math.min(MAX_MEMORY_BYTES, Math.max(end, have + Math.floor(have / 8)));
    const pages = Math.ceil((want - have) / WASM_PAGE);
    try {
      this.memory.grow(pages);
    } catch {
      // The host may refuse a large step: fall back to exactly what is needed.
      const exact = Math.ceil((end - have) / WASM_PAGE);
      try {
        this.memory.grow(exact);
      } catch (e) {
        throw new OutOfMemoryError(
          `cannot grow the shared memory from ${formatBytes(have)} to ${formatBytes(end)}: ${(e as Error).message}`,
        );
      }
    }
  }

  #insertFree(block: Block): void {
    // Keep the list sorted by address and coalesce with both neighbours.
    const list = this.#free;
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (list[mid]!.ptr < block.ptr) lo = mid + 1;
      else hi = mid;
    }
    list.splice(lo, 0, block);
    if (lo + 1 < list.length && block.ptr + block.size === list[lo + 1]!.ptr) {
      block.size += list[lo + 1]!.size;
      list.splice(lo + 1, 1);
    }
    if (lo > 0 && list[lo - 1]!.ptr + list[lo - 1]!.size === block.ptr) {
      list[lo - 1]!.size += block.size;
      list.splice(lo, 1);
    }
    // A free block that reaches the bump pointer gives its space back to it.
    const last = list[list.length - 1];
    if (last && last.ptr + last.size === this.#top) {
      this.#top = last.ptr;
      list.pop();
    }
  }
}

/**
 * Per-step scratch: bump allocation, reset in O(1). Chunks come from the
 * Allocator and are kept across resets, so a steady-state step allocates
 * nothing from it.
 */
export class StepArena {
  readonly #allocator: Allocator;
  readonly #label: string;
  #chunks: Block[] = [];
  #chunk = 0;
  #offset = 0;
  #used = 0;

  constructor(allocator: Allocator, label = "step arena") {
    this.#allocator = allocator;
    this.#label = label;
  }

  /** Bytes handed out since the last reset. */
  get used(): number {
    return this.#used;
  }

  /** Bytes held in chunks. */
  get capacity(): number {
    return this.#chunks.reduce((s, c) => s + c.size, 0);
  }

  alloc(bytes: number, align = ALIGN): number {
    if (!Number.isInteger(bytes) || bytes < 0) throw new ArgumentError("bytes", `must be a non-negative integer, got ${show(bytes)}`);
    const size = Math.max(ALIGN, alignUp(bytes, ALIGN));
    for (; this.#chunk < this.#chunks.length; this.#chunk++, this.#offset = 0) {
      const c = this.#chunks[this.#chunk]!;
      const start = alignUp(c.ptr + this.#offset, align);
      if (start + size <= c.ptr + c.size) {
        this.#offset = start + size - c.ptr;
        this.#used += size;
        return start;
      }
    }
    const last = this.#chunks[this.#chunks.length - 1];
    const chunkSize = Math.max(size + align, last ? last.size * 2 : 1 << 20);
    const ptr = this.#allocator.alloc(chunkSize, this.#label);
    this.#chunks.push({ ptr, size: chunkSize });
    this.#chunk = this.#chunks.length - 1;
    const start = alignUp(ptr, align);
    this.#offset = start + size - ptr;
    this.#used += size;
    return start;
  }

  /** Forgets every allocation since the last reset. O(1). */
  reset(): void {
    this.#chunk = 0;
    this.#offset = 0;
    this.#used = 0;
  }

  /** Returns every chunk to the Allocator. */
  release(): void {
    for (const c of this.#chunks) this.#allocator.free(c.ptr);
    this.#chunks = [];
    this.reset();
  }
}

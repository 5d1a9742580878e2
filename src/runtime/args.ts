/**
 * Writes a kernel's argument struct into the runtime's argument buffer.
 * Fields are laid out in call order with natural alignment (4 bytes for
 * i32/u32/f32/ptr, 8 for f64), which is how AssemblyScript lays out the
 * fields of an `@unmanaged class` declared in the same order:
 *
 *   TS:  rt.args().ptr(q).i32(n).f32(scale).end()
 *   AS:  @unmanaged class Args { q: usize; n: i32; scale: f32 }
 *
 * A small table the kernel indexes (a linear's work items, ops/partition.ts)
 * goes in the same buffer, from its far end down, before the struct names it:
 *
 *   const a = rt.args(); const starts = a.i32Array(table); a.ptr(w).ptr(starts)…end()
 */
import { ArgumentError } from "../errors.js";

export class ArgsWriter {
  static readonly CAPACITY = 4096;
  readonly #view: DataView;
  readonly #base: number;
  #offset = 0;
  /** Arrays (i32Array) fill the buffer from CAPACITY down to here. */
  #top = ArgsWriter.CAPACITY;

  constructor(memory: WebAssembly.Memory, base: number) {
    this.#view = new DataView(memory.buffer, base, ArgsWriter.CAPACITY);
    this.#base = base;
  }

  /** Starts a new struct at the base (the runtime keeps one writer and restarts it per launch). */
  reset(): this {
    this.#offset = 0;
    this.#top = ArgsWriter.CAPACITY;
    return this;
  }

  #slot(bytes: number): number {
    this.#offset = Math.ceil(this.#offset / bytes) * bytes;
    const at = this.#offset;
    if (at + bytes > this.#top) throw new ArgumentError("args", `overflow the ${ArgsWriter.CAPACITY}-byte argument buffer`);
    this.#offset += bytes;
    return at;
  }

  i32(v: number): this {
    this.#view.setInt32(this.#slot(4), v, true);
    return this;
  }

  /** A byte address in the shared memory (u32). */
  ptr(v: number): this {
    this.#view.setUint32(this.#slot(4), v >>> 0, true);
    return this;
  }

  f32(v: number): this {
    this.#view.setFloat32(this.#slot(4), v, true);
    return this;
  }

  f64(v: number): this {
    this.#view.setFloat64(this.#slot(8), v, true);
    return this;
  }

  /**
   * Writes `values` (i32) at the far end of the buffer, below any array
   * written since reset(), and returns their address for a `.ptr()` field.
   */
  i32Array(values: Int32Array): number {
    const top = this.#top - values.length * 4;
    if (top < this.#offset) throw new ArgumentError("args", `overflow the ${ArgsWriter.CAPACITY}-byte argument buffer (an array of ${values.length} i32)`);
    for (let i = 0; i < values.length; i++) this.#view.setInt32(top + 4 * i, values[i]!, true);
    this.#top = top;
    return this.#base + top;
  }

  /** Address of the struct. */
  end(): number {
    return this.#base;
  }
}

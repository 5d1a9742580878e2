/**
 * Writes a kernel's argument struct into the runtime's argument buffer.
 * Fields are laid out in call order with natural alignment (4 bytes for
 * i32/u32/f32/ptr, 8 for f64), which is how AssemblyScript lays out the
 * fields of an `@unmanaged class` declared in the same order:
 *
 *   TS:  rt.args().ptr(q).i32(n).f32(scale).end()
 *   AS:  @unmanaged class Args { q: usize; n: i32; scale: f32 }
 */
import { ArgumentError } from "../errors.js";

export class ArgsWriter {
  static readonly CAPACITY = 4096;
  readonly #view: DataView;
  readonly #base: number;
  #offset = 0;

  constructor(memory: WebAssembly.Memory, base: number) {
    this.#view = new DataView(memory.buffer, base, ArgsWriter.CAPACITY);
    this.#base = base;
  }

  /** Starts a new struct at the base (the runtime keeps one writer and restarts it per launch). */
  reset(): this {
    this.#offset = 0;
    return this;
  }

  #slot(bytes: number): number {
    this.#offset = Math.ceil(this.#offset / bytes) * bytes;
    const at = this.#offset;
    if (at + bytes > ArgsWriter.CAPACITY) throw new ArgumentError("args", `overflow the ${ArgsWriter.CAPACITY}-byte argument buffer`);
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

  /** Address of the struct. */
  end(): number {
    return this.#base;
  }
}

/**
 * Tensor views: a dtype, a shape, element strides and a byte pointer into one
 * of the runtime's shared WebAssembly memories (`memory`: a tensor knows which;
 * memoryName() says which in messages). A view owns nothing; the allocator that
 * produced `ptr` does. Typed-array views are created fresh on each access
 * because growing a shared memory replaces `memory.buffer`.
 */
import { ArgumentError, show } from "../errors.js";
import { type EncodeOptions, type StorageArray, decodeValue, encodeValue, storageArray } from "./codec.js";
import { checkShapeArray, checkStrides, contiguousStrides, numel } from "./check.js";
import { type DType, DTYPE_BYTES, checkDType } from "./dtype.js";

/** Names of the runtime's memories ("memory 0", "memory 1", …), for error messages. */
const memoryNames = new WeakMap<WebAssembly.Memory, string>();

/** Records `memory`'s name (the runtime does, as it creates each memory). */
export function nameMemory(memory: WebAssembly.Memory, name: string): void {
  memoryNames.set(memory, name);
}

/** The name the runtime gave `memory`, else "an unnamed memory". */
export function memoryName(memory: WebAssembly.Memory): string {
  return memoryNames.get(memory) ?? "an unnamed memory";
}

export class Tensor {
  readonly memory: WebAssembly.Memory;
  /** Byte address of element [0, …, 0]. */
  readonly ptr: number;
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Element strides (not bytes). */
  readonly strides: readonly number[];
  /** Elements from index 0 to the last one, gaps included (shape and strides are frozen: computed once). */
  readonly #extent: number;

  constructor(memory: WebAssembly.Memory, ptr: number, dtype: DType, shape: readonly number[], strides?: readonly number[]) {
    this.memory = memory;
    this.dtype = checkDType("dtype", dtype);
    this.shape = Object.freeze(checkShapeArray("shape", [...shape]));
    this.strides = Object.freeze(strides ? checkStrides("tensor", this.shape, [...strides]) : contiguousStrides(this.shape));
    if (!Number.isInteger(ptr) || ptr < 0 || ptr % DTYPE_BYTES[this.dtype] !== 0) {
      throw new ArgumentError("ptr", `must be a non-negative address aligned to ${DTYPE_BYTES[this.dtype]} bytes, got ${show(ptr)}`);
    }
    this.#extent = extentOf(this.shape, this.strides);
    const end = ptr + this.#extent * DTYPE_BYTES[this.dtype];
    if (end > memory.buffer.byteLength) {
      throw new ArgumentError("ptr", `${ptr} with shape ${show(this.shape)} ends at byte ${end}, beyond the memory's ${memory.buffer.byteLength} bytes`);
    }
    this.ptr = ptr;
  }

  get rank(): number {
    return this.shape.length;
  }

  get numel(): number {
    return numel(this.shape);
  }

  get elementBytes(): number {
    return DTYPE_BYTES[this.dtype];
  }

  /** Bytes spanned from element 0 to the last element, inclusive. */
  get byteLength(): number {
    return this.extentElements() * DTYPE_BYTES[this.dtype];
  }

  isContiguous(): boolean {
    const c = contiguousStrides(this.shape);
    return this.shape.every((d, i) => d <= 1 || this.strides[i] === c[i]);
  }

  /** The raw elements as a typed array over the shared memory (contiguous tensors only). */
  data(): StorageArray {
    if (!this.isContiguous()) {
      throw new ArgumentError("tensor", `must be contiguous to expose its data, got strides ${show(this.strides)} for shape ${show(this.shape)}`);
    }
    return storageArray(this.dtype, this.memory.buffer, this.ptr, this.numel);
  }

  /** A new view of the same memory with another shape (contiguous tensors, same element count). */
  reshape(shape: readonly number[]): Tensor {
    if (numel(shape) !== this.numel) {
      throw new ArgumentError("shape", `must keep ${this.numel} elements, got ${show(shape)} (${numel(shape)} elements)`);
    }
    if (!this.isContiguous()) throw new ArgumentError("tensor", "must be contiguous to reshape");
    return new Tensor(this.memory, this.ptr, this.dtype, shape);
  }

  /** Element offsets of every index in row-major order of the shape. */
  *offsets(): Generator<number> {
    const n = this.numel;
    if (n === 0) return;
    const idx = new Array<number>(this.rank).fill(0);
    let off = 0;
    for (let k = 0; k < n; k++) {
      yield off;
      for (let d = this.rank - 1; d >= 0; d--) {
        idx[d]!++;
        off += this.strides[d]!;
        if (idx[d]! < this.shape[d]!) break;
        off -= this.strides[d]! * this.shape[d]!;
        idx[d] = 0;
      }
    }
  }

  /** Decoded copy of the elements in row-major order. */
  toFloat32(): Float32Array {
    const raw = storageArray(this.dtype, this.memory.buffer, this.ptr, this.extentElements());
    const out = new Float32Array(this.numel);
    let i = 0;
    for (const off of this.offsets()) out[i++] = decodeValue(this.dtype, raw[off]!);
    return out;
  }

  /** Encodes `values` (row-major, numel long) into the tensor's elements. */
  set(values: ArrayLike<number>, options: EncodeOptions = {}): this {
    if (values.length !== this.numel) {
      throw new ArgumentError("values", `must have ${this.numel} elements for shape ${show(this.shape)}, got ${values.length}`);
    }
    const raw = storageArray(this.dtype, this.memory.buffer, this.ptr, this.extentElements());
    if (this.dtype === "f32" && this.isContiguous()) {
      (raw as Float32Array).set(values);
      return this;
    }
    let i = 0;
    for (const off of this.offsets()) raw[off] = encodeValue(this.dtype, values[i++]!, options);
    return this;
  }

  /** Sets every element to the encoding of `value` (NaN works: use it to poison outputs). */
  fill(value: number, options: EncodeOptions = {}): this {
    const raw = storageArray(this.dtype, this.memory.buffer, this.ptr, this.extentElements());
    const code = encodeValue(this.dtype, value, options);
    if (this.isContiguous()) raw.fill(code);
    else for (const off of this.offsets()) raw[off] = code;
    return this;
  }

  toString(): string {
    return `Tensor(${this.dtype}, [${this.shape.join(", ")}] @ ${this.ptr} in ${memoryName(this.memory)})`;
  }

  /** Elements from index 0 to the last element, inclusive of the gaps. */
  private extentElements(): number {
    return this.#extent;
  }
}

function extentOf(shape: readonly number[], strides: readonly number[]): number {
  let last = 0;
  for (let i = 0; i < shape.length; i++) {
    if (shape[i] === 0) return 0;
    last += (shape[i]! - 1) * strides[i]!;
  }
  return last + 1;
}

/**
 * Throws unless `memory` is the one an op runs in (`rt`'s), naming both memories.
 * `what` is described (String(what)) only when it throws: every op checks every
 * operand on every call, and building the description each time cost a
 * tiny model's decode step ≈ 2% of its time.
 */
export function checkSameMemory(argument: string, what: string | { toString(): string }, memory: WebAssembly.Memory, rt: { readonly memory: WebAssembly.Memory }): void {
  if (memory !== rt.memory) {
    throw new ArgumentError(argument, `must live in ${memoryName(rt.memory)}, where this op runs, got ${String(what)} in ${memoryName(memory)} (copy it with copyTensor, or run the op in its memory's runtime)`);
  }
}

/** `value` as a Tensor in `rt`'s memory (an op's tensor argument), or an Error naming the argument and the value. */
export function checkTensor(argument: string, value: unknown, rt: { readonly memory: WebAssembly.Memory }): Tensor {
  if (!(value instanceof Tensor)) throw new ArgumentError(argument, `must be a Tensor, got ${show(value)}`);
  checkSameMemory(argument, value, value.memory, rt);
  return value;
}

/**
 * Writes GGUF v3 files (format.ts), for tests and benchmarks: typed metadata
 * and tensors given as already-encoded bytes (quantize.ts makes them), each
 * tensor at an offset aligned to `general.alignment`. The counterpart of
 * safetensors-writer.ts; streamed to disk tensor by tensor.
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { ArgumentError, show } from "../../errors.js";
import { GGML_TYPES, type GgmlTypeName, ggmlRowBytes } from "../../tensor/ggml-types.js";
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VALUE } from "./format.js";

/** A metadata value with its GGUF type. */
export type GgufTyped =
  | { type: "u8" | "i8" | "u16" | "i16" | "u32" | "i32" | "f32" | "u64" | "i64" | "f64"; value: number }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | { type: "array"; of: "u8" | "i8" | "u16" | "i16" | "u32" | "i32" | "f32" | "u64" | "i64" | "f64" | "bool" | "string"; values: readonly (number | boolean | string)[] };

export interface GgufWriteTensor {
  name: string;
  type: GgmlTypeName;
  /** PyTorch order ([rows, cols]); written reversed as ggml's ne. */
  shape: readonly number[];
  /** The encoded bytes: ggmlRowBytes(type, cols) × rows. */
  data: Uint8Array;
}

export interface WriteGgufOptions {
  metadata: Readonly<Record<string, GgufTyped>>;
  tensors: readonly GgufWriteTensor[];
  /** Default 3. */
  version?: 2 | 3;
}

const TYPE_CODE: Readonly<Record<string, number>> = {
  u8: GGUF_VALUE.UINT8, i8: GGUF_VALUE.INT8, u16: GGUF_VALUE.UINT16, i16: GGUF_VALUE.INT16, u32: GGUF_VALUE.UINT32,
  i32: GGUF_VALUE.INT32, f32: GGUF_VALUE.FLOAT32, bool: GGUF_VALUE.BOOL, string: GGUF_VALUE.STRING, array: GGUF_VALUE.ARRAY,
  u64: GGUF_VALUE.UINT64, i64: GGUF_VALUE.INT64, f64: GGUF_VALUE.FLOAT64,
};

const SCALAR_BYTES: Readonly<Record<string, number>> = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, u64: 8, i64: 8, f64: 8, bool: 1 };

/** Little-endian byte builder. */
export class ByteWriter {
  #buf = new Uint8Array(1 << 16);
  #view = new DataView(this.#buf.buffer);
  length = 0;

  #grow(n: number): number {
    if (this.length + n > this.#buf.length) {
      const next = new Uint8Array(Math.max(this.#buf.length * 2, this.length + n));
      next.set(this.#buf.subarray(0, this.length));
      this.#buf = next;
      this.#view = new DataView(next.buffer);
    }
    const at = this.length;
    this.length += n;
    return at;
  }
  // Each method grows first, then reads #view / #buf: growing replaces them.
  u8(v: number): this {
    const at = this.#grow(1);
    this.#view.setUint8(at, v);
    return this;
  }
  u32(v: number): this {
    const at = this.#grow(4);
    this.#view.setUint32(at, v, true);
    return this;
  }
  u64(v: number | bigint): this {
    const at = this.#grow(8);
    this.#view.setBigUint64(at, BigInt(v), true);
    return this;
  }
  bytes(b: Uint8Array): this {
    const at = this.#grow(b.length);
    this.#buf.set(b, at);
    return this;
  }
  string(s: string): this {
    const b = new TextEncoder().encode(s);
    return this.u64(b.length).bytes(b);
  }
  scalar(type: string, v: number | boolean | string): this {
    const n = type === "string" ? 0 : SCALAR_BYTES[type];
    if (n === undefined) throw new ArgumentError("type", `must be a GGUF value type, got ${show(type)}`);
    if (type === "string") return this.string(v as string);
    const at = this.#grow(n);
    const d = this.#view;
    switch (type) {
      case "u8": d.setUint8(at, v as number); break;
      case "i8": d.setInt8(at, v as number); break;
      case "u16": d.setUint16(at, v as number, true); break;
      case "i16": d.setInt16(at, v as number, true); break;
      case "u32": d.setUint32(at, v as number, true); break;
      case "i32": d.setInt32(at, v as number, true); break;
      case "f32": d.setFloat32(at, v as number, true); break;
      case "u64": d.setBigUint64(at, BigInt(v as number), true); break;
      case "i64": d.setBigInt64(at, BigInt(v as number), true); break;
      case "f64": d.setFloat64(at, v as number, true); break;
      default: d.setUint8(at, v ? 1 : 0); // bool
    }
    return this;
  }
  toBytes(): Uint8Array {
    return this.#buf.slice(0, this.length);
  }
}

/** The header bytes (magic … tensor index), unpadded, and each tensor's data offset. */
export function encodeGgufHeader(options: WriteGgufOptions): { header: Uint8Array; offsets: number[]; alignment: number } {
  const meta = options.metadata;
  const alignEntry = meta["general.alignment"];
  const alignment = alignEntry && alignEntry.type !== "array" ? Number(alignEntry.value) : GGUF_DEFAULT_ALIGNMENT;
  const w = new ByteWriter().u32(GGUF_MAGIC).u32(options.version ?? 3).u64(options.tensors.length).u64(Object.keys(meta).length);
  for (const [key, v] of Object.entries(meta)) {
    w.string(key).u32(TYPE_CODE[v.type]!);
    if (v.type === "array") {
      w.u32(TYPE_CODE[v.of]!).u64(v.values.length);
      for (const x of v.values) w.scalar(v.of, x);
    } else w.scalar(v.type, v.value);
  }
  const offsets: number[] = [];
  let offset = 0;
  for (const t of options.tensors) {
    const type = GGML_TYPES[t.type];
    const cols = t.shape[t.shape.length - 1]!;
    const want = ggmlRowBytes(type, cols) * (t.shape.slice(0, -1).reduce((a, b) => a * b, 1));
    if (cols % type.blockSize !== 0 || t.data.length !== want) {
      throw new ArgumentError(`tensors[${show(t.name)}].data`, `must be ${want} bytes of ${t.type} for shape [${t.shape.join(", ")}], got ${t.data.length}`);
    }
    w.string(t.name).u32(t.shape.length);
    for (let d = t.shape.length - 1; d >= 0; d--) w.u64(t.shape[d]!);
    w.u32(type.id).u64(offset);
    offsets.push(offset);
    offset = Math.ceil((offset + t.data.length) / alignment) * alignment;
  }
  return { header: w.toBytes(), offsets, alignment };
}

/** Writes a GGUF file. */
export function writeGguf(path: string, options: WriteGgufOptions): void {
  const { header, offsets, alignment } = encodeGgufHeader(options);
  const fd = openSync(path, "w");
  try {
    writeSync(fd, header);
    const dataStart = Math.ceil(header.length / alignment) * alignment;
    writeSync(fd, new Uint8Array(dataStart - header.length));
    let at = dataStart;
    options.tensors.forEach((t, i) => {
      const begin = dataStart + offsets[i]!;
      if (begin > at) writeSync(fd, new Uint8Array(begin - at));
      writeSync(fd, t.data);
      at = begin + t.data.length;
    });
  } finally {
    closeSync(fd);
  }
}

/** Shorthands for typed metadata values. */
export const gguf = {
  u32: (value: number): GgufTyped => ({ type: "u32", value }),
  i32: (value: number): GgufTyped => ({ type: "i32", value }),
  f32: (value: number): GgufTyped => ({ type: "f32", value }),
  bool: (value: boolean): GgufTyped => ({ type: "bool", value }),
  str: (value: string): GgufTyped => ({ type: "string", value }),
  strings: (values: readonly string[]): GgufTyped => ({ type: "array", of: "string", values }),
  f32s: (values: readonly number[]): GgufTyped => ({ type: "array", of: "f32", values }),
  i32s: (values: readonly number[]): GgufTyped => ({ type: "array", of: "i32", values }),
};

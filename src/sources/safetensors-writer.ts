/**
 * Writes .safetensors files (format v1; see safetensors.ts): tensors laid out
 * back to back in the given order, the JSON header padded with spaces to a
 * multiple of 8 bytes as the reference writer does, so every tensor starts
 * 8-byte aligned in the file. Output is a pure function of the input:
 * the tiny-model tool relies on it to reproduce committed files byte for byte.
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { ArgumentError, show } from "../errors.js";
import { checkShapeArray, numel } from "../tensor/check.js";
import { DTYPE_BYTES } from "../tensor/dtype.js";
import { SAFETENSORS_NAME, type WeightDType } from "./safetensors.js";

export interface TensorToWrite {
  name: string;
  dtype: WeightDType;
  shape: readonly number[];
  /** Raw little-endian elements, numel(shape) × dtype bytes. */
  data: Uint8Array;
}

/** The header JSON text (unpadded) of a file holding `tensors` in order. */
function headerJson(tensors: readonly TensorToWrite[], metadata?: Readonly<Record<string, string>>): string {
  const header: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length > 0) header["__metadata__"] = metadata;
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: SAFETENSORS_NAME[t.dtype], shape: [...t.shape], data_offsets: [offset, offset + t.data.length] };
    offset += t.data.length;
  }
  return JSON.stringify(header);
}

/** Writes `tensors` (in order) and optional string metadata to `path`. Returns the file size in bytes. */
export function writeSafetensors(path: string, tensors: readonly TensorToWrite[], metadata?: Readonly<Record<string, string>>): number {
  const seen = new Set<string>();
  for (const [i, t] of tensors.entries()) {
    if (typeof t.name !== "string" || t.name === "" || t.name === "__metadata__") throw new ArgumentError(`tensors[${i}].name`, `must be a non-empty tensor name, got ${show(t.name)}`);
    if (seen.has(t.name)) throw new ArgumentError(`tensors[${i}].name`, `duplicates ${show(t.name)}`);
    seen.add(t.name);
    if (!(t.dtype in SAFETENSORS_NAME)) throw new ArgumentError(`tensors[${i}].dtype`, `must be one of f32 | f16 | bf16, got ${show(t.dtype)}`);
    checkShapeArray(`tensors[${i}].shape`, t.shape);
    const want = numel(t.shape) * DTYPE_BYTES[t.dtype];
    if (t.data.length !== want) {
      throw new ArgumentError(`tensors[${i}].data`, `must hold ${want} bytes for ${t.dtype} [${t.shape.join(", ")}], got ${t.data.length}`);
    }
  }
  const text = headerJson(tensors, metadata);
  const raw = new TextEncoder().encode(text);
  const padded = Math.ceil(raw.length / 8) * 8;
  const head = new Uint8Array(8 + padded).fill(0x20);
  new DataView(head.buffer).setBigUint64(0, BigInt(padded), true);
  head.set(raw, 8);
  const fd = openSync(path, "w");
  let size = 0;
  try {
    size += writeAll(fd, head);
    for (const t of tensors) size += writeAll(fd, t.data);
  } finally {
    closeSync(fd);
  }
  return size;
}

function writeAll(fd: number, bytes: Uint8Array): number {
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, bytes.length - done);
  return bytes.length;
}

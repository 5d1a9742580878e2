/**
 * A safetensors reader (https://github.com/huggingface/safetensors, format v1):
 *
 *   [8 bytes]  N, unsigned little-endian u64: header length
 *   [N bytes]  UTF-8 JSON: { name: { dtype, shape, data_offsets: [begin, end] }, "__metadata__"?: {str: str} }
 *   [rest]     the byte buffer; offsets are relative to its start (byte 8 + N)
 *
 * Tensor bytes are read with fs.readSync straight into the runtime's shared
 * wasm memory at an address from the allocator, in chunks, so the file is
 * never held in JavaScript memory. Everything in the header is checked before
 * any tensor is allocated: a hostile or truncated file gets an error naming the
 * file and what is wrong with it.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { ArgumentError, show } from "../errors.js";
import type { Runtime } from "../runtime/runtime.js";
import { formatBytes } from "../runtime/allocator.js";
import { DTYPE_BYTES } from "../tensor/dtype.js";
import { Tensor } from "../tensor/tensor.js";
import type { LoadProgress } from "./progress.js";

/** The source dtypes kvflash loads, by their safetensors names. */
export type WeightDType = "f32" | "f16" | "bf16";
export const SAFETENSORS_DTYPES: Readonly<Record<string, WeightDType>> = { F32: "f32", F16: "f16", BF16: "bf16" };
export const SAFETENSORS_NAME: Readonly<Record<WeightDType, string>> = { f32: "F32", f16: "F16", bf16: "BF16" };
/** Valid safetensors dtypes that kvflash does not load (quantized or integer checkpoints). */
const KNOWN_UNSUPPORTED = new Set([
  "F64", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "U8", "BOOL",
  "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64",
]);

/** The safetensors reference implementation refuses headers above 100 MB; so do we. */
export const MAX_HEADER_BYTES = 100_000_000;
/** Bytes per readSync call: large enough to stream at disk speed, small enough for a smooth progress bar. */
const READ_CHUNK = 16 << 20;

export interface SafetensorsEntry {
  name: string;
  dtype: WeightDType;
  shape: number[];
  /** Absolute byte range in the file: [begin, end). */
  begin: number;
  end: number;
}

export interface SafetensorsHeader {
  path: string;
  fileBytes: number;
  /** Absolute file offset of the byte buffer (8 + header length). */
  dataStart: number;
  /** Tensors in file order (by offset). */
  tensors: SafetensorsEntry[];
  metadata: Record<string, string>;
}

/** Reads and validates the header of a .safetensors file (reads only the header bytes). */
export function readSafetensorsHeader(path: string): SafetensorsHeader {
  const fd = openFile(path);
  try {
    return readHeaderFd(fd, path);
  } finally {
    closeSync(fd);
  }
}

function openFile(path: string): number {
  try {
    return openSync(path, "r");
  } catch (e) {
    throw new ArgumentError(path, `cannot be opened: ${(e as Error).message}`);
  }
}

function readExactly(fd: number, view: Uint8Array, position: number, path: string): void {
  let done = 0;
  while (done < view.length) {
    const n = readSync(fd, view, done, Math.min(view.length - done, 0x7fff_f000), position + done);
    if (n === 0) throw new ArgumentError(path, `ended early: wanted bytes [${position}, ${position + view.length}), got ${done} (file truncated while reading?)`);
    done += n;
  }
}

function readHeaderFd(fd: number, path: string): SafetensorsHeader {
  const fileBytes = fstatSync(fd).size;
  if (fileBytes < 8) throw new ArgumentError(path, `is not a safetensors file: ${fileBytes} bytes, fewer than the 8-byte header length`);
  const lenBytes = new Uint8Array(8);
  readExactly(fd, lenBytes, 0, path);
  const headerLen = new DataView(lenBytes.buffer).getBigUint64(0, true);
  if (headerLen > BigInt(MAX_HEADER_BYTES)) {
    throw new ArgumentError(path, `header length ${headerLen} exceeds the ${MAX_HEADER_BYTES}-byte limit (not a safetensors file, or a hostile one)`);
  }
  const n = Number(headerLen);
  if (8 + n > fileBytes) throw new ArgumentError(path, `header length ${n} runs past the end of the file (${fileBytes} bytes)`);
  if (n < 2) throw new ArgumentError(path, `header length ${n} is too short for a JSON object`);
  const bytes = new Uint8Array(n);
  readExactly(fd, bytes, 8, path);
  return parseHeader(bytes, fileBytes, path);
}

/** Parses and checks the JSON header: dtypes, shapes, byte counts, offsets in range and not overlapping. */
function parseHeader(bytes: Uint8Array, fileBytes: number, path: string): SafetensorsHeader {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new ArgumentError(path, "header is not valid UTF-8");
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ArgumentError(path, `header is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    throw new ArgumentError(path, `header must be a JSON object, got ${show(json)}`);
  }
  const dataStart = 8 + bytes.length;
  const dataBytes = fileBytes - dataStart;
  const metadata: Record<string, string> = {};
  const tensors: SafetensorsEntry[] = [];
  for (const [name, raw] of Object.entries(json as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new ArgumentError(path, `__metadata__ must be an object of strings, got ${show(raw)}`);
      for (const [k, v] of Object.entries(raw)) {
        if (typeof v !== "string") throw new ArgumentError(path, `__metadata__.${k} must be a string, got ${show(v)}`);
        metadata[k] = v;
      }
      continue;
    }
    tensors.push(parseEntry(name, raw, dataStart, dataBytes, path));
  }
  tensors.sort((a, b) => a.begin - b.begin || a.end - b.end);
  for (let i = 1; i < tensors.length; i++) {
    const prev = tensors[i - 1]!;
    const cur = tensors[i]!;
    if (cur.begin < prev.end) {
      throw new ArgumentError(
        path,
        `tensors ${show(prev.name)} [${prev.begin - dataStart}, ${prev.end - dataStart}) and ${show(cur.name)} [${cur.begin - dataStart}, ${cur.end - dataStart}) overlap`,
      );
    }
  }
  return { path, fileBytes, dataStart, tensors, metadata };
}

function parseEntry(name: string, raw: unknown, dataStart: number, dataBytes: number, path: string): SafetensorsEntry {
  const where = `tensor ${show(name)}`;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw new ArgumentError(path, `${where} must be an object, got ${show(raw)}`);
  const e = raw as Record<string, unknown>;
  const dt = e["dtype"];
  if (typeof dt !== "string") throw new ArgumentError(path, `${where} dtype must be a string, got ${show(dt)}`);
  const dtype = SAFETENSORS_DTYPES[dt];
  if (!dtype) {
    const supported = Object.keys(SAFETENSORS_DTYPES).join(", ");
    throw new ArgumentError(
      path,
      KNOWN_UNSUPPORTED.has(dt)
        ? `${where} has dtype ${dt}, which kvflash does not load (supported: ${supported})`
        : `${where} has unknown dtype ${show(dt)} (supported: ${supported})`,
    );
  }
  const shape = e["shape"];
  if (!Array.isArray(shape) || shape.some((d) => typeof d !== "number" || !Number.isSafeInteger(d) || d < 0)) {
    throw new ArgumentError(path, `${where} shape must be a list of non-negative integers, got ${show(shape)}`);
  }
  const offsets = e["data_offsets"];
  if (
    !Array.isArray(offsets) ||
    offsets.length !== 2 ||
    offsets.some((o) => typeof o !== "number" || !Number.isSafeInteger(o) || o < 0)
  ) {
    throw new ArgumentError(path, `${where} data_offsets must be [begin, end] non-negative integers, got ${show(offsets)}`);
  }
  const [begin, end] = offsets as [number, number];
  if (end < begin) throw new ArgumentError(path, `${where} data_offsets [${begin}, ${end}] end before they begin`);
  if (end > dataBytes) {
    throw new ArgumentError(path, `${where} data_offsets [${begin}, ${end}] run past the end of the data (${dataBytes} bytes after the header)`);
  }
  const elements = (shape as number[]).reduce((a, b) => a * b, 1);
  const want = elements * DTYPE_BYTES[dtype];
  if (end - begin !== want) {
    throw new ArgumentError(
      path,
      `${where} holds ${end - begin} bytes, but ${dt} × shape [${(shape as number[]).join(", ")}] needs ${want}`,
    );
  }
  return { name, dtype, shape: shape as number[], begin: dataStart + begin, end: dataStart + end };
}

export interface LoadSafetensorsOptions {
  /** Load only these tensors (default: all). A name not in the file is an error. */
  names?: Iterable<string>;
  /** Progress to advance by each chunk read (shared across the shards of one model). */
  progress?: LoadProgress;
  /** Allocation label prefix for out-of-memory messages. Default "weight". */
  label?: string;
}

/**
 * Loads tensors of a .safetensors file into the runtime's memory, in the
 * file's dtype (f32, f16 or bf16), contiguous, one heap allocation each.
 * Returns name → Tensor; free them with rt.free() (or freeTensors()). On any
 * error the tensors allocated so far are freed.
 */
export function loadSafetensors(rt: Runtime, path: string, options: LoadSafetensorsOptions = {}): Map<string, Tensor> {
  const fd = openFile(path);
  const out = new Map<string, Tensor>();
  try {
    const header = readHeaderFd(fd, path);
    let entries = header.tensors;
    if (options.names) {
      const byName = new Map(entries.map((t) => [t.name, t]));
      const wanted = new Set<string>();
      for (const name of options.names) {
        if (!byName.has(name)) throw new ArgumentError(path, `has no tensor ${show(name)}`);
        wanted.add(name);
      }
      entries = entries.filter((t) => wanted.has(t.name)); // keep file order: sequential reads
    }
    const label = options.label ?? "weight";
    for (const entry of entries) {
      const bytes = entry.end - entry.begin;
      const ptr = rt.heap.alloc(bytes, `${label} ${entry.name} (${formatBytes(bytes)})`);
      const tensor = new Tensor(rt.memory, ptr, entry.dtype, entry.shape);
      out.set(entry.name, tensor);
      for (let done = 0; done < bytes; ) {
        const n = Math.min(READ_CHUNK, bytes - done);
        // A fresh view each chunk: growing the memory may have replaced memory.buffer.
        readExactly(fd, new Uint8Array(rt.memory.buffer, ptr + done, n), entry.begin + done, path);
        done += n;
        options.progress?.add(n);
      }
    }
    return out;
  } catch (e) {
    freeTensors(rt, out);
    throw e;
  } finally {
    closeSync(fd);
  }
}

/** Frees every tensor of a map returned by loadSafetensors / loadModelDir and empties it. */
export function freeTensors(rt: Runtime, tensors: Map<string, Tensor>): void {
  for (const t of tensors.values()) rt.free(t);
  tensors.clear();
}

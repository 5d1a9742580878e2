/**
 * A GGUF reader (format.ts; ggml's gguf.cpp is the reference) that reads the
 * metadata and the tensor index — never the weights — through a small
 * buffered cursor over the file descriptor.
 *
 * It is written for hostile files, like safetensors.ts: every count, length,
 * dimension and offset is checked against the bytes the file actually has
 * before anything is allocated for it, so a truncated or forged header fails
 * fast with an error naming the file, the field and the value, and never
 * allocates more than the file could describe (plus fixed caps on strings,
 * arrays and counts far above any real model's; tighter ones for the
 * tokenizer's arrays, tokenizer-limits.ts).
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { ArgumentError, show } from "../../errors.js";
import { GGML_TYPE_BY_ID, GGML_UNSUPPORTED_NAMES, type GgmlType } from "../../tensor/ggml-types.js";
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_SCALAR_BYTES, GGUF_VALUE } from "./format.js";
import { GGUF_TOKENIZER_ARRAY_LIMITS } from "./tokenizer-limits.js";
import type { GgufScalar, GgufValue } from "./value.js";

export type { GgufScalar, GgufValue } from "./value.js";

export interface GgufTensorInfo {
  name: string;
  type: GgmlType;
  /** ggml order: ne[0] is the fastest-moving dimension (columns of a matrix). */
  ne: number[];
  /** PyTorch order: ne reversed, e.g. [rows, cols]. */
  shape: number[];
  numel: number;
  /** Absolute byte range in the file: [begin, end). */
  begin: number;
  end: number;
}

export interface GgufHeader {
  path: string;
  version: number;
  fileBytes: number;
  alignment: number;
  /** Absolute file offset of the tensor data section. */
  dataStart: number;
  metadata: Map<string, GgufValue>;
  /** Tensors in index order. */
  tensors: GgufTensorInfo[];
}

/** Caps far above real models (a 262k vocabulary, ~1000 tensors a layer stack) and far below a hostile file's claims. */
export const GGUF_LIMITS = {
  maxStringBytes: 16 << 20,
  maxArrayLength: 1 << 22,
  maxMetadataKeys: 1 << 16,
  maxTensors: 1 << 20,
  maxDims: 4,
} as const;

const CHUNK = 1 << 20;

/** Sequential reads through a 1 MiB window; every read is bounds-checked against the file size first. */
class Cursor {
  pos = 0;
  #buf = new Uint8Array(CHUNK);
  #view = new DataView(this.#buf.buffer);
  #start = 0;
  #end = 0;
  readonly #decoder = new TextDecoder("utf-8", { fatal: true });

  constructor(
    readonly fd: number,
    readonly fileBytes: number,
    readonly path: string,
  ) {}

  fail(what: string, message: string): ArgumentError {
    return new ArgumentError(this.path, `${what} ${message} (at byte ${this.pos})`);
  }

  /** Makes bytes [pos, pos + n) available in the window (n ≤ CHUNK). */
  #need(n: number, what: string): number {
    if (this.pos + n > this.fileBytes) {
      throw this.fail(what, `needs ${n} bytes but the file ends at byte ${this.fileBytes} (truncated?)`);
    }
    if (this.pos < this.#start || this.pos + n > this.#end) {
      const want = Math.min(CHUNK, this.fileBytes - this.pos);
      let done = 0;
      while (done < want) {
        const r = readSync(this.fd, this.#buf, done, want - done, this.pos + done);
        if (r === 0) throw this.fail(what, "could not be read: the file ended early (truncated while reading?)");
        done += r;
      }
      this.#start = this.pos;
      this.#end = this.pos + want;
    }
    const at = this.pos - this.#start;
    this.pos += n;
    return at;
  }

  u8(what: string): number {
    return this.#view.getUint8(this.#need(1, what));
  }
  u32(what: string): number {
    return this.#view.getUint32(this.#need(4, what), true);
  }
  /** A u64 as a number; values above 2^53 are an error naming `what`. */
  u64(what: string): number {
    const v = this.#view.getBigUint64(this.#need(8, what), true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw this.fail(what, `is ${v}, beyond any file this reader accepts`);
    return Number(v);
  }

  scalar(type: number, what: string): GgufScalar {
    const n = GGUF_SCALAR_BYTES[type]!;
    const at = this.#need(n, what);
    const v = this.#view;
    switch (type) {
      case GGUF_VALUE.UINT8: return v.getUint8(at);
      case GGUF_VALUE.INT8: return v.getInt8(at);
      case GGUF_VALUE.UINT16: return v.getUint16(at, true);
      case GGUF_VALUE.INT16: return v.getInt16(at, true);
      case GGUF_VALUE.UINT32: return v.getUint32(at, true);
      case GGUF_VALUE.INT32: return v.getInt32(at, true);
      case GGUF_VALUE.FLOAT32: return v.getFloat32(at, true);
      case GGUF_VALUE.FLOAT64: return v.getFloat64(at, true);
      case GGUF_VALUE.BOOL: {
        const b = v.getUint8(at);
        if (b > 1) throw this.fail(what, `is a bool with byte value ${b} (must be 0 or 1)`);
        return b === 1;
      }
      case GGUF_VALUE.UINT64: return safe(v.getBigUint64(at, true));
      default: return safe(v.getBigInt64(at, true)); // INT64
    }
  }

  string(what: string): string {
    const len = this.u64(`${what} length`);
    if (len > GGUF_LIMITS.maxStringBytes) throw this.fail(what, `has length ${len}, above the ${GGUF_LIMITS.maxStringBytes}-byte limit for a GGUF string`);
    if (this.pos + len > this.fileBytes) throw this.fail(what, `has length ${len}, which runs past the end of the file (${this.fileBytes} bytes)`);
    let bytes: Uint8Array;
    if (len <= CHUNK) {
      const at = this.#need(len, what);
      bytes = this.#buf.subarray(at, at + len);
    } else {
      bytes = new Uint8Array(len);
      let done = 0;
      while (done < len) {
        const r = readSync(this.fd, bytes, done, len - done, this.pos + done);
        if (r === 0) throw this.fail(what, "could not be read: the file ended early");
        done += r;
      }
      this.pos += len;
    }
    try {
      return this.#decoder.decode(bytes);
    } catch {
      throw this.fail(what, "is not valid UTF-8");
    }
  }
}

function safe(v: bigint): number | bigint {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

/** One metadata value; an array longer than `arrayLimit` (GGUF_LIMITS.maxArrayLength by default) fails before its first element is read. */
function readValue(c: Cursor, type: number, what: string, arrayLimit?: number): GgufValue {
  if (type === GGUF_VALUE.STRING) return c.string(what);
  if (GGUF_SCALAR_BYTES[type] !== undefined) return c.scalar(type, what);
  if (type !== GGUF_VALUE.ARRAY) throw c.fail(what, `has unknown value type ${type} (GGUF knows 0..12)`);
  const elemType = c.u32(`${what} element type`);
  const count = c.u64(`${what} length`);
  if (elemType === GGUF_VALUE.ARRAY) throw c.fail(what, "is an array of arrays, which GGUF readers do not support");
  const minBytes = elemType === GGUF_VALUE.STRING ? 8 : GGUF_SCALAR_BYTES[elemType];
  if (minBytes === undefined) throw c.fail(`${what} element type`, `is unknown: ${elemType} (GGUF knows 0..12)`);
  const limit = arrayLimit ?? GGUF_LIMITS.maxArrayLength;
  if (count > limit) throw c.fail(what, `has ${count} elements, above the limit of ${limit}`);
  if (count * minBytes > c.fileBytes - c.pos) throw c.fail(what, `has ${count} elements, which need at least ${count * minBytes} bytes but the file has ${c.fileBytes - c.pos} left`);
  const out: GgufScalar[] = new Array(count);
  for (let i = 0; i < count; i++) out[i] = elemType === GGUF_VALUE.STRING ? c.string(`${what}[${i}]`) : c.scalar(elemType, `${what}[${i}]`);
  return out;
}

/** Reads and validates a GGUF file's metadata and tensor index (reads no tensor data). */
export function readGgufHeader(path: string): GgufHeader {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    throw new ArgumentError(path, `cannot be opened: ${(e as Error).message}`);
  }
  try {
    return readHeader(new Cursor(fd, fstatSync(fd).size, path));
  } finally {
    closeSync(fd);
  }
}

/** True if the file starts with the GGUF magic. */
export function isGgufFile(path: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return false;
  }
  try {
    const b = new Uint8Array(4);
    return readSync(fd, b, 0, 4, 0) === 4 && new DataView(b.buffer).getUint32(0, true) === GGUF_MAGIC;
  } finally {
    closeSync(fd);
  }
}

function readHeader(c: Cursor): GgufHeader {
  const { path, fileBytes } = c;
  if (fileBytes < 24) throw new ArgumentError(path, `is not a GGUF file: ${fileBytes} bytes, fewer than the 24-byte header`);
  const magic = c.u32("magic");
  if (magic !== GGUF_MAGIC) throw new ArgumentError(path, `is not a GGUF file: magic 0x${magic.toString(16).padStart(8, "0")}, expected 0x46554747 ("GGUF")`);
  const version = c.u32("version");
  if (version !== 2 && version !== 3) throw new ArgumentError(path, `has GGUF version ${version}; kvflash reads versions 2 and 3`);
  const tensorCount = c.u64("tensor_count");
  const kvCount = c.u64("metadata_kv_count");
  // A metadata entry takes ≥ 13 bytes (8 key length + 1 + 4 type), a tensor entry ≥ 28 (8 + 1 + 4 + 8 + 4 + 8 with one dim... ≥ 24 with none).
  if (kvCount > GGUF_LIMITS.maxMetadataKeys || kvCount * 13 > fileBytes - c.pos) {
    throw new ArgumentError(path, `metadata_kv_count ${kvCount} cannot fit in a ${fileBytes}-byte file (limit ${GGUF_LIMITS.maxMetadataKeys})`);
  }
  if (tensorCount > GGUF_LIMITS.maxTensors || tensorCount * 24 > fileBytes - c.pos) {
    throw new ArgumentError(path, `tensor_count ${tensorCount} cannot fit in a ${fileBytes}-byte file (limit ${GGUF_LIMITS.maxTensors})`);
  }

  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < kvCount; i++) {
    const key = c.string(`metadata key #${i}`);
    if (metadata.has(key)) throw c.fail(`metadata key ${show(key)}`, "appears twice");
    const type = c.u32(`metadata ${key} type`);
    metadata.set(key, readValue(c, type, `metadata ${key}`, GGUF_TOKENIZER_ARRAY_LIMITS.get(key)));
  }
  const alignment = metadata.get("general.alignment") ?? GGUF_DEFAULT_ALIGNMENT;
  if (typeof alignment !== "number" || !Number.isInteger(alignment) || alignment < 1 || (alignment & (alignment - 1)) !== 0) {
    throw new ArgumentError(path, `general.alignment must be a power of two, got ${show(alignment)}`);
  }

  const raw: { name: string; type: GgmlType; ne: number[]; numel: number; offset: number; bytes: number }[] = [];
  const names = new Set<string>();
  for (let i = 0; i < tensorCount; i++) {
    const name = c.string(`tensor #${i} name`);
    const what = `tensor ${show(name)}`;
    if (names.has(name)) throw c.fail(what, "appears twice in the tensor index");
    names.add(name);
    const nDims = c.u32(`${what} n_dims`);
    if (nDims < 1 || nDims > GGUF_LIMITS.maxDims) throw c.fail(`${what} n_dims`, `must be in 1..${GGUF_LIMITS.maxDims}, got ${nDims}`);
    const ne: number[] = [];
    let numel = 1;
    for (let d = 0; d < nDims; d++) {
      const n = c.u64(`${what} ne[${d}]`);
      if (n < 1) throw c.fail(`${what} ne[${d}]`, `must be ≥ 1, got ${n}`);
      numel *= n;
      if (numel > Number.MAX_SAFE_INTEGER) throw c.fail(what, `has ${ne.concat(n).join(" × ")} elements, which overflows`);
      ne.push(n);
    }
    const typeId = c.u32(`${what} type`);
    const type = GGML_TYPE_BY_ID.get(typeId);
    if (!type) {
      const known = GGML_UNSUPPORTED_NAMES[typeId];
      throw c.fail(
        `${what} type`,
        known
          ? `is ${known} (ggml type ${typeId}), which kvflash does not read (supported: ${[...GGML_TYPE_BY_ID.values()].map((t) => t.name).join(", ")})`
          : `is unknown ggml type ${typeId}`,
      );
    }
    if (ne[0]! % type.blockSize !== 0) throw c.fail(what, `has rows of ${ne[0]} values, not a multiple of ${type.name}'s block of ${type.blockSize}`);
    const offset = c.u64(`${what} offset`);
    if (offset % alignment !== 0) throw c.fail(`${what} offset`, `${offset} is not a multiple of the alignment ${alignment}`);
    raw.push({ name, type, ne, numel, offset, bytes: (numel / type.blockSize) * type.typeSize });
  }
  const dataStart = Math.ceil(c.pos / alignment) * alignment;
  if (tensorCount > 0 && dataStart > fileBytes) throw new ArgumentError(path, `tensor data would start at byte ${dataStart}, past the end of the file (${fileBytes} bytes)`);

  const tensors: GgufTensorInfo[] = raw.map((t) => {
    const begin = dataStart + t.offset;
    const end = begin + t.bytes;
    if (end > fileBytes) {
      throw new ArgumentError(path, `tensor ${show(t.name)} (${t.type.name} [${t.ne.join(", ")}], ${t.bytes} bytes at data offset ${t.offset}) runs past the end of the file (${fileBytes} bytes)`);
    }
    return { name: t.name, type: t.type, ne: t.ne, shape: [...t.ne].reverse(), numel: t.numel, begin, end };
  });
  const byStart = [...tensors].sort((a, b) => a.begin - b.begin);
  for (let i = 1; i < byStart.length; i++) {
    const a = byStart[i - 1]!;
    const b = byStart[i]!;
    if (b.begin < a.end) throw new ArgumentError(path, `tensors ${show(a.name)} and ${show(b.name)} overlap in the data section`);
  }
  return { path, version, fileBytes, alignment, dataStart, metadata, tensors };
}

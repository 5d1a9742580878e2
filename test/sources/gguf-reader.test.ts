/**
 * The GGUF reader (src/sources/gguf/reader.ts) on files from the test writer
 * and on hostile ones: truncated anywhere, a huge tensor count, a huge string
 * length, a huge array, misaligned data, an unknown type, a tensor past the
 * end of the file, overlapping tensors, bad versions. Each gets a clear error
 * naming the file and the field, quickly and without a large allocation
 * (every claim is checked against the file's size before anything is
 * allocated for it).
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { parseGgufConfig } from "../../src/model/gguf/config.js";
import { readGgufHeader, isGgufFile } from "../../src/sources/gguf/reader.js";
import { quantize } from "../../src/sources/gguf/quantize.js";
import { encodeGgufHeader, gguf, writeGguf, type WriteGgufOptions } from "../../src/sources/gguf/writer.js";

const root = mkdtempSync(join(tmpdir(), "kvflash-gguf-reader-"));
after(() => rmSync(root, { recursive: true, force: true }));

const values = (n: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i));
const OPTIONS: WriteGgufOptions = {
  metadata: {
    "general.architecture": gguf.str("llama"),
    "general.name": gguf.str("tiny ✓"),
    "llama.block_count": gguf.u32(2),
    "llama.rope.freq_base": gguf.f32(10000),
    "some.flag": gguf.bool(true),
    "some.i64": { type: "i64", value: -5 },
    "some.f64": { type: "f64", value: 0.1 },
    "some.list": gguf.strings(["a", "", "ü"]),
  },
  tensors: [
    { name: "a", type: "F32", shape: [3, 5], data: quantize("F32", values(15), 5) },
    { name: "b", type: "Q8_0", shape: [2, 64], data: quantize("Q8_0", values(128), 64) },
    { name: "c", type: "Q4_K", shape: [256], data: quantize("Q4_K", values(256), 256) },
  ],
};

function file(name: string, bytes: Uint8Array): string {
  const path = join(root, name);
  writeFileSync(path, bytes);
  return path;
}
const good = join(root, "good.gguf");
writeGguf(good, OPTIONS);
const goodBytes = new Uint8Array(readFileSync(good));
const headerBytes = encodeGgufHeader(OPTIONS).header;

/** The byte offset of the first occurrence of `text` (a key or tensor name) in the header. */
function find(text: string, from = 0): number {
  const needle = new TextEncoder().encode(text);
  outer: for (let i = from; i < headerBytes.length; i++) {
    for (let j = 0; j < needle.length; j++) if (headerBytes[i + j] !== needle[j]) continue outer;
    return i;
  }
  throw new Error(`${text} not in header`);
}
function patched(name: string, at: number, write: (v: DataView) => void): string {
  const b = goodBytes.slice();
  write(new DataView(b.buffer, at));
  return file(name, b);
}

test("a written file reads back: version, metadata of every type, tensor shapes, types and aligned ranges", () => {
  const h = readGgufHeader(good);
  assert.equal(h.version, 3);
  assert.equal(h.alignment, 32);
  assert.equal(h.metadata.get("general.name"), "tiny ✓");
  assert.equal(h.metadata.get("llama.block_count"), 2);
  assert.equal(h.metadata.get("some.flag"), true);
  assert.equal(h.metadata.get("some.i64"), -5);
  assert.equal(h.metadata.get("some.f64"), 0.1);
  assert.deepEqual(h.metadata.get("some.list"), ["a", "", "ü"]);
  assert.deepEqual(h.tensors.map((t) => [t.name, t.type.name, t.shape, t.ne]), [
    ["a", "F32", [3, 5], [5, 3]],
    ["b", "Q8_0", [2, 64], [64, 2]],
    ["c", "Q4_K", [256], [256]],
  ]);
  for (const t of h.tensors) assert.equal((t.begin - h.dataStart) % 32, 0);
  assert.equal(h.tensors[1]!.end - h.tensors[1]!.begin, 2 * 2 * 34);
  assert.equal(h.tensors[2]!.end, goodBytes.length);
  assert.equal(isGgufFile(good), true);
  const v2 = join(root, "v2.gguf");
  writeGguf(v2, { ...OPTIONS, version: 2 });
  assert.equal(readGgufHeader(v2).version, 2);
});

test("general.alignment moves the data and every offset", () => {
  const path = join(root, "align64.gguf");
  writeGguf(path, { ...OPTIONS, metadata: { ...OPTIONS.metadata, "general.alignment": gguf.u32(64) } });
  const h = readGgufHeader(path);
  assert.equal(h.alignment, 64);
  assert.equal(h.dataStart % 64, 0);
  for (const t of h.tensors) assert.equal(t.begin % 64, 0);
  const bad = join(root, "align48.gguf");
  writeGguf(bad, { ...OPTIONS, metadata: { ...OPTIONS.metadata, "general.alignment": gguf.u32(48) } });
  assert.throws(() => readGgufHeader(bad), /general\.alignment must be a power of two, got 48/);
});

test("a file truncated at any byte of its header or data is refused with an error naming the field", () => {
  const cuts = [0, 3, 10, 23, 30, 60, headerBytes.length - 1, goodBytes.length - 1];
  for (let cut = 24; cut < headerBytes.length; cut += 37) cuts.push(cut);
  for (const cut of cuts) {
    const path = file("cut.gguf", goodBytes.subarray(0, cut));
    assert.throws(() => readGgufHeader(path), (e: Error) => {
      assert.match(e.message, /cut\.gguf (is not a GGUF file|.*(truncated|runs past the end|cannot fit|the file has))/, `cut at ${cut}: ${e.message}`);
      return true;
    });
  }
});

test("hostile counts and lengths fail before allocating: tensor count, metadata count, string length, array length", () => {
  const huge = (name: string, at: number) => patched(name, at, (v) => v.setBigUint64(0, 0xffff_ffff_ffffn, true));
  const t0 = performance.now();
  assert.throws(() => readGgufHeader(huge("tensors.gguf", 8)), /tensor_count 281474976710655 cannot fit in a \d+-byte file/);
  assert.throws(() => readGgufHeader(huge("kvs.gguf", 16)), /metadata_kv_count 281474976710655 cannot fit/);
  assert.throws(() => readGgufHeader(huge("keylen.gguf", 24)), /metadata key #0 has length 281474976710655, above the 16777216-byte limit/);
  const nameAt = find("tiny ✓") - 8;
  assert.throws(() => readGgufHeader(patched("strlen.gguf", nameAt, (v) => v.setBigUint64(0, 1_000_000n, true))), /metadata general\.name has length 1000000, which runs past the end of the file/);
  const listAt = find("some.list") + "some.list".length + 4 + 4;
  assert.throws(() => readGgufHeader(patched("arrlen.gguf", listAt, (v) => v.setBigUint64(0, 3_000_000n, true))), /metadata some\.list has 3000000 elements, which need at least 24000000 bytes/);
  assert.throws(() => readGgufHeader(huge("bigval.gguf", listAt)), /metadata some\.list length is 281474976710655|above the limit/);
  assert.throws(() => readGgufHeader(patched("u64.gguf", 8, (v) => v.setBigUint64(0, 0xffff_ffff_ffff_ffffn, true))), /tensor_count is 18446744073709551615, beyond any file/);
  assert.ok(performance.now() - t0 < 2000, "hostile headers are refused quickly");
});

test("bad magic, version, value type, bool byte and duplicate keys are refused", () => {
  assert.throws(() => readGgufHeader(patched("magic.gguf", 0, (v) => v.setUint32(0, 0x12345678, true))), /is not a GGUF file: magic 0x12345678/);
  assert.throws(() => readGgufHeader(patched("v1.gguf", 4, (v) => v.setUint32(0, 1, true))), /has GGUF version 1; kvflash reads versions 2 and 3/);
  const typeAt = find("general.name") + "general.name".length;
  assert.throws(() => readGgufHeader(patched("vtype.gguf", typeAt, (v) => v.setUint32(0, 13, true))), /metadata general\.name has unknown value type 13/);
  const boolAt = find("some.flag") + "some.flag".length + 4;
  assert.throws(() => readGgufHeader(patched("bool.gguf", boolAt, (v) => v.setUint8(0, 7))), /metadata some\.flag is a bool with byte value 7/);
  const dup = find("some.flag");
  assert.throws(() => readGgufHeader(patched("dup.gguf", dup, (v) => new Uint8Array(v.buffer, v.byteOffset).set(new TextEncoder().encode("some.list")))), /some\.list.*appears twice|metadata some\.list/);
});

test("tensor index: unknown and unsupported types, misaligned offsets, rows not whole blocks, past-the-end and overlapping tensors", () => {
  const bAt = find("\u0001\u0000\u0000\u0000\u0000\u0000\u0000\u0000b", 30) + 9; // tensor "b" (u64 length 1, then "b"): n_dims follows
  const typeAt = bAt + 4 + 2 * 8; // n_dims, ne[0], ne[1]
  assert.throws(() => readGgufHeader(patched("type.gguf", typeAt, (v) => v.setUint32(0, 77, true))), /tensor "b" type is unknown ggml type 77/);
  assert.throws(() => readGgufHeader(patched("iq.gguf", typeAt, (v) => v.setUint32(0, 16, true))), /tensor "b" type is IQ2_XXS \(ggml type 16\), which kvflash does not read/);
  assert.throws(() => readGgufHeader(patched("misaligned.gguf", typeAt + 4, (v) => v.setBigUint64(0, 96n + 4n, true))), /tensor "b" offset 100 is not a multiple of the alignment 32/);
  assert.throws(() => readGgufHeader(patched("past.gguf", typeAt + 4, (v) => v.setBigUint64(0, 1n << 40n, true))), /tensor "b" \(Q8_0 \[64, 2\], 136 bytes at data offset 1099511627776\) runs past the end of the file/);
  assert.throws(() => readGgufHeader(patched("overlap.gguf", typeAt + 4, (v) => v.setBigUint64(0, 32n, true))), /tensors "a" and "b" overlap/);
  assert.throws(() => readGgufHeader(patched("ne0.gguf", bAt + 4, (v) => v.setBigUint64(0, 48n, true))), /tensor "b" has rows of 48 values, not a multiple of Q8_0's block of 32/);
  assert.throws(() => readGgufHeader(patched("ndims.gguf", bAt, (v) => v.setUint32(0, 9, true))), /tensor "b" n_dims must be in 1\.\.4, got 9/);
  assert.throws(() => readGgufHeader(patched("dims0.gguf", bAt + 4, (v) => v.setBigUint64(0, 0n, true))), /tensor "b" ne\[0\] must be ≥ 1, got 0/);
  assert.throws(() => readGgufHeader(patched("overflow.gguf", bAt + 4, (v) => { v.setBigUint64(0, 1n << 40n, true); v.setBigUint64(8, 1n << 40n, true); })), /tensor "b" has 1099511627776 × 1099511627776 elements, which overflows/);
  assert.throws(() => readGgufHeader(file("tiny.gguf", goodBytes.subarray(0, 12))), /is not a GGUF file: 12 bytes/);
  assert.throws(() => readGgufHeader(join(root, "absent.gguf")), /absent\.gguf cannot be opened/);
});

test("absurd hyperparameters (block_count 1e9, embedding_length 1e9, context 1e12) are refused by the config, naming the key, before any allocation", () => {
  const withMeta = (name: string, key: string, value: number) => {
    const path = join(root, name);
    const metadata = { ...OPTIONS.metadata, "llama.embedding_length": gguf.u32(64), "llama.feed_forward_length": gguf.u32(128), "llama.attention.head_count": gguf.u32(4) };
    writeGguf(path, { ...OPTIONS, metadata: { ...metadata, [key]: { type: "u64", value } } });
    return path;
  };
  const t0 = performance.now();
  assert.throws(() => parseGgufConfig(readGgufHeader(withMeta("layers.gguf", "llama.block_count", 1e9))), /llama\.block_count must be ≤ 1024 .*got 1000000000/);
  assert.throws(() => parseGgufConfig(readGgufHeader(withMeta("hidden.gguf", "llama.embedding_length", 1e9))), /llama\.embedding_length must be ≤ 65536 .*got 1000000000/);
  assert.ok(performance.now() - t0 < 2000, "refused quickly");
});

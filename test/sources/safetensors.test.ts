// The safetensors reader and writer: round trips into the shared memory, and
// hostile files that must fail with an error naming the file and the fault,
// leaving no allocation behind.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { LoadProgress } from "../../src/sources/progress.js";
import { MAX_HEADER_BYTES, freeTensors, loadSafetensors, readSafetensorsHeader } from "../../src/sources/safetensors.js";
import { type Runtime, createRuntime, encodeValue } from "../../src/ops-entry.js";
import { writeSafetensors } from "../../src/sources/safetensors-writer.js";

let rt: Runtime;
let dir: string;
before(async () => {
  rt = await createRuntime({ threads: 1 });
  dir = mkdtempSync(join(tmpdir(), "kvflash-st-"));
});
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  await rt.dispose();
});

function f32Bytes(values: number[]): Uint8Array {
  return new Uint8Array(new Float32Array(values).buffer);
}

function u16Bytes(dtype: "f16" | "bf16", values: number[]): Uint8Array {
  return new Uint8Array(new Uint16Array(values.map((v) => encodeValue(dtype, v))).buffer);
}

/** A file made of an 8-byte length, a header string and data bytes, as a hostile writer would make it. */
function rawFile(name: string, header: string | Uint8Array, data = new Uint8Array(0), declaredLength?: bigint): string {
  const h = typeof header === "string" ? new TextEncoder().encode(header) : header;
  const buf = new Uint8Array(8 + h.length + data.length);
  new DataView(buf.buffer).setBigUint64(0, declaredLength ?? BigInt(h.length), true);
  buf.set(h, 8);
  buf.set(data, 8 + h.length);
  const path = join(dir, name);
  writeFileSync(path, buf);
  return path;
}

test("write then load: f32, f16, bf16, a scalar and an empty tensor, bytes exact", () => {
  const path = join(dir, "roundtrip.safetensors");
  const a = [1, -2.5, 3.25, Math.fround(1e-3), 65504, -0];
  const tensors = [
    { name: "a.f32", dtype: "f32" as const, shape: [2, 3], data: f32Bytes(a) },
    { name: "b.f16", dtype: "f16" as const, shape: [3], data: u16Bytes("f16", [0.5, -1, 2048]) },
    { name: "c.bf16", dtype: "bf16" as const, shape: [1, 2, 2], data: u16Bytes("bf16", [1, 2, 3, -4]) },
    { name: "scalar", dtype: "f32" as const, shape: [], data: f32Bytes([7]) },
    { name: "empty", dtype: "bf16" as const, shape: [0, 4], data: new Uint8Array(0) },
  ];
  const size = writeSafetensors(path, tensors, { format: "pt" });
  assert.equal(size, readFileSync(path).length);
  const headerLen = Number(readFileSync(path).readBigUInt64LE(0));
  assert.equal(headerLen % 8, 0, "header padded to 8 bytes");

  const header = readSafetensorsHeader(path);
  assert.deepEqual(header.metadata, { format: "pt" });
  assert.deepEqual(
    header.tensors.map((t) => [t.name, t.dtype, t.shape]),
    tensors.map((t) => [t.name, t.dtype, t.shape]),
  );
  const live = rt.heap.liveCount;
  const loaded = loadSafetensors(rt, path);
  assert.equal(loaded.size, 5);
  for (const t of tensors) {
    const got = loaded.get(t.name)!;
    assert.equal(got.dtype, t.dtype);
    assert.deepEqual(got.shape, t.shape);
    assert.deepEqual(new Uint8Array(rt.memory.buffer, got.ptr, t.data.length), t.data, t.name);
  }
  assert.deepEqual([...loaded.get("a.f32")!.toFloat32()], a);
  assert.deepEqual([...loaded.get("c.bf16")!.toFloat32()], [1, 2, 3, -4]);
  freeTensors(rt, loaded);
  assert.equal(rt.heap.liveCount, live);
});

test("a subset loads in file order; a name the file lacks is an error", () => {
  const path = join(dir, "subset.safetensors");
  writeSafetensors(path, [
    { name: "x", dtype: "f32", shape: [2], data: f32Bytes([1, 2]) },
    { name: "y", dtype: "f32", shape: [1], data: f32Bytes([3]) },
  ]);
  const got = loadSafetensors(rt, path, { names: ["y"] });
  assert.deepEqual([...got.keys()], ["y"]);
  assert.deepEqual([...got.get("y")!.toFloat32()], [3]);
  freeTensors(rt, got);
  const live = rt.heap.liveCount;
  assert.throws(() => loadSafetensors(rt, path, { names: ["x", "z"] }), /has no tensor "z"/);
  assert.equal(rt.heap.liveCount, live);
});

test("tensors larger than one read chunk stream into the memory intact", () => {
  const path = join(dir, "big.safetensors");
  const n = (32 << 20) / 4 + 3; // 32 MiB + 12 bytes: two full 16 MiB read chunks and a ragged tail
  const values = new Float32Array(n);
  for (let i = 0; i < n; i++) values[i] = (i % 9973) - 4000.5;
  writeSafetensors(path, [
    { name: "pad", dtype: "bf16", shape: [3], data: u16Bytes("bf16", [1, 2, 3]) },
    { name: "big", dtype: "f32", shape: [n], data: new Uint8Array(values.buffer) },
  ]);
  const seen: number[] = [];
  const progress = new LoadProgress(n * 4 + 6, { enabled: false });
  const got = loadSafetensors(rt, path, { progress });
  seen.push(progress.done);
  const big = got.get("big")!;
  const view = new Float32Array(rt.memory.buffer, big.ptr, n);
  assert.equal(view[0], -4000.5);
  assert.equal(view[n - 1], ((n - 1) % 9973) - 4000.5);
  assert.deepEqual(view.subarray(16 << 18, (16 << 18) + 4), values.subarray(16 << 18, (16 << 18) + 4));
  assert.deepEqual(seen, [n * 4 + 6]);
  freeTensors(rt, got);
});

const ok = (name: string, dtype = "F32", shape = [2], offsets = [0, 8]) => ({ [name]: { dtype, shape, data_offsets: offsets } });

const hostile: { name: string; make: () => string; error: RegExp }[] = [
  { name: "shorter than the length field", make: () => (writeFileSync(join(dir, "tiny"), "abc"), join(dir, "tiny")), error: /3 bytes, fewer than the 8-byte header length/ },
  { name: "header length beyond the file", make: () => rawFile("beyond", "{}", new Uint8Array(0), 1000n), error: /header length 1000 runs past the end of the file \(10 bytes\)/ },
  { name: "absurd header length", make: () => rawFile("absurd", "{}", new Uint8Array(0), 2n ** 62n), error: new RegExp(`header length ${2n ** 62n} exceeds the ${MAX_HEADER_BYTES}-byte limit`) },
  { name: "header length 2^64 − 1", make: () => rawFile("max", "{}", new Uint8Array(0), 2n ** 64n - 1n), error: /exceeds the 100000000-byte limit/ },
  { name: "invalid JSON", make: () => rawFile("json", '{"a": {"dtype": "F32",'), error: /header is not valid JSON/ },
  { name: "invalid UTF-8", make: () => rawFile("utf8", new Uint8Array([0x7b, 0xff, 0xfe, 0x7d])), error: /header is not valid UTF-8/ },
  { name: "header not an object", make: () => rawFile("array", "[1, 2]"), error: /header must be a JSON object, got \[1, 2\]/ },
  {
    name: "overlapping offsets",
    make: () => rawFile("overlap", JSON.stringify({ ...ok("a", "F32", [2], [0, 8]), ...ok("b", "F32", [2], [4, 12]) }), new Uint8Array(12)),
    error: /tensors "a" \[0, 8\) and "b" \[4, 12\) overlap/,
  },
  {
    name: "offsets beyond the data",
    make: () => rawFile("range", JSON.stringify(ok("a", "F32", [4], [0, 16])), new Uint8Array(8)),
    error: /tensor "a" data_offsets \[0, 16\] run past the end of the data \(8 bytes after the header\)/,
  },
  {
    name: "offsets that end before they begin",
    make: () => rawFile("reversed", JSON.stringify(ok("a", "F32", [0], [8, 0])), new Uint8Array(8)),
    error: /data_offsets \[8, 0\] end before they begin/,
  },
  {
    name: "byte count that disagrees with dtype × shape",
    make: () => rawFile("count", JSON.stringify(ok("w", "BF16", [3, 2], [0, 8])), new Uint8Array(8)),
    error: /tensor "w" holds 8 bytes, but BF16 × shape \[3, 2\] needs 12/,
  },
  { name: "unknown dtype", make: () => rawFile("dtype", JSON.stringify(ok("a", "F17")), new Uint8Array(8)), error: /tensor "a" has unknown dtype "F17" \(supported: F32, F16, BF16\)/ },
  { name: "unsupported dtype", make: () => rawFile("i8", JSON.stringify(ok("a", "I8", [8])), new Uint8Array(8)), error: /tensor "a" has dtype I8, which kvflash does not load/ },
  { name: "negative dimension", make: () => rawFile("shape", JSON.stringify(ok("a", "F32", [-2])), new Uint8Array(8)), error: /shape must be a list of non-negative integers, got \[-2\]/ },
  { name: "fractional offsets", make: () => rawFile("frac", JSON.stringify(ok("a", "F32", [2], [0, 7.5])), new Uint8Array(8)), error: /data_offsets must be \[begin, end\] non-negative integers/ },
  { name: "non-string metadata", make: () => rawFile("meta", JSON.stringify({ __metadata__: { step: 3 } })), error: /__metadata__.step must be a string, got 3/ },
];

for (const h of hostile) {
  test(`hostile file: ${h.name}`, () => {
    const path = h.make();
    const live = rt.heap.liveCount;
    assert.throws(() => readSafetensorsHeader(path), (e: Error) => e.name === "ArgumentError" && e.message.startsWith(path) && h.error.test(e.message));
    assert.throws(() => loadSafetensors(rt, path), h.error);
    assert.equal(rt.heap.liveCount, live, "nothing stays allocated");
  });
}

test("a missing file names the path", () => {
  assert.throws(() => readSafetensorsHeader(join(dir, "nope.safetensors")), /nope\.safetensors cannot be opened/);
});

test("the writer rejects a byte count that disagrees with the shape, and duplicate names", () => {
  const path = join(dir, "bad-write.safetensors");
  assert.throws(() => writeSafetensors(path, [{ name: "a", dtype: "f16", shape: [3], data: new Uint8Array(4) }]), /tensors\[0\]\.data must hold 6 bytes for f16 \[3\], got 4/);
  assert.throws(
    () =>
      writeSafetensors(path, [
        { name: "a", dtype: "f32", shape: [1], data: new Uint8Array(4) },
        { name: "a", dtype: "f32", shape: [1], data: new Uint8Array(4) },
      ]),
    /tensors\[1\]\.name duplicates "a"/,
  );
});

test("progress: one redrawn line on a TTY, a line per 10 % elsewhere, nothing when disabled", () => {
  const sink = (isTTY: boolean) => {
    const chunks: string[] = [];
    return { chunks, stream: { isTTY, write: (s: string) => chunks.push(s) } };
  };
  const tty = sink(true);
  const p = new LoadProgress(1000, { stream: tty.stream, intervalMs: 0 });
  p.add(250);
  p.add(750);
  p.finish();
  p.finish();
  assert.ok(tty.chunks.every((c) => c.startsWith("\r")));
  assert.match(tty.chunks[0]!, /loading weights \[#####···············\]  25%  250 B \/ 1000 B  .*\/s/);
  assert.match(tty.chunks.at(-1)!, /100%.*\n$/);
  assert.equal(tty.chunks.length, 3);

  const log = sink(false);
  const q = new LoadProgress(100, { stream: log.stream, enabled: true });
  for (let i = 0; i < 100; i++) q.add(1);
  q.finish();
  assert.equal(log.chunks.length, 11, "0 %, 10 %, …, 90 % and the final line");
  assert.ok(log.chunks.every((c) => c.endsWith("\n") && !c.includes("\r")));

  const quiet = sink(false);
  const r = new LoadProgress(10, { stream: quiet.stream });
  r.add(10);
  r.finish();
  assert.equal(quiet.chunks.length, 0, "not a TTY and not asked for");
});

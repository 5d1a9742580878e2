// bench/decode-roofline.ts: the roofline fields of the gguf suite's rows (issue #30), with no
// engine and no timing: the bytes llama.cpp reads per decoded token from a real GGUF file's
// index (tied and untied embeddings, alignment padding not counted), and the GB/s and
// roofline fraction computed from them.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { decodeRoofline, ggufDecodeBytes } from "../../bench/decode-roofline.js";
import { readGgufHeader } from "../../src/sources/gguf/reader.js";
import { gguf, writeGguf } from "../../src/sources/gguf/writer.js";
import { GGML_TYPES, ggmlRowBytes } from "../../src/tensor/ggml-types.js";

const root = mkdtempSync(join(tmpdir(), "kvflash-decode-roofline-"));
after(() => rmSync(root, { recursive: true, force: true }));

/** A tensor of `rows` × `cols` in `type`, its bytes a counting pattern (the index is all this test reads). */
function tensor(name: string, type: "Q8_0" | "F32", rows: number, cols: number) {
  const data = new Uint8Array(ggmlRowBytes(GGML_TYPES[type], cols) * rows).map((_, i) => i * 7);
  return { name, type, shape: rows === 1 ? [cols] : [rows, cols], data };
}

/** One layer's tensors as llama.cpp names them (hidden 64, MLP 96, vocab 50; odd sizes so no tensor ends on the 32-byte alignment). */
function layerTensors() {
  return [
    tensor("blk.0.attn_norm.weight", "F32", 1, 64),
    tensor("blk.0.attn_q.weight", "Q8_0", 64, 64),
    tensor("blk.0.attn_q.bias", "F32", 1, 64),
    tensor("blk.0.attn_k.weight", "Q8_0", 32, 64),
    tensor("blk.0.attn_v.weight", "Q8_0", 32, 64),
    tensor("blk.0.attn_output.weight", "Q8_0", 64, 64),
    tensor("blk.0.ffn_norm.weight", "F32", 1, 64),
    tensor("blk.0.ffn_gate.weight", "Q8_0", 96, 64),
    tensor("blk.0.ffn_up.weight", "Q8_0", 96, 64),
    tensor("blk.0.ffn_down.weight", "Q8_0", 64, 96),
    tensor("output_norm.weight", "F32", 1, 64),
  ];
}

function write(name: string, tensors: ReturnType<typeof tensor>[]): string {
  const path = join(root, name);
  writeGguf(path, { metadata: { "general.architecture": gguf.str("qwen2"), "general.alignment": gguf.u32(32) }, tensors });
  return path;
}

test("ggufDecodeBytes: tied embeddings (no output.weight): every tensor's bytes, the embedding whole as the LM head, padding not counted", () => {
  const embedding = tensor("token_embd.weight", "Q8_0", 50, 64);
  const all = [embedding, ...layerTensors()];
  const path = write("tied.gguf", all);
  const header = readGgufHeader(path);
  const want = all.reduce((n, t) => n + t.data.length, 0);
  assert.equal(ggufDecodeBytes(header.tensors), want);
  // The file holds more than the tensors (header, alignment padding between them): the sum is of the ranges, not of offsets.
  assert.ok(statSync(path).size - header.dataStart > want, "the fixture must have padding between tensors");
  // Q8_0: 34 bytes a block of 32.
  assert.equal(embedding.data.length, 50 * 2 * 34);
});

test("ggufDecodeBytes: untied (output.weight present): the embedding is read one row a token and not counted, the LM head is", () => {
  const embedding = tensor("token_embd.weight", "Q8_0", 50, 64);
  const head = tensor("output.weight", "Q8_0", 50, 64);
  const layers = layerTensors();
  const header = readGgufHeader(write("untied.gguf", [embedding, ...layers, head]));
  assert.equal(ggufDecodeBytes(header.tensors), layers.reduce((n, t) => n + t.data.length, 0) + head.data.length);
  // Order does not matter: the head after or before the embedding.
  assert.equal(ggufDecodeBytes([...header.tensors].reverse()), ggufDecodeBytes(header.tensors));
});

test("ggufDecodeBytes: a range that is not 0 ≤ begin ≤ end is an error naming the tensor and the range", () => {
  assert.equal(ggufDecodeBytes([]), 0);
  assert.throws(() => ggufDecodeBytes([{ name: "blk.3.ffn_up.weight", begin: 100, end: 90 }]), /tensors\["blk\.3\.ffn_up\.weight"\] must have integer byte offsets 0 ≤ begin ≤ end, got \[100, 90\)/);
  assert.throws(() => ggufDecodeBytes([{ name: "x", begin: 0.5, end: 90 }]), /got \[0\.5, 90\)/);
});

test("decodeRoofline: GB/s = bytes × tok/s, the fraction over the read bandwidth, MB per token", () => {
  // The lead's measurement: kvflash's 556 MB a step at 53 ms against 15.2 GB/s.
  const k = decodeRoofline({ bytesPerToken: 556e6, decodeTokS: 1000 / 53, readGbps: 15.2 });
  assert.equal(k.decode_mb_per_token, 556);
  assert.ok(Math.abs(k.decode_gbps - 10.4906) < 1e-4, String(k.decode_gbps));
  assert.ok(Math.abs(k.decode_roofline - 10.4906 / 15.2) < 1e-5, String(k.decode_roofline));
  assert.equal(k.read_gbps, 15.2);
  // A native engine may read faster than the wasm probe: the fraction passes 1 and is kept as it is.
  const c = decodeRoofline({ bytesPerToken: 525e6, decodeTokS: 40, readGbps: 15 });
  assert.equal(c.decode_gbps, 21);
  assert.equal(c.decode_roofline, 1.4);
});

test("decodeRoofline: a missing or non-positive input is an error naming it and the value", () => {
  assert.throws(() => decodeRoofline({ bytesPerToken: 0, decodeTokS: 20, readGbps: 15 }), /bytesPerToken must be a finite number > 0, got 0/);
  assert.throws(() => decodeRoofline({ bytesPerToken: 5e8, decodeTokS: NaN, readGbps: 15 }), /decodeTokS must be a finite number > 0, got NaN/);
  assert.throws(() => decodeRoofline({ bytesPerToken: 5e8, decodeTokS: 20, readGbps: Infinity }), /readGbps must be a finite number > 0, got Infinity/);
});

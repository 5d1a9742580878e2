/**
 * Hostile GGUF files (issue 32, "model files are input too"): a forged tensor
 * that the config reads (rope_freqs.weight) is checked against the shape the
 * config implies before a byte of it is read, and tokenizer metadata whose
 * sizes no real model has (token length, vocabulary, merges) is refused
 * before the tokenizer is built, naming the file and the key; a long token is
 * built in linear time.
 */
import assert from "node:assert/strict";
import { closeSync, mkdtempSync, openSync, rmSync, ftruncateSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { writeTinyModel } from "../../src/testing/index.js";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { openGgufModel } from "../../src/model/gguf/gguf-model.js";
import { encodeGgufHeader, gguf, type GgufTyped, type GgufWriteTensor } from "../../src/model/gguf/writer.js";

const root = mkdtempSync(join(tmpdir(), "kvflash-gguf-hostile-"));
after(() => rmSync(root, { recursive: true, force: true }));

const LLAMA: Record<string, GgufTyped> = {
  "general.architecture": gguf.str("llama"),
  "llama.embedding_length": gguf.u32(8),
  "llama.feed_forward_length": gguf.u32(16),
  "llama.block_count": gguf.u32(1),
  "llama.attention.head_count": gguf.u32(2),
  "llama.attention.head_count_kv": gguf.u32(1),
};

/**
 * A GGUF file of `tensors` whose data section is a hole (ftruncate): only the
 * header is written, so a file that declares a 1 GiB tensor takes no disk and
 * no time to make. The data arrays are only measured, never read.
 */
function sparseGguf(name: string, metadata: Record<string, GgufTyped>, tensors: GgufWriteTensor[]): string {
  const path = join(root, name);
  const { header, offsets, alignment } = encodeGgufHeader({ metadata, tensors });
  const dataStart = Math.ceil(header.length / alignment) * alignment;
  const end = tensors.reduce((e, t, i) => Math.max(e, dataStart + offsets[i]! + t.data.length), dataStart);
  const fd = openSync(path, "w");
  try {
    writeSync(fd, header);
    ftruncateSync(fd, end);
  } finally {
    closeSync(fd);
  }
  return path;
}

test("a 1 GiB rope_freqs.weight is refused by its shape before it is read (peak RSS grows by far less than the tensor)", () => {
  const GiB = 1 << 30;
  const path = sparseGguf("rope-1gib.gguf", LLAMA, [
    { name: "token_embd.weight", type: "F32", shape: [4, 8], data: new Uint8Array(4 * 8 * 4) },
    // An untouched zero-filled buffer: its pages are never committed, so it adds nothing to RSS here.
    { name: "rope_freqs.weight", type: "F32", shape: [GiB / 4], data: new Uint8Array(GiB) },
  ]);
  const before = process.resourceUsage().maxRSS * 1024;
  assert.throws(() => openGgufModel(path), (e: Error) => e.message.includes(`${path} rope_freqs.weight must be a [2] tensor (head dim / 2), got [268435456]`));
  const grew = process.resourceUsage().maxRSS * 1024 - before;
  assert.ok(grew < 256 << 20, `peak RSS grew by ${(grew / 2 ** 20).toFixed(0)} MiB`);
});

test("a rope_freqs.weight of the right shape is read and gives back Llama 3.1's RoPE scaling", () => {
  const scaling = { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 };
  const dir = join(root, "llama31");
  writeTinyModel(dir, { arch: "llama", hiddenSize: 32, numHeads: 2, numKvHeads: 1, numLayers: 1, ropeTheta: 500000, ropeScaling: scaling });
  const path = join(root, "llama31.gguf");
  convertModelDirToGguf(dir, path, { type: "F32" });
  assert.deepEqual(openGgufModel(path).config.ropeScaling, { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 });
});

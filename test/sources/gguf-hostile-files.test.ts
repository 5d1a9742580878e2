/**
 * Hostile GGUF files (issue 32, "model files are input too"): a forged tensor
 * that the config reads (rope_freqs.weight) is checked against the shape the
 * config implies before a byte of it is read, and tokenizer metadata whose
 * sizes no real model has (token length, vocabulary, merges) is refused
 * before the tokenizer is built, naming the file and the key; a long token is
 * built in linear time.
 */
import assert from "node:assert/strict";
import { closeSync, ftruncateSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { writeTinyModel } from "../../src/testing/index.js";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { readJsonFile } from "../../src/json-file.js";
import { GGUF_MAGIC, GGUF_VALUE } from "../../src/sources/gguf/format.js";
import { openGgufModel } from "../../src/model/gguf/gguf-model.js";
import { GgufMetadata } from "../../src/sources/gguf/metadata.js";
import { readGgufHeader } from "../../src/sources/gguf/reader.js";
import { mergesFromScores } from "../../src/sources/gguf/spm-merges.js";
import { GGUF_TOKENIZER_LIMITS } from "../../src/sources/gguf/tokenizer-limits.js";
import { ggufTokenizer } from "../../src/sources/gguf/tokenizer.js";
import { ByteWriter, encodeGgufHeader, gguf, type GgufTyped, type GgufWriteTensor, writeGguf } from "../../src/sources/gguf/writer.js";
import { rng as seeded } from "../helpers/random.js";

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

/** The quadratic SentencePieceExtractor as transformers writes it (every split sliced and looked up): the reference for mergesFromScores. */
function referenceMerges(tokens: readonly string[], scores: readonly number[], mergeable: (id: number) => boolean): [string, string][] {
  const ids = new Map<string, number>();
  tokens.forEach((t, id) => {
    if (mergeable(id) && !ids.has(t)) ids.set(t, id);
  });
  const merges: { a: string; b: string; score: number; ia: number; ib: number; id: number }[] = [];
  for (const [piece, id] of ids) {
    const chars = [...piece];
    for (let i = 1; i < chars.length; i++) {
      const a = chars.slice(0, i).join("");
      const b = chars.slice(i).join("");
      const ia = ids.get(a);
      const ib = ids.get(b);
      if (ia !== undefined && ib !== undefined) merges.push({ a, b, score: scores[id]!, ia, ib, id });
    }
  }
  merges.sort((x, y) => y.score - x.score || x.id - y.id || x.ia - y.ia || x.ib - y.ib);
  return merges.map((m) => [m.a, m.b]);
}

test("SentencePiece merges equal the quadratic reference: random vocabularies (surrogate pairs, repeats, unmergeable ids, tied scores) and the default model's", () => {
  const next = seeded(32);
  const rng = { next };
  const alphabet = ["a", "b", "c", "▁", "é", "🦙", "\ud800", "x"];
  for (let trial = 0; trial < 40; trial++) {
    const tokens: string[] = [];
    const n = 5 + Math.floor(rng.next() * 200);
    for (let i = 0; i < n; i++) {
      const len = 1 + Math.floor(rng.next() * 7);
      tokens.push(Array.from({ length: len }, () => alphabet[Math.floor(rng.next() * alphabet.length)]!).join(""));
    }
    const scores = tokens.map(() => Math.floor(rng.next() * 10)); // ties: the ids decide
    const mergeable = (id: number): boolean => id % 7 !== 3;
    assert.deepEqual(mergesFromScores(tokens, scores, mergeable), referenceMerges(tokens, scores, mergeable), `trial ${trial}`);
  }
  const vocab = ((readJsonFile("models/default/tokenizer.json") as { model: { vocab: Record<string, number> } }).model.vocab);
  const tokens: string[] = [];
  for (const [t, id] of Object.entries(vocab)) tokens[id] = t;
  const scores = tokens.map((_, i) => -i);
  const merges = mergesFromScores(tokens, scores, () => true);
  assert.ok(merges.length > 1000);
  assert.deepEqual(merges, referenceMerges(tokens, scores, () => true));
});

test("a 100k-character piece is split in linear time (the quadratic extractor took minutes; a liveness bound, not a benchmark)", () => {
  const ladder = (L: number): string[] => ["x", "x".repeat(L), "x".repeat(L - 1), "xx", "x".repeat(L - 2)];
  const scores = [0, 5, 4, 3, 2];
  const show = (m: [string, string]): string => `${m[0].length}+${m[1].length}`;
  assert.deepEqual(mergesFromScores(ladder(1000), scores, () => true).map(show), referenceMerges(ladder(1000), scores, () => true).map(show));
  const t0 = performance.now();
  const merges = mergesFromScores(ladder(100_000), scores, () => true);
  const seconds = (performance.now() - t0) / 1000;
  assert.ok(seconds < 5, `took ${seconds.toFixed(1)} s`);
  assert.deepEqual(merges.map(show), ["1+99999", "99999+1", "2+99998", "99998+2", "1+99998", "99998+1", "1+1"]);
});

/** GGUF tokenizer metadata of a small SentencePiece vocabulary plus `extra` tokens. */
function spmMetadata(extra: readonly string[]): Record<string, GgufTyped> {
  const tokens = ["<unk>", "<s>", "</s>", ...Array.from({ length: 256 }, (_, b) => `<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`), "▁", "a", "b", "ab", ...extra];
  return {
    "tokenizer.ggml.model": gguf.str("llama"),
    "tokenizer.ggml.tokens": gguf.strings(tokens),
    "tokenizer.ggml.scores": gguf.f32s(tokens.map((_, i) => -i)),
    "tokenizer.ggml.token_type": gguf.i32s(tokens.map((_, i) => (i === 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1))),
    "tokenizer.ggml.bos_token_id": gguf.u32(1),
    "tokenizer.ggml.eos_token_id": gguf.u32(2),
  };
}

function openTokenizer(name: string, metadata: Record<string, GgufTyped>) {
  const path = join(root, name);
  writeGguf(path, { metadata, tensors: [] });
  return { path, load: () => ggufTokenizer(new GgufMetadata(readGgufHeader(path).metadata, path)) };
}

test("a token longer than the limit (20k characters) is refused before any work, naming the file, the key and the index", () => {
  const { path, load } = openTokenizer("long-token.gguf", spmMetadata(["▁" + "z".repeat(20_000)]));
  assert.throws(load, (e: Error) => e.message === `${path} tokenizer.ggml.tokens[263] has 20001 characters, above the limit of ${GGUF_TOKENIZER_LIMITS.maxTokenChars} for one token`);
  // At the limit it builds, and the long piece is one token.
  const atLimit = "▁" + "z".repeat(GGUF_TOKENIZER_LIMITS.maxTokenChars - 1);
  const ok = openTokenizer("limit-token.gguf", spmMetadata([atLimit])).load();
  assert.equal(ok.tokenToId(atLimit), 263);
  assert.equal(ok.decode([263]), "z".repeat(GGUF_TOKENIZER_LIMITS.maxTokenChars - 1));
});

test("merges past the limit are refused naming the key: derived from the scores, and a gpt2 merges string too long", () => {
  // "▁z…z" pieces of every length up to 2048: each splits at every point, 2M merges of 2.8G characters in all.
  const ladder = Array.from({ length: 2047 }, (_, k) => "▁" + "z".repeat(k + 1));
  const { path, load } = openTokenizer("ladder.gguf", spmMetadata(["z", ...Array.from({ length: 2047 }, (_, k) => "z".repeat(k + 2)), ...ladder]));
  assert.throws(load, (e: Error) => e.message.startsWith(`${path} tokenizer.ggml.tokens with tokenizer.ggml.scores would make merges of more than ${GGUF_TOKENIZER_LIMITS.maxMergeChars} characters in all`));
  const gpt2 = openTokenizer("gpt2-merge.gguf", {
    "tokenizer.ggml.model": gguf.str("gpt2"),
    "tokenizer.ggml.tokens": gguf.strings(["a", "b"]),
    "tokenizer.ggml.merges": gguf.strings(["a b", "a " + "b".repeat(5000)]),
  });
  assert.throws(gpt2.load, (e: Error) => e.message === `${gpt2.path} tokenizer.ggml.merges[1] has 5002 characters, above the limit of 4097 for one merge`);
});

test("a 4M-token vocabulary is refused by the reader when it reads the array's length, before any token", () => {
  // Written directly (the writer encodes 4M strings slowly): the string "t" 4M times, as a GGUF string array.
  const n = 1 << 22;
  const one = Buffer.from([1, 0, 0, 0, 0, 0, 0, 0, "t".charCodeAt(0)]); // u64 length 1, then the byte
  const array = Buffer.alloc(12 + n * one.length);
  array.writeUInt32LE(GGUF_VALUE.STRING, 0);
  array.writeBigUInt64LE(BigInt(n), 4);
  array.fill(one, 12);
  const w = new ByteWriter().u32(GGUF_MAGIC).u32(3).u64(0).u64(3);
  w.string("general.architecture").u32(GGUF_VALUE.STRING).string("llama");
  w.string("tokenizer.ggml.model").u32(GGUF_VALUE.STRING).string("gpt2");
  w.string("tokenizer.ggml.tokens").u32(GGUF_VALUE.ARRAY).bytes(array);
  const path = join(root, "vocab-4m.gguf");
  writeFileSync(path, w.toBytes());
  assert.throws(() => readGgufHeader(path), (e: Error) => e.message.startsWith(`${path} metadata tokenizer.ggml.tokens has ${n} elements, above the limit of ${GGUF_TOKENIZER_LIMITS.maxTokens}`));
});

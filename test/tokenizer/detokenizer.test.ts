// Incremental detokenization on the real tokenizers: the deltas add up to the
// full decode, never carry half a character, and give SentencePiece's "▁" its
// space after a prompt.
import assert from "node:assert/strict";
import { test } from "node:test";
import { IncrementalDetokenizer, Tokenizer } from "../../src/ops-entry.js";
import { realTokenizerDir } from "./real-tokenizers.js";

const tokenizers = {
  llama3: Tokenizer.fromDir(realTokenizerDir("llama3")),
  qwen3: Tokenizer.fromDir(realTokenizerDir("qwen3")),
  mistral: Tokenizer.fromDir(realTokenizerDir("llama2")),
};

const TEXTS = [
  "Hello world, this is a test.",
  "日本語のテキスト、中文文本，한국어 텍스트",
  "emoji 🤗👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵 done",
  "   spaces   and\ttabs\n\n\nnewlines  ",
  "Ελληνικά, עברית, العربية, हिन्दी, ไทย",
  "mixed: naïve café — “quotes” … 1234567 ½ ∑∫√",
];

/** True if `s` has a lone UTF-16 surrogate (half of a code point). */
function hasLoneSurrogate(s: string): boolean {
  return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

test("deltas add up to the full decode and never hold half a character", () => {
  for (const [name, t] of Object.entries(tokenizers)) {
    for (const text of TEXTS) {
      const ids = t.encode(text, { addSpecialTokens: false });
      const detok = new IncrementalDetokenizer(t);
      const deltas = ids.map((id) => detok.push(id));
      deltas.push(detok.flush());
      const expected = t.decode(ids, { skipSpecialTokens: true });
      assert.equal(deltas.join(""), expected, `${name}: ${JSON.stringify(text)}`);
      assert.equal(detok.text, expected);
      for (const d of deltas) {
        assert.ok(!d.includes("\uFFFD"), `${name}: a delta with U+FFFD in ${JSON.stringify(text)}: ${JSON.stringify(d)}`);
        assert.ok(!hasLoneSurrogate(d), `${name}: a delta with a lone surrogate: ${JSON.stringify(d)}`);
      }
      assert.deepEqual(detok.ids, ids);
    }
  }
});

test("a character spread over byte tokens appears only with its last byte", () => {
  // Mistral's byte fallback: 🤗 = <0xF0> <0x9F> <0xA4> <0x97>.
  const t = tokenizers.mistral;
  const detok = new IncrementalDetokenizer(t, { promptIds: t.encode("Look:") });
  const out = [0xf0, 0x9f, 0xa4, 0x97].map((b) => detok.push(3 + b));
  assert.deepEqual(out, ["", "", "", "🤗"]);
  // Llama 3's byte-level BPE splits 🤗 into "ĠðŁ", "¤", "Ĺ".
  const l3 = tokenizers.llama3;
  const ids = l3.encode(" 🤗", { addSpecialTokens: false });
  assert.deepEqual(ids.map((id) => l3.idToToken(id)), ["ĠðŁ", "¤", "Ĺ"]);
  const d3 = new IncrementalDetokenizer(l3);
  assert.deepEqual(ids.map((id) => d3.push(id)), ["", "", " 🤗"]);
});

test("SentencePiece: the prompt's last tokens give the first generated token its leading space", () => {
  const t = tokenizers.mistral;
  const prompt = t.encode("Hello"); // [<s>, ▁Hello]
  const world = t.encode(" world", { addSpecialTokens: false }).at(-1)!; // ▁world
  assert.equal(t.idToToken(world), "▁world");
  const withContext = new IncrementalDetokenizer(t, { promptIds: prompt });
  assert.equal(withContext.push(world), " world");
  // Without context the decoder strips the leading space, as decoding the output alone does.
  const alone = new IncrementalDetokenizer(t);
  assert.equal(alone.push(world), "world");
  assert.equal(t.decode([world]), "world");
});

test("special tokens are skipped by default and kept on request", () => {
  const t = tokenizers.qwen3;
  const ids = t.encode("<|im_start|>assistant\nHi<|im_end|>");
  const skip = new IncrementalDetokenizer(t);
  const keep = new IncrementalDetokenizer(t, { skipSpecialTokens: false });
  assert.equal(ids.map((id) => skip.push(id)).join("") + skip.flush(), "assistant\nHi");
  assert.equal(ids.map((id) => keep.push(id)).join("") + keep.flush(), "<|im_start|>assistant\nHi<|im_end|>");
});

test("flush releases an unfinished character as U+FFFD, as a full decode would", () => {
  const t = tokenizers.mistral;
  const detok = new IncrementalDetokenizer(t);
  assert.equal(detok.push(3 + 0xf0), "");
  assert.equal(detok.push(3 + 0x9f), "");
  const rest = detok.flush();
  assert.equal(rest, t.decode([3 + 0xf0, 3 + 0x9f]));
  assert.ok(rest.includes("\uFFFD"));
  assert.equal(detok.flush(), "", "a second flush has nothing left");
});

test("ids past the tokenizer (a model's padded vocabulary rows) add no text and break nothing", () => {
  const t = tokenizers.qwen3;
  const ids = t.encode("Hello world, again", { addSpecialTokens: false });
  const pad = t.vocabSize + 7;
  const detok = new IncrementalDetokenizer(t, { promptIds: [pad, ...t.encode("Say:", { addSpecialTokens: false })] });
  const deltas = [ids[0]!, pad, ...ids.slice(1), pad].map((id) => detok.push(id));
  deltas.push(detok.flush());
  assert.equal(deltas.join(""), t.decode(ids));
  assert.equal(deltas[1], "");
  assert.deepEqual(detok.ids, [ids[0], pad, ...ids.slice(1), pad]);
  // The tokenizer itself still refuses such an id, naming it.
  assert.throws(() => t.decode([pad]), new RegExp(`ids\\[0\\] must be a token id in \\[0, ${t.vocabSize}\\), got ${pad}`));
});

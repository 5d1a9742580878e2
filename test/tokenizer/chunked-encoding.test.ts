// Chunked encoding (src/tokenizer/chunked-encoding.ts) gives exactly the ids
// of encoding the whole text with @huggingface/tokenizers, on legacy
// SentencePiece tokenizers (the default model's, Mistral's), for random text
// built to hit the cut rules: space runs, literal "▁", added tokens glued to
// words, newlines, tabs, emoji, CJK. stopAfter stops early and says so;
// maxTokenChars bounds what a token stands for; byte-level tokenizers
// (Llama 3, Qwen3: a pre-tokenizer) are never cut.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { Tokenizer } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { chunkCuts, chunkableSentencePiece } from "../../src/tokenizer/chunked-encoding.js";
import { realTokenizerDir } from "./real-tokenizers.js";

const WORDS = ["the", "quick", "brown", "<s>", "</s>", "<unk>", "x<s>y", "  ", "\n", "\t", "é", "日本語", "😀", "▁", "▁▁a", "a▁b", "representations", " ", "42"];

function randomText(seed: number, length: number): string {
  let state = seed;
  const next = (): number => (state = (state * 1103515245 + 12345) % 2147483648) / 2147483648;
  let text = "";
  while (text.length < length) text += WORDS[Math.floor(next() * WORDS.length)]! + (next() < 0.7 ? " " : "");
  return text;
}

function hfOf(dir: string): HfTokenizer {
  const json = (f: string): object => JSON.parse(readFileSync(join(dir, f), "utf8")) as object;
  return new HfTokenizer(json("tokenizer.json"), json("tokenizer_config.json"));
}

for (const [name, dir] of [
  ["the default model's", defaultModelDir()],
  ["Mistral's", realTokenizerDir("llama2")],
] as const) {
  test(`${name} legacy SentencePiece tokenizer: chunked encoding equals whole encoding on 20 adversarial texts`, () => {
    const tok = Tokenizer.fromDir(dir);
    const hf = hfOf(dir);
    assert.ok(chunkableSentencePiece(JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"))));
    for (let seed = 1; seed <= 10; seed++) {
      const text = randomText(seed, 600 + 100 * seed);
      assert.ok(chunkCuts(text, ["<s>", "</s>", "<unk>"]).length > 1, "the text is long enough to be cut");
      for (const addSpecialTokens of [true, false]) {
        assert.deepEqual(tok.encode(text, { addSpecialTokens }), hf.encode(text, { add_special_tokens: addSpecialTokens }).ids, `seed ${seed}, addSpecialTokens ${addSpecialTokens}`);
      }
    }
  });
}

test("cuts: single spaces between non-spaces, never beside a '▁' or an added token", () => {
  const text = `${"ab ".repeat(200)}<s> x ▁ y${" cd".repeat(200)}`;
  const cuts = chunkCuts(text, ["<s>"], 16);
  assert.ok(cuts.length > 10);
  for (const p of cuts) {
    assert.equal(text[p], " ");
    assert.ok(![" ", "▁"].includes(text[p - 1]!) && ![" ", "▁"].includes(text[p + 1]!), `cut at ${p}`);
    const near = text.slice(p - 3, p + 4);
    assert.ok(!near.includes("<s>") || !(text.slice(p - 3, p) === "<s>" || text.slice(p + 1, p + 4) === "<s>"), `cut at ${p} touches <s>`);
  }
  assert.deepEqual(chunkCuts("a".repeat(10_000), [], 16), [], "no space, no cut");
});

test("stopAfter: a text with more tokens stops early with more than stopAfter ids; a shorter one is whole", () => {
  const tok = Tokenizer.fromDir(defaultModelDir());
  const long = randomText(99, 200_000);
  const ids = tok.encode(long, { stopAfter: 500 });
  assert.ok(ids.length > 500 && ids.length < 1000, `got ${ids.length} ids`);
  const short = randomText(7, 3000);
  assert.deepEqual(tok.encode(short, { stopAfter: 100_000 }), tok.encode(short));
});

test("maxTokenChars: no token stands for more characters (Mistral's: 16); byte-level tokenizers are never cut", () => {
  const tok = Tokenizer.fromDir(realTokenizerDir("llama2"));
  assert.equal(tok.maxTokenChars, 16);
  const text = randomText(5, 5000);
  assert.ok(text.length <= tok.encode(text, { addSpecialTokens: false }).length * tok.maxTokenChars);
  for (const pkg of ["llama3", "qwen3"] as const) {
    const json = JSON.parse(readFileSync(join(realTokenizerDir(pkg), "tokenizer.json"), "utf8")) as unknown;
    assert.equal(chunkableSentencePiece(json), false, pkg);
  }
});

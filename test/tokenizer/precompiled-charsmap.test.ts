// SentencePiece's precompiled_charsmap (src/tokenizer/precompiled-charsmap.ts)
// on a table built here (src/testing/charsmap.ts: the double-array trie and
// replacement pool normalizer.cc reads) whose rules are not NFKC's: accents
// stripped, ① → "(1)" where NFKC gives "1", a zero-width space dropped where
// the library's stand-in makes it a space, two-character keys (A + ring →
// Å; ｶﾞ → ガ, which HF applies per character since it is 6 bytes), a rule of
// the empty string. normalize() is checked against Hugging Face's
// Precompiled semantics written out here (graphemes under 6 bytes replaced
// whole by their shortest-prefix rule, else character by character), on
// every rule, mixed texts and random strings over the rules' characters;
// then through the Tokenizer (tokenizer.json's Precompiled normalizer) and a
// GGUF file's tokenizer.ggml.precompiled_charsmap, which give the ids of the
// text normalized by the table, not by NFKC. Bad blobs fail naming the
// normalizer.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError } from "../../src/errors.js";
import { encoderTokenizer } from "../../src/model/encoder/encoder-model.js";
import { ggufEncoderTokenizer } from "../../src/model/encoder/gguf-encoder.js";
import { Prng } from "../../src/tensor/prng.js";
import { PrecompiledCharsmap, graphemes } from "../../src/tokenizer/precompiled-charsmap.js";
import { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import { buildCharsmap } from "../../src/testing/charsmap.js";
import { writeBertGguf } from "../../src/testing/tiny-bert-gguf.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";

/** Rules NFKC does not give (and a few it does). */
const RULES: Record<string, string> = {
  "\u00c4": "A", // NFKC keeps Ä
  "\u00e9": "e",
  "\u2460": "(1)", // NFKC: "1"
  "\u200b": "", // zero-width space: dropped (the library's stand-in makes it " ")
  "\t": " ",
  "\uff76": "\u30ab", // ｶ → カ
  "\uff76\uff9e": "\u30ac", // ｶﾞ → ガ: one grapheme, but 6 UTF-8 bytes, so HF replaces it per character (sentencepiece would take this rule)
  "A\u030a": "\u00c5", // A + ring above → Å: a two-character key, 3 bytes, replaced whole
  "\ufb01": "fi",
  "\u{1f44d}": "+1", // 👍
  x: "X",
};

/** Hugging Face's Precompiled.normalize written out: graphemes < 6 UTF-8 bytes replaced whole by the shortest rule prefixing them, else per character. */
function hfNormalize(text: string, rules: Record<string, string>): string {
  const utf8 = (s: string): number[] => [...new TextEncoder().encode(s)];
  const shortest = (s: string): string | null => {
    const b = utf8(s);
    let best: [number, string] | null = null;
    for (const [k, v] of Object.entries(rules)) {
      const kb = utf8(k);
      if (kb.length <= b.length && kb.every((x, i) => x === b[i]) && (best === null || kb.length < best[0])) best = [kb.length, v];
    }
    return best === null ? null : best[1];
  };
  let out = "";
  for (const { segment } of new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment(text)) {
    const whole = utf8(segment).length < 6 ? shortest(segment) : null;
    if (whole !== null) out += whole;
    else for (const ch of segment) out += shortest(ch) ?? ch;
  }
  return out;
}

let root: string;
let map: PrecompiledCharsmap;
before(() => {
  root = mkdtempSync(join(tmpdir(), "kvflash-charsmap-"));
  map = new PrecompiledCharsmap(buildCharsmap(RULES), "test charsmap");
});
after(() => rmSync(root, { recursive: true, force: true }));

test("each rule, and texts where the table and NFKC differ, normalize as Hugging Face's Precompiled does", () => {
  for (const [k, v] of Object.entries(RULES)) assert.equal(map.normalize(k), k === "\uff76\uff9e" ? "\u30ab\uff9e" : v, JSON.stringify(k));
  const cases: [string, string][] = [
    ["\u00c4pfel \u2460\u200bok", "Apfel (1)ok"],
    ["caf\u00e9\tbar", "cafe bar"],
    ["\uff76\uff9e\uff76", "\u30ab\uff9e\u30ab"], // ｶﾞ is 6 bytes: per character, ﾞ has no rule
    ["\u212bA\u030a", "\u212b\u00c5"], // the two-character key as one grapheme (Å, the Ångström sign, has no rule)
    ["\ufb01le", "file"],
    ["x\u0301y", "Xy"], // a short grapheme with a rule for its first character: replaced whole (the mark goes), as HF does
    ["\u{1f44d}\u{1f3fd}!", "+1\u{1f3fd}!"], // 👍🏽 is 8 bytes: per character
    ["plain ascii 123", "plain ascii 123"],
    ["", ""],
  ];
  for (const [text, want] of cases) {
    assert.equal(map.normalize(text), want, JSON.stringify(text));
    assert.equal(hfNormalize(text, RULES), want, `the written-out semantics agree on ${JSON.stringify(text)}`);
  }
  assert.notEqual(map.normalize("\u2460\u00c4\u200b"), "\u2460\u00c4\u200b".normalize("NFKC"), "a table NFKC does not stand in for");
});

test("random strings over the rules' characters and others = the written-out semantics", () => {
  const alphabet = ["A", "\u030a", "\u00c4", "\u00e9", "\u2460", "\u200b", "\t", "\uff76", "\uff9e", "\ufb01", "\u{1f44d}", "\u{1f3fd}", "x", "y", " ", "\u0301", "e", "\u00e4", "\u4e2d"];
  const rng = new Prng(5);
  for (let t = 0; t < 300; t++) {
    const text = Array.from({ length: rng.nextInt(12) }, () => alphabet[rng.nextInt(alphabet.length)]!).join("");
    assert.equal(map.normalize(text), hfNormalize(text, RULES), JSON.stringify(text));
  }
});

test("graphemes() (ASCII runs by hand, the rest by Intl.Segmenter in 256-character windows) = Intl.Segmenter over the whole text", () => {
  const whole = (t: string): string[] => Array.from(new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment(t), (p) => p.segment);
  // CR LF, marks on ASCII letters, ZWJ emoji, flags (regional indicator pairs), Hangul jamo, a Prepend, controls, CJK, surrogate pairs.
  const pieces = ["a", "b", " ", ".", "\r", "\n", "\r\n", "\t", "\u0301", "\u200d", "\u{1f468}", "\u{1f469}", "\u{1f1eb}", "\u{1f1f7}", "\u1100", "\u1161", "\u11a8", "\u0600", "\u0001", "\u4e2d", "\u{1f44d}", "\u{1f3fd}", "\ufe0f", "\u0915", "\u094d"];
  const rng = new Prng(11);
  for (let t = 0; t < 60; t++) {
    const text = Array.from({ length: 1 + rng.nextInt(t < 50 ? 40 : 700) }, () => pieces[rng.nextInt(pieces.length)]!).join("");
    assert.deepEqual([...graphemes(text)], whole(text), JSON.stringify(text.slice(0, 80)));
  }
  const zalgo = `x${"\u0301".repeat(600)}y`; // one cluster longer than two windows
  assert.deepEqual([...graphemes(zalgo)], whole(zalgo));
  const flags = "\u{1f1eb}\u{1f1f7}".repeat(300); // regional indicators pair up across window edges
  assert.deepEqual([...graphemes(flags)], whole(flags));
});

test("bad blobs fail naming the normalizer: too short, a trie size past the end or not a multiple of 4, replacements that are not UTF-8", () => {
  const isArg = (re: RegExp) => (e: unknown) => e instanceof ArgumentError && e.argument === "here" && re.test(e.message);
  assert.throws(() => new PrecompiledCharsmap(new Uint8Array(3), "here"), isArg(/got 3 bytes/));
  const good = buildCharsmap({ a: "b" });
  const past = good.slice();
  new DataView(past.buffer).setUint32(0, good.length, true);
  assert.throws(() => new PrecompiledCharsmap(past, "here"), isArg(/trie size of \d+ bytes/));
  const odd = good.slice();
  new DataView(odd.buffer).setUint32(0, 6, true);
  assert.throws(() => new PrecompiledCharsmap(odd, "here"), isArg(/multiple of 4/));
  const bad = Uint8Array.from([...good.slice(0, good.length - 2), 0xff, 0]);
  assert.throws(() => new PrecompiledCharsmap(bad, "here"), isArg(/not valid UTF-8/));
  const tj = { model: { type: "Unigram", unk_id: 0, vocab: [["<unk>", 0], ["a", -1]] }, normalizer: { type: "Sequence", normalizers: [{ type: "Precompiled", precompiled_charsmap: Buffer.from(odd).toString("base64") }] }, pre_tokenizer: null, post_processor: null, decoder: null, added_tokens: [] };
  assert.throws(() => new Tokenizer({ tokenizerJson: tj, source: "m" }), (e: unknown) => e instanceof ArgumentError && e.argument === "m tokenizer.json normalizer.normalizers[0].precompiled_charsmap");
});

test("through tokenizer.json and GGUF: an XLM-R Unigram tokenizer with this table encodes the table's normalization, not NFKC's", () => {
  const dir = join(root, "xlmr");
  const words = ["apfel", "cafe", "bar", "file", "ok", "(1)", "カ"];
  writeTinyBert({ dir, arch: "xlm-roberta", words, numLayers: 1, hiddenSize: 16, numHeads: 2, charsmap: buildCharsmap(RULES) });
  const file = join(root, "xlmr.gguf");
  writeBertGguf(dir, file);
  const hf = encoderTokenizer(dir);
  const gg = ggufEncoderTokenizer(file);
  const texts = ["\u00c4pfel \u2460\u200bok", "caf\u00e9\tbar", "\ufb01le \uff76\uff9e", "x\u0301y"];
  // The same tokenizer.json without its normalizer, fed the normalized text by hand.
  const tj = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")) as Record<string, unknown>;
  const plain = new Tokenizer({ tokenizerJson: { ...tj, normalizer: null }, source: "no normalizer" });
  for (const text of texts) {
    const got = hf.encode(text);
    assert.deepEqual(got, plain.encode(hfNormalize(text, RULES)), `tokenizer.json: ${JSON.stringify(text)} encodes as its normalization ${JSON.stringify(hfNormalize(text, RULES))}`);
    assert.deepEqual(gg.encode(text), got, `GGUF = tokenizer.json on ${JSON.stringify(text)}`);
  }
  // What the library's NFKC stand-in would give (① → "1", ZWSP → " ", Ä kept) is other ids.
  assert.notDeepEqual(hf.encode(texts[0]!), plain.encode(texts[0]!.normalize("NFKC").replace("\u200b", " ")));
});

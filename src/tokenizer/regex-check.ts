/**
 * A load-time bound on the regexes a tokenizer.json brings (issue 32: a
 * pre-tokenizer regex that backtracks catastrophically hung the load, and
 * would hang every request that reaches it).
 *
 * JavaScript regexes cannot be interrupted on the thread that runs them, so
 * the check runs them on another: a worker (regex-check-worker.ts) builds the
 * file's normalizer and pre-tokenizer with @huggingface/tokenizers itself (so
 * the very patterns it compiles, after its Oniguruma rewriting, are the ones
 * tried) and splits ADVERSARIAL_TEXTS — long runs of one character of each
 * class the usual patterns test (letters, digits, spaces, newlines,
 * punctuation, apostrophes, CJK, emoji), each also ending in a character that
 * breaks the run, which is what makes nested quantifiers like (a+)+$ explode.
 * A linear pattern splits them all in milliseconds; the loading thread waits
 * (Atomics.wait, so Tokenizer's constructor stays synchronous) at most
 * REGEX_CHECK.timeMs, then terminates the worker and fails the load naming
 * the file, the field and the text that hung. The worker's heap is capped too.
 *
 * Only patterns from the file are checked (a "Regex" key anywhere in the
 * normalizer or pre-tokenizer); the library's built-in ones (ByteLevel's
 * GPT-2 pattern, Digits, Whitespace) are its own. Each distinct configuration
 * is checked once per thread. What it cannot see: a pattern that is linear on
 * every text here and explodes only on some other one; encoding runs in the
 * tokenizer workers, off the HTTP thread, so such a request stalls one worker.
 */
import { Worker } from "node:worker_threads";
import { ArgumentError } from "../errors.js";
import { workerExecArgv } from "../runtime/worker-exec-argv.js";

export const REGEX_CHECK = {
  /** Wall-clock ms for all the texts, the worker's start included (Qwen 3's check: about 0.3 s on a 2-core machine at load average 23). */
  timeMs: 5000,
  /** Characters of each adversarial text. */
  chars: 4096,
  /** The worker's V8 heap cap, MiB. */
  heapMb: 256,
} as const;

const ATOMS: readonly [string, string][] = [
  ["a", "letters"], ["Z", "capitals"], ["7", "digits"], [" ", "spaces"], ["\n", "newlines"], ["\t", "tabs"], ["\r\n", "CRLFs"],
  ["!", "punctuation"], ["'", "apostrophes"], ["'s", "contractions"], ["中", "CJK"], ["é", "accented letters"], ["▁", "metaspaces"],
  ["😀", "emoji"], [" a", "space-letter pairs"], ["a1", "letter-digit pairs"], ["_", "underscores"], ["-", "hyphens"],
];
const BREAKERS = ["", "!", "\n", "a", " ", "\u0000"];

/** Each atom repeated to REGEX_CHECK.chars, once plain and once per breaker, with what it is (for the error). */
export const ADVERSARIAL_TEXTS: readonly { text: string; what: string }[] = ATOMS.flatMap(([atom, name]) =>
  BREAKERS.map((end) => ({
    text: atom.repeat(Math.ceil(REGEX_CHECK.chars / atom.length)).slice(0, REGEX_CHECK.chars) + end,
    what: `${REGEX_CHECK.chars} ${name}${end === "" ? "" : ` then ${JSON.stringify(end)}`}`,
  })),
);

const checked = new Set<string>();

/** True if the value holds a "Regex" pattern anywhere (a Split or Replace with a pattern from the file). */
function hasRegex(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(hasRegex);
  if (typeof v !== "object" || v === null) return false;
  return Object.entries(v).some(([k, x]) => k === "Regex" || hasRegex(x));
}

/**
 * Throws an ArgumentError naming `where` if the normalizer and pre-tokenizer
 * of `tokenizerJson` do not split ADVERSARIAL_TEXTS within REGEX_CHECK.timeMs.
 */
export function checkTokenizerRegexes(tokenizerJson: Readonly<Record<string, unknown>>, where: string, timeMs: number = REGEX_CHECK.timeMs): void {
  const normalizer = tokenizerJson["normalizer"] ?? null;
  const preTokenizer = tokenizerJson["pre_tokenizer"] ?? null;
  if (!hasRegex(normalizer) && !hasRegex(preTokenizer)) return;
  const key = JSON.stringify([normalizer, preTokenizer]);
  if (checked.has(key)) return;
  const state = new SharedArrayBuffer(8);
  const flags = new Int32Array(state);
  const worker = new Worker(new URL("./regex-check-worker.js", import.meta.url), {
    execArgv: workerExecArgv(),
    workerData: { normalizer, preTokenizer, texts: ADVERSARIAL_TEXTS.map((t) => t.text), state },
    resourceLimits: { maxOldGenerationSizeMb: REGEX_CHECK.heapMb },
  });
  worker.unref();
  const deadline = performance.now() + timeMs;
  while (Atomics.load(flags, 0) === 0 && performance.now() < deadline) Atomics.wait(flags, 0, 0, Math.max(1, deadline - performance.now()));
  const outcome = Atomics.load(flags, 0);
  if (outcome === 0) {
    void worker.terminate();
    const text = ADVERSARIAL_TEXTS[Atomics.load(flags, 1)]!;
    throw new ArgumentError(
      `${where} tokenizer.json normalizer / pre_tokenizer`,
      `did not split a text of ${text.what} within ${timeMs} ms: a regex pattern there backtracks catastrophically (or the check's worker could not run)`,
    );
  }
  checked.add(key);
}

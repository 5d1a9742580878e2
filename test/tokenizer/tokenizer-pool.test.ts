// The tokenizer pool's cancellation (issue #32 item 3, tokenizer-pool.ts): a
// job whose signal fires while it waits for its worker is dropped before any
// work (the worker never runs it); one already running rejects at once and
// its result is ignored; the pool goes on with the next jobs. A job past the
// pool's time bound (a hostile pre-tokenizer regex) fails alone and its worker
// is replaced.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { readJsonFile } from "../../src/json-file.js";
import { Tokenizer } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import { JobCancelledError, JobTimeoutError, TokenizerPool } from "../../src/tokenizer/tokenizer-pool.js";

const source = { kind: "dir", path: defaultModelDir() } as const;
const tokenizer = Tokenizer.fromDir(defaultModelDir());
const pool = new TokenizerPool({ source, size: 1 });
after(() => pool.close());

/** A prompt that keeps the worker busy for a while (~0.2 s on a quiet machine). */
const LONG = Array.from({ length: 50_000 }, (_, i) => `w${i % 977}`).join(" ");

test("queued jobs of a cancelled request are dropped before the worker runs them; the job ahead of them still answers", async () => {
  const before = pool.jobsRun;
  let longDone = false;
  const long = pool.encode(LONG, { addSpecialTokens: false }).then((ids) => ((longDone = true), ids));
  const gone = new AbortController();
  const queued = Array.from({ length: 5 }, (_, i) => pool.encode(`queued ${i}`, { signal: gone.signal }));
  assert.equal(pool.pending, 6);
  gone.abort();
  for (const q of queued) await assert.rejects(q, JobCancelledError);
  assert.equal(longDone, false, "the queued jobs were refused without waiting for the worker");
  assert.equal(pool.pending, 1, "only the running job is left");
  assert.equal((await long).length, tokenizer.encode(LONG, { addSpecialTokens: false }).length);
  assert.equal(pool.jobsRun - before, 1, "the worker ran only the job that was not cancelled");
  assert.deepEqual(await pool.encode("hello world", { addSpecialTokens: false }), tokenizer.encode("hello world", { addSpecialTokens: false }));
  await assert.rejects(pool.decode([1, 2], { signal: AbortSignal.abort() }), JobCancelledError, "a job already cancelled is never queued");
});

test("a running job whose request is cancelled rejects at once; its result is ignored and the pool answers the next job", async () => {
  const gone = new AbortController();
  let rejected = false;
  const running = pool.encode(LONG, { signal: gone.signal }).catch((e: unknown) => {
    rejected = true;
    throw e;
  });
  const next = pool.encodeChat({ messages: [{ role: "user", content: "hi" }], addGenerationPrompt: true, variables: {}, tools: undefined, continueFinal: false });
  const runsBefore = pool.jobsRun;
  gone.abort();
  await assert.rejects(running, JobCancelledError);
  assert.equal(rejected, true);
  assert.equal(pool.jobsRun, runsBefore, "it rejected before the worker finished it");
  assert.ok((await next).length > 0, "the job behind it runs");
  assert.equal(pool.pending, 0);
});

test("a job past the time bound (a pre-tokenizer regex that passed the load check and backtracks on this text) fails alone; its worker is replaced and the queue goes on", async () => {
  const base = readJsonFile(join(defaultModelDir(), "tokenizer.json")) as Record<string, unknown>;
  const dir = mkdtempSync(join(tmpdir(), "kvflash-pool-regex-"));
  // Linear on every text the load check tries (no run of "x" there); exponential on a run of "x" with no "y".
  const pre = { type: "Sequence", pretokenizers: [{ type: "Split", pattern: { Regex: "(x+x+)+y" }, behavior: "Isolated", invert: false }, ...(base["pre_tokenizer"] ? [base["pre_tokenizer"]] : [])] };
  writeFileSync(join(dir, "tokenizer.json"), JSON.stringify({ ...base, pre_tokenizer: pre }));
  const hostile = new TokenizerPool({ source: { kind: "dir", path: dir }, size: 1, jobBudgetMs: 1500 });
  try {
    const expected = Tokenizer.fromDir(dir).encode("hello world", { addSpecialTokens: false });
    const hang = hostile.encode("x".repeat(64), { addSpecialTokens: false });
    const behind = hostile.encode("hello world", { addSpecialTokens: false });
    await assert.rejects(hang, (e: Error) => e instanceof JobTimeoutError && /tokenizing took longer than 1500 ms/.test(e.message));
    assert.deepEqual(await behind, expected, "the job queued behind it runs on a fresh worker");
    assert.equal(hostile.workersReplaced, 1);
    assert.throws(() => new TokenizerPool({ source, jobBudgetMs: 0 }), /jobBudgetMs must be a positive number of milliseconds, got 0/);
  } finally {
    await hostile.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

// The tokenizer pool's cancellation (issue #32 item 3, tokenizer-pool.ts): a
// job whose signal fires while it waits for its worker is dropped before any
// work (the worker never runs it); one already running rejects at once and
// its result is ignored; the pool goes on with the next jobs.
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { Tokenizer, defaultModelDir } from "../../src/index.js";
import { JobCancelledError, TokenizerPool } from "../../src/tokenizer/tokenizer-pool.js";

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

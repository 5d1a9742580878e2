// parallelFor: every item exactly once, spread over threads, errors and traps
// surface as KernelError naming the kernel, and the pool keeps working.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { KernelError, type Runtime, createRuntime, resolveThreads } from "../../src/ops-entry.js";

describe("parallelFor", () => {
  let rt: Runtime;
  let counts = 0;
  let tids = 0;
  const MAX = 100000;

  before(async () => {
    rt = await createRuntime({ threads: 3 });
    counts = rt.heap.alloc(MAX * 4);
    tids = rt.heap.alloc(MAX * 4);
  });
  after(() => rt.dispose());

  function run(items: number, opts: { trap?: number; abort?: number; spin?: number } = {}): { counts: Int32Array; tids: Int32Array } {
    new Int32Array(rt.memory.buffer, counts, MAX).fill(0);
    new Int32Array(rt.memory.buffer, tids, MAX).fill(-1);
    const args = rt.args().ptr(counts).ptr(tids).i32(opts.trap ?? -1).i32(opts.abort ?? -1).i32(opts.spin ?? 0).end();
    rt.parallelFor("selftest_count", items, args);
    return { counts: new Int32Array(rt.memory.buffer, counts, MAX), tids: new Int32Array(rt.memory.buffer, tids, MAX) };
  }

  for (const items of [0, 1, 7, 100000]) {
    test(`${items} items: each runs exactly once`, () => {
      const r = run(items, { spin: items < 100 ? 20000 : 0 });
      for (let i = 0; i < MAX; i++) {
        if (r.counts[i] !== (i < items ? 1 : 0)) assert.fail(`item ${i} ran ${r.counts[i]} times`);
      }
    });
  }

  test("work spreads over all threads", () => {
    // With more threads than cores a thread can miss one short task entirely,
    // so look at the union over a few tasks.
    const used = new Set<number>();
    for (let attempt = 0; attempt < 5 && used.size < 3; attempt++) {
      for (const t of run(3000, { spin: 5000 }).tids.subarray(0, 3000)) used.add(t);
    }
    assert.deepEqual([...used].sort(), [0, 1, 2]);
  });

  test("a trap in a worker surfaces as a KernelError naming the kernel; the next call works", () => {
    for (const trap of [0, 37, 99]) {
      assert.throws(
        () => run(100, { trap, spin: 5000 }),
        (e: unknown) => e instanceof KernelError && e.kernel === "selftest_count" && /unreachable/.test(e.message) && e.message.includes(`item ${trap}`),
      );
      const r = run(100);
      assert.ok(r.counts.subarray(0, 100).every((c) => c === 1));
    }
  });

  test("an abort() in the kernel surfaces with its message", () => {
    assert.throws(() => run(50, { abort: 49 }), /kernel selftest_count failed: Error: abort: selftest abort requested/);
    assert.throws(() => run(1, { abort: 0 }), /kernel selftest_count failed: Error: abort: selftest abort requested \(thread 0, item 0\)/);
    assert.ok(run(50).counts.subarray(0, 50).every((c) => c === 1));
  });

  test("bad kernel names and item counts are named", () => {
    assert.throws(() => rt.parallelFor("no_such_kernel", 1), /kernel must name an exported kernel, got "no_such_kernel"/);
    assert.throws(() => rt.parallelFor("task_noop", -1), /items must be an integer in \[0, 2\^31\), got -1/);
    assert.throws(() => rt.parallelFor("task_noop", 2.5), /got 2.5/);
  });
});

test("threads: option, then KVFLASH_THREADS, then the machine", () => {
  const saved = process.env["KVFLASH_THREADS"];
  try {
    process.env["KVFLASH_THREADS"] = "5";
    assert.equal(resolveThreads(), 5);
    assert.equal(resolveThreads(2), 2);
    process.env["KVFLASH_THREADS"] = "zero";
    assert.throws(() => resolveThreads(), /KVFLASH_THREADS must be an integer in \[1, 256\], got "zero"/);
    delete process.env["KVFLASH_THREADS"];
    assert.ok(resolveThreads() >= 1);
    assert.throws(() => resolveThreads(0), /threads must be an integer in \[1, 256\], got 0/);
  } finally {
    if (saved === undefined) delete process.env["KVFLASH_THREADS"];
    else process.env["KVFLASH_THREADS"] = saved;
  }
});

test("a runtime that is never disposed does not keep the process alive", async () => {
  const { spawnSync } = await import("node:child_process");
  const { mkdtempSync, writeFileSync } = await import("node:fs");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const url = new URL("../../src/ops-entry.js", import.meta.url).href;
  const file = join(mkdtempSync(join(tmpdir(), "kvflash-")), "forget-dispose.mjs");
  writeFileSync(file, `const { createRuntime } = await import(${JSON.stringify(url)});\nconst rt = await createRuntime({ threads: 3 });\nrt.parallelFor("task_noop", 10);\nconsole.log("done");\n`);
  const env = { ...process.env };
  delete env["NODE_TEST_CONTEXT"];
  const r = spawnSync(process.execPath, [file], { encoding: "utf8", timeout: 20000, env });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), "done");
});

// The fork–join door (src/runtime/control.ts): a worker goes in only while a
// task is open, the caller's close waits for exactly the workers inside, and
// many short tasks in a row (workers spinning, sleeping, waking late) run
// every item exactly once with the right kernel and arguments.
import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { after, before, test } from "node:test";
import { type Runtime, createRuntime } from "../../src/ops-entry.js";
import { CLOSED, CONTROL_SLOTS, STATE, closeTask, enterTask, leaveTask, openTask } from "../../src/runtime/control.js";

const CONTROL_URL = new URL("../../src/runtime/control.js", import.meta.url).href;

function closedControl(): Int32Array {
  const ctl = new Int32Array(new SharedArrayBuffer(CONTROL_SLOTS * 4));
  Atomics.store(ctl, STATE, CLOSED);
  return ctl;
}

test("door: nobody goes in while closed; open admits and counts; close with nobody inside returns at once", () => {
  const ctl = closedControl();
  assert.equal(enterTask(ctl), false);
  openTask(ctl);
  assert.equal(enterTask(ctl), true);
  assert.equal(enterTask(ctl), true);
  assert.equal(Atomics.load(ctl, STATE), 2);
  leaveTask(ctl);
  leaveTask(ctl);
  assert.equal(Atomics.load(ctl, STATE), 0);
  closeTask(ctl);
  assert.equal(Atomics.load(ctl, STATE), CLOSED);
  assert.equal(enterTask(ctl), false);
  assert.equal(Atomics.load(ctl, STATE), CLOSED, "a refused entry leaves no trace");
});

test("door: close waits for the worker inside to leave, and refuses one that comes after", async () => {
  const ctl = closedControl();
  // flags[0]: 1 = inside, 2 = about to leave; flags[1]: the late worker's enterTask result (1/0), 9 = not yet.
  const flags = new Int32Array(new SharedArrayBuffer(8));
  flags[1] = 9;
  openTask(ctl);
  const code = `
    const { workerData } = require("node:worker_threads");
    import(workerData.url).then(({ enterTask, leaveTask }) => {
      const { ctl, flags, late } = workerData;
      const nap = new Int32Array(new SharedArrayBuffer(4));
      if (late) {
        Atomics.store(flags, 1, enterTask(ctl) ? 1 : 0);
        Atomics.notify(flags, 1);
        return;
      }
      if (!enterTask(ctl)) throw new Error("the open door refused the worker");
      Atomics.store(flags, 0, 1);
      Atomics.notify(flags, 0);
      Atomics.wait(nap, 0, 0, 50); // holds the task while the caller closes
      Atomics.store(flags, 0, 2);
      leaveTask(ctl);
    });`;
  const inside = new Worker(code, { eval: true, workerData: { url: CONTROL_URL, ctl, flags, late: false } });
  const failed = new Promise<never>((_, reject) => inside.once("error", reject));
  while (Atomics.load(flags, 0) === 0) await Promise.race([new Promise((r) => setTimeout(r, 1)), failed]);
  closeTask(ctl);
  assert.equal(Atomics.load(flags, 0), 2, "closeTask returned before the worker inside left");
  assert.equal(Atomics.load(ctl, STATE), CLOSED);
  const late = new Worker(code, { eval: true, workerData: { url: CONTROL_URL, ctl, flags, late: true } });
  while (Atomics.load(flags, 1) === 9) await new Promise((r) => setTimeout(r, 1));
  assert.equal(Atomics.load(flags, 1), 0, "a worker got in after the door closed");
  await Promise.all([inside.terminate(), late.terminate()]);
});

let rt: Runtime;
before(async () => {
  rt = await createRuntime({ threads: 3 });
});
after(() => rt.dispose());

test("thousands of short tasks of two kernels in a row, with pauses that let workers sleep: every item once, right kernel, right arguments", () => {
  const MAXN = 16;
  const counts = rt.heap.alloc(MAXN * 4);
  const tids = rt.heap.alloc(MAXN * 4);
  const out = rt.heap.alloc(MAXN * 4);
  const c = new Int32Array(rt.memory.buffer, counts, MAXN);
  const t = new Int32Array(rt.memory.buffer, tids, MAXN);
  const o = new Int32Array(rt.memory.buffer, out, MAXN);
  const flavorBit = rt.kernels === "relaxed" ? 1 : 0;
  const nap = new Int32Array(new SharedArrayBuffer(4));
  let workerItems = 0;
  for (let round = 0; round < 4000; round++) {
    // selftest_count over 2..9 items, each spinning a little so threads overlap.
    const n = 2 + (round % 8);
    c.fill(0);
    t.fill(-1);
    rt.parallelFor("selftest_count", n, rt.args().ptr(counts).ptr(tids).i32(-1).i32(-1).i32((round * 37) % 300).end());
    for (let i = 0; i < MAXN; i++) {
      if (c[i] !== (i < n ? 1 : 0)) assert.fail(`round ${round}: item ${i} of ${n} ran ${c[i]} times`);
    }
    for (let i = 0; i < n; i++) if (t[i]! > 0) workerItems++;
    // Then a different kernel with different arguments: a worker holding the previous task's descriptor would show here.
    const m = 3 + (round % 5);
    o.fill(-7);
    rt.parallelFor("task_kernels_relaxed", m, out);
    for (let i = 0; i < MAXN; i++) {
      if (o[i] !== (i < m ? flavorBit : -7)) assert.fail(`round ${round}: out[${i}] = ${o[i]} after ${m} items`);
    }
    if (round % 97 === 0) Atomics.wait(nap, 0, 0, 1); // longer than the workers spin: the next task wakes them
  }
  assert.ok(workerItems > 0, "no item ever ran on a worker: the test exercised nothing");
  rt.free(counts);
  rt.free(tids);
  rt.free(out);
});

test("rt.forkJoins counts the tasks handed to workers: not one-item calls, not a one-thread runtime's", async () => {
  const before = rt.forkJoins;
  rt.parallelFor("task_noop", 1);
  assert.equal(rt.forkJoins, before, "a one-item call runs on the caller");
  rt.parallelFor("task_noop", 0);
  assert.equal(rt.forkJoins, before, "an empty call runs nothing");
  rt.parallelFor("task_noop", 5);
  rt.parallelFor("task_noop", 2);
  assert.equal(rt.forkJoins, before + 2);
  const one = await createRuntime({ threads: 1 });
  try {
    one.parallelFor("task_noop", 9);
    assert.equal(one.forkJoins, 0);
  } finally {
    await one.dispose();
  }
});

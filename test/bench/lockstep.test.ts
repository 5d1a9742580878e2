// bench/lockstep.ts: the kernel flavors' copies of a suite measured in
// alternation (baseline, relaxed, baseline, …), and the errors when the copies
// do not reach the same measurements; run.ts's side-by-side rows.
import assert from "node:assert/strict";
import { test } from "node:test";
import { repeatMeasurement, timeMeasurement } from "../../bench/harness.js";
import { Lockstep } from "../../bench/lockstep.js";
import { pairRows } from "../../bench/run.js";

test("two participants' rounds alternate, each warmed first, until both are done", async () => {
  const lock = new Lockstep(["baseline", "relaxed"]);
  const order: string[] = [];
  const side = (name: string, rounds: number) => ({
    kind: "repeat",
    warm: () => void order.push(`${name} warm`),
    round: () => void order.push(name),
    done: () => order.filter((o) => o === name).length >= rounds,
    result: () => name,
  });
  // The relaxed side arrives first; rounds still run in participant order, until both are done.
  const [b, r] = await Promise.all([lock.measure(0, side("b", 3)), lock.measure(1, side("r", 2))]);
  assert.deepEqual([b, r], ["b", "r"]);
  assert.deepEqual(order, ["b warm", "r warm", "b", "r", "b", "r", "b", "r"]);
});

test("a suite's measurements in sequence: each waits for the other flavor, results go back to their own side", async () => {
  const lock = new Lockstep(["baseline", "relaxed"]);
  const log: string[] = [];
  const suite = async (i: number, name: string) => {
    const first = await lock.measure(i, repeatMeasurement(() => (log.push(`${name}1`), `${name}-a`), 2));
    const ms = await lock.measure(i, timeMeasurement(() => undefined, { warmup: 0, minReps: 3, minTimeMs: 0 }));
    lock.leave(i);
    return { first, ms };
  };
  const [a, b] = await Promise.all([suite(0, "b"), suite(1, "r")]);
  assert.deepEqual(log, ["b1", "r1", "b1", "r1"]);
  assert.deepEqual(a.first, ["b-a", "b-a"]);
  assert.deepEqual(b.first, ["r-a", "r-a"]);
  assert.ok(a.ms >= 0 && b.ms >= 0);
});

test("a flavor that finishes while the other waits, or different measurements, fail with the flavors named", async () => {
  const early = new Lockstep(["baseline", "relaxed"]);
  const waiting = early.measure(1, repeatMeasurement(() => 1, 1));
  early.leave(0);
  await assert.rejects(waiting, /the baseline run finished its suite while the relaxed run waits on a "repeat" measurement/);
  await assert.rejects(early.measure(1, repeatMeasurement(() => 1, 1)), /measured differently per flavor/);

  const mixed = new Lockstep(["baseline", "relaxed"]);
  const t = mixed.measure(0, timeMeasurement(() => undefined));
  const r = mixed.measure(1, repeatMeasurement(() => 1, 1));
  await assert.rejects(t, /different measurements \(baseline: time, relaxed: repeat\)/);
  await assert.rejects(r, /different measurements/);
});

test("a measurement that throws rejects every side, and later measurements too", async () => {
  const lock = new Lockstep(["baseline", "relaxed"]);
  const boom = repeatMeasurement(() => {
    throw new Error("kernel trap");
  }, 1);
  const results = await Promise.allSettled([lock.measure(0, boom), lock.measure(1, repeatMeasurement(() => 2, 1))]);
  assert.deepEqual(results.map((s) => s.status), ["rejected", "rejected"]);
  await assert.rejects(lock.measure(0, repeatMeasurement(() => 3, 1)), /kernel trap/);
});

test("pairRows: one flavor's rows unchanged; two flavors side by side with speedup_vs_baseline from ms, us or tok_s", () => {
  const one = [{ op: "a", ms: 2 }];
  assert.equal(pairRows([one]), one);
  const rows = pairRows([
    [{ kernels: "baseline", op: "a", ms: 2 }, { kernels: "baseline", op: "b", us: 30, tok_s: 5 }, { kernels: "baseline", op: "c", tok_s: 1 }],
    [{ kernels: "relaxed", op: "a", ms: 1 }, { kernels: "relaxed", op: "b", us: 40, tok_s: 4 }, { kernels: "relaxed", op: "c", tok_s: 2 }],
  ]);
  assert.deepEqual(rows, [
    { kernels: "baseline", op: "a", ms: 2 },
    { kernels: "relaxed", op: "a", ms: 1, speedup_vs_baseline: 2 },
    { kernels: "baseline", op: "b", us: 30, tok_s: 5 },
    { kernels: "relaxed", op: "b", us: 40, tok_s: 4, speedup_vs_baseline: 0.75 },
    { kernels: "baseline", op: "c", tok_s: 1 },
    { kernels: "relaxed", op: "c", tok_s: 2, speedup_vs_baseline: 2 },
  ]);
  // A llama.cpp row (the serve suite's peer, beside each flavor) is no flavor's: no speed-up.
  assert.deepEqual(pairRows([[{ engine: "llama.cpp", tok_s: 10 }], [{ engine: "llama.cpp", tok_s: 11 }]]), [{ engine: "llama.cpp", tok_s: 10 }, { engine: "llama.cpp", tok_s: 11 }]);
  // Rows that do not line up stay in flavor order, unpaired.
  assert.equal(pairRows([[{ ms: 1 }], []]).length, 1);
});

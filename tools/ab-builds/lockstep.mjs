// The lockstep of ab-model-steps.mjs and ab-engine-steps.mjs: every side takes
// one step in turn (order reversed every step, 0.3 ms pause before each), so
// load that comes and goes hits all of them alike; each side's step times go
// to side.ms. Returns /proc/loadavg before and after.
import { execSync } from "node:child_process";

export function lockstep(sides, steps) {
  const load0 = execSync("cat /proc/loadavg").toString().trim();
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let i = 0; i < steps; i++) {
    const order = i % 2 ? [...sides].reverse() : sides;
    for (const s of order) {
      Atomics.wait(pause, 0, 0, 0.3);
      const t0 = performance.now();
      s.step();
      s.ms.push(performance.now() - t0);
    }
  }
  return { load0, load1: execSync("cat /proc/loadavg").toString().trim() };
}

/** The median (the mean of the middle two for an even count). */
export function median(xs) {
  const a = [...xs].sort((x, y) => x - y);
  return a.length % 2 ? a[a.length >> 1] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
}

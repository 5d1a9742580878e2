// The seeded PRNG: a pure function of the seed, uniform enough for sampling and weights.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Prng } from "../../src/ops-entry.js";

test("the stream is a function of the seed; nearby seeds give unrelated streams", () => {
  const draw = (seed: number) => {
    const r = new Prng(seed);
    return Array.from({ length: 8 }, () => r.nextU32());
  };
  assert.deepEqual(draw(0), draw(0));
  assert.deepEqual(draw(2 ** 53 - 1), draw(2 ** 53 - 1));
  const a = draw(1);
  const b = draw(2);
  assert.notDeepEqual(a, b);
  assert.ok(a.every((x, i) => x !== b[i]), "no shared values at the same position");
  assert.notDeepEqual(draw(2 ** 32), draw(0), "the high half of the seed counts");
});

test("nextFloat is uniform on [0, 1); nextInt covers its range evenly", () => {
  const r = new Prng(11);
  const n = 100_000;
  let sum = 0;
  const bins = new Array<number>(10).fill(0);
  for (let i = 0; i < n; i++) {
    const u = r.nextFloat();
    assert.ok(u >= 0 && u < 1);
    sum += u;
    bins[Math.floor(u * 10)]!++;
  }
  assert.ok(Math.abs(sum / n - 0.5) < 0.005, `mean ${sum / n}`);
  // χ² with 9 degrees of freedom: 27.9 is the 0.999 quantile.
  const chi2 = bins.reduce((s, c) => s + (c - n / 10) ** 2 / (n / 10), 0);
  assert.ok(chi2 < 27.9, `χ² = ${chi2}`);
  const counts = new Array<number>(7).fill(0);
  for (let i = 0; i < 70_000; i++) counts[r.nextInt(7)]!++;
  assert.ok(counts.every((c) => Math.abs(c - 10_000) < 500), `${counts}`);
  assert.throws(() => r.nextInt(0), /n must be an integer in \[1, 2\^32\], got 0/);
});

test("seeds are validated", () => {
  assert.throws(() => new Prng(-1), /seed must be an integer in \[0, 2\^53\), got -1/);
  assert.throws(() => new Prng(1.5), /seed must be an integer/);
  assert.throws(() => new Prng(2 ** 53), /seed must be an integer/);
});

// The rejection rule of a sampled draft (src/engine/rejection-sampler.ts) on
// exact small distributions: acceptance is u · q(x) < p(x), the residual is
// norm(max(0, p − q)) (checked by sweeping u over a fine grid, exact to the
// grid step), and the combined law of verifyDraft with x ~ q is p (summed
// exactly over q and the u grid).
import assert from "node:assert/strict";
import { test } from "node:test";
import { type TokenDistribution, probabilityOf, sampleFrom, sampleResidual, verifyDraft } from "../../src/engine/rejection-sampler.js";

const dist = (ids: number[], probs: number[]): TokenDistribution => ({ ids: Int32Array.from(ids), probs: Float64Array.from(probs) });
const p = dist([2, 5, 7, 9], [0.4, 0.3, 0.2, 0.1]);
const q = dist([1, 2, 5, 9], [0.3, 0.5, 0.1, 0.1]); // q has an id p lacks (1) and lacks one p has (7)
const GRID = 20_000;
const uAt = (i: number) => (i + 0.5) / GRID;

test("probabilityOf finds listed ids and gives 0 for the rest", () => {
  assert.equal(probabilityOf(p, 7), 0.2);
  assert.equal(probabilityOf(p, 1), 0);
  assert.equal(probabilityOf(p, 10), 0);
  assert.equal(probabilityOf(dist([], []), 3), 0);
});

test("the residual is norm(max(0, p − q)): only ids where p > q, in proportion", () => {
  // max(0, p − q): 2 → 0, 5 → 0.2, 7 → 0.2, 9 → 0; mass 0.4.
  const counts = new Map<number, number>();
  for (let i = 0; i < GRID; i++) {
    const t = sampleResidual(p, q, uAt(i));
    counts.set(t, (counts.get(t) ?? 0) + 1);
  }
  assert.deepEqual([...counts.keys()].sort((a, b) => a - b), [5, 7]);
  assert.ok(Math.abs(counts.get(5)! / GRID - 0.5) < 1e-3);
  assert.equal(sampleResidual(p, p, 0.95), 9, "no residual mass (p = q): a draw from p");
});

test("verifyDraft with x ~ q outputs p exactly (summed over q and a grid of uniforms)", () => {
  const law = new Map<number, number>();
  q.ids.forEach((x, i) => {
    for (let a = 0; a < 200; a++) {
      for (let b = 0; b < 50; b++) {
        const us = [(a + 0.5) / 200, (b + 0.5) / 50];
        const { token, accepted } = verifyDraft(p, q, x, { nextFloat: () => us.shift()! });
        if (accepted) assert.equal(token, x);
        law.set(token, (law.get(token) ?? 0) + q.probs[i]! / (200 * 50));
      }
    }
  });
  p.ids.forEach((t, i) => assert.ok(Math.abs((law.get(t) ?? 0) - p.probs[i]!) < 1e-9, `P(${t}) = ${law.get(t)}, p = ${p.probs[i]}`));
  assert.equal(law.get(1), undefined, "an id p gives 0 is never output");
});

test("sampleFrom walks the ids in order", () => {
  assert.equal(sampleFrom(p, 0), 2);
  assert.equal(sampleFrom(p, 0.45), 5);
  assert.equal(sampleFrom(p, 0.999), 9);
});

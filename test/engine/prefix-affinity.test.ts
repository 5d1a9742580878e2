// The data-parallel routing rule (src/engine/prefix-affinity.ts): prompts that begin alike go to
// one engine, keys spread evenly over the engines, a key keeps its engine when others are added
// (rendezvous hashing), and an engine far busier than the least loaded one is passed over.
import assert from "node:assert/strict";
import { test } from "node:test";
import { AFFINITY_TOKENS, affineEngine, pickEngine } from "../../src/engine/prefix-affinity.js";
import { rng } from "../helpers/random.js";

const prompt = (rand: () => number, n: number): number[] => Array.from({ length: n }, () => Math.floor(rand() * 32000));

test("prompts sharing their first AFFINITY_TOKENS tokens go to the same engine; the salt separates them", () => {
  const rand = rng(1);
  for (let i = 0; i < 200; i++) {
    const head = prompt(rand, AFFINITY_TOKENS);
    const a = affineEngine([...head, ...prompt(rand, 30)], undefined, 4);
    const b = affineEngine([...head, ...prompt(rand, 5)], undefined, 4);
    assert.equal(a, b);
  }
  const head = prompt(rand, AFFINITY_TOKENS);
  const salts = new Set(Array.from({ length: 64 }, (_, i) => affineEngine(head, `tenant-${i}`, 4)));
  assert.ok(salts.size > 1, "different salts reach different engines");
});

test("keys spread evenly: 4000 random prompts over 4 engines within 10% of 1000 each", () => {
  const rand = rng(2);
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < 4000; i++) counts[affineEngine(prompt(rand, 1 + Math.floor(rand() * 100)), undefined, 4)]!++;
  for (const c of counts) assert.ok(Math.abs(c - 1000) < 100, JSON.stringify(counts));
});

test("adding an engine moves only the keys the new engine takes (rendezvous hashing)", () => {
  const rand = rng(3);
  let moved = 0;
  for (let i = 0; i < 2000; i++) {
    const p = prompt(rand, 20);
    const before = affineEngine(p, undefined, 3);
    const after = affineEngine(p, undefined, 4);
    if (after !== before) {
      assert.equal(after, 3, "a key moves only to the new engine");
      moved++;
    }
  }
  assert.ok(moved > 350 && moved < 650, `about a quarter moved: ${moved}`);
});

test("an engine with more than `slack` extra requests in flight is passed over for the least loaded", () => {
  const rand = rng(4);
  const p = prompt(rand, 40);
  const affine = affineEngine(p, undefined, 3);
  const load = [0, 0, 0];
  load[affine] = 4;
  assert.equal(pickEngine(p, undefined, load, 4), affine, "within the slack: affinity wins");
  load[affine] = 5;
  const least = (affine + 1) % 3;
  load[(affine + 2) % 3] = 1;
  assert.equal(pickEngine(p, undefined, load, 4), least, "past the slack: the least loaded");
  assert.equal(pickEngine(p, undefined, [7], 0), 0, "one engine takes everything");
});

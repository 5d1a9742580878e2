// The sampler against a sort-based float64 reference written for clarity,
// each processor's effect on hand-made logits, seeded reproducibility,
// per-request independence, and logprobs of the raw logits — for both of its
// passes: JavaScript (float64) and the wasm kernels (f32 weights within ≈ 2 ulp,
// so probabilities are held to 1e-6 there against 1e-9 in JavaScript).
import assert from "node:assert/strict";
import { after, test } from "node:test";
import {
  Prng,
  type Runtime,
  createRuntime,
  type ResolvedSamplingParams,
  Sampler,
  type SamplingParams,
  SamplingState,
  resolveSamplingParams,
  samplingDefaults,
} from "../../src/ops-entry.js";
import { kthLargest, nucleusEdge, topN } from "../../src/engine/sampler.js";

const rt: Runtime = await createRuntime({ threads: 1 });
after(() => rt.dispose());

/** Each test below runs on both passes; `tol` bounds |p − reference| for a probability. */
const PASSES = [
  { passes: "js", tol: 1e-9, make: (V: number) => new Sampler(V) },
  { passes: "wasm", tol: 1e-6, make: (V: number) => new Sampler(V, { runtime: rt }) },
] as const;

/** Logits whose softmax at temperature 1 is exactly proportional to `probs`. */
const fromProbs = (probs: number[]): Float32Array => Float32Array.from(probs, (p) => Math.log(p));

function state(params: SamplingParams, vocab: number, prompt: number[] = []): SamplingState {
  return new SamplingState(resolveSamplingParams(params, vocab), prompt);
}

/**
 * Reference: bias, penalties (rounded to f32 as the sampler stores them), then
 * softmax(l / T), min-p, top-k and top-p over a full descending sort (ties by id).
 */
function reference(logits: Float32Array, p: ResolvedSamplingParams, prompt: number[], output: number[]): Map<number, number> {
  const l = Array.from(logits);
  for (const [id, b] of p.logitBias) l[id] = Math.fround(l[id]! + b);
  if (p.repetitionPenalty !== 1) {
    for (const id of new Set([...prompt, ...output])) l[id] = Math.fround(l[id]! > 0 ? l[id]! / p.repetitionPenalty : l[id]! * p.repetitionPenalty);
  }
  const counts = new Map<number, number>();
  for (const id of output) counts.set(id, (counts.get(id) ?? 0) + 1);
  if (p.frequencyPenalty !== 0 || p.presencePenalty !== 0) {
    for (const [id, n] of counts) l[id] = Math.fround(l[id]! - p.frequencyPenalty * n - p.presencePenalty);
  }
  const order = l.map((_, i) => i).sort((a, b) => l[b]! - l[a]! || a - b);
  if (p.temperature === 0) return new Map([[order[0]!, 1]]);
  const max = l[order[0]!]!;
  const prob = l.map((v) => Math.exp((v - max) / p.temperature));
  let kept = order.filter((i) => prob[i]! >= p.minP * prob[order[0]!]!);
  if (p.topK > 0 && kept.length > p.topK) {
    const kth = l[kept[p.topK - 1]!]!;
    kept = kept.filter((i) => l[i]! >= kth);
  }
  if (p.topP < 1) {
    const mass = kept.reduce((s, i) => s + prob[i]!, 0);
    let cum = 0;
    let edge = 0;
    for (const i of kept) {
      cum += prob[i]!;
      if (cum >= p.topP * mass) {
        edge = prob[i]!;
        break;
      }
    }
    kept = kept.filter((i) => prob[i]! >= edge);
  }
  const mass = kept.reduce((s, i) => s + prob[i]!, 0);
  return new Map(kept.map((i) => [i, prob[i]! / mass]));
}

function assertMatchesReference(sampler: Sampler, s: SamplingState, logits: Float32Array, prompt: number[], label: string, tol: number): void {
  const want = reference(logits, s.params, prompt, s.outputIds);
  const got = sampler.distribution(s, logits);
  let total = 0;
  got.ids.forEach((id, j) => {
    const p = got.probs[j]!;
    total += p;
    assert.ok(want.has(id), `${label}: kept token ${id} the reference drops`);
    assert.ok(Math.abs(p - want.get(id)!) < tol, `${label}: p(${id}) = ${p}, reference ${want.get(id)}`);
  });
  const kept = new Set(got.ids);
  for (const [id, p] of want) if (p > 1e-15) assert.ok(kept.has(id), `${label}: dropped token ${id} (p = ${p})`);
  assert.ok(Math.abs(total - 1) < 1e-12);
}

for (const { passes, tol, make } of PASSES) {
    test(`${passes}: every processor and their combinations match the reference on random logits with ties`, () => {
    const rng = new Prng(1234);
    const V = 997;
    const sampler = make(V);
    const choices: SamplingParams[] = [
      { temperature: 1 },
      { temperature: 0.7, topK: 40 },
      { temperature: 1.3, topP: 0.9 },
      { temperature: 0.8, minP: 0.05 },
      { temperature: 1, topK: 50, topP: 0.8, minP: 0.02 },
      { temperature: 0.5, repetitionPenalty: 1.3, presencePenalty: 0.5, frequencyPenalty: 0.7 },
      { temperature: 1, topP: 0.5, repetitionPenalty: 0.8, logitBias: { 5: 4, 17: -100 } },
      { temperature: 0 },
      { temperature: 0, repetitionPenalty: 2, frequencyPenalty: -1 },
      { temperature: 2, topK: 1 },
    ];
    for (let trial = 0; trial < 60; trial++) {
      const logits = new Float32Array(V);
      for (let i = 0; i < V; i++) logits[i] = Math.fround(6 * (rng.nextFloat() - 0.5));
      for (let i = 0; i < 20; i++) logits[rng.nextInt(V)] = logits[rng.nextInt(V)]!; // ties
      const params = choices[trial % choices.length]!;
      const prompt = Array.from({ length: 30 }, () => rng.nextInt(V));
      const s = state({ ...params, seed: trial }, V, prompt);
      for (let step = 0; step < 4; step++) {
        assertMatchesReference(sampler, s, logits, prompt, `trial ${trial} step ${step} ${JSON.stringify(params)}`, tol);
        sampler.sample(s, logits);
      }
    }
  });
}

for (const { passes, tol, make } of PASSES) {
    test(`${passes}: a 151936-token vocabulary (Qwen2.5) matches the reference too`, () => {
    const rng = new Prng(99);
    const V = 151936;
    const logits = new Float32Array(V);
    for (let i = 0; i < V; i++) logits[i] = Math.fround(4 * (rng.nextFloat() + rng.nextFloat() + rng.nextFloat() - 1.5));
    const sampler = make(V);
    for (const params of [{ topK: 50, topP: 0.95, temperature: 0.7 }, { topP: 0.9 }, { minP: 0.1, temperature: 1.5 }, {}] as SamplingParams[]) {
      assertMatchesReference(sampler, state({ ...params, seed: 1 }, V), logits, [], JSON.stringify(params), tol);
    }
  });
}

for (const { passes, make } of PASSES) {
    test(`${passes}: top-k keeps exactly k; top-p keeps the nucleus; min-p keeps p ≥ minP · p_max`, () => {
    const sampler = make(6);
    const logits = fromProbs([0.05, 0.4, 0.1, 0.25, 0.15, 0.05]);
    const kept = (params: SamplingParams) => [...sampler.distribution(state(params, 6), logits).ids].sort();
    assert.deepEqual(kept({ topK: 3 }), [1, 3, 4]);
    assert.deepEqual(kept({ topK: 1 }), [1]);
    assert.deepEqual(kept({ topK: 6 }), [0, 1, 2, 3, 4, 5]);
    assert.deepEqual(kept({ topP: 0.64 }), [1, 3], "0.40 + 0.25 ≥ 0.64");
    assert.deepEqual(kept({ topP: 0.66 }), [1, 3, 4], "0.65 < 0.66 needs the 0.15 token");
    assert.deepEqual(kept({ topP: 0.3 }), [1]);
    assert.deepEqual(kept({ minP: 0.5 }), [1, 3], "p ≥ 0.2");
    assert.deepEqual(kept({ minP: 0.3 }), [1, 3, 4], "p ≥ 0.12");
    // Ties at the edge stay: both 0.05 tokens are the k-th value.
    assert.deepEqual(kept({ topK: 5 }), [0, 1, 2, 3, 4, 5]);
    const d = sampler.distribution(state({ topK: 2 }, 6), logits);
    [0.4 / 0.65, 0.25 / 0.65].forEach((p, j) => assert.ok(Math.abs(d.probs[j]! - p) < 1e-6, "renormalized over the kept tokens (f32 logits)"));
  });
}

for (const { passes, make } of PASSES) {
    test(`${passes}: penalties match hand-computed values (HF repetition, OpenAI frequency and presence)`, () => {
    const V = 5;
    const sampler = make(V);
    const s = state({ repetitionPenalty: 2, frequencyPenalty: 0.5, presencePenalty: 0.25, logitBias: { 4: 1.5 } }, V, [0, 1]);
    for (const t of [3, 3, 2]) s.accept(t);
    const out = sampler.processLogits(s, Float32Array.of(2, -1, 0.5, 3, 0));
    // 0: prompt, 2 > 0 → 2 / 2 = 1        1: prompt, −1 → −1 · 2 = −2
    // 2: output once: 0.5 / 2 − 0.5 · 1 − 0.25 = −0.5
    // 3: output twice: 3 / 2 − 0.5 · 2 − 0.25 = 0.25        4: unseen, bias +1.5
    assert.deepEqual([...out], [1, -2, -0.5, 0.25, 1.5]);
    const greedy = state({ temperature: 0, repetitionPenalty: 10 }, V, [3]);
    assert.equal(sampler.sample(greedy, Float32Array.of(2, -1, 0.5, 3, 0)).token, 0, "3 / 10 < 2: the penalty applies to greedy too");
  });
}

for (const { passes, make } of PASSES) {
    test(`${passes}: greedy: argmax with ties to the lowest id, logit bias steers it, bad logits are errors`, () => {
    const sampler = make(4);
    assert.equal(sampler.sample(state({ temperature: 0 }, 4), Float32Array.of(1, 3, 3, 2)).token, 1);
    assert.equal(sampler.sample(state({ temperature: 0, logitBias: { "3": 1.5 } }, 4), Float32Array.of(1, 3, 3, 2)).token, 3);
    assert.throws(() => sampler.sample(state({}, 4), Float32Array.of(1, NaN, 0, 0)), /logits contain NaN at index 1/);
    assert.throws(() => sampler.sample(state({}, 4), new Float32Array(4).fill(-Infinity)), /every token is masked/);
    assert.throws(() => sampler.sample(state({}, 4), new Float32Array(5)), /logits must be a Float32Array of the vocabulary size 4/);
    assert.equal(sampler.sample(state({ temperature: 1 }, 4), Float32Array.of(0, Infinity, 0, 0)).token, 1, "an overflowed logit takes all the mass");
  });
}

for (const { passes, make } of PASSES) {
    test(`${passes}: a seed reproduces; requests sample independently of each other and of the batch order`, () => {
    const V = 500;
    const rng = new Prng(5);
    const steps = Array.from({ length: 40 }, () => Float32Array.from({ length: V }, () => 3 * rng.nextFloat()));
    const sampler = make(V);
    const run = (seed: number, interleave: boolean): number[] => {
      const a = state({ seed, topP: 0.95, temperature: 1.2 }, V);
      const other = state({ seed: seed + 1000, topK: 5 }, V);
      return steps.map((logits) => {
        if (interleave) sampler.sample(other, steps[0]!);
        return sampler.sample(a, logits).token;
      });
    };
    const first = run(42, false);
    assert.deepEqual(run(42, true), first, "another request in the batch changes nothing");
    assert.deepEqual(run(42, false), first);
    assert.notDeepEqual(run(43, false), first);
    const unseeded = state({}, V);
    assert.ok(Number.isSafeInteger(unseeded.seed), "an unseeded request still records the seed it used");
  });
}

for (const { passes, make } of PASSES) {
    test(`${passes}: draw frequencies follow the distribution`, () => {
    const sampler = make(4);
    const probs = [0.1, 0.2, 0.3, 0.4];
    const s = state({ seed: 7 }, 4);
    const counts = [0, 0, 0, 0];
    const n = 20000;
    for (let i = 0; i < n; i++) counts[sampler.sample(s, fromProbs(probs)).token]!++;
    counts.forEach((c, i) => assert.ok(Math.abs(c / n - probs[i]!) < 0.012, `token ${i}: ${c / n} vs ${probs[i]}`));
    assert.equal(s.outputIds.length, n);
  });
}

for (const { passes, make } of PASSES) {
    test(`${passes}: logprobs are the raw model's log-softmax, whatever the processing; top-n best first`, () => {
    const logits = Float32Array.of(1, 4, 2, 4, -3);
    const lse = Math.log([...logits].reduce((a, v) => a + Math.exp(v), 0));
    const sampler = make(5);
    const r = sampler.sample(state({ temperature: 0, logprobs: 3, logitBias: { 0: 50 } }, 5), logits);
    assert.equal(r.token, 0, "the bias picks token 0");
    assert.ok(Math.abs(r.logprob! - (1 - lse)) < 1e-6, "its logprob is from the unbiased logits");
    assert.deepEqual(r.topLogprobs!.map((t) => t.token), [1, 3, 2], "ties by id");
    r.topLogprobs!.forEach((t) => assert.ok(Math.abs(t.logprob - (logits[t.token]! - lse)) < 1e-6));
    const none = sampler.sample(state({ temperature: 0 }, 5), logits);
    assert.equal(none.logprob, null);
    assert.equal(none.topLogprobs, null);
    assert.deepEqual(sampler.sample(state({ temperature: 0, logprobs: 0 }, 5), logits).topLogprobs, []);
  });
}

test("selection helpers agree with sorting on random arrays with ties", () => {
  const rng = new Prng(3);
  for (let trial = 0; trial < 200; trial++) {
    const n = 1 + rng.nextInt(60);
    const values = Array.from({ length: n }, () => rng.nextInt(12) / 4);
    const desc = [...values].sort((a, b) => b - a);
    const k = 1 + rng.nextInt(n);
    assert.equal(kthLargest(Float32Array.from(values), k), desc[k - 1]);
    const floor = rng.nextInt(12) / 4;
    const above = desc.filter((v) => v >= floor);
    assert.equal(kthLargest(Float32Array.from(values), k, floor), above.length >= k ? above[k - 1] : floor);
    const total = values.reduce((a, b) => a + b, 0);
    if (total > 0) {
      const need = rng.nextFloat() * total;
      let cum = 0;
      let edge = desc[n - 1]!;
      for (const v of desc) {
        cum += v;
        if (cum >= need) {
          edge = v;
          break;
        }
      }
      assert.equal(nucleusEdge(Float64Array.from(values), n, need), edge, `need ${need} of ${values}`);
    }
    const x = Float32Array.from(values);
    const m = rng.nextInt(n + 1);
    const byValue = values.map((_, i) => i).sort((a, b) => values[b]! - values[a]! || a - b);
    assert.deepEqual(topN(x, m), byValue.slice(0, m));
  }
});

test("parameters: ranges and names in errors; generation_config defaults; request values win", () => {
  const cases: [SamplingParams, RegExp][] = [
    [{ temperature: -1 }, /temperature must be ≥ 0, got -1/],
    [{ topP: 0 }, /topP must be > 0, got 0/],
    [{ topK: 2.5 }, /topK must be an integer, got 2\.5/],
    [{ minP: 1.5 }, /minP must be ≤ 1, got 1\.5/],
    [{ repetitionPenalty: 0 }, /repetitionPenalty must be > 0, got 0/],
    [{ presencePenalty: 3 }, /presencePenalty must be ≤ 2, got 3/],
    [{ frequencyPenalty: NaN }, /frequencyPenalty must be a finite number, got NaN/],
    [{ logitBias: { 10: 1 } }, /logitBias key must be in \[0, 9\], got 10/],
    [{ logitBias: { 1: 101 } }, /logitBias\[1\] must be ≤ 100, got 101/],
    [{ seed: -1 }, /seed must be an integer in \[0, 2\^53\), got -1/],
    [{ maxTokens: 0 }, /maxTokens must be in \[1, /],
    [{ stop: [""] }, /stop\[0\] must be a non-empty string/],
    [{ stopTokenIds: [12] }, /stopTokenIds\[0\] must be in \[0, 9\], got 12/],
    [{ logprobs: 21 }, /logprobs must be in \[0, 20\], got 21/],
  ];
  for (const [params, error] of cases) assert.throws(() => resolveSamplingParams(params, 10), error);
  const defaults = samplingDefaults({
    bosTokenId: 1, eosTokenIds: [2], padTokenId: null, doSample: true, temperature: 0.6, topP: 0.9,
    topK: null, minP: null, repetitionPenalty: 1.1, maxNewTokens: 256, maxLength: null,
  });
  const r = resolveSamplingParams({ temperature: 0.2, topK: -1, stop: "END" }, 10, defaults);
  assert.deepEqual([r.temperature, r.topP, r.topK, r.repetitionPenalty, r.maxTokens, r.stop], [0.2, 0.9, 0, 1.1, 256, ["END"]]);
  const plain = resolveSamplingParams({}, 10);
  assert.deepEqual([plain.temperature, plain.topP, plain.topK, plain.minP, plain.maxTokens, plain.logprobs, plain.seed], [1, 1, 0, 0, 16, null, null]);
});

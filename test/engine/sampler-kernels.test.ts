// The sampler's wasm passes (sampler-kernels.ts, assembly/ops/sampling.ts)
// against their float64 JavaScript twins in sampler.ts, kernel by kernel:
// awkward lengths (1, 7, 97, 1000, 4099 and Qwen's 151936: tails of 1–3
// lanes and blocks of 16), thresholds that are not f32 values, ties, and
// scratch poisoned with NaN before the kernels run (each kernel must write
// what it reports and never read past the vocabulary).
// Tolerances: ids, counts, thresholds and the greedy token are exact; weights
// are e^x in f32 (≈ 2 ulp: |Δw| ≤ 1e-6 · w), sums in f64 (relative 1e-6).
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { OutOfMemoryError, Prng, type Runtime, Sampler, createRuntime } from "../../src/ops-entry.js";
import { SamplingState, argmax, kthLargest, logSumExp, topN } from "../../src/engine/sampler.js";
import { SamplerKernels, f32AtLeast } from "../../src/engine/sampler-kernels.js";
import { resolveSamplingParams } from "../../src/engine/sampling-params.js";

const rt: Runtime = await createRuntime({ threads: 1 });
after(() => rt.dispose());

const LENGTHS = [1, 7, 97, 1000, 4099, 151936];
const BUCKETS = 2048;

/**
 * SamplerKernels over scratch that held poison just before (the allocator
 * hands back the freed block): NaN and 1e30 alternating, so a kernel that
 * reads a lane past the vocabulary either sees a NaN or a logit above them all.
 */
function poisonedKernels(V: number): SamplerKernels {
  const bytes = 40 * (V + 8) + 8 * BUCKETS + 4096;
  const p = rt.heap.alloc(bytes, "poison");
  const f = new Float32Array(rt.memory.buffer, p, bytes >> 2);
  for (let i = 0; i < f.length; i++) f[i] = i & 1 ? 1e30 : NaN;
  rt.heap.free(p);
  return new SamplerKernels(rt, V, BUCKETS);
}

/** Runs `check` on poisoned kernels of vocabulary V, then frees them. */
function withKernels(V: number, check: (k: SamplerKernels) => void): void {
  const k = poisonedKernels(V);
  try {
    check(k);
  } finally {
    k.free();
  }
}

function randomLogits(rng: Prng, V: number, spread: number): Float32Array {
  const x = Float32Array.from({ length: V }, () => spread * (rng.nextFloat() + rng.nextFloat() + rng.nextFloat() - 1.5));
  for (let i = 0; i < V / 50; i++) x[rng.nextInt(V)] = x[rng.nextInt(V)]!; // ties
  return x;
}

test("f32AtLeast: the smallest f32 at or above x, so an f32 compare equals the float64 one", () => {
  const rng = new Prng(11);
  const f = new Float32Array(1);
  const i = new Int32Array(f.buffer);
  for (let t = 0; t < 2000; t++) {
    const x = (rng.nextFloat() - 0.5) * 10 ** (rng.nextInt(12) - 6);
    const up = f32AtLeast(x);
    assert.equal(Math.fround(up), up, "an f32 value");
    assert.ok(up >= x, `${up} ≥ ${x}`);
    f[0] = up;
    i[0] += up > 0 ? -1 : up < 0 ? 1 : 0;
    if (up !== 0) assert.ok(f[0]! < x, `the f32 below ${up} (${f[0]}) is < ${x}`);
  }
  assert.equal(f32AtLeast(1.5), 1.5);
  assert.equal(f32AtLeast(-Infinity), -Infinity);
  assert.equal(f32AtLeast(1e-50), 2 ** -149);
});

test("max, first index of the max, NaN and −∞ at every length", () => {
  const rng = new Prng(1);
  for (const V of LENGTHS) {
    withKernels(V, (k) => {
      const x = randomLogits(rng, V, 8);
      k.loadScores(x);
      const max = k.maxScore();
      assert.equal(max, x[argmax(x)], `V ${V}`);
      assert.equal(k.firstAtLeast(max), argmax(x), `V ${V}: the lowest id among ties`);
      const at = rng.nextInt(V);
      x[at] = NaN;
      k.loadScores(x);
      assert.ok(Number.isNaN(k.maxScore()), `V ${V}: a NaN at ${at} is seen`);
      k.loadScores(new Float32Array(V).fill(-Infinity));
      assert.equal(k.maxScore(), -Infinity);
    });
  }
});

/** `x` copied into a block of the runtime's memory (what the engine's logits view is); freed after `check`. */
function withView(x: Float32Array, check: (view: Float32Array) => void): void {
  const p = rt.heap.alloc(4 * x.length + 16, "logits view");
  try {
    const view = new Float32Array(rt.memory.buffer, p, x.length);
    view.set(x);
    check(view);
  } finally {
    rt.heap.free(p);
  }
}

test("greedy in place: logits in the runtime's memory give the JavaScript argmax without the scores copy; others return null", () => {
  const rng = new Prng(12);
  for (const V of LENGTHS) {
    withKernels(V, (k) => {
      const x = randomLogits(rng, V, 8);
      x[rng.nextInt(V)] = 1e9; // one clear winner, and a tie for it further on
      const top = argmax(x);
      if (top + 1 < V) x[top + 1 + rng.nextInt(V - top - 1)] = 1e9;
      withView(x, (view) => {
        assert.equal(k.argmaxInPlace(view), argmax(x), `V ${V}: the lowest id among ties`);
        // The scores scratch still holds its poison: no copy was made.
        assert.ok(Number.isNaN(k.maxScore()), `V ${V}: scores scratch untouched`);
        view[rng.nextInt(V)] = NaN;
        assert.equal(k.argmaxInPlace(view), null, `V ${V}: a NaN goes to the copy path, which names it`);
        view.fill(-Infinity);
        assert.equal(k.argmaxInPlace(view), null, `V ${V}: all −∞ goes to the copy path`);
      });
      assert.equal(k.argmaxInPlace(x), null, `V ${V}: logits outside the runtime's memory are copied`);
    });
  }
});

test("Sampler greedy: a view of the runtime's memory picks what a copy picks, and a processed request still gets its processing", () => {
  const V = 4099;
  const rng = new Prng(13);
  const sampler = new Sampler(V, { runtime: rt });
  try {
    for (let t = 0; t < 20; t++) {
      const x = randomLogits(rng, V, 8);
      const greedy = resolveSamplingParams({ temperature: 0 }, V);
      withView(x, (view) => {
        assert.equal(sampler.sample(new SamplingState(greedy), view).token, argmax(x));
        assert.deepEqual(sampler.distribution(new SamplingState(greedy), view).ids, Int32Array.of(argmax(x)));
        // A logit bias must still apply: the in-place path is only for unprocessed rows.
        const low = (argmax(x) + 1) % V;
        const biased = resolveSamplingParams({ temperature: 0, logitBias: { [low]: 100 } }, V);
        assert.equal(sampler.sample(new SamplingState(biased), view).token, low);
        view[rng.nextInt(V)] = NaN;
        assert.throws(() => sampler.sample(new SamplingState(greedy), view), /NaN/);
      });
    }
  } finally {
    sampler.free();
  }
});

test("k-th largest over a floor equals the heap in JavaScript (floors that are not f32)", () => {
  const rng = new Prng(2);
  for (const V of LENGTHS) {
    withKernels(V, (k) => {
      const x = randomLogits(rng, V, 6);
      k.loadScores(x);
      for (const kk of [1, 2, 7, 50, V]) {
        if (kk > V) continue;
        const floor = -9 + rng.nextFloat() * 9 + 1e-9; // rarely an f32
        const want = kthLargest(x, kk, floor);
        const got = k.kthLargest(kk, floor);
        assert.equal(got === -Infinity ? floor : got, want, `V ${V} k ${kk} floor ${floor}`);
      }
    });
  }
});

test("candidates: the ids ≥ floor in order, weights e^((l − max)/T), buckets monotone with exact masses", () => {
  const rng = new Prng(3);
  for (const V of LENGTHS) {
    withKernels(V, (k) => {
      const x = randomLogits(rng, V, 10);
      k.loadScores(x);
      const max = k.maxScore();
      for (const T of [0.3, 1, 1.7]) {
        const floor = max - (0.5 + rng.nextFloat() * 12) * T + 1e-9;
        const want: number[] = [];
        for (let i = 0; i < V; i++) if (x[i]! >= floor) want.push(i);
        for (const hist of [false, true]) {
          const f = f32AtLeast(floor);
          const scale = max > f ? BUCKETS / (max - f) : 0;
          const { n, mass } = k.candidates(floor, max, T, hist ? scale : null);
          const { ids, w } = k.candidateArrays(n);
          assert.deepEqual([...ids], want, `V ${V} T ${T} hist ${hist}: the candidate ids`);
          let sum = 0;
          for (let j = 0; j < n; j++) {
            const ref = Math.exp((x[ids[j]!]! - max) / T);
            assert.ok(Math.abs(w[j]! - ref) <= 1e-6 * ref, `V ${V} T ${T}: w(${ids[j]}) = ${w[j]}, e^x = ${ref}`);
            sum += w[j]!;
          }
          assert.ok(Math.abs(mass - sum) <= 1e-9 * sum, `V ${V}: mass ${mass} vs Σw ${sum}`);
          if (!hist) continue;
          // Bucket masses add up to the total, and a bucket never holds a larger logit than the next one up.
          const bm = k.bucketMass;
          assert.ok(Math.abs(bm.reduce((a, b) => a + b, 0) - mass) <= 1e-9 * mass);
          let total = 0;
          for (let b = 0; b < BUCKETS; b++) total += k.bucketWeights(n, b).length;
          assert.equal(total, n, "every candidate is in exactly one bucket");
        }
      }
    });
  }
});

test("the nucleus cut keeps the buckets above and the edge bucket's weights ≥ edge, in order", () => {
  const rng = new Prng(4);
  const V = 4099;
  withKernels(V, (k) => {
    const x = randomLogits(rng, V, 6);
    k.loadScores(x);
    const max = k.maxScore();
    const floor = max - 20;
    const f = f32AtLeast(floor);
    const { n } = k.candidates(floor, max, 1, BUCKETS / (max - f));
    const before = k.candidateArrays(n);
    const ids0 = [...before.ids];
    const w0 = [...before.w];
    const b = 1900;
    const inB = k.bucketWeights(n, b);
    const edge = inB.length > 0 ? inB[inB.length >> 1]! : 0.5;
    const bucketOf = (l: number) => Math.min(BUCKETS - 1, Math.trunc(Math.fround(Math.fround(l - f) * Math.fround(BUCKETS / (max - f)))));
    const want = ids0.filter((id, j) => bucketOf(x[id]!) > b || (bucketOf(x[id]!) === b && w0[j]! >= edge));
    const m = k.keepNucleus(n, b, edge);
    assert.deepEqual([...k.candidateArrays(m).ids], want);
  });
});

test("the draw walks the running sum: first, last, and every id at its own fraction", () => {
  for (const V of [1, 7, 97, 1000]) {
    withKernels(V, (k) => {
      const x = Float32Array.from({ length: V }, (_, i) => -((i * 7) % 5));
      k.loadScores(x);
      const { n } = k.candidates(-Infinity, 0, 1, null);
      const { w } = k.candidateArrays(n);
      const total = [...w].reduce((a, b) => a + b, 0);
      assert.equal(k.draw(n, 0), 0);
      assert.equal(k.draw(n, 1 - 1e-12), V - 1);
      let cum = 0;
      for (let j = 0; j < n; j++) {
        const mid = (cum + w[j]! / 2) / total;
        assert.equal(k.draw(n, mid), j, `V ${V}: fraction ${mid} lands on ${j}`);
        cum += w[j]!;
      }
    });
  }
});

test("log-sum-exp and the top-n of the raw logits match JavaScript (ties by lower id)", () => {
  const rng = new Prng(5);
  for (const V of LENGTHS) {
    withKernels(V, (k) => {
      const x = randomLogits(rng, V, 12);
      const lse = k.rawLogSumExp(x);
      const want = logSumExp(x);
      assert.ok(Math.abs(lse - want) <= 1e-6 * Math.max(1, Math.abs(want)), `V ${V}: ${lse} vs ${want}`);
      for (const m of [0, 1, 5, 20]) assert.deepEqual(k.topRaw(m), topN(x, Math.min(m, V)), `V ${V} top ${m}`);
      assert.equal(k.rawLogSumExp(new Float32Array(V).fill(-Infinity)), -Infinity);
    });
  }
});

test("a memory that cannot hold the scratch is an OutOfMemoryError (createSampler then uses JavaScript)", () => {
  assert.throws(() => new Sampler(2 ** 28, { runtime: rt }), OutOfMemoryError);
  assert.equal(new Sampler(10, { runtime: rt }).passes, "wasm");
  assert.equal(new Sampler(10).passes, "js");
});

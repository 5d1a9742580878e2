// Test helpers for the speculative decoding distribution tests
// (speculative-distribution.test.ts, structured/speculative-sampled-grammar.test.ts):
// a first-order Markov model as a ModelRunner, whose next-token distribution
// is known in closed form, and a chi-square goodness-of-fit check with the
// Wilson–Hilferty critical value.
import assert from "node:assert/strict";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import type { KvCacheGeometry, ModelRunner } from "../../src/model/model-runner.js";
import type { ModelConfig } from "../../src/model/config.js";

/**
 * A Markov model over `states` (token ids) as a ModelRunner: the logit row
 * after token states[i] is log table[i][j] at states[j], −∞ at every other id
 * of the vocabulary [0, config.vocabSize). After a token outside `states` the
 * row is table[0]'s. Stateless: it needs no KV cache (any block table works).
 */
export class MarkovRunner implements ModelRunner {
  readonly vocabSize: number;
  readonly maxModelLen = 256;
  readonly kvCache: KvCacheGeometry = { numBlocks: 4096, blockSize: 16 };
  constructor(
    readonly config: ModelConfig,
    readonly states: readonly number[],
    readonly table: readonly (readonly number[])[],
  ) {
    this.vocabSize = config.vocabSize;
  }
  forward(batch: ForwardBatch): Float32Array {
    const V = this.vocabSize;
    const out = new Float32Array(batch.logitIndices.length * V).fill(-Infinity);
    batch.logitIndices.forEach((t, row) => {
      const prev = Math.max(0, this.states.indexOf(batch.tokens[t]!));
      this.states.forEach((s, j) => (out[row * V + s] = Math.log(this.table[prev]![j]!)));
    });
    return out;
  }
  dispose(): void {}
}

/** Upper α quantile of χ²(df) by Wilson–Hilferty; z the standard normal's upper α quantile (3.0902 for α = 0.001). */
export function chiSquareCritical(df: number, z: number): number {
  const a = 2 / (9 * df);
  return df * (1 - a + z * Math.sqrt(a)) ** 3;
}

/**
 * Pearson's chi-square of `observed` counts against `expected` counts (same
 * length, equal totals): each outcome with expected count ≥ 5 is its own bin,
 * the rest are pooled into one. Asserts it is below the α = 0.001 critical
 * value and returns the statistic and its degrees of freedom.
 */
export function assertChiSquare(observed: ArrayLike<number>, expected: ArrayLike<number>, what: string): { chi2: number; df: number } {
  let chi2 = 0;
  let bins = 0;
  let poolO = 0;
  let poolE = 0;
  for (let c = 0; c < expected.length; c++) {
    const e = expected[c]!;
    if (e >= 5) {
      chi2 += (observed[c]! - e) ** 2 / e;
      bins++;
    } else {
      poolO += observed[c]!;
      poolE += e;
    }
  }
  if (poolE > 0) (chi2 += (poolO - poolE) ** 2 / poolE), bins++;
  const critical = chiSquareCritical(bins - 1, 3.0902);
  assert.ok(chi2 < critical, `${what}: chi-square ${chi2.toFixed(1)} over ${bins - 1} degrees of freedom ≥ the α = 0.001 critical value ${critical.toFixed(1)}`);
  return { chi2, df: bins - 1 };
}

// truncatePair (src/server/pair-truncation.ts): a cross-encoder pair cut to k
// tokens with Hugging Face's longest_first strategy, checked against the
// strategy written out here for BERT's and XLM-R's pair templates, on every
// k from the template's size to the full length, and on awkward shapes
// (empty text, one text far longer, ties).
import assert from "node:assert/strict";
import { test } from "node:test";
import { truncatePair } from "../../src/server/pair-truncation.js";

const CLS = 101;
const SEP = 102;
const S = 0;
const ES = 2;

/** HF's longest_first, the reference: drop from the longer (a tie: the second) one at a time. */
function longestFirst(a: number[], b: number[], budget: number): [number[], number[]] {
  let na = a.length;
  let nb = b.length;
  while (na + nb > budget) {
    if (na > nb) na--;
    else nb--;
  }
  return [a.slice(0, na), b.slice(0, nb)];
}
const bert = (a: number[], b: number[]): { ids: number[]; typeIds: number[] } => ({
  ids: [CLS, ...a, SEP, ...b, SEP],
  typeIds: [0, ...a.map(() => 0), 0, ...b.map(() => 1), 1],
});
const xlmr = (a: number[], b: number[]): { ids: number[]; typeIds: number[] } => {
  const ids = [S, ...a, ES, ES, ...b, ES];
  return { ids, typeIds: ids.map(() => 0) };
};
const seq = (n: number, from: number): number[] => Array.from({ length: n }, (_, i) => from + i);

test("truncatePair = longest_first on BERT's and XLM-R's templates, every k", () => {
  const shapes: [number, number][] = [[3, 9], [9, 3], [5, 5], [0, 7], [7, 0], [1, 20], [13, 12]];
  for (const [template, specials] of [[bert, 3], [xlmr, 4]] as const) {
    for (const [la, lb] of shapes) {
      const a = seq(la, 1000);
      const b = seq(lb, 2000);
      const full = template(a, b);
      for (let k = specials; k <= full.ids.length + 2; k++) {
        const [ra, rb] = longestFirst(a, b, k - specials);
        assert.deepEqual(truncatePair(full, a, b, k), template(ra, rb), `${la}+${lb} k=${k}`);
      }
      if (la + lb > 0) assert.equal(truncatePair(full, a, b, specials - 1), null, `${la}+${lb}: k below the template`);
    }
  }
});

test("truncatePair: texts whose ids also appear as special tokens still find their place", () => {
  const a = [SEP, 5, SEP];
  const b = [CLS, SEP];
  const full = bert(a, b);
  const [ra, rb] = longestFirst(a, b, 3);
  assert.deepEqual(truncatePair(full, a, b, 6), bert(ra, rb));
});

test("truncatePair: an encoding that does not hold its texts is an error, not a silent cut", () => {
  assert.throws(() => truncatePair({ ids: [CLS, 1, 2, SEP, 9, SEP], typeIds: [0, 0, 0, 0, 1, 1] }, [1, 3], [9], 4), /does not hold its two texts/);
});

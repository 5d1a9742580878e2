// truncatePair (src/server/pair-truncation.ts): a cross-encoder pair cut to k
// tokens with the fast (Rust) tokenizer's longest_first strategy, which vLLM
// runs: against the table of tokenizers' own unit test
// (truncation.rs truncate_encodings_longest_first), and against the rule
// written out here for BERT's and XLM-R's pair templates on every k from the
// template's size to the full length, on awkward shapes (empty text, one text
// far longer, equal lengths, odd budgets with the query the shorter).
import assert from "node:assert/strict";
import { test } from "node:test";
import { truncatePair } from "../../src/server/pair-truncation.js";

const CLS = 101;
const SEP = 102;
const S = 0;
const ES = 2;

/**
 * The fast tokenizer's longest_first, the reference: the shorter text whole
 * if it takes at most half the budget (the longer gets the rest), else both
 * cut to halves, the odd token to the longer (equal lengths: the second).
 */
function longestFirst(a: number[], b: number[], budget: number): [number[], number[]] {
  if (a.length + b.length <= budget) return [a, b];
  const short = Math.min(a.length, b.length);
  const firstLonger = a.length > b.length;
  let [na, nb] = [0, 0];
  if (2 * short <= budget) [na, nb] = firstLonger ? [budget - short, short] : [short, budget - short];
  else {
    const lo = Math.floor(budget / 2);
    [na, nb] = firstLonger ? [budget - lo, lo] : [lo, budget - lo];
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

test("truncatePair = the fast tokenizer's longest_first on BERT's and XLM-R's templates, every k", () => {
  const shapes: [number, number][] = [[3, 9], [9, 3], [5, 5], [0, 7], [7, 0], [1, 20], [13, 12], [4, 30], [12, 13]];
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

test("truncatePair = tokenizers' own longest_first table (max_length 7, texts of 0, 2, 4 and 8 tokens; no template)", () => {
  // truncation.rs truncate_encodings_longest_first: [first, second, kept first, kept second].
  const table: [number, number, number, number][] = [
    [0, 0, 0, 0], [0, 2, 0, 2], [0, 4, 0, 4], [0, 8, 0, 7],
    [2, 0, 2, 0], [2, 2, 2, 2], [2, 4, 2, 4], [2, 8, 2, 5],
    [4, 0, 4, 0], [4, 2, 4, 2], [4, 4, 3, 4], [4, 8, 3, 4],
    [8, 0, 7, 0], [8, 2, 5, 2], [8, 4, 4, 3], [8, 8, 3, 4],
  ];
  for (const [la, lb, ka, kb] of table) {
    const a = seq(la, 1000);
    const b = seq(lb, 2000);
    const cut = truncatePair({ ids: [...a, ...b], typeIds: [...a.map(() => 0), ...b.map(() => 1)] }, a, b, 7);
    assert.deepEqual(cut, { ids: [...a.slice(0, ka), ...b.slice(0, kb)], typeIds: [...new Array(ka).fill(0), ...new Array(kb).fill(1)] }, `${la} + ${lb} → ${ka} + ${kb}`);
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

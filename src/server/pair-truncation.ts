/**
 * A cross-encoder's pair input cut to `k` tokens, as vLLM's score route asks
 * the tokenizer for it (serving_score.py: tokenizer(text=q, text_pair=d,
 * truncation=True, max_length=k)), i.e. the fast (Rust) tokenizer's
 * "longest_first" strategy (tokenizers/src/utils/truncation.rs
 * truncate_encodings), which vLLM's AutoTokenizer runs. With T = k minus the
 * template's special tokens, n1 ≤ n2 the two texts' lengths:
 *
 *   n1 + n2 ≤ T              nothing is cut
 *   n1 ≤ T − n1 (n1 ≤ T/2)   only the longer is cut, to T − n1
 *   otherwise                both: the shorter to ⌊T/2⌋, the longer to ⌈T/2⌉
 *                            (equal lengths: the second is "the longer")
 *
 * Each text keeps its first tokens; the template's special tokens (BERT's
 * [CLS] a [SEP] b [SEP], XLM-R's <s> a </s></s> b </s>) stay. (transformers'
 * slow tokenizers take one token at a time off the longer, a tie off the
 * second, which ends ⌈T/2⌉ / ⌊T/2⌋ the other way round when T is odd and the
 * first text is not the longer.)
 *
 *   pair      the full encoding: ids, typeIds (length n = |a| + |b| + s)
 *   a, b      each text's ids without special tokens (how the pair template
 *             tokenized them: each sequence is encoded alone)
 *   → the truncated ids and typeIds, or null when the s special tokens alone
 *     exceed k (transformers raises there too).
 */
export function truncatePair(
  pair: { ids: readonly number[]; typeIds: readonly number[] },
  a: readonly number[],
  b: readonly number[],
  k: number,
): { ids: number[]; typeIds: number[] } | null {
  const n = pair.ids.length;
  if (n <= k) return { ids: [...pair.ids], typeIds: [...pair.typeIds] };
  const s = n - a.length - b.length;
  if (s < 0 || s > k) return null;
  const layout = findLayout(pair.ids, a, b, s);
  if (layout === null) throw new Error(`truncatePair: the pair encoding (${n} tokens) does not hold its two texts (${a.length} and ${b.length} tokens) in a template`);
  const [na, nb] = longestFirst(a.length, b.length, k - s);
  const { p, m } = layout; // prefix length, middle length; suffix = s - p - m
  const keep = (from: number, count: number): [number, number] => [from, from + count];
  const pieces: [number, number][] = [
    keep(0, p),
    keep(p, na),
    keep(p + a.length, m),
    keep(p + a.length + m, nb),
    keep(p + a.length + m + b.length, s - p - m),
  ];
  const ids: number[] = [];
  const typeIds: number[] = [];
  for (const [lo, hi] of pieces) {
    for (let i = lo; i < hi; i++) {
      ids.push(pair.ids[i]!);
      typeIds.push(pair.typeIds[i]!);
    }
  }
  return { ids, typeIds };
}

/** Where the two texts sit in the pair: prefix length p, middle length m (searched over the s special tokens). */
function findLayout(ids: readonly number[], a: readonly number[], b: readonly number[], s: number): { p: number; m: number } | null {
  const at = (from: number, xs: readonly number[]): boolean => xs.every((x, i) => ids[from + i] === x);
  for (let p = 0; p <= s; p++) {
    if (!at(p, a)) continue;
    for (let m = 0; p + m <= s; m++) {
      if (at(p + a.length + m, b)) return { p, m };
    }
  }
  return null;
}

/** truncate_encodings' LongestFirst lengths for texts of la and lb tokens within t (la + lb > t ≥ 0). */
function longestFirst(la: number, lb: number, t: number): [number, number] {
  const swap = la > lb;
  let n1 = Math.min(la, lb);
  let n2 = n1 > t ? n1 : Math.max(n1, t - n1);
  if (n1 + n2 > t) {
    n1 = Math.floor(t / 2);
    n2 = n1 + (t % 2);
  }
  return swap ? [n2, n1] : [n1, n2];
}

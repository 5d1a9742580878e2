/**
 * A cross-encoder's pair input cut to `k` tokens, as vLLM's score route asks
 * the tokenizer for it (serving_score.py: tokenizer(text=q, text_pair=d,
 * truncation=True, max_length=k)), i.e. Hugging Face tokenizers' default
 * "longest_first" strategy (tokenizers/src/utils/truncation.rs): one token at a
 * time comes off the end of the longer of the two texts (a tie: the second),
 * until the texts and the template's special tokens fit k; the template's
 * special tokens (BERT's [CLS] a [SEP] b [SEP], XLM-R's <s> a </s></s> b </s>)
 * stay.
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
  let na = a.length;
  let nb = b.length;
  for (let drop = n - k; drop > 0; drop--) {
    if (na > nb) na--;
    else nb--;
  }
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

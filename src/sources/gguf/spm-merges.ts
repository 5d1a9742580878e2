/**
 * The BPE merges of a SentencePiece ("llama") vocabulary, as transformers'
 * SentencePieceExtractor derives them: every split (a, b) of a piece into two
 * pieces of the vocabulary, ordered by the piece's score (highest first), then
 * by the ids of the piece, a and b. tokenizer.ts feeds them to the BPE of
 * @huggingface/tokenizers.
 *
 * Linear time (issue 32: slicing and hashing every prefix and suffix made one
 * 20k-character piece cost 23–41 s). Each piece's prefixes and suffixes are
 * looked up by a polynomial hash over its UTF-16 code units (two moduli below
 * 2^26, so the key is an exact integer below 2^52; a random base per call, so a
 * file cannot be forged to collide), computed incrementally in O(1) a split.
 * Only a hash hit is confirmed by comparing the strings (startsWith, O(|a| + |b|)),
 * and a confirmed hit is a merge, so the work is O(characters of the
 * vocabulary + characters of the merges made). `maxMergeChars` and `maxMerges`
 * bound the second term: past either the call stops with a MergeLimitError.
 * Splits fall on code point boundaries, never inside a surrogate pair
 * (SentencePieceExtractor splits the piece's code points).
 */

const P1 = 67108859; // primes below 2^26: (P − 1)² < 2^52, exact in a double
const P2 = 67108837;

export interface MergeLimits {
  /** Merges at most. */
  maxMerges: number;
  /** Σ (|a| + |b|) over the merges at most, in UTF-16 code units. */
  maxMergeChars: number;
}

/** Thrown when the merges would exceed a MergeLimits bound; `field` names which. */
export class MergeLimitError extends Error {
  constructor(
    readonly field: "maxMerges" | "maxMergeChars",
    readonly limit: number,
  ) {
    super(field === "maxMerges" ? `would make more than ${limit} merges` : `would make merges of more than ${limit} characters in all`);
    this.name = "MergeLimitError";
  }
}

/** The polynomial hash key of s[start, end) (the same key hashPrefixes' arithmetic gives). */
function keyOf(s: string, b1: number, b2: number): number {
  let h1 = 0;
  let h2 = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i) + 1;
    h1 = (h1 * b1 + c) % P1;
    h2 = (h2 * b2 + c) % P2;
  }
  return h1 * P2 + h2;
}

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff;

/**
 * transformers' SentencePieceExtractor merges of `tokens` (ids are indices),
 * ordered by score, highest first. Only tokens with `mergeable(id)` take part
 * (the first id of a repeated piece).
 */
export function mergesFromScores(
  tokens: readonly string[],
  scores: readonly number[],
  mergeable: (id: number) => boolean,
  limits: MergeLimits = { maxMerges: Infinity, maxMergeChars: Infinity },
): [string, string][] {
  const ids = new Map<string, number>();
  let longest = 0;
  tokens.forEach((t, id) => {
    if (mergeable(id) && !ids.has(t)) {
      ids.set(t, id);
      longest = Math.max(longest, t.length);
    }
  });
  const b1 = 256 + Math.floor(Math.random() * (P1 - 512));
  const b2 = 256 + Math.floor(Math.random() * (P2 - 512));
  // pow[k] = (b1^k mod P1, b2^k mod P2): shifts a prefix's hash left by k code units.
  const pow1 = new Float64Array(longest + 1);
  const pow2 = new Float64Array(longest + 1);
  pow1[0] = pow2[0] = 1;
  for (let k = 1; k <= longest; k++) {
    pow1[k] = (pow1[k - 1]! * b1) % P1;
    pow2[k] = (pow2[k - 1]! * b2) % P2;
  }
  const byKey = new Map<number, number>();
  for (const [t, id] of ids) {
    const key = keyOf(t, b1, b2);
    if (!byKey.has(key)) byKey.set(key, id);
  }
  // The id of piece[start, end), given its key: a hash hit is confirmed; a collision falls back to the exact map.
  const lookup = (piece: string, start: number, end: number, key: number): number | undefined => {
    const id = byKey.get(key);
    if (id === undefined) return undefined;
    const t = tokens[id]!;
    if (t.length === end - start && piece.startsWith(t, start)) return id;
    return ids.get(piece.slice(start, end));
  };

  const found: { score: number; id: number; ia: number; ib: number }[] = [];
  let chars = 0;
  const h1 = new Float64Array(longest + 1); // h[i]: hash of piece[0, i)
  const h2 = new Float64Array(longest + 1);
  for (const [piece, id] of ids) {
    const n = piece.length;
    for (let i = 0; i < n; i++) {
      const c = piece.charCodeAt(i) + 1;
      h1[i + 1] = (h1[i]! * b1 + c) % P1;
      h2[i + 1] = (h2[i]! * b2 + c) % P2;
    }
    for (let i = 1; i < n; i++) {
      if (isHigh(piece.charCodeAt(i - 1)) && isLow(piece.charCodeAt(i))) continue;
      const ia = lookup(piece, 0, i, h1[i]! * P2 + h2[i]!);
      if (ia === undefined) continue;
      const s1 = (h1[n]! - ((h1[i]! * pow1[n - i]!) % P1) + P1) % P1;
      const s2 = (h2[n]! - ((h2[i]! * pow2[n - i]!) % P2) + P2) % P2;
      const ib = lookup(piece, i, n, s1 * P2 + s2);
      if (ib === undefined) continue;
      found.push({ score: scores[id]!, id, ia, ib });
      chars += n;
      if (found.length > limits.maxMerges) throw new MergeLimitError("maxMerges", limits.maxMerges);
      if (chars > limits.maxMergeChars) throw new MergeLimitError("maxMergeChars", limits.maxMergeChars);
    }
  }
  found.sort((x, y) => y.score - x.score || x.id - y.id || x.ia - y.ia || x.ib - y.ib);
  return found.map((m) => [tokens[m.ia]!, tokens[m.ib]!]);
}

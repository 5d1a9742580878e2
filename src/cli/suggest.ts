/**
 * "Did you mean …?" for a mistyped command or flag: the closest candidate by
 * Damerau–Levenshtein distance (optimal string alignment: insert, delete,
 * substitute, swap two neighbours), as git and npm suggest commands.
 */

/** Edits that turn `a` into `b` (each transposition of neighbours counts as one). */
export function editDistance(a: string, b: string): number {
  // d[i][j]: distance between a[0, i) and b[0, j); rows of length b.length + 1.
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/**
 * The candidate closest to `word`, if it is close enough to be a typo: at
 * most a third of the longer word's letters differ (at least one edit), or
 * `word` is a prefix of exactly one candidate. Ties go to the first candidate.
 */
export function closest(word: string, candidates: readonly string[]): string | null {
  const w = word.toLowerCase();
  const prefixed = candidates.filter((c) => w.length >= 2 && c.startsWith(w));
  if (prefixed.length === 1) return prefixed[0]!;
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const distance = editDistance(w, c);
    if (distance < bestDistance && distance <= Math.max(1, Math.floor(Math.max(w.length, c.length) / 3))) {
      best = c;
      bestDistance = distance;
    }
  }
  return best;
}

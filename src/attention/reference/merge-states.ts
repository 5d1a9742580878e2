/**
 * Float64 reference of mergeStates: the state over the union of two key
 * segments, from each segment's (o, lse). Row-major arrays: o [rows, D], lse [rows].
 */
export function referenceMergeStates(
  oA: ArrayLike<number>,
  lseA: ArrayLike<number>,
  oB: ArrayLike<number>,
  lseB: ArrayLike<number>,
  D: number,
): { out: Float64Array; lse: Float64Array } {
  const rows = lseA.length;
  const out = new Float64Array(rows * D);
  const lse = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    const la = lseA[r]!;
    const lb = lseB[r]!;
    const m = Math.max(la, lb);
    if (m === -Infinity) {
      lse[r] = -Infinity; // both segments empty: o stays 0
      continue;
    }
    // An empty segment (lse = −Infinity) has weight e^(−∞) = 0.
    const wa = la === -Infinity ? 0 : Math.exp(la - m);
    const wb = lb === -Infinity ? 0 : Math.exp(lb - m);
    for (let d = 0; d < D; d++) {
      const a = wa === 0 ? 0 : wa * oA[r * D + d]!;
      const b = wb === 0 ? 0 : wb * oB[r * D + d]!;
      out[r * D + d] = (a + b) / (wa + wb);
    }
    lse[r] = m + Math.log(wa + wb);
  }
  return { out, lse };
}

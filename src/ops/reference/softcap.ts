/** Reference softcap in float64: cap · tanh(x / cap) (Gemma 2's logit soft-capping). */
export function softcapReference(x: ArrayLike<number>, cap: number): Float64Array {
  return Float64Array.from(x, (v) => cap * Math.tanh(v / cap));
}

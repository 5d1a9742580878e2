/** One linear shape of the integer-dot conformance suites (linear-int8-dot.test.ts, linear-q5.test.ts). */
export interface LinearCase {
  rows: number;
  cols: number;
  tokens: number;
  /** ±1 activations and weights at their largest codes: every activation code ±127 (each suite says which weight codes). */
  extreme?: boolean;
  bias?: boolean;
}

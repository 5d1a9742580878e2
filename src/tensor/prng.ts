/**
 * A small deterministic PRNG: xoshiro128** (Blackman & Vigna, "Scrambled
 * linear pseudorandom number generators", 2018), seeded through SplitMix32
 * so that nearby seeds give unrelated streams. 32-bit operations only, so it
 * is fast in JavaScript and bit-identical on every platform.
 *
 * It lives in the tensor layer because both the model layer (deterministic
 * test weights) and the engine (seeded sampling) draw from it.
 */
import { ArgumentError, show } from "../errors.js";

const TWO_POW_32 = 4294967296;

/** SplitMix32 (a 32-bit finalizer of Stafford's variant 13 family), used only for seeding. */
function splitMix32(state: { s: number }): number {
  state.s = (state.s + 0x9e3779b9) | 0;
  let z = state.s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

export class Prng {
  #s0: number;
  #s1: number;
  #s2: number;
  #s3: number;

  /**
   * @param seed an integer in [0, 2^53): the whole stream is a function of it.
   */
  constructor(seed: number) {
    if (typeof seed !== "number" || !Number.isSafeInteger(seed) || seed < 0) {
      throw new ArgumentError("seed", `must be an integer in [0, 2^53), got ${show(seed)}`);
    }
    const lo = seed % TWO_POW_32;
    const hi = Math.floor(seed / TWO_POW_32);
    const st = { s: (lo ^ Math.imul(hi, 0x27d4eb2d)) | 0 };
    this.#s0 = splitMix32(st) ^ hi;
    this.#s1 = splitMix32(st);
    this.#s2 = splitMix32(st);
    this.#s3 = splitMix32(st);
    if ((this.#s0 | this.#s1 | this.#s2 | this.#s3) === 0) this.#s3 = 1; // the all-zero state is a fixed point
  }

  /** A uniform 32-bit unsigned integer. */
  nextU32(): number {
    const s1 = this.#s1;
    const result = Math.imul(rotl(Math.imul(s1, 5), 7), 9) >>> 0;
    const t = s1 << 9;
    this.#s2 ^= this.#s0;
    this.#s3 ^= this.#s1;
    this.#s1 ^= this.#s2;
    this.#s0 ^= this.#s3;
    this.#s2 ^= t;
    this.#s3 = rotl(this.#s3, 11);
    return result;
  }

  /** A uniform double in [0, 1) with 53 random bits. */
  nextFloat(): number {
    const a = this.nextU32() >>> 5; // 27 bits
    const b = this.nextU32() >>> 6; // 26 bits
    return (a * 67108864 + b) / 9007199254740992;
  }

  /** A uniform integer in [0, n), n ≤ 2^32, without modulo bias (rejection sampling). */
  nextInt(n: number): number {
    if (!Number.isInteger(n) || n < 1 || n > TWO_POW_32) throw new ArgumentError("n", `must be an integer in [1, 2^32], got ${show(n)}`);
    const limit = TWO_POW_32 - (TWO_POW_32 % n);
    for (;;) {
      const x = this.nextU32();
      if (x < limit) return x % n;
    }
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** A seed for callers that did not give one (not reproducible by design). */
export function randomSeed(): number {
  return Math.floor(Math.random() * 2 ** 32) * 2 ** 20 + Math.floor(Math.random() * 2 ** 20);
}

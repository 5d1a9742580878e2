// Random ggml K-quant blocks for the GPU block suites (quant-blocks.test.ts,
// block-kernels.test.ts); not a test file of its own.
import { GGML_TYPES } from "../../src/tensor/ggml-types.js";
import { encodeMiniFloat, F16 } from "../../src/tensor/minifloat.js";
import { rng } from "../helpers/random.js";

export type KquantName = "Q2_K" | "Q3_K" | "Q4_K" | "Q5_K" | "Q6_K" | "IQ4_XS";

/** Byte offsets of each type's f16 super-scale d and (Q2_K, Q4_K, Q5_K) dmin in its block (ggml-common.h). */
const SUPER_SCALES: Readonly<Record<KquantName, { d: number; dmin?: number }>> = {
  Q2_K: { d: 80, dmin: 82 },
  Q3_K: { d: 108 },
  Q4_K: { d: 0, dmin: 2 },
  Q5_K: { d: 0, dmin: 2 },
  Q6_K: { d: 208 },
  IQ4_XS: { d: 0 },
};

/**
 * Raw random blocks of a K-quant: random bytes (every code, sub-block scale
 * and min), the f16 super-scales finite. Without `extremes` every third
 * block's are f16 subnormals (below 6.1e-5), the others about 0.004; with
 * it the scale class goes by row instead (so no row's sum hides another
 * class): rows 3i about 0.004, rows 3i + 1 subnormal, rows 3i + 2 up to
 * 6.4e4 (near f16's largest, 65504), their second block (if any) d = 0.
 */
export function randomKquantBlocks(type: KquantName, rows: number, cols: number, seed: number, extremes = false): Uint8Array {
  const t = GGML_TYPES[type];
  const r = rng(seed);
  const perRow = cols / 256;
  const bytes = Uint8Array.from({ length: rows * perRow * t.typeSize }, () => Math.floor(r() * 256));
  const f16 = (at: number, v: number) => {
    const c = encodeMiniFloat(F16, v, true);
    bytes[at] = c & 255;
    bytes[at + 1] = c >> 8;
  };
  const { d, dmin } = SUPER_SCALES[type];
  for (let at = 0, k = 0; at < bytes.length; at += t.typeSize, k++) {
    const cls = extremes ? Math.floor(k / perRow) % 3 : k % 3 === 2 ? 1 : 0;
    const scale = cls === 1 ? 3e-5 : cls === 2 ? (k % perRow === 1 ? 0 : 1.28e5) : 0.004;
    f16(at + d, (r() - 0.5) * scale);
    if (dmin !== undefined) f16(at + dmin, r() * scale * (cls === 2 ? 0.5 : 1));
  }
  return bytes;
}

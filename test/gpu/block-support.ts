// Random ggml K-quant blocks for the GPU block suites (quant-blocks.test.ts,
// block-kernels.test.ts); not a test file of its own.
import { GGML_TYPES } from "../../src/model/gguf/format.js";
import { encodeMiniFloat, F16 } from "../../src/tensor/minifloat.js";
import { rng } from "../helpers/random.js";

/** Raw random blocks of a K-quant: random bytes, the f16 super-scales finite (every third block's d subnormal). */
export function randomKquantBlocks(type: "Q4_K" | "Q5_K" | "Q6_K", rows: number, cols: number, seed: number): Uint8Array {
  const t = GGML_TYPES[type];
  const r = rng(seed);
  const bytes = Uint8Array.from({ length: ((rows * cols) / 256) * t.typeSize }, () => Math.floor(r() * 256));
  const f16 = (at: number, v: number) => {
    const c = encodeMiniFloat(F16, v, true);
    bytes[at] = c & 255;
    bytes[at + 1] = c >> 8;
  };
  for (let at = 0, k = 0; at < bytes.length; at += t.typeSize, k++) {
    const scale = k % 3 === 2 ? 3e-5 : 0.004; // f16 subnormals below 6.1e-5
    if (type === "Q6_K") f16(at + 208, (r() - 0.5) * scale);
    else {
      f16(at, (r() - 0.5) * scale);
      f16(at + 2, r() * scale);
    }
  }
  return bytes;
}


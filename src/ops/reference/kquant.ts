/**
 * Reference for the native ggml linear kernels (float64, written for
 * clarity): the activation as the K-quant kernels quantize it — per
 * superblock of 256 like ggml's Q8_K, d = f32(max|x| / 127),
 * q = roundHalfEven(f32(x · f32(1/d))) — and the weights as ggml decodes
 * them (tensor/ggml-dequantize.ts, ggml's dequantize_row_*). With those,
 * linearReference (linear.ts) gives what the kernels compute up to their f32
 * rounding.
 */
import { roundHalfEven } from "../../tensor/codec.js";

export const QK_K = 256;

/** x [T, cols] (cols a multiple of 256) as the K-quant kernels see it: quantized per 256 (Q8_K) and decoded. */
export function quantizeActivationQ8KReference(x: ArrayLike<number>, tokens: number, cols: number): Float64Array {
  const out = new Float64Array(tokens * cols);
  for (let t = 0; t < tokens; t++) {
    for (let b = t * cols; b < (t + 1) * cols; b += QK_K) {
      let amax = 0;
      for (let i = b; i < b + QK_K; i++) amax = Math.max(amax, Math.abs(x[i]!));
      const d = Math.fround(amax / 127);
      const id = d !== 0 ? Math.fround(1 / d) : 0;
      for (let i = b; i < b + QK_K; i++) out[i] = roundHalfEven(Math.fround(x[i]! * id)) * d;
    }
  }
  return out;
}

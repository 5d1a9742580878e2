/**
 * Float64 twin of the GPU's ggml-block decode (gpu/wgsl/quant-blocks.ts),
 * written for clarity: a matrix [rows, cols] held as rows of blocks decodes
 * through ggml's dequantize_row_* (tensor/ggml-dequantize.ts) — q4_0 with its
 * scale widened to f32 (20-byte blocks) decoded here — and, for the
 * tolerance of a sum over them, each value's offset term |dmin·m| (Q2_K, Q4_K,
 * Q5_K: the kernels sum d·sc·q and dmin·m apart, so their rounding scales
 * with both, not with the difference). With linearReference (linear.ts) the
 * values give the GEMV's and GEMM's float64 twin.
 */
import { dequantize, getScaleMinK4 } from "../../tensor/ggml-dequantize.js";
import { BLOCK_GEOMETRY, type BlockTypeName, GGML_TYPES } from "../../tensor/ggml-types.js";

export type { BlockTypeName };

/** Values and bytes of a block (tensor/ggml-types.ts). */
const GEOMETRY = BLOCK_GEOMETRY;

const GGML_NAME = { q4_k: "Q4_K", q5_k: "Q5_K", q6_k: "Q6_K", q2_k: "Q2_K", q3_k: "Q3_K", iq4_xs: "IQ4_XS" } as const;

/** |dmin·m| of value v of the block at o (Q4_K, Q5_K, Q2_K; 0 for the types without mins). */
function offsetOf(type: BlockTypeName, bytes: Uint8Array, view: DataView, o: number, v: number): number {
  if (type === "q4_k" || type === "q5_k") return Math.abs(f16(view.getUint16(o + 2, true))) * getScaleMinK4(v >> 5, bytes, o + 4)[1];
  if (type === "q2_k") return Math.abs(f16(view.getUint16(o + 82, true))) * (bytes[o + (v >> 4)]! >> 4);
  return 0;
}

/** The values [rows, cols] of rows of `type` blocks (row r at r · ⌈cols / values⌉ blocks; a q4_0 row's padding dropped), and each one's |dmin·m|. */
export function decodeBlockRows(type: BlockTypeName, bytes: Uint8Array, rows: number, cols: number): { values: Float64Array; offsets: Float64Array } {
  const g = GEOMETRY[type];
  const blocks = Math.ceil(cols / g.values);
  const values = new Float64Array(rows * cols);
  const offsets = new Float64Array(rows * cols);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const row = new Float64Array(blocks * g.values);
  for (let r = 0; r < rows; r++) {
    const at = r * blocks * g.bytes;
    if (type === "q4_0") {
      for (let b = 0; b < blocks; b++) {
        const o = at + 20 * b;
        const d = view.getFloat32(o, true);
        for (let j = 0; j < 16; j++) {
          row[32 * b + j] = d * ((bytes[o + 4 + j]! & 15) - 8);
          row[32 * b + j + 16] = d * ((bytes[o + 4 + j]! >> 4) - 8);
        }
      }
    } else {
      dequantize(GGML_TYPES[GGML_NAME[type]], bytes.subarray(at, at + blocks * g.bytes), blocks * g.values, row);
      for (let b = 0; b < blocks; b++) {
        for (let v = 0; v < 256 && b * 256 + v < cols; v++) offsets[r * cols + b * 256 + v] = offsetOf(type, bytes, view, at + g.bytes * b, v);
      }
    }
    values.set(row.subarray(0, cols), r * cols);
  }
  return { values, offsets };
}

/** f16 bits → value (IEEE half, subnormals included). */
function f16(h: number): number {
  const e = (h >> 10) & 31;
  const m = h & 1023;
  const a = e === 0 ? m * 2 ** -24 : e === 31 ? (m === 0 ? Infinity : NaN) : (1 + m / 1024) * 2 ** (e - 15);
  return h & 0x8000 ? -a : a;
}

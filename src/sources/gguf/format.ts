/**
 * The GGUF file format (ggml's `docs/gguf.md`, versions 2 and 3), as constants:
 *
 *   u32 magic "GGUF" · u32 version · u64 tensor_count · u64 metadata_kv_count
 *   metadata_kv_count × { string key, u32 value_type, value }
 *   tensor_count × { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
 *   zero padding to `general.alignment` (default 32)
 *   tensor data; each tensor at data_start + offset, offset a multiple of the alignment
 *
 * A string is u64 length + UTF-8 bytes (no NUL); an array is u32 element type +
 * u64 count + elements. All little-endian. `ne[0]` is the fastest-moving
 * dimension, so a PyTorch [rows, cols] matrix is stored as ne = [cols, rows].
 *
 * Tensor types follow ggml.h's `enum ggml_type`; a quantized type packs
 * `blockSize` consecutive values of a row into `typeSize` bytes.
 */

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_DEFAULT_ALIGNMENT = 32;

/** Metadata value types (gguf_type). */
export const GGUF_VALUE = {
  UINT8: 0,
  INT8: 1,
  UINT16: 2,
  INT16: 3,
  UINT32: 4,
  INT32: 5,
  FLOAT32: 6,
  BOOL: 7,
  STRING: 8,
  ARRAY: 9,
  UINT64: 10,
  INT64: 11,
  FLOAT64: 12,
} as const;
export type GgufValueType = (typeof GGUF_VALUE)[keyof typeof GGUF_VALUE];

/** Bytes of each fixed-size scalar value type (strings and arrays are variable). */
export const GGUF_SCALAR_BYTES: Readonly<Record<number, number>> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

/** Tensor types kvflash reads, with ggml's type ids and block geometry. */
export type GgmlTypeName = "F32" | "F16" | "BF16" | "Q4_0" | "Q4_1" | "Q5_0" | "Q5_1" | "Q8_0" | "Q2_K" | "Q3_K" | "Q4_K" | "Q5_K" | "Q6_K" | "IQ4_NL" | "IQ4_XS";

export interface GgmlType {
  name: GgmlTypeName;
  id: number;
  /** Values per block (1 for float types; 32 for Q*_0/Q*_1; 256, QK_K, for K-quants). */
  blockSize: number;
  /** Bytes per block. */
  typeSize: number;
}

export const GGML_TYPES: Readonly<Record<GgmlTypeName, GgmlType>> = {
  F32: { name: "F32", id: 0, blockSize: 1, typeSize: 4 },
  F16: { name: "F16", id: 1, blockSize: 1, typeSize: 2 },
  Q4_0: { name: "Q4_0", id: 2, blockSize: 32, typeSize: 18 }, // f16 d, u8 qs[16]
  Q4_1: { name: "Q4_1", id: 3, blockSize: 32, typeSize: 20 }, // f16 d, f16 m, u8 qs[16]
  Q5_0: { name: "Q5_0", id: 6, blockSize: 32, typeSize: 22 }, // f16 d, u8 qh[4], u8 qs[16]
  Q5_1: { name: "Q5_1", id: 7, blockSize: 32, typeSize: 24 }, // f16 d, f16 m, u8 qh[4], u8 qs[16]
  Q8_0: { name: "Q8_0", id: 8, blockSize: 32, typeSize: 34 }, // f16 d, i8 qs[32]
  Q2_K: { name: "Q2_K", id: 10, blockSize: 256, typeSize: 84 }, // u8 scales[16], u8 qs[64], f16 d, f16 dmin
  Q3_K: { name: "Q3_K", id: 11, blockSize: 256, typeSize: 110 }, // u8 hmask[32], u8 qs[64], u8 scales[12], f16 d
  Q4_K: { name: "Q4_K", id: 12, blockSize: 256, typeSize: 144 }, // f16 d, f16 dmin, u8 scales[12], u8 qs[128]
  Q5_K: { name: "Q5_K", id: 13, blockSize: 256, typeSize: 176 }, // f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]
  Q6_K: { name: "Q6_K", id: 14, blockSize: 256, typeSize: 210 }, // u8 ql[128], u8 qh[64], i8 scales[16], f16 d
  IQ4_NL: { name: "IQ4_NL", id: 20, blockSize: 32, typeSize: 18 }, // f16 d, u8 qs[16]
  IQ4_XS: { name: "IQ4_XS", id: 23, blockSize: 256, typeSize: 136 }, // f16 d, u16 scales_h, u8 scales_l[4], u8 qs[128]
  BF16: { name: "BF16", id: 30, blockSize: 1, typeSize: 2 },
};

export const GGML_TYPE_BY_ID: ReadonlyMap<number, GgmlType> = new Map(Object.values(GGML_TYPES).map((t) => [t.id, t]));

/** ggml types that exist but kvflash does not read, for a precise error. */
export const GGML_UNSUPPORTED_NAMES: Readonly<Record<number, string>> = {
  9: "Q8_1", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S",
  21: "IQ3_S", 22: "IQ2_S", 24: "I8", 25: "I16", 26: "I32", 27: "I64",
  28: "F64", 29: "IQ1_M", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4",
};

/** Bytes of a row of `n` values of `type` (n a multiple of its block size). */
export function ggmlRowBytes(type: GgmlType, n: number): number {
  return (n / type.blockSize) * type.typeSize;
}

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
 * `blockSize` consecutive values of a row into `typeSize` bytes. Their table
 * (ids, block geometry, which ones the CPU kernels keep native) is
 * tensor/ggml-types.ts, one layer down, shared with ops/ and gpu/.
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

/**
 * The ggml tensor types kvflash knows, in one table (ggml.h's `enum ggml_type`,
 * ggml-common.h's `block_*` structs, ggml.c's `type_traits`): the type id a
 * GGUF file stores, the values a block packs (`blk_size`: 1 for float types,
 * QK4_0 = QK8_0 = 32, QK_K = 256 for the K-quants and IQ4_XS), the bytes of a
 * block (`type_size`), and the Weight format the CPU kernels keep its matrices
 * in without requantizing (ops/ggml-weight.ts), or null when a loader converts
 * it. The GGUF reader and writer (sources/gguf), the native ggml weights
 * (ops/ggml-weight.ts), the float64 dequantizers (ggml-dequantize.ts) and the
 * GPU's block geometry (gpu/wgsl/quant-blocks.ts) all read it here, in the
 * lowest layer, so a block size is written once. (The AssemblyScript kernels
 * cannot import it: assembly/linalg/ggml-pack.ts repeats its sizes, and
 * test/tensor/ggml-types.test.ts checks them against this table.)
 *
 *   type    id  values  bytes  block (ggml-common.h)
 *   F32      0     1      4
 *   F16      1     1      2
 *   Q4_0     2    32     18    f16 d · u8 qs[16]
 *   Q4_1     3    32     20    f16 d · f16 m · u8 qs[16]
 *   Q5_0     6    32     22    f16 d · u8 qh[4] · u8 qs[16]
 *   Q5_1     7    32     24    f16 d · f16 m · u8 qh[4] · u8 qs[16]
 *   Q8_0     8    32     34    f16 d · i8 qs[32]
 *   Q2_K    10   256     84    u8 scales[16] · u8 qs[64] · f16 d · f16 dmin
 *   Q3_K    11   256    110    u8 hmask[32] · u8 qs[64] · u8 scales[12] · f16 d
 *   Q4_K    12   256    144    f16 d · f16 dmin · u8 scales[12] · u8 qs[128]
 *   Q5_K    13   256    176    f16 d · f16 dmin · u8 scales[12] · u8 qh[32] · u8 qs[128]
 *   Q6_K    14   256    210    u8 ql[128] · u8 qh[64] · i8 scales[16] · f16 d
 *   IQ4_NL  20    32     18    f16 d · u8 qs[16]
 *   IQ4_XS  23   256    136    f16 d · u16 scales_h · u8 scales_l[4] · u8 qs[128]
 *   BF16    30     1      2
 */

/** Values per block of the K-quants and IQ4_XS (ggml's QK_K). */
export const QK_K = 256;

/** The Weight formats (ops/weight.ts StorageFormat) the CPU kernels keep native ggml matrices in. */
export type GgmlCpuFormat = "q8" | "q5" | "iq4_xs" | "q2_k" | "q3_k" | "q4_k" | "q5_k" | "q6_k";

export interface GgmlType {
  name: GgmlTypeName;
  /** ggml.h's `enum ggml_type` value, as a GGUF tensor index stores it. */
  id: number;
  /** Values per block (1 for float types; 32 for Q*_0 / Q*_1 / IQ4_NL; 256, QK_K, for the K-quants and IQ4_XS). */
  blockSize: number;
  /** Bytes per block. */
  typeSize: number;
  /** The Weight format the CPU kernels multiply this type's matrices in as the file has them (ops/ggml-weight.ts), or null: converted at load. */
  cpuFormat: GgmlCpuFormat | null;
}

/** Tensor types kvflash reads, with ggml's type ids and block geometry. */
export const GGML_TYPES = {
  F32: { name: "F32", id: 0, blockSize: 1, typeSize: 4, cpuFormat: null },
  F16: { name: "F16", id: 1, blockSize: 1, typeSize: 2, cpuFormat: null },
  Q4_0: { name: "Q4_0", id: 2, blockSize: 32, typeSize: 18, cpuFormat: null },
  Q4_1: { name: "Q4_1", id: 3, blockSize: 32, typeSize: 20, cpuFormat: null },
  Q5_0: { name: "Q5_0", id: 6, blockSize: 32, typeSize: 22, cpuFormat: "q5" },
  Q5_1: { name: "Q5_1", id: 7, blockSize: 32, typeSize: 24, cpuFormat: null },
  Q8_0: { name: "Q8_0", id: 8, blockSize: 32, typeSize: 34, cpuFormat: "q8" },
  Q2_K: { name: "Q2_K", id: 10, blockSize: QK_K, typeSize: 84, cpuFormat: "q2_k" },
  Q3_K: { name: "Q3_K", id: 11, blockSize: QK_K, typeSize: 110, cpuFormat: "q3_k" },
  Q4_K: { name: "Q4_K", id: 12, blockSize: QK_K, typeSize: 144, cpuFormat: "q4_k" },
  Q5_K: { name: "Q5_K", id: 13, blockSize: QK_K, typeSize: 176, cpuFormat: "q5_k" },
  Q6_K: { name: "Q6_K", id: 14, blockSize: QK_K, typeSize: 210, cpuFormat: "q6_k" },
  IQ4_NL: { name: "IQ4_NL", id: 20, blockSize: 32, typeSize: 18, cpuFormat: "q8" },
  IQ4_XS: { name: "IQ4_XS", id: 23, blockSize: QK_K, typeSize: 136, cpuFormat: "iq4_xs" },
  BF16: { name: "BF16", id: 30, blockSize: 1, typeSize: 2, cpuFormat: null },
} as const satisfies { [N in GgmlTypeName]: GgmlType & { name: N; cpuFormat: N extends GgmlNativeType ? GgmlCpuFormat : null } };

export type GgmlTypeName = "F32" | "F16" | "BF16" | "Q4_0" | "Q4_1" | "Q5_0" | "Q5_1" | "Q8_0" | "Q2_K" | "Q3_K" | "Q4_K" | "Q5_K" | "Q6_K" | "IQ4_NL" | "IQ4_XS";

/** The types whose matrices the CPU kernels run as the file has them: those with a cpuFormat in GGML_TYPES (its type checks that the two agree). */
export type GgmlNativeType = "Q5_0" | "Q8_0" | "Q2_K" | "Q3_K" | "Q4_K" | "Q5_K" | "Q6_K" | "IQ4_NL" | "IQ4_XS";

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

/** The ggml block types read block by block in place: by the GPU kernels and the float64 block decoder. */
export type BlockTypeName = "q4_0" | "q4_k" | "q5_k" | "q6_k" | "q2_k" | "q3_k" | "iq4_xs";

/** Values and bytes of one block of each in-place block type as kvflash stores it: ggml's (GGML_TYPES), except q4_0's f16 scale widened to f32 (2 bytes more). */
export const BLOCK_GEOMETRY: Readonly<Record<BlockTypeName, { values: number; bytes: number }>> = {
  q4_0: { values: GGML_TYPES.Q4_0.blockSize, bytes: GGML_TYPES.Q4_0.typeSize + 2 },
  q4_k: { values: GGML_TYPES.Q4_K.blockSize, bytes: GGML_TYPES.Q4_K.typeSize },
  q5_k: { values: GGML_TYPES.Q5_K.blockSize, bytes: GGML_TYPES.Q5_K.typeSize },
  q6_k: { values: GGML_TYPES.Q6_K.blockSize, bytes: GGML_TYPES.Q6_K.typeSize },
  q2_k: { values: GGML_TYPES.Q2_K.blockSize, bytes: GGML_TYPES.Q2_K.typeSize },
  q3_k: { values: GGML_TYPES.Q3_K.blockSize, bytes: GGML_TYPES.Q3_K.typeSize },
  iq4_xs: { values: GGML_TYPES.IQ4_XS.blockSize, bytes: GGML_TYPES.IQ4_XS.typeSize },
};

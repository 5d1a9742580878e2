/** The GGUF public surface (re-exported from src/index.ts): open and load .gguf files, read their headers, write them. */
export { type GgufModel, isGgufPath, openGgufModel, resolveGgufWeightFormat } from "./gguf-model.js";
export { type GgufHeader, type GgufTensorInfo, type GgufValue, GGUF_LIMITS, isGgufFile, readGgufHeader } from "./reader.js";
export { type GgufTyped, type GgufWriteTensor, type WriteGgufOptions, gguf, writeGguf } from "./writer.js";
export { type ConvertToGgufOptions, type GgufQuantMix, convertModelDirToGguf } from "./convert.js";
export { GGML_TYPES, type GgmlType, type GgmlTypeName } from "./format.js";
export { dequantize } from "./dequantize.js";
export { quantize } from "./quantize.js";

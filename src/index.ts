// kvflash: the public API.
export { ArgumentError, KernelError, OutOfMemoryError } from "./errors.js";
export { createRuntime, Runtime, type RuntimeOptions, resolveThreads } from "./runtime/runtime.js";
export { Allocator, StepArena, formatBytes } from "./runtime/allocator.js";
export { ArgsWriter } from "./runtime/args.js";
export { Tensor } from "./tensor/tensor.js";
export { type DType, type FloatDType, DTYPES, DTYPE_BYTES, DTYPE_CODE, checkDType, isDType } from "./tensor/dtype.js";
export {
  type CodedFloatDType,
  type EncodeOptions,
  decodeInto,
  decodeToF32Bits,
  decodeValue,
  encodeInto,
  encodeValue,
  roundTo,
} from "./tensor/codec.js";
export { convert } from "./tensor/convert.js";
export {
  type CreateWeightOptions,
  type DequantizeWeightOptions,
  type WeightFormat,
  WEIGHT_BLOCK,
  WEIGHT_FORMATS,
  WEIGHT_ROW_GROUP,
  WEIGHT_TILE_BYTES,
  Weight,
  createWeight,
  dequantizeWeight,
  weightBytes,
} from "./ops/weight.js";
export { type LinearOptions, linear } from "./ops/linear.js";
export { type EmbeddingOptions, embedding } from "./ops/embedding.js";
export { type AddRmsNormOptions, type RmsNormOptions, addRmsNorm, rmsNorm } from "./ops/rmsnorm.js";
export {
  type ApplyRopeOptions,
  type RopeOptions,
  type RopeScaling,
  Rope,
  RopeTable,
  SUPPORTED_ROPE_TYPES,
  ropeInvFreq,
  ropeScalingFromConfig,
} from "./ops/rope.js";
export { type SwigluOptions, swiglu } from "./ops/swiglu.js";
export { type AddOptions, add } from "./ops/add.js";

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
export * from "./attention/index.js";

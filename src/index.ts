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
export { BlockPool, type BlockHash, type BlockPoolOptions, type BlockPoolStats } from "./kv/block-pool.js";
export { ROOT_BLOCK_HASH, hashBlockTokens } from "./engine/block-hash.js";
export { Request, type FinishReason, type RequestInit, type RequestStatus } from "./engine/request.js";
export {
  KvCacheManager,
  type AllocateSlotsOptions,
  type ComputedBlocks,
  type KvCacheManagerOptions,
  type PrefixCacheStats,
} from "./engine/kv-cache-manager.js";
export {
  Scheduler,
  type RequestOutput,
  type ScheduledRequest,
  type SchedulerOptions,
  type SchedulerOutput,
  type SchedulerStats,
  type StopChecker,
  type StopDecision,
} from "./engine/scheduler.js";
export { buildForwardBatch } from "./engine/forward-batch-builder.js";
export { PagedKvCache, type KvLayer, type PagedKvCacheOptions } from "./kv/paged-kv-cache.js";
export { type Fp8Scales, type Int8PerChannel, type Int8PerToken, type Int8Scaling, type KvCacheDType, type KvQuantMode } from "./kv/kv-quant.js";
export { appendKv, type AppendKvOptions } from "./kv/append-kv.js";

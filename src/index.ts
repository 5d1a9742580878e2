/// <reference types="node" preserve="true" />
// The public types use Node's (node:http servers, NodeJS.ProcessEnv): this reference, kept in the
// emitted .d.ts, brings @types/node (a dependency of the package) into a consumer's program.
// kvflash: the public API.
export { LLM, type LoadOptions } from "./llm/llm.js";
export { LLMError } from "./llm/llm-error.js";
export type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatDelta,
  ChatOptions,
  ChatResult,
  CompleteOptions,
  CompleteResult,
  Completion,
  JsonSchema,
  LoadProgressEvent,
  ResponseFormat,
  SamplingOptions,
  ToolCall,
  ToolChoice,
  ToolDefinition,
  Usage,
} from "./llm/types.js";
export { ArgumentError, KernelError, OutOfMemoryError } from "./errors.js";
export { createRuntime, Runtime, type RuntimeOptions, resolveThreads } from "./runtime/runtime.js";
export { INT8_DOT_MODES, type Int8DotMode, KERNEL_FLAVORS, type KernelFlavor, defaultInt8Dot, defaultKernelFlavor, kernelFlavorAvailable, relaxedInt8DotHere, relaxedPreferred, resolveKernelFlavor } from "./runtime/module.js";
export { Allocator, StepArena, formatBytes } from "./runtime/allocator.js";
export { ArgsWriter } from "./runtime/args.js";
export { Tensor, memoryName } from "./tensor/tensor.js";
export { copyTensor } from "./tensor/copy.js";
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
  type StopCallback,
  type StopDecision,
} from "./engine/scheduler.js";
export { buildForwardBatch } from "./engine/forward-batch-builder.js";
export { PagedKvCache, type KvLayer, type PagedKvCacheOptions } from "./kv/paged-kv-cache.js";
export { type Fp8Scales, type Int8PerChannel, type Int8PerToken, type Int8Scaling, type KvCacheDType, type KvDtypeSetting, type KvQuantMode } from "./kv/kv-quant.js";
export { appendKv, type AppendKvOptions } from "./kv/append-kv.js";
export {
  INT8_PATHS,
  type Int8Path,
  type PagedAttentionOptions,
  type PagedBatch,
  type PlanPagedAttentionOptions,
  pagedAttention,
  planPagedAttention,
} from "./kv/paged-attention.js";
export {
  CascadePlan,
  type CascadeAttentionOptions,
  type PlanCascadeAttentionOptions,
  cascadeAttention,
  planCascadeAttention,
} from "./kv/cascade-attention.js";
export { referencePagedAttention } from "./kv/reference-attention.js";
export { Prng, randomSeed } from "./tensor/prng.js";
export {
  type Architecture,
  type ModelConfig,
  type ParseConfigOptions,
  SUPPORTED_ARCHITECTURES,
  parseModelConfig,
} from "./model/config.js";
export { type WeightSpec, checkWeights, expectedWeights, isIgnorableWeight } from "./model/weight-names.js";
export {
  type LoadSafetensorsOptions,
  type SafetensorsEntry,
  type SafetensorsHeader,
  type WeightDType,
  MAX_HEADER_BYTES,
  freeTensors,
  loadSafetensors,
  readSafetensorsHeader,
} from "./model/safetensors.js";
export { type TensorToWrite, writeSafetensors } from "./model/safetensors-writer.js";
export { LoadProgress, type ProgressOptions, type ProgressStream } from "./model/progress.js";
export { type GenerationConfig, parseGenerationConfig } from "./model/generation-config.js";
export {
  type LoadModelDirOptions,
  type ModelDir,
  type ModelDirInfo,
  type OpenModelDir,
  type WeightLocation,
  loadModelDir,
  openModelDir,
  readModelDirInfo,
} from "./model/model-dir.js";
export { type GgufModel, isGgufPath, openGgufModel, readGgufHeader, type GgufHeader, type GgufTensorInfo, writeGguf, convertModelDirToGguf } from "./model/gguf/index.js";
export { defaultModelDir } from "./model/default-model.js";
export { type DecodeOptions, type EncodeOptions as TokenizerEncodeOptions, type FallbackChatTemplate, Tokenizer, type TokenizerOptions, type TokenizerSource } from "./tokenizer/tokenizer.js";
export { type ChatContentPart, type ChatMessage, type ChatTemplateOptions, renderChatTemplate } from "./tokenizer/chat-template.js";
export { type DetokenizerOptions, IncrementalDetokenizer } from "./tokenizer/detokenizer.js";
export {
  GREEDY_EPSILON,
  MAX_LOGPROBS,
  type ResolvedSamplingParams,
  type SamplingParams,
  resolveSamplingParams,
  samplingDefaults,
} from "./engine/sampling-params.js";
export { type SampleResult, Sampler, SamplingState, type TokenLogprob } from "./engine/sampler.js";
export { type StopFinishReason, type StopOptions, StopChecker, StopStringMatcher, type StopUpdate } from "./engine/stop.js";
export { Engine, type EngineOptions, type EngineOutput, type EngineRequest, type TokenLogprobs } from "./engine/engine.js";
export { EngineMetrics, type EngineFinishReason, type EngineMetricsSnapshot, Histogram, type HistogramSnapshot } from "./engine/metrics.js";
export { EngineClient, EngineRejectedError, type EngineState, OutputStream } from "./engine/engine-client.js";
export type { EngineInfo, EngineSettings, EngineWorkerConfig } from "./engine/protocol.js";
export { DEFAULT_MAX_NUM_SEQS, type EngineConfig, defaultMaxNumBatchedTokens, resolveEngineConfig } from "./engine/engine-config.js";
export type { LoadProgressInfo, EngineModel, ModelLoadOptions, ModelLoader, ModelLoaderModule } from "./engine/loader-module.js";
export { KvflashServer, type KvflashServerOptions } from "./server/server.js";
export { DEFAULT_LOADER, type RunningServer, type ServeOptions, serve } from "./server/start-server.js";
export * from "./attention/index.js";
export {
  type CreateWeightOptions,
  type DequantizeWeightOptions,
  type WeightFormat,
  type WeightsSetting,
  WEIGHT_BLOCK,
  WEIGHT_FORMATS,
  WEIGHT_ROW_GROUP,
  WEIGHT_TILE_BYTES,
  Weight,
  createWeight,
  dequantizeWeight,
  weightBytes,
} from "./ops/weight.js";
export { type KquantFormat, type StorageFormat, KQUANT_FORMATS, WeightStack, stackWeights } from "./ops/weight.js";
export { type CreateGgmlWeightOptions, type GgmlNativeType, GGML_NATIVE, GgmlMatrix, createGgmlWeight, isGgmlNativeType } from "./ops/ggml-weight.js";
export { type LinearOptions, linear } from "./ops/linear.js";
export { type EmbeddingOptions, embedding } from "./ops/embedding.js";
export { type AddRmsNormOptions, type RmsNormOptions, addRmsNorm, rmsNorm } from "./ops/rmsnorm.js";
export {
  type ApplyRopeOptions,
  type RopeOptions,
  type RopeScaling,
  Rope,
  RopeTable,
  ropeInvFreq,
} from "./ops/rope.js";
export { type SwigluOptions, swiglu } from "./ops/swiglu.js";
export { type AddOptions, add } from "./ops/add.js";
export { type BuildWeightsOptions, DecoderWeights, type LayerWeights, type TensorSource, buildDecoderWeights, weightGroups } from "./model/decoder-weights.js";
export { Decoder, type DecoderOptions } from "./model/decoder.js";
export {
  type LoadModelOptions,
  type LoadedModel,
  type RunnerOptions,
  createDecoder,
  kvBytesPerBlock,
  loadModel,
  planRunner,
  resolveKvDtype,
  resolveWeightFormat,
} from "./model/loader.js";
export { DEFAULT_KV_CACHE_BYTES, type MachineMemory, type MemoryPlan, type MemoryPlanOptions, kvBytesPerLayerBlock, layerWeightBytes, planModelMemory } from "./model/memory-plan.js";
export { type MemoryShare, type PlacedPart, type Placement, type PlacementInput, describePlacement, placeAuto } from "./model/placement.js";
export { LLAMA31_8B_CONFIG_JSON, QWEN25_05B_CONFIG_JSON, type SyntheticModelOptions, createSyntheticModel, llama31EightBConfig, qwen25HalfBConfig } from "./model/synthetic-model.js";
export { type ReferenceWeights, referenceForward } from "./model/reference-decoder.js";
export { type ForwardBatch } from "./model/forward-batch.js";
export { type KvCacheGeometry, type ModelRunner } from "./model/model-runner.js";
export {
  type GenerateOptions,
  type GenerateResult,
  type PhaseTiming,
  type RunRequestOptions,
  type StepInfo,
  type StepLoopOptions,
  generate,
  promptLogits,
  runRequest,
} from "./engine/offline-generate.js";
export { type ModelSource, type ResolveModelOptions, type ResolvedModel, localModelSource, localModelSourceOf, resolveModelSource } from "./model/source.js";
export { type ModelMetadata, readModelMetadata } from "./model/model-metadata.js";
export { type FallbackTemplateName, fallbackChatTemplate } from "./model/chat-template-fallback.js";
export { type CachedRepo, type CachedSnapshot, HubCache } from "./model/hub/hub-cache.js";
export { type HubSettings, hubSettings } from "./model/hub/hub-settings.js";
export { HubError, type HubErrorKind } from "./model/hub/hub-client.js";
export { GrammarBackend, type ConstraintMatcher, type GrammarBackendLike } from "./structured/grammar-backend.js"; export { type GrammarSpec, grammarKey } from "./structured/grammar-spec.js"; export { applyTokenMask } from "./engine/sampler.js";

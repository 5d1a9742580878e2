/// <reference types="node" preserve="true" />
// The public types use Node's (NodeJS.ProcessEnv): this reference, kept in the emitted .d.ts,
// brings @types/node (a dependency of the package) into a consumer's program.
/**
 * kvflash/ops: the kernels and the runtime under the front door (../shared/ARCHITECTURE.md,
 * layers runtime/ tensor/ ops/ attention/ kv/), for code that drives them itself: the wasm
 * runtime and its kernel flavors, tensors and dtype codecs, the attention operators with their
 * float64 references, the paged KV cache and paged / cascade attention, weights and the model
 * ops (linear, embedding, RMSNorm, RoPE, SwiGLU, add); then the model runtime built from them,
 * which the README walks through: loadModel, the tokenizer, the sampler and stop rules, the
 * engine core (Scheduler, KvCacheManager, buildForwardBatch) and generate (one request through
 * the engine). The high-level API is the main entry (kvflash); fixtures are kvflash/testing.
 * @module kvflash/ops
 */
export { ArgumentError, KernelError, OutOfMemoryError } from "./errors.js";
// The runtime: wasm memories, worker threads, kernel flavors.
export { createRuntime, Runtime, type RuntimeOptions, resolveThreads } from "./runtime/runtime.js";
export { INT8_DOT_MODES, type Int8DotMode, KERNEL_FLAVORS, type KernelFlavor, defaultInt8Dot, defaultKernelFlavor, kernelFlavorAvailable, relaxedInt8DotHere, relaxedPreferred, resolveKernelFlavor } from "./runtime/module.js";
export { Allocator, StepArena, formatBytes } from "./runtime/allocator.js";
// Tensors and dtypes.
export { Tensor, memoryName } from "./tensor/tensor.js";
export { copyTensor } from "./tensor/copy.js";
export { type DType, type FloatDType, DTYPES, DTYPE_BYTES, DTYPE_CODE, checkDType, isDType } from "./tensor/dtype.js";
export { type CodedFloatDType, type EncodeOptions, type StorageArray, decodeInto, decodeToF32Bits, decodeValue, encodeInto, encodeValue, roundTo } from "./tensor/codec.js";
export { type ConvertOptions, convert } from "./tensor/convert.js";
export { Prng, randomSeed } from "./tensor/prng.js";
// Attention: FlashAttention-2 prefill, IncreFlashAttention decode, mergeStates, their float64 references.
export * from "./attention/index.js";
// Paged KV: the block pool, the paged cache, paged and cascade attention.
export { BlockPool, type BlockHash, type BlockPoolOptions, type BlockPoolStats } from "./kv/block-pool.js";
export { PagedKvCache, type KvLayer, type PagedKvCacheOptions } from "./kv/paged-kv-cache.js";
export { type Fp8Scales, type Int8PerChannel, type Int8PerToken, type Int8Scaling, type KvCacheDType, type KvDtypeSetting, type KvQuantMode } from "./kv/kv-quant.js";
export { appendKv, type AppendKvOptions } from "./kv/append-kv.js";
export { INT8_PATHS, type Int8Path, type PagedAttentionOptions, type PagedBatch, type PlanPagedAttentionOptions, pagedAttention, planPagedAttention } from "./kv/paged-attention.js";
export { CascadePlan, type CascadeAttentionOptions, type PlanCascadeAttentionOptions, cascadeAttention, planCascadeAttention } from "./kv/cascade-attention.js";
export { referencePagedAttention } from "./kv/reference-attention.js";
// Weights and the model ops.
export {
  type CreateWeightOptions,
  type DequantizeWeightOptions,
  type KquantFormat,
  type Q5Format,
  type StorageFormat,
  type WeightFormat,
  type WeightsSetting,
  KQUANT_FORMATS,
  WEIGHT_BLOCK,
  WEIGHT_FORMATS,
  WEIGHT_ROW_GROUP,
  WEIGHT_TILE_BYTES,
  Weight,
  WeightStack,
  createWeight,
  dequantizeWeight,
  stackWeights,
  weightBytes,
} from "./ops/weight.js";
export { type CreateGgmlWeightOptions, type GgmlNativeType, GGML_NATIVE, GgmlMatrix, createGgmlWeight, isGgmlNativeType } from "./ops/ggml-weight.js";
export { type LinearOptions, linear } from "./ops/linear.js";
export { type EmbeddingOptions, embedding } from "./ops/embedding.js";
export { type AddRmsNormOptions, type RmsNormOptions, addRmsNorm, rmsNorm } from "./ops/rmsnorm.js";
export { type ApplyRopeOptions, type RopeOptions, type RopeScaling, Rope, RopeTable, ropeInvFreq } from "./ops/rope.js";
export { type SwigluOptions, swiglu } from "./ops/swiglu.js";
export { type AddOptions, add } from "./ops/add.js";
// The model runtime: a loaded model (decoder, tokenizer, generation config) and its parts.
export { type Architecture, type LayerRope, type ModelConfig, SUPPORTED_ARCHITECTURES } from "./model/config.js";
export { type LoadModelOptions, type LoadedModel, loadModel } from "./model/loader.js";
export { type LoadModelDirOptions, type ModelDir, type WeightLocation, loadModelDir } from "./model/model-dir.js";
export { type GenerationConfig } from "./model/generation-config.js";
export { type MachineMemory, type MemoryPlan } from "./model/memory-plan.js";
export { type MemoryShare, type Placement, describePlacement } from "./model/placement.js";
export { Decoder, type DecoderOptions } from "./model/decoder.js";
export { type ForwardBatch } from "./model/forward-batch.js";
export { type ForwardOptions, type KvCacheGeometry, type ModelRunner, type StepResult, type SyncModelRunner } from "./model/model-runner.js";
export { type DecodeOptions, type EncodeOptions as TokenizerEncodeOptions, type FallbackChatTemplate, Tokenizer, type TokenizerOptions, type TokenizerSource } from "./tokenizer/tokenizer.js";
export { type ChatContentPart, type ChatMessage, type ChatTemplateOptions, renderChatTemplate } from "./tokenizer/chat-template.js";
export { type DetokenizerOptions, IncrementalDetokenizer } from "./tokenizer/detokenizer.js";
// Sampling and stop rules (vLLM's order and semantics).
export { GREEDY_EPSILON, MAX_LOGPROBS, type ResolvedSamplingParams, type SamplingParams, resolveSamplingParams, samplingDefaults } from "./engine/sampling-params.js";
export { type SampleResult, Sampler, type SamplerOptions, SamplingState, type TokenLogprob } from "./engine/sampler.js";
export { type MatchResult, type StopFinishReason, type StopOptions, StopChecker, StopStringMatcher, type StopUpdate } from "./engine/stop.js";
// The engine core (vLLM v1's layering): requests, the KV cache manager, the scheduler, the batch builder.
export { Request, type FinishReason, type RequestInit, type RequestStatus } from "./engine/request.js";
export { KvCacheManager, type AllocateSlotsOptions, type ComputedBlocks, type KvCacheManagerOptions, type PrefixCacheStats } from "./engine/kv-cache-manager.js";
export { Scheduler, type RequestOutput, type ScheduledRequest, type SchedulerOptions, type SchedulerOutput, type SchedulerStats, type StopCallback, type StopDecision } from "./engine/scheduler.js";
export { buildForwardBatch } from "./engine/forward-batch-builder.js";
// Offline generation: one request through the engine's step loop.
export { type GenerateOptions, type GenerateResult, type PhaseTiming, type RequestTiming, type RunRequestOptions, type StepInfo, type StepLoopOptions, generate, promptLogits, runRequest } from "./engine/offline-generate.js";
// Speculative decoding's proposers (GenerateOptions.proposer): the interfaces a proposer implements.
export type { DraftProposer } from "./engine/ngram-proposer.js";
export type { BatchDraftProposer, DraftPenalties, DraftRequest } from "./engine/draft-model-proposer.js";
export type { TokenDistribution } from "./engine/rejection-sampler.js";

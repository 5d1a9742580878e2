/// <reference types="node" preserve="true" />
// The public types use Node's (node:http servers, NodeJS.ProcessEnv): this reference, kept in the
// emitted .d.ts, brings @types/node (a dependency of the package) into a consumer's program.
/**
 * kvflash, the main entry point: the front door (../shared/ARCHITECTURE.md, "The front door is
 * small"), as node-llama-cpp's getLlama() and vLLM's LLM(model) are theirs. It holds the
 * high-level API (LLM: load any model source, chat / stream / complete / countTokens on the
 * engine worker), `serve`, the model-source functions, the errors and the types they use; each
 * name is chosen, and test/package/entry-points.test.ts pins the list. The kernels and the
 * runtime underneath are `kvflash/ops`; fixtures and synthetic models are `kvflash/testing`;
 * the WebGPU backend is `kvflash/gpu`.
 * @module kvflash
 */
// The high-level API.
export { LLM, type LoadOptions } from "./llm/llm.js";
export { LLMError } from "./llm/llm-error.js";
export type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionMessage,
  ChatDelta,
  ChatMessage,
  ChatOptions,
  ChatResult,
  CompleteOptions,
  CompleteResult,
  Completion,
  EmbedOptions,
  EmbedResult,
  JsonSchema,
  LoadProgressEvent,
  RerankOptions,
  RerankResult,
  ResponseFormat,
  SamplingOptions,
  ToolCall,
  ToolChoice,
  ToolDefinition,
  Usage,
} from "./llm/types.js";
export type { ChatContentPart } from "./tokenizer/chat-template.js";
export type { EmbeddingInfo, EngineInfo, EngineSettings, EngineTask } from "./engine/protocol.js";
export type { SpeculativeConfig } from "./engine/speculative-config.js";
// The OpenAI-compatible server.
export { type RunningServer, type ServeOptions, serve } from "./server/start-server.js";
export type { LoadSettings } from "./model/load-settings.js";
export type { ToolParserName } from "./server/tool-parsers.js";
export type { KvDtypeSetting } from "./kv/kv-quant.js";
export type { WeightsSetting } from "./ops/weight.js";
// Model sources: a directory, a .gguf file, a Hugging Face spec, the embedded default model.
export type { ProgressOptions, ProgressStream } from "./sources/progress.js";
export { type ModelSource, type ResolveModelOptions, type ResolvedModel, localModelSource, resolveModelSource } from "./sources/source.js";
export { defaultModelDir } from "./model/default-model.js";
export { type CachedRepo, type CachedSnapshot, HubCache } from "./sources/hub/hub-cache.js";
export { type HubSettings, hubSettings } from "./sources/hub/hub-settings.js";
// Errors.
export { ArgumentError, KernelError, OutOfMemoryError } from "./errors.js";
export { HubError, type HubErrorKind } from "./sources/hub/hub-client.js";

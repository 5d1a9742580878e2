/// <reference types="node" preserve="true" />
// The public types use Node's (node:http servers, NodeJS.ProcessEnv): this reference, kept in the
// emitted .d.ts, brings @types/node (a dependency of the package) into a consumer's program.
/**
 * kvflash/testing: what tests (ours, and those of code built on kvflash) use
 * to make models, kept out of the main entry point: tiny Hugging Face model
 * directories with deterministic weights (writeTinyModel) and a real 32k
 * SentencePiece-style tokenizer to give them (llama2Tokenizer); synthetic
 * models built in memory at real shapes (createSyntheticModel, what the
 * benches run); the float64 reference decoder, the tests' oracle
 * (referenceForward); and the GGUF writer and converter that make .gguf test
 * files (writeGguf, convertModelDirToGguf). The product's code imports none of
 * them (test/package/fixture-imports.test.ts walks its imports).
 * @module kvflash/testing
 */
export { TINY_ARCHS, type TinyArch, type TinyModel, type TinyModelOptions, type TinyTokenizerOptions, writeTinyModel } from "./tiny-model.js";
export { LLAMA2_CHAT_TEMPLATE, llama2Tokenizer, llama2TokenizerDir } from "./llama2-tokenizer.js";
export { LLAMA31_8B_CONFIG_JSON, QWEN25_05B_CONFIG_JSON, type SyntheticModelOptions, createSyntheticModel, llama31EightBConfig, qwen25HalfBConfig } from "../model/synthetic-model.js";
export { type ReferenceOptions, type ReferenceWeights, referenceForward } from "../model/reference-decoder.js";
export { type GgufTyped, type GgufWriteTensor, type WriteGgufOptions, gguf, writeGguf } from "../sources/gguf/writer.js";
export { type HfToGgufOptions, hfTokenizerToGguf } from "../sources/gguf/tokenizer-to-gguf.js";
export { type ConvertToGgufOptions, type GgufQuantMix, convertModelDirToGguf } from "../model/gguf/convert.js";
export type { GgmlTypeName } from "../tensor/ggml-types.js";
export type { WeightDType } from "../sources/safetensors.js";

/// <reference types="node" preserve="true" />
// The public types use Node's (node:http servers, NodeJS.ProcessEnv): this reference, kept in the
// emitted .d.ts, brings @types/node (a dependency of the package) into a consumer's program.
/**
 * kvflash/testing: what tests (ours, and those of code built on kvflash) use
 * to make models, kept out of the main entry point: tiny Hugging Face model
 * directories with deterministic weights (writeTinyModel) and a real 32k
 * SentencePiece-style tokenizer to give them (llama2Tokenizer).
 */
export { TINY_ARCHS, type TinyArch, type TinyModel, type TinyModelOptions, type TinyTokenizerOptions, writeTinyModel } from "./tiny-model.js";
export { LLAMA2_CHAT_TEMPLATE, llama2Tokenizer, llama2TokenizerDir } from "./llama2-tokenizer.js";

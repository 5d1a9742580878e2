/**
 * kvflash/testing: what tests (ours, and those of code built on kvflash) use
 * to make models, kept out of the main entry point: tiny Hugging Face model
 * directories with deterministic weights (writeTinyModel) and the options
 * that regenerate the embedded default model.
 */
export { TINY_ARCHS, type TinyArch, type TinyModel, type TinyModelOptions, type TinyTokenizerOptions, writeTinyModel } from "./tiny-model.js";
export { defaultModelOptions, defaultModelTokenizerDir } from "./default-model-options.js";

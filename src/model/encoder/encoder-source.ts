/**
 * An encoder by its ModelSource (sources/source.ts), whichever form it came in: a
 * model directory (config.json + model.safetensors + tokenizer.json,
 * encoder-model.ts) or a llama.cpp GGUF file of arch "bert" / "nomic-bert"
 * (gguf-encoder.ts). The one place that branches on the source's kind for
 * encoders: the HTTP thread (server/embedding-metadata.ts) and the engine
 * worker (engine/embed-worker.ts) both come through here.
 */
import type { Tokenizer } from "../../tokenizer/tokenizer.js";
import type { Runtime } from "../../runtime/runtime.js";
import { readGgufHeader } from "../../sources/gguf/reader.js";
import type { ModelSource } from "../../sources/source.js";
import { type EncoderInfo, type EncoderModel, type LoadEncoderOptions, encoderTokenizer, isEncoderSource, loadEncoderModel, readEncoderInfo } from "./encoder-model.js";
import { isGgufEncoderHeader } from "./gguf-bert-config.js";
import { ggufEncoderTokenizer, loadGgufEncoderModel, readGgufEncoderInfo } from "./gguf-encoder.js";

/** True for an encoder directory, or a GGUF file whose general.architecture is an encoder's. */
export function isEncoderModelSource(source: ModelSource): boolean {
  return source.kind === "gguf" ? isGgufEncoderHeader(readGgufHeader(source.path)) : isEncoderSource(source);
}

/** Config, pooling and length limit; reads no weights. */
export function readEncoderSourceInfo(source: ModelSource, maxModelLen?: number): EncoderInfo {
  return source.kind === "gguf" ? readGgufEncoderInfo(source.path, maxModelLen) : readEncoderInfo(source.path, maxModelLen);
}

/** The encoder's tokenizer: tokenizer.json, or the GGUF file's WordPiece vocabulary. */
export function encoderSourceTokenizer(source: ModelSource): Tokenizer {
  return source.kind === "gguf" ? ggufEncoderTokenizer(source.path) : encoderTokenizer(source.path);
}

/** Loads the encoder's weights into rt's memory. */
export function loadEncoderSource(rt: Runtime, source: ModelSource, options: LoadEncoderOptions = {}): EncoderModel {
  return source.kind === "gguf" ? loadGgufEncoderModel(rt, source.path, options) : loadEncoderModel(rt, source.path, options);
}

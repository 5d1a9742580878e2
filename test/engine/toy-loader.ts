// An engine-worker loader module (loader-module.ts) that builds a ToyRunner
// with the default model's config and tokenizer: the worker, the client and
// the engine's failure handling are tested without a decoder. Options come in
// ModelLoadOptions (numBlocks, blockSize, maxModelLen: the resolved load settings) or its loaderExtra,
// which wins: numBlocks, blockSize, failToken, nanToken, failLoad (throw instead of
// loading), progressSteps.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { LoadProgressInfo, EngineModel, ModelLoadOptions } from "../../src/engine/loader-module.js";
import { Tokenizer } from "../../src/ops-entry.js";
import { parseModelConfig } from "../../src/model/config.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { ToyRunner } from "./toy-runner.js";

export function loadEngineModel(_rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): EngineModel {
  const extra = options.loaderExtra ?? {};
  if (extra["failLoad"] === true) throw new Error("toy loader: asked to fail");
  const steps = Number(extra["progressSteps"] ?? 1);
  for (let i = 1; i <= steps; i++) onProgress({ done: i, total: steps });
  const config = parseModelConfig(JSON.parse(readFileSync(join(options.source.path, "config.json"), "utf8")));
  const tokenizer = Tokenizer.fromDir(options.source.path);
  const runner = new ToyRunner({
    config,
    numBlocks: extra["numBlocks"] === undefined ? (options.numBlocks ?? 64) : Number(extra["numBlocks"]),
    blockSize: extra["blockSize"] === undefined ? options.blockSize : Number(extra["blockSize"]),
    ...(options.maxModelLen === undefined ? {} : { maxModelLen: options.maxModelLen }),
    ...(extra["failToken"] === undefined ? {} : { failToken: Number(extra["failToken"]) }),
    ...(extra["nanToken"] === undefined ? {} : { nanToken: Number(extra["nanToken"]) }),
  });
  const eos = tokenizer.eosTokenId;
  return { runner, tokenizer, eosTokenIds: eos === null ? [] : [eos] };
}

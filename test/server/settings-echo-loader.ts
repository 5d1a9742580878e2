// A loader module (engine/loader-module.ts) that reports the load settings it was given: the
// toy model (../engine/toy-loader.ts), with EngineInfo.placement set to "load settings <JSON>",
// so a test reads what serve(), LLM.load and `kvflash serve` handed the engine worker.
import type { EngineModel, LoadProgressInfo, ModelLoadOptions } from "../../src/engine/loader-module.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { loadEngineModel as loadToy } from "../engine/toy-loader.js";

export function loadEngineModel(rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): EngineModel {
  const { source: _source, loaderExtra: _extra, maxNumSeqs: _seqs, maxNumBatchedTokens: _tokens, ...settings } = options;
  return { ...loadToy(rt, options, onProgress), placement: `load settings ${JSON.stringify(settings)}` };
}

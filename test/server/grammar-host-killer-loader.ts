// A loader module that wraps another one (loaderExtra.base, a module URL) and, on
// the first forward after a test writes extra.triggerFile, kills the grammar
// hosts holding a grammar whose key contains the file's text
// (terminateGrammarHostHolding: the worker is terminated, as by a crash or an
// OOM kill), then writes how many it killed to `${triggerFile}.done`; every
// forward first sleeps extra.stepDelayMs, so that streams outlast the test's
// steps on a quick machine. It runs
// in the engine worker, the thread that owns the grammar host pool: the only
// place that hook can be reached from. Everything else is the base loader's model.
import { existsSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import type { LoadProgressInfo, EngineModel, ModelLoadOptions, ModelLoaderModule } from "../../src/engine/loader-module.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import { terminateGrammarHostHolding } from "../../src/structured/grammar-host-pool.js";

export async function loadEngineModel(rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): Promise<EngineModel> {
  const extra = options.loaderExtra ?? {};
  const base = (await import(String(extra["base"]))) as ModelLoaderModule;
  const trigger = String(extra["triggerFile"]);
  const delay = new Int32Array(new SharedArrayBuffer(4));
  const delayMs = Number(extra["stepDelayMs"] ?? 0);
  const model = await base.loadEngineModel(rt, options, onProgress);
  const runner = model.runner;
  const forward = runner.forward.bind(runner);
  runner.forward = (batch: ForwardBatch): Float32Array | Promise<Float32Array> => {
    Atomics.wait(delay, 0, 0, delayMs); // the engine worker may block: a slower step, as a bigger model's
    if (existsSync(trigger)) {
      const needle = readFileSync(trigger, "utf8");
      unlinkSync(trigger);
      writeFileSync(`${trigger}.done`, String(terminateGrammarHostHolding(needle)));
    }
    return forward(batch);
  };
  return model;
}

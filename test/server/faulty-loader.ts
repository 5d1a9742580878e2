// A loader module that wraps another one (loaderExtra.base, a module URL) and makes
// the runner's forward throw whenever a batch contains loaderExtra.failToken: the
// server must contain a failed forward (fail the running requests, keep
// serving). With loaderExtra.loadDelayMs it first reports 1 of 4 bytes loaded and
// waits that long (the server's loading state). Everything else is the base
// loader's model.
import type { LoadProgressInfo, EngineModel, ModelLoadOptions, ModelLoaderModule } from "../../src/engine/loader-module.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import type { Runtime } from "../../src/runtime/runtime.js";

export async function loadEngineModel(rt: Runtime, options: ModelLoadOptions, onProgress: (p: LoadProgressInfo) => void): Promise<EngineModel> {
  const extra = options.loaderExtra ?? {};
  const base = (await import(String(extra["base"]))) as ModelLoaderModule;
  const failToken = Number(extra["failToken"]);
  const delayMs = Number(extra["loadDelayMs"] ?? 0);
  if (delayMs > 0) {
    onProgress({ done: 1, total: 4 });
    await new Promise((r) => setTimeout(r, delayMs));
  }
  const model = await base.loadEngineModel(rt, options, onProgress);
  const runner = model.runner;
  const forward = runner.forward.bind(runner);
  runner.forward = (batch: ForwardBatch): Float32Array | Promise<Float32Array> => {
    if (batch.tokens.includes(failToken)) throw new Error(`injected failure: the batch contains token ${failToken}`);
    return forward(batch);
  };
  return model;
}

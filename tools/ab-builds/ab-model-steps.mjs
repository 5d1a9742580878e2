// Whole-model decode, step by step in lockstep across builds and KV dtypes:
// synthetic Qwen2.5-0.5B shapes (bench model suite), q8 weights ($WEIGHTS), one sequence;
// every side prefills the same PROMPT tokens, then the sides take one decode
// step each in turn (order reversed every step, 0.3 ms pause before each),
// so load that comes and goes hits all of them alike.
//
//   node tools/ab-builds/ab-model-steps.mjs KERNELS PROMPT STEPS DTYPES DIR1 [DIR2 …]
//     DTYPES  KV cache dtypes, e.g. f16,bf16; DIR as in ab-attention.mjs
//   env WEIGHTS: the weight format (default q8; f32 | bf16 | q8 | q4)
//
// Prints per side the median step time and the median of its per-step time
// ratios against every other side.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { loadBuild } from "./load-build.mjs";
import { lockstep, median } from "./lockstep.mjs";
const url = (dir, path) => pathToFileURL(resolve(dir, path)).href;
const [kernels, promptS, stepsS, dtypesS, ...dirs] = process.argv.slice(2);
const prompt = +promptS, steps = +stepsS, dtypes = dtypesS.split(",");
const sides = [];
const ids = Array.from({ length: prompt }, (_, i) => (i * 2654435761) % 151936 >>> 0);
for (const dir of dirs) {
  const lib = await loadBuild(dir);
  const { argmax } = await import(url(dir, "dist/src/engine/sampler.js"));
  const { KvCacheManager } = await import(url(dir, "dist/src/engine/kv-cache-manager.js"));
  const { Scheduler } = await import(url(dir, "dist/src/engine/scheduler.js"));
  const { Request } = await import(url(dir, "dist/src/engine/request.js"));
  const rt = await lib.createRuntime({ threads: 2, kernels });
  for (const kv of dtypes) {
    const model = lib.createSyntheticModel(rt, { config: lib.qwen25HalfBConfig(), weights: process.env.WEIGHTS ?? "q8", kvDtype: kv, numBlocks: Math.ceil((prompt + steps + 2) / 16), maxBatchTokens: prompt });
    const kvm = new KvCacheManager({ numBlocks: model.kvCache.numBlocks, blockSize: model.kvCache.blockSize, enablePrefixCaching: false });
    const sched = new Scheduler({ kvCacheManager: kvm, maxNumBatchedTokens: prompt, maxNumSeqs: 1, maxModelLen: model.maxModelLen, stopChecker: () => null });
    sched.addRequest(new Request({ requestId: "r", promptTokenIds: ids, maxTokens: steps + 2 }));
    const step = () => {
      const s = sched.schedule();
      const logits = model.forward(lib.buildForwardBatch(s, kvm.blockSize));
      sched.updateFromOutput(new Map([["r", [argmax(logits.subarray(0, model.vocabSize))]]]));
    };
    step(); // prefill
    sides.push({ name: `${dir.split("/").pop()} ${kv}`, step, rt, ms: [] });
  }
}
const { load0, load1 } = lockstep(sides, steps);
const med = median;
console.log(`kernels=${sides[0].rt.kernels} node=${process.version} prompt=${prompt} steps=${steps} (context ${prompt + 1}…${prompt + steps}); loadavg ${load0} | ${load1}`);
for (const s of sides) {
  const row = sides.map((o) => `${o.name}: ${med(o.ms.map((t, i) => s.ms[i] / t)).toFixed(3)}`).join(", ");
  console.log(`${s.name}: decode ${med(s.ms).toFixed(2)} ms/token (${(1000 / med(s.ms)).toFixed(1)} tok/s); median per-step time ratio this/other: ${row}`);
}
for (const rt of new Set(sides.map((s) => s.rt))) await rt.dispose();

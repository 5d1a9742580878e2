// Engine.step (the server's engine loop without its messages) in lockstep across builds:
// N sequences of the synthetic Qwen2.5-0.5B (q8 weights, f16 KV cache, the gguf
// and serve suites' shapes and KV dtype), greedy through the engine's sampler on
// the runtime's wasm passes. Every side adds the same N prompts, runs their
// prefill, then the sides take one decode step each in turn (order reversed
// every step, 0.3 ms pause before each), so load that comes and goes hits all
// of them alike. Where ab-model-steps.mjs times the runner's forward, this times
// everything a served step does around it: sampling, stop checks,
// detokenization, the scheduler.
//
//   node tools/ab-builds/ab-engine-steps.mjs KERNELS N PROMPT STEPS DIR1 [DIR2 …]
//
// Prints per side the median step time and the median of its per-step time
// ratios against every other side, and whether every side sampled the same tokens.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { loadBuild } from "./load-build.mjs";
import { lockstep, median } from "./lockstep.mjs";
const url = (dir, path) => pathToFileURL(resolve(dir, path)).href;
const [kernels, nS, promptS, stepsS, ...dirs] = process.argv.slice(2);
const N = +nS, prompt = +promptS, steps = +stepsS;
if (!(N >= 1 && prompt >= 1 && steps >= 1 && dirs.length >= 1)) throw new Error("usage: ab-engine-steps.mjs KERNELS N PROMPT STEPS DIR1 [DIR2 …]");
const sides = [];
for (const dir of dirs) {
  const lib = await loadBuild(dir);
  const { Engine } = await import(url(dir, "dist/src/engine/engine.js"));
  const { resolveSamplingParams } = await import(url(dir, "dist/src/engine/sampling-params.js"));
  const rt = await lib.createRuntime({ threads: 2, kernels });
  const blocksPerSeq = Math.ceil((prompt + steps + 2) / 16) + 1;
  const model = lib.createSyntheticModel(rt, { config: lib.qwen25HalfBConfig(), weights: "q8", kvDtype: "f16", numBlocks: N * blocksPerSeq, maxBatchTokens: Math.max(512, N * prompt), maxLogitRows: Math.max(16, N) });
  const tokenizer = { vocabSize: model.vocabSize, decode: (ids) => ids.map((i) => String.fromCharCode(97 + (i % 26))).join("") };
  const engine = new Engine({ runner: model, tokenizer, eosTokenIds: [], maxNumSeqs: N, maxNumBatchedTokens: Math.max(512, N * prompt), enablePrefixCaching: false, runtime: rt });
  const params = resolveSamplingParams({ temperature: 0, maxTokens: steps + 2, ignoreEos: true }, model.vocabSize);
  for (let r = 0; r < N; r++) engine.addRequest({ requestId: `r${r}`, promptTokenIds: Array.from({ length: prompt }, (_, i) => ((r * 7919 + i) * 2654435761) % 151936 >>> 0), params });
  const tokens = [];
  const step = () => {
    for (const o of engine.step()) if (o.tokenIds) tokens.push(...o.tokenIds);
  };
  while (tokens.length < N) step(); // prefill (chunks), up to every sequence's first token
  sides.push({ name: dir.split("/").pop(), step, tokens, rt, ms: [] });
}
const { load0, load1 } = lockstep(sides, steps);
const med = median;
console.log(`kernels=${sides[0].rt.kernels} node=${process.version} N=${N} prompt=${prompt} steps=${steps}; loadavg ${load0} | ${load1}`);
for (const s of sides) {
  const row = sides.map((o) => `${o.name}: ${med(o.ms.map((t, i) => s.ms[i] / t)).toFixed(3)}`).join(", ");
  console.log(`${s.name}: step ${med(s.ms).toFixed(2)} ms (mean ${(s.ms.reduce((a, b) => a + b, 0) / s.ms.length).toFixed(2)}); median per-step time ratio this/other: ${row}`);
}
console.log(`same tokens on every side: ${sides.every((s) => s.tokens.length === sides[0].tokens.length && s.tokens.every((t, i) => t === sides[0].tokens[i]))}`);
for (const s of sides) await s.rt.dispose();

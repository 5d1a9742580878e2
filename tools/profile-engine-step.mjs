// Where a decode step's time goes (issue #30 item 3): N sequences of the
// synthetic Qwen2.5-0.5B (q8 weights, f16 KV cache: the gguf and serve suites'
// shapes) through Engine.step, the server's engine loop without its messages,
// greedy on the engine's wasm sampler. After the prefill, every parallelFor of
// the decode steps is timed on the calling thread: per kernel (the linears per
// projection, qkv / o / gate_up / down and the LM head, the step's last linear,
// each with the GB/s of its q8 weights, or GMAC/s in a prefill; "1 item": run on the calling thread
// alone), and the runner's forward as a whole. "outside kernels" is the rest of the step: the
// operators' JavaScript, the sampler's passes (direct wasm calls), stop checks,
// detokenization, the scheduler.
//
//   node tools/profile-engine-step.mjs [N=16] [PROMPT=32] [STEPS=32] [KERNELS]
//   env NULL_KERNELS=1: every parallelFor returns at once (the step's JavaScript alone)
//   env PREFILL=1: time prefills instead (a served request's time to first token):
//       STEPS rounds of N new PROMPT-token prompts, one token each, every round
//       one engine step while N·PROMPT fits the token budget; WARM_ROUNDS (default 4)
//       untimed rounds first, so V8 has tiered the prefill's code up
//
// Run from a built checkout (npm run build). Prints one line per kernel: calls
// and milliseconds a step, share of the step, and the spread of one call's time
// (p10 / p50 / p90 µs): a memory-bound kernel's calls vary with the VM's
// neighbours, a compute-bound one's little.
import { WEIGHT_TILE_BYTES } from "../dist/src/ops/weight.js";
import { resolveSamplingParams } from "../dist/src/engine/sampling-params.js";
import { syntheticEngine } from "./synthetic-engine.mjs";

const [N = 16, prompt = 32, steps = 32] = process.argv.slice(2, 5).map(Number);
const kernels = process.argv[5];
const { rt, config, model, engine, promptIds } = await syntheticEngine({ N, prompt, positions: prompt + steps + 2, kernels });
/** The projection of each linear call of a step, in call order. */
const projections = [...Array.from({ length: config.numLayers }, () => ["qkv", "o", "gate_up", "down"]).flat(), "LM head"];
const linearsPerStep = projections.length;
const { hiddenSize: h, intermediateSize: im, numHeads, numKvHeads, headDim } = config;
/** Weight elements (rows × cols) of one call per projection. */
const weightElements = {
  qkv: (numHeads + 2 * numKvHeads) * headDim * h,
  o: h * numHeads * headDim,
  gate_up: 2 * im * h,
  down: h * im,
  "LM head": config.vocabSize * h,
};
/** q8 bytes of `elements` weights: a q8 tile holds 8 rows × 32 columns. */
const q8Bytes = (elements) => (elements * WEIGHT_TILE_BYTES.q8) / 256;

const nullKernels = process.env.NULL_KERNELS === "1"; // read once: process.env costs microseconds a read
let on = false;
/**
 * Every timed launch, in call order: its kernel name, whether it ran as one
 * item, and its milliseconds: three appends a launch (a Map lookup and a push
 * a launch had read 0.2–0.5 ms more "outside kernels" in a one-sequence step),
 * the per-kernel tables built after the run. What the operators' JavaScript
 * really costs: tools/launch-replay-bound.mjs.
 */
const launchKernels = [];
const launchOne = [];
const launchMs = [];
for (const view of rt.memories) {
  const run = view.parallelFor.bind(view);
  view.parallelFor = (kernel, items, args) => {
    if (!on) return run(kernel, items, args);
    const t0 = performance.now();
    if (!nullKernels) run(kernel, items, args);
    const ms = performance.now() - t0;
    launchMs.push(ms);
    launchKernels.push(kernel);
    launchOne.push(items === 1);
  };
}
let forwardMs = 0;
const forward = model.forward.bind(model);
model.forward = (batch, options) => {
  const t0 = performance.now();
  const logits = forward(batch, options);
  if (on) forwardMs += performance.now() - t0;
  return logits;
};

const prefill = process.env.PREFILL === "1";
const warmRounds = Number(process.env.WARM_ROUNDS ?? 4);
const stepMs = [];
if (prefill) {
  // Every round: N prompts in, one token out each; the round's steps are timed as one.
  const once = resolveSamplingParams({ temperature: 0, maxTokens: 1, ignoreEos: true }, model.vocabSize);
  for (let round = 0; round < warmRounds + steps; round++) {
    for (let r = 0; r < N; r++) engine.addRequest({ requestId: `p${round}.${r}`, promptTokenIds: promptIds(round, r), params: once });
    on = round >= warmRounds;
    const t0 = performance.now();
    while (engine.hasUnfinishedRequests) engine.step();
    if (on) stepMs.push(performance.now() - t0);
  }
} else {
  const params = resolveSamplingParams({ temperature: 0, maxTokens: steps + 1, ignoreEos: true }, model.vocabSize);
  for (let r = 0; r < N; r++) engine.addRequest({ requestId: `r${r}`, promptTokenIds: promptIds(0, r), params });
  let first = 0;
  while (first < N) for (const o of engine.step()) if (o.tokenIds.length > 0 && o.numOutputTokens === o.tokenIds.length) first++; // prefill, up to every first token
  on = true;
  while (engine.hasUnfinishedRequests) {
    const t0 = performance.now();
    engine.step();
    stepMs.push(performance.now() - t0);
  }
}
const n = stepMs.length;
const total = stepMs.reduce((a, b) => a + b, 0);
/** Per kernel (a linear's key names its projection: the step's linears in call order), [many items, one item]: calls, ms, each call's ms. */
const byKernel = new Map();
let linears = 0;
launchKernels.forEach((kernel, i) => {
  const key = kernel.startsWith("task_linear_") ? `${kernel} ${projections[linears++ % linearsPerStep]}` : kernel;
  let rows = byKernel.get(key);
  if (rows === undefined) byKernel.set(key, (rows = [null, null]));
  const s = (rows[launchOne[i] ? 1 : 0] ??= { calls: 0, ms: 0, each: [] });
  s.calls++;
  s.ms += launchMs[i];
  s.each.push(launchMs[i]);
});
const kernelMs = new Map();
for (const [kernel, rows] of byKernel) {
  rows.forEach((s, at) => s && kernelMs.set(`${kernel}${at ? " (1 item)" : ""}`, s));
}
const inKernels = [...kernelMs.values()].reduce((a, s) => a + s.ms, 0);
const median = [...stepMs].sort((a, b) => a - b)[n >> 1];
const per = (ms) => `${(ms / n).toFixed(2)} ms`;
const what = prefill ? `${n} prefills of ${N} × ${prompt} tokens (after ${warmRounds} untimed)` : `${n} decode steps`;
console.log(`N ${N}, prompt ${prompt}, ${what}, ${rt.kernels} kernels, int8 dot ${rt.int8Dot}${nullKernels ? ", kernels NOT run" : ""}; Node ${process.version}`);
console.log(`${prefill ? "prefill" : "step"} ${per(total)} (median ${median.toFixed(2)} ms): in kernels ${per(inKernels)}, outside kernels ${per(total - inKernels)} (${((100 * (total - inKernels)) / total).toFixed(1)} %) of which the forward's own JavaScript ${per(forwardMs - inKernels)}`);
/**
 * A projection's rate. Decode: the GB/s of its q8 weights (each call streams them
 * once), and with N > 1 also GMAC/s. Prefill: GMAC/s over every prompt token (the
 * LM head: over the N sampled rows only).
 */
function linearRate(projection, s) {
  const tokens = prefill && projection !== "LM head" ? N * prompt : N;
  const gmacs = `${((weightElements[projection] * tokens * s.calls) / s.ms / 1e6).toFixed(1).padStart(5)} GMAC/s`;
  if (prefill) return `  ${gmacs}`;
  const gbps = `${((q8Bytes(weightElements[projection]) * s.calls) / s.ms / 1e6).toFixed(1).padStart(5)} GB/s`;
  return N > 1 ? `  ${gbps}, ${gmacs.trimStart()}` : `  ${gbps}`;
}
/** The q-quantile of sorted `a`, in µs. */
const us = (a, q) => (a[Math.min(a.length - 1, Math.floor(q * a.length))] * 1000).toFixed(0);
for (const [k, s] of [...kernelMs].sort((a, b) => b[1].ms - a[1].ms)) {
  const projection = k.startsWith("task_linear_q8 ") ? k.slice("task_linear_q8 ".length) : undefined;
  const rate = projection !== undefined && !nullKernels ? linearRate(projection, s) : "";
  const each = s.each.sort((a, b) => a - b);
  const spread = `  ${us(each, 0.1)} / ${us(each, 0.5)} / ${us(each, 0.9)} µs`.padStart(24);
  console.log(`  ${k.padEnd(36)} ${(s.calls / n).toFixed(0).padStart(4)} calls ${per(s.ms).padStart(11)}  ${((100 * s.ms) / total).toFixed(1).padStart(5)} %${spread}${rate}`);
}
await rt.dispose();

// How much of a decode forward is the operators' JavaScript, measured by
// taking it away: the synthetic Qwen2.5-0.5B (q8 weights, f16 KV cache, as
// tools/profile-engine-step.mjs) decodes WARM steps through the Engine, then
// one forward of its last batch is captured at the runtime's parallelFor (the
// kernel, its items, its argument address and the argument buffer's bytes,
// ArgsWriter.CAPACITY of them), and that same batch is timed three ways, ROUNDS rounds of 4 calls
// each (forward and replay back to back, their order flipping every round):
//   forward   the decoder's forward, as the engine calls it;
//   replay    the captured launches alone: per launch, the argument bytes put
//             back and parallelFor called, so the same kernels do the same
//             work on the same data with none of the operators' checks,
//             planning or argument writing (the buffer copies stay in: the
//             saving printed is a lower bound);
//   timed     the forward with every launch timed, and the time outside
//             the launches summed.
// Then ENGINE_STEPS engine steps go on from there, in blocks of 8, every other
// block with the forward replaced by the replay: the same comparison with the
// sampler, scheduler and detokenizer running between forwards, as they do in
// a server (the replay then redoes the captured step's work, not the growing
// one's, and hands the sampler the captured forward's logits: a timing, not
// a generation).
// Two captured forwards of the batch must launch the same kernels with the
// same argument bytes, else the script fails. The replay leaves out the
// forward's own writes from JavaScript (token ids, KV slots, the sampled
// rows copied to the head's buffer): its kernels read what the last forward
// left there, so its numbers are not logits, only the same work.
//
//   node tools/launch-replay-bound.mjs [N=1] [PROMPT=32] [KERNELS]     env WARM (default 40), ROUNDS (default 60), ENGINE_STEPS (default 96)
//
// Run from a built checkout (npm run build).
import { ArgsWriter } from "../dist/src/runtime/args.js";
import { resolveSamplingParams } from "../dist/src/engine/sampling-params.js";
import { median } from "./ab-builds/lockstep.mjs";
import { syntheticEngine } from "./synthetic-engine.mjs";

const [N = 1, prompt = 32] = process.argv.slice(2, 4).map(Number);
const kernels = process.argv[4];
const WARM = Number(process.env.WARM ?? 40), ROUNDS = Number(process.env.ROUNDS ?? 60), CALLS = 4;
const ENGINE_STEPS = Number(process.env.ENGINE_STEPS ?? 96);
const { rt, model, engine, promptIds } = await syntheticEngine({ N, prompt, positions: prompt + WARM + ENGINE_STEPS + 2, kernels });
if (rt.memories.length !== 1) throw new Error(`the capture covers one memory, got ${rt.memories.length}`);
const forward = model.forward.bind(model);
let last;
/** In the engine blocks: the forward's stand-in (null: the forward itself). */
let standIn = null;
model.forward = (batch, options) => (standIn ? standIn() : ((last = { batch, options }), forward(batch, options)));
const params = resolveSamplingParams({ temperature: 0, maxTokens: WARM + ENGINE_STEPS + 2, ignoreEos: true }, model.vocabSize);
for (let r = 0; r < N; r++) engine.addRequest({ requestId: `r${r}`, promptTokenIds: promptIds(0, r), params });
for (let s = 0; s < WARM && engine.hasUnfinishedRequests; s++) engine.step();
const { batch, options } = last;
if (prompt + WARM + ENGINE_STEPS + 2 > model.maxModelLen) throw new Error(`PROMPT + WARM + ENGINE_STEPS must stay under the model's ${model.maxModelLen} positions`);
if (batch.tokens.length !== N) throw new Error(`the last step was not an N = ${N} decode step (${batch.tokens.length} tokens)`);

const run = rt.parallelFor.bind(rt);
const bytes = () => new Uint8Array(rt.memory.buffer);
/** The forward's logits: a view of the buffer that the replay writes again. */
let logits;
/** One forward's launches in order: [kernel, items, args, the argument buffer's bytes at launch]. */
const capture = () => {
  const launches = [];
  rt.parallelFor = (kernel, items, args) => {
    launches.push([kernel, items, args, args ? bytes().slice(args, args + ArgsWriter.CAPACITY) : null]);
    run(kernel, items, args);
  };
  logits = forward(batch, options);
  rt.parallelFor = run;
  return launches;
};
const launches = capture();
// A second forward of the batch must launch the same kernels with the same argument bytes: then the replay is that forward's kernel work.
const again = capture();
const same = (a, b) => a[0] === b[0] && a[1] === b[1] && a[2] === b[2] && (a[3] === null ? b[3] === null : b[3] !== null && a[3].every((v, i) => v === b[3][i]));
if (again.length !== launches.length || !again.every((l, i) => same(l, launches[i]))) throw new Error("two forwards of one batch launched different kernels or arguments");
const replay = () => {
  const m = bytes();
  for (const [kernel, items, args, saved] of launches) {
    if (saved) m.set(saved, args);
    run(kernel, items, args);
  }
};

let inLaunches = 0;
const timed = (kernel, items, args) => {
  const t0 = performance.now();
  run(kernel, items, args);
  inLaunches += performance.now() - t0;
};
const ms = { forward: [], replay: [], timed: [], timedIn: [] };
const each = (f) => {
  const t0 = performance.now();
  for (let i = 0; i < CALLS; i++) f();
  return (performance.now() - t0) / CALLS;
};
for (let r = 0; r < ROUNDS; r++) {
  // forward and replay back to back, the order flipping every round, so both meet the same neighbours
  const f = () => ms.forward.push(each(() => forward(batch, options)));
  const p = () => ms.replay.push(each(replay));
  if (r % 2) (p(), f());
  else (f(), p());
  rt.parallelFor = timed;
  inLaunches = 0;
  ms.timed.push(each(() => forward(batch, options)));
  ms.timedIn.push(inLaunches / CALLS);
  rt.parallelFor = run;
}
// The replay's own logits drift (the final norm runs in place on rows the forward copies in from JavaScript), so the engine samples the captured forward's.
const captured = Float32Array.from(logits);
const engineMs = { forward: [], replay: [] };
for (let s = 0; s < ENGINE_STEPS; s++) {
  const way = (s >> 3) % 2 ? "replay" : "forward";
  standIn = way === "replay" ? () => (replay(), logits.set(captured), logits) : null;
  const t0 = performance.now();
  const outputs = engine.step();
  engineMs[way].push(performance.now() - t0);
  const failed = outputs.find((o) => o.error);
  if (failed) throw new Error(`engine step ${s} (${way}) failed: ${failed.error} (a replay redoes the captured step, whose attention arguments stop fitting as the sequences grow: use fewer ENGINE_STEPS)`);
  if (outputs.length !== N) throw new Error(`engine step ${s} (${way}) gave ${outputs.length} outputs, not ${N}`);
}
standIn = null;
const saved = ms.forward.map((f, r) => f - ms.replay[r]).sort((x, y) => x - y);
console.log(`N ${N}, prompt ${prompt}, ${rt.kernels} kernels, int8 dot ${rt.int8Dot}; Node ${process.version}; ${launches.length} launches a forward, the same in two forwards`);
console.log(`forward ${median(ms.forward).toFixed(2)} ms, replay ${median(ms.replay).toFixed(2)} ms: the operators' JavaScript ≥ ${median(saved).toFixed(2)} ms a forward (rounds' quartiles ${saved[saved.length >> 2].toFixed(2)} to ${saved[(3 * saved.length) >> 2].toFixed(2)})`);
console.log(`under a per-launch timer: ${median(ms.timed).toFixed(2)} ms, ${(median(ms.timed) - median(ms.timedIn)).toFixed(2)} ms of it outside the launches`);
console.log(`engine steps (medians of ${engineMs.forward.length} and ${engineMs.replay.length}): ${median(engineMs.forward).toFixed(2)} ms with the forward, ${median(engineMs.replay).toFixed(2)} ms with the replay`);
await rt.dispose();

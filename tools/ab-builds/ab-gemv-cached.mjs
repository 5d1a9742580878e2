// One q8 linear whose weights stay in the last-level cache ([4864, 896], 4.6 MB:
// Qwen2.5-0.5B's down_proj transposed, the size of its gate or up half), T tokens,
// on two or more built checkouts in one process, alternated round by round
// (order flipping every round). With the weight stream out of the way this is
// the kernel's instruction cost, what the bandwidth hides in a model's decode.
// Prints per build the median ms a call, GB/s of weights, and the median of the
// per-round time ratios first / this (> 1: this build is faster).
//
//   node tools/ab-builds/ab-gemv-cached.mjs DIR1 DIR2 …
//   env T (tokens, default 1), THREADS (default 1), ROUNDS (default 21),
//       KERNELS (baseline | relaxed, default: the runtime's choice)
import { values } from "./fill-values.mjs";
import { loadBuild } from "./load-build.mjs";
import { median } from "./lockstep.mjs";

const dirs = process.argv.slice(2);
if (dirs.length < 2) throw new Error(`give two or more built checkouts, got ${dirs.length}`);
const T = Number(process.env.T ?? 1), THREADS = Number(process.env.THREADS ?? 1), ROUNDS = Number(process.env.ROUNDS ?? 21);
const [ROWS, COLS] = [4864, 896];

const sides = [];
for (const dir of dirs) {
  const lib = await loadBuild(dir);
  const rt = await lib.createRuntime({ threads: THREADS, ...(process.env.KERNELS ? { kernels: process.env.KERNELS } : {}) });
  const src = rt.tensor("f32", [ROWS, COLS]).set(values(ROWS * COLS, 3));
  const weight = lib.createWeight(rt, { source: src, format: "q8" });
  rt.free(src);
  const x = rt.tensor("f32", [T, COLS]).set(values(T * COLS, 5));
  const out = rt.tensor("f32", [T, ROWS]);
  sides.push({ dir, lib, rt, weight, x, out, ms: [] });
}
const calls = Math.max(3, Math.round(60 / T));
for (let r = 0; r < ROUNDS; r++) {
  for (const s of r % 2 ? [...sides].reverse() : sides) {
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) s.lib.linear(s.rt, { x: s.x, weight: s.weight, out: s.out });
    s.ms.push((performance.now() - t0) / calls);
  }
}
const base = sides[0];
console.log(`ab-gemv-cached: q8 [${ROWS}, ${COLS}], T = ${T}, ${THREADS} thread(s), ${ROUNDS} rounds, Node ${process.version}`);
for (const s of sides) {
  const ms = median(s.ms);
  const ratio = median(s.ms.map((t, i) => base.ms[i] / t));
  console.log(`${s.dir} ${s.rt.kernels}/${s.rt.int8Dot}: ${ms.toFixed(3)} ms, ${(s.weight.byteLength / ms / 1e6).toFixed(1)} GB/s; first/this ${ratio.toFixed(3)}`);
}
for (const s of sides) await s.rt.dispose();

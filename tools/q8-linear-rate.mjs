// GMAC/s of single q8 linears at a model's shapes, T tokens, on THREADS
// threads: each shape's weights quantized from sin(i), x = cos(i), 10 untimed
// calls, then the median of ROUNDS timings of 5 calls, and the second-fastest.
//
//   node tools/q8-linear-rate.mjs     env T (default 32), THREADS (default 1), SHAPES (ROWSxCOLS,…; default
//                                     9728x896,896x4864: Qwen2.5-0.5B's gate_up and down), KERNELS, ROUNDS (default 9)
//
// Run from a built checkout (npm run build); pin it with taskset to compare cores.
import { createRuntime, createWeight, linear } from "../dist/src/ops-entry.js";
import { median } from "./ab-builds/lockstep.mjs";

const T = Number(process.env.T ?? 32), THREADS = Number(process.env.THREADS ?? 1), ROUNDS = Number(process.env.ROUNDS ?? 9);
const shapes = (process.env.SHAPES ?? "9728x896,896x4864").split(",").map((s) => s.split("x").map(Number));
const rt = await createRuntime({ threads: THREADS, ...(process.env.KERNELS ? { kernels: process.env.KERNELS } : {}) });
for (const [rows, cols] of shapes) {
  const source = rt.tensor("f32", [rows, cols]).set(Float32Array.from({ length: rows * cols }, (_, i) => Math.sin(i)));
  const weight = createWeight(rt, { source, format: "q8" });
  const x = rt.tensor("f32", [T, cols]).set(Float32Array.from({ length: T * cols }, (_, i) => Math.cos(i)));
  const out = rt.tensor("f32", [T, rows]);
  for (let i = 0; i < 10; i++) linear(rt, { x, weight, out });
  const ms = Array.from({ length: ROUNDS }, () => {
    const t0 = performance.now();
    for (let i = 0; i < 5; i++) linear(rt, { x, weight, out });
    return (performance.now() - t0) / 5;
  });
  const gmacs = (m) => ((rows * cols * T) / m / 1e6).toFixed(1);
  console.log(`${rt.kernels} ${rt.int8Dot}, ${THREADS} thread(s), q8 [${rows}, ${cols}] × T = ${T}: ${median(ms).toFixed(3)} ms, ${gmacs(median(ms))} GMAC/s (fastest but one: ${gmacs([...ms].sort((a, b) => a - b)[1])})`);
  for (const t of [source, x, out]) rt.free(t);
  weight.free();
}
await rt.dispose();

// The decode GEMV (or, with T > 1, the prefill GEMM) of one native ggml type
// (Q4_K, Q6_K, Q5_0, …) on two or more built checkouts in one process,
// alternated round by round (order flipping every round): COPIES copies of a
// [ROWS, COLS] matrix quantized by ggml's rules (src/sources/gguf/quantize.ts)
// from the same values, T tokens, 2 threads, so the weights stream from DRAM
// as in a model's decode. Prints per build the median ms a matrix, GB/s of its
// packed weights (GMAC/s with T > 1), the median of the per-round time ratios
// first / this (> 1: this build is faster), and whether its outputs are
// bit-identical to the first build's.
//
//   node tools/ab-builds/ab-ggml-gemv.mjs DIR1 DIR2 …
//   env TYPE (default Q4_K), SHAPE (ROWSxCOLS, default 4864x1024), COPIES (default 20), ROUNDS (default 21),
//       T (tokens, default 1), KERNELS (baseline | relaxed, default: the runtime's choice),
//       KQWIDE (1 | 0: RuntimeOptions.kquantWide, default: the runtime's choice)
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { values } from "./fill-values.mjs";
import { loadBuild } from "./load-build.mjs";
import { median } from "./lockstep.mjs";

const dirs = process.argv.slice(2);
if (dirs.length < 2) throw new Error(`give two or more built checkouts, got ${dirs.length}`);
const TYPE = process.env.TYPE ?? "Q4_K";
const [ROWS, COLS] = (process.env.SHAPE ?? "4864x1024").split("x").map(Number);
const COPIES = Number(process.env.COPIES ?? 20), ROUNDS = Number(process.env.ROUNDS ?? 21), T = Number(process.env.T ?? 1);
const { quantize } = await import(pathToFileURL(resolve(dirs[0], "dist/src/sources/gguf/quantize.js")).href);
const bytes = quantize(TYPE, Float32Array.from(values(ROWS * COLS, 3)), COLS);
const sides = [];
for (const dir of dirs) {
  const lib = await loadBuild(dir);
  const wide = process.env.KQWIDE ? { kquantWide: process.env.KQWIDE === "1" } : {};
  const rt = await lib.createRuntime({ threads: 2, ...(process.env.KERNELS ? { kernels: process.env.KERNELS } : {}), ...wide });
  const raw = rt.tensor("uint8", [ROWS, bytes.length / ROWS]).set(bytes);
  const ws = Array.from({ length: COPIES }, () => lib.createGgmlWeight(rt, { source: new lib.GgmlMatrix(TYPE, raw, ROWS, COLS) }));
  rt.free(raw);
  const x = rt.tensor("f32", [T, COLS]).set(values(T * COLS, 5));
  const out = rt.tensor("f32", [T, ROWS]);
  sides.push({ dir, lib, rt, ws, x, out, ms: [] });
}
for (let r = 0; r < ROUNDS; r++) {
  for (const s of r % 2 ? [...sides].reverse() : sides) {
    const t0 = performance.now();
    const reps = Math.max(1, Math.round(20 / T));
    for (let i = 0; i < reps; i++) for (const w of s.ws) s.lib.linear(s.rt, { x: s.x, weight: w, out: s.out });
    s.ms.push((performance.now() - t0) / reps / COPIES);
  }
}
console.log(`ab-ggml-gemv: ${TYPE} [${ROWS}, ${COLS}] × ${COPIES}, T = ${T}, 2 threads, ${ROUNDS} rounds, Node ${process.version}`);
const first = sides[0].out.toFloat32();
for (const s of sides) {
  const ms = median(s.ms);
  const rate = T === 1 ? `${(s.ws[0].byteLength / ms / 1e6).toFixed(1)} GB/s` : `${((ROWS * COLS * T) / ms / 1e6).toFixed(1)} GMAC/s`;
  const same = s.out.toFloat32().every((v, i) => Object.is(v, first[i]));
  console.log(`${s.dir} ${s.rt.kernels}/${s.rt.int8Dot} (${s.ws[0].format}): ${ms.toFixed(3)} ms, ${rate}; first/this ${median(s.ms.map((t, i) => sides[0].ms[i] / t)).toFixed(3)}; outputs ${same ? "bit-identical" : "differ"}`);
}
for (const s of sides) await s.rt.dispose();

// How close the q8 GEMM on the int16 dot comes to the dot's own throughput, on
// one thread, with the weights in L2 (so neither DRAM nor the other thread
// counts): the q8 linear's multiply-accumulates a second at T tokens
// ([ROWS, COLS] = [256, 1024], 288 KB of q8 tiles), against 8 × the
// i32x4.dot_i16x8_s a second that probe.ts sustains (each dot is 8 MACs), and
// the same dots with the loads of a tile step (probe.ts tileStep, tileStepByPair,
// tileStep16).
// Both in this process, medians of 7 rounds. The checkout must be built.
//
//   node tools/int16-dot-bound/measure.mjs          env T (default 64), KERNELS (default: the runtime's choice)
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { median } from "../ab-builds/lockstep.mjs";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const T = Number(process.env.T ?? 64), ROWS = 256, COLS = 1024, ROUNDS = 7;

const dir = mkdtempSync(join(tmpdir(), "int16-dot-bound-"));
let probe;
try {
  const wasm = join(dir, "probe.wasm");
  // An empty config, not the repository's asconfig.json (shared imported memory): the probe owns one page for the tile steps' operands.
  const config = join(dir, "asconfig.json");
  writeFileSync(config, "{}");
  execFileSync(process.execPath, [join(ROOT, "node_modules/assemblyscript/bin/asc.js"), join(ROOT, "tools/int16-dot-bound/probe.ts"), "--config", config, "-O3", "--enable", "simd", "--runtime", "stub", "--initialMemory", "1", "-o", wasm], { stdio: "inherit" });
  probe = (await WebAssembly.instantiate(readFileSync(wasm), {})).instance.exports;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const N = 20_000_000;
probe.dots(N / 20, 1);
const dotS = median(Array.from({ length: ROUNDS }, (_, k) => {
  const t0 = performance.now();
  probe.dots(N, k);
  return (performance.now() - t0) / 1000;
}));
const boundGmacs = (16 * 8 * N) / dotS / 1e9;
// The three tile steps (probe.ts): the same 16 dots an iteration, their operands loaded from L1.
probe.fill();
const stepGmacs = Object.fromEntries(["tileStep", "tileStepByPair", "tileStep16"].map((name) => {
  probe[name](N / 20);
  const s = median(Array.from({ length: ROUNDS }, () => {
    const t0 = performance.now();
    probe[name](N);
    return (performance.now() - t0) / 1000;
  }));
  return [name, (16 * 8 * N) / s / 1e9];
}));

const { createRuntime, createWeight, linear } = await import(join(ROOT, "dist/src/ops-entry.js"));
const rt = await createRuntime({ threads: 1, ...(process.env.KERNELS ? { kernels: process.env.KERNELS } : {}) });
const src = rt.tensor("f32", [ROWS, COLS]).set(Array.from({ length: ROWS * COLS }, (_, i) => Math.sin(i)));
const weight = createWeight(rt, { source: src, format: "q8" });
const x = rt.tensor("f32", [T, COLS]).set(Array.from({ length: T * COLS }, (_, i) => Math.cos(i)));
const out = rt.tensor("f32", [T, ROWS]);
const calls = Math.max(20, Math.round(12800 / T));
for (let i = 0; i < calls; i++) linear(rt, { x, weight, out });
const callS = median(Array.from({ length: ROUNDS }, () => {
  const t0 = performance.now();
  for (let i = 0; i < calls; i++) linear(rt, { x, weight, out });
  return (performance.now() - t0) / 1000 / calls;
}));
const gemmGmacs = (ROWS * COLS * T) / callS / 1e9;
console.log(`Node ${process.version}, ${rt.kernels} kernels, int8 dot ${rt.int8Dot}, one thread`);
console.log(`dot_i16x8 alone: ${(boundGmacs / 8).toFixed(2)} G/s = ${boundGmacs.toFixed(1)} GMAC/s`);
console.log(`the same dots with a tile step's loads (probe.ts): 8 rows × 4 tokens ${stepGmacs.tileStep.toFixed(1)} GMAC/s = ${(stepGmacs.tileStep / boundGmacs).toFixed(2)}, the same one column pair a step ${stepGmacs.tileStepByPair.toFixed(1)} GMAC/s = ${(stepGmacs.tileStepByPair / boundGmacs).toFixed(2)}, 16 rows × 2 tokens ${stepGmacs.tileStep16.toFixed(1)} GMAC/s = ${(stepGmacs.tileStep16 / boundGmacs).toFixed(2)} of the dot's rate`);
console.log(`q8 linear [${ROWS}, ${COLS}] × T = ${T} (weights in L2): ${gemmGmacs.toFixed(1)} GMAC/s = ${(gemmGmacs / boundGmacs).toFixed(2)} of the dot's rate`);
await rt.dispose();

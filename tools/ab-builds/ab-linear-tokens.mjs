// One decoder layer's four q8 (or FORMAT) projections at Qwen2.5-0.5B's shapes (the
// "linear" rows of bench/int8-dot.ts: qkv, o, gate_up, down) for a few
// tokens T, on two built checkouts in one process, per kernel flavor and
// int8-dot mode, alternated round by round (order flipping every round).
// Prints per mode and T each build's median ms, its cost over its own T = 1
// (median of the per-round ratios: every round runs every T), the median per-round time ratio first /
// second (> 1: the second is faster), and the largest difference between the
// two builds' outputs (0: bit-identical).
//
//   node tools/ab-builds/ab-linear-tokens.mjs DIR1 DIR2      # e.g. a base of main and this checkout
//   env FORMAT (q8, the default; f32, bf16, q4), ROUNDS (default 9), TOKENS (default 1,2,3,4,5,8), THREADS (default 2), REPS (calls per timing, default 1),
//       MODES (default: baseline, relaxed-i16, relaxed-i7, relaxed-u8 where each exists)
import { resolve } from "node:path";
import { values } from "./fill-values.mjs";
import { loadBuild } from "./load-build.mjs";

const dirs = process.argv.slice(2);
if (dirs.length !== 2) throw new Error(`give two built checkouts, got ${dirs.length}`);
const ROUNDS = Number(process.env.ROUNDS ?? 9);
const TOKENS = (process.env.TOKENS ?? "1,2,3,4,5,8").split(",").map(Number);
const THREADS = Number(process.env.THREADS ?? 2);
const REPS = Number(process.env.REPS ?? 1);
const FORMAT = process.env.FORMAT ?? "q8";
const HIDDEN = 896;
const INTERMEDIATE = 4864;
const LAYER = [
  [(14 + 2 * 2) * 64, HIDDEN],
  [HIDDEN, 14 * 64],
  [2 * INTERMEDIATE, HIDDEN],
  [HIDDEN, INTERMEDIATE],
];

const libs = [];
for (const d of dirs) libs.push(await loadBuild(resolve(d)));
const candidates = [
  ["baseline", { kernels: "baseline" }],
  ["relaxed-i16", { kernels: "relaxed", int8Dot: "i16" }],
  ["relaxed-i7", { kernels: "relaxed", int8Dot: "i7" }],
  ["relaxed-u8", { kernels: "relaxed", int8Dot: "u8" }],
];
const wanted = process.env.MODES?.split(",");
const modes = [];
for (const [name, opts] of candidates) {
  if (wanted && !wanted.includes(name)) continue;
  if (opts.kernels === "relaxed" && !libs[0].kernelFlavorAvailable("relaxed")) continue;
  if (opts.int8Dot === "u8" && libs[0].relaxedInt8DotHere() !== "u8") continue;
  const sides = [];
  for (const lib of libs) {
    const rt = await lib.createRuntime({ threads: THREADS, ...opts });
    const weights = LAYER.map(([rows, cols], k) => {
      const src = rt.tensor("f32", [rows, cols]).set(values(rows * cols, 17 + k));
      const w = lib.createWeight(rt, { source: src, format: FORMAT });
      rt.free(src);
      return w;
    });
    sides.push({ lib, rt, weights });
  }
  modes.push({ name, sides });
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
console.log(`ab-linear-tokens: ${FORMAT}, Node ${process.version}, ${THREADS} thread(s), ${ROUNDS} rounds; modes ${modes.map((m) => m.name).join(", ")}`);

for (const m of modes) {
  // Every round times every T on both builds (order flipping), so the cost over T = 1 is a ratio within rounds too.
  const cells = TOKENS.map((T) => ({
    T,
    per: m.sides.map((s) => ({
      xs: LAYER.map(([, cols], k) => s.rt.tensor("f32", [T, cols]).set(values(T * cols, 91 + k))),
      outs: LAYER.map(([rows]) => s.rt.tensor("f32", [T, rows]).fill(NaN)),
    })),
    ms: [[], []],
  }));
  const run = (c, i) => m.sides[i].weights.forEach((w, k) => m.sides[i].lib.linear(m.sides[i].rt, { x: c.per[i].xs[k], weight: w, out: c.per[i].outs[k] }));
  for (let r = 0; r < 3; r++) cells.forEach((c) => [0, 1].forEach((i) => run(c, i))); // warm-up: V8 tiers wasm up between calls
  for (let r = 0; r < ROUNDS; r++) {
    for (const c of cells) {
      for (const i of r % 2 ? [1, 0] : [0, 1]) {
        const t0 = performance.now();
        for (let k = 0; k < REPS; k++) run(c, i);
        c.ms[i].push((performance.now() - t0) / REPS);
      }
    }
  }
  const one = cells.find((c) => c.T === 1);
  for (const c of cells) {
    let diff = 0;
    c.per[0].outs.forEach((o, k) => {
      const a = o.toFloat32(), b = c.per[1].outs[k].toFloat32();
      a.forEach((v, i) => (diff = Math.max(diff, Number.isNaN(v) !== Number.isNaN(b[i]) ? Infinity : Math.abs(v - b[i]))));
    });
    const ratios = c.ms[0].map((t, r) => t / c.ms[1][r]);
    const over1 = (i) => (one ? median(c.ms[i].map((t, r) => t / one.ms[i][r])).toFixed(2) : "-");
    console.log(
      `${m.name} T=${c.T}: ${median(c.ms[0]).toFixed(2)} / ${median(c.ms[1]).toFixed(2)} ms, over T=1 ${over1(0)} / ${over1(1)}, first/second ${median(ratios).toFixed(3)} [${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}], max |Δ| ${diff}`,
    );
    c.per.forEach((p, i) => [...p.xs, ...p.outs].forEach((t) => m.sides[i].rt.free(t)));
  }
}
for (const m of modes) {
  for (const s of m.sides) {
    s.weights.forEach((w) => w.free());
    await s.rt.dispose();
  }
}

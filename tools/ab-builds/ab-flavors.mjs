// Whole-model prefill and decode on both kernel flavors in one process: the
// synthetic Qwen2.5-0.5B (bench model suite shapes), bf16 KV, 2 threads, one
// runtime per flavor. Each round both flavors prefill PROMPT tokens (order
// alternating), then take STEPS decode steps alternated step by step, so load
// that comes and goes hits both alike. Prints each flavor's medians and the
// median per-step time ratio against the first flavor.
//
//   node tools/ab-builds/ab-flavors.mjs WEIGHTS PROMPT STEPS ROUNDS   # e.g. q8 512 24 3
//   env DIR (a built checkout, default .), FLAVORS (default baseline,relaxed)
import { resolve } from "node:path"; import { pathToFileURL } from "node:url";
const dir = process.env.DIR ?? "."; const url = (p) => pathToFileURL(resolve(dir, p)).href;
const [weights, P, S, R] = [process.argv[2], ...process.argv.slice(3).map(Number)];
const lib = await import(url("dist/src/index.js"));
const sides = [];
const nb = Math.ceil((P + S + 2) / 16);
const table = Int32Array.from({ length: nb }, (_, i) => i);
const batch = (start, n) => ({ tokens: Int32Array.from({ length: n }, (_, i) => ((start + i) * 2654435761) % 151936 >>> 0), positions: Int32Array.from({ length: n }, (_, i) => start + i), cuSeqlensQ: Int32Array.of(0, n), seqLens: Int32Array.of(start + n), blockTable: table, maxBlocksPerSeq: nb, slotMapping: Int32Array.from({ length: n }, (_, i) => start + i), logitIndices: Int32Array.of(n - 1) });
for (const kernels of (process.env.FLAVORS ?? "baseline,relaxed").split(",")) {
  const rt = await lib.createRuntime({ threads: 2, kernels });
  const model = lib.createSyntheticModel(rt, { config: lib.qwen25HalfBConfig(), weights, kvDtype: "bf16", numBlocks: nb + 1, maxBatchTokens: P });
  sides.push({ name: `${rt.kernels}/${rt.int8Dot}`, model, pre: [], dec: [] });
}
const pb = batch(0, P);
for (let r = 0; r < R; r++) {
  for (const s of r % 2 ? [...sides].reverse() : sides) { const t0 = performance.now(); s.model.forward(pb); s.pre.push(performance.now() - t0); }
  for (let i = 0; i < S; i++) for (const s of i % 2 ? [...sides].reverse() : sides) { const b = batch(P + i, 1); const t0 = performance.now(); s.model.forward(b); s.dec.push(performance.now() - t0); }
}
const med = (xs) => { const a = [...xs].sort((x, y) => x - y); return a[a.length >> 1]; };
const b = sides[0];
for (const s of sides) console.log(`${process.version} ${weights} ${s.name}: prefill ${P} ${med(s.pre).toFixed(1)} ms (${(P * 1000 / med(s.pre)).toFixed(1)} tok/s), decode ${med(s.dec).toFixed(2)} ms; vs ${b.name}: prefill ${med(s.pre.map((t, i) => b.pre[i] / t)).toFixed(3)}x decode ${med(s.dec.map((t, i) => b.dec[i] / t)).toFixed(3)}x`);
process.exit(0);

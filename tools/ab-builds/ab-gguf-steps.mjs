// Whole-model prefill and decode of one GGUF file (--weights auto: its native
// matrices as the build keeps them) on two or more built checkouts in one
// process, f16 KV, 2 threads. Each round every build prefills PROMPT tokens
// (order alternating), then the builds take STEPS decode steps alternated step
// by step, so load that comes and goes hits all alike. Prints each build's
// weight format, the bytes a decode step reads, medians, the median per-step
// time ratio against the first build, and whether its last prefill's logits
// are bit-identical to the first build's.
//
//   node tools/ab-builds/ab-gguf-steps.mjs FILE PROMPT STEPS ROUNDS DIR1 DIR2 …
//   e.g. … bench/.cache/qwen2.5-0.5b-shape-random-Q4_K_M.gguf 512 32 3 /tmp/kvflash-base .
//   env KERNELS (baseline | relaxed, default: the runtime's choice; comma-separated: one per build, e.g.
//   KERNELS=baseline,relaxed … BASE . to set the old default against a new one);
//   KQWIDE (1 | 0: RuntimeOptions.kquantWide, default: the runtime's choice; comma-separated as KERNELS)
import { loadBuild } from "./load-build.mjs";
import { median } from "./lockstep.mjs";

const [file, P, S, R, ...dirs] = [process.argv[2], ...process.argv.slice(3, 6).map(Number), ...process.argv.slice(6)];
if (!file || dirs.length < 2) throw new Error("usage: ab-gguf-steps.mjs FILE PROMPT STEPS ROUNDS DIR1 DIR2 …");
const nb = Math.ceil((P + S + 2) / 16);
const table = Int32Array.from({ length: nb }, (_, i) => i);
const batch = (start, n) => ({ tokens: Int32Array.from({ length: n }, (_, i) => ((start + i) * 2654435761) % 151936 >>> 0), positions: Int32Array.from({ length: n }, (_, i) => start + i), cuSeqlensQ: Int32Array.of(0, n), seqLens: Int32Array.of(start + n), blockTable: table, maxBlocksPerSeq: nb, slotMapping: Int32Array.from({ length: n }, (_, i) => start + i), logitIndices: Int32Array.of(n - 1) });
const sides = [];
const perBuild = (name, i) => { const k = (process.env[name] ?? "").split(","); return k.length > 1 ? k[i] : k[0]; };
const kernelsOf = (i) => perBuild("KERNELS", i);
const wideOf = (i) => (perBuild("KQWIDE", i) ? { kquantWide: perBuild("KQWIDE", i) === "1" } : {});
for (const [i, dir] of dirs.entries()) {
  const lib = await loadBuild(dir);
  const rt = await lib.createRuntime({ threads: 2, ...(kernelsOf(i) ? { kernels: kernelsOf(i) } : {}), ...wideOf(i) });
  const km = lib.loadModel(rt, file, { weights: "auto", kvDtype: "f16", blockSize: 16, numBlocks: nb + 1, maxBatchTokens: P, progress: false });
  const w = km.runner.weights;
  sides.push({ dir, name: `${dir} ${rt.kernels}/${rt.int8Dot}`, runner: km.runner, mb: (w.bytesPerToken ?? NaN) / 1e6, format: w.format, pre: [], dec: [], logits: new Float32Array(0) });
}
const pb = batch(0, P);
for (let r = 0; r < R; r++) {
  for (const s of r % 2 ? [...sides].reverse() : sides) {
    const t0 = performance.now();
    const logits = await s.runner.forward(pb);
    s.pre.push(performance.now() - t0);
    s.logits = Float32Array.from(logits);
  }
  for (let i = 0; i < S; i++) for (const s of i % 2 ? [...sides].reverse() : sides) {
    const t0 = performance.now();
    await s.runner.forward(batch(P + i, 1));
    s.dec.push(performance.now() - t0);
  }
}
const b = sides[0];
console.log(`ab-gguf-steps: ${file}, prompt ${P}, ${S} steps × ${R} rounds, Node ${process.version}`);
for (const s of sides) {
  const same = s.logits.length === b.logits.length && s.logits.every((v, i) => Object.is(v, b.logits[i]));
  console.log(`${s.name}: ${s.format} weights, ${s.mb.toFixed(1)} MB/token; prefill ${median(s.pre).toFixed(1)} ms (${(P * 1000 / median(s.pre)).toFixed(1)} tok/s), decode ${median(s.dec).toFixed(2)} ms; vs first: prefill ${median(s.pre.map((t, i) => b.pre[i] / t)).toFixed(3)}x decode ${median(s.dec.map((t, i) => b.dec[i] / t)).toFixed(3)}x; logits ${same ? "bit-identical" : "differ"}`);
}
process.exit(0);

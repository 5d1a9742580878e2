// The serve bench's workload (distinct 32-token prompts, 32 output tokens; BENCHMARKS.md
// "serve") as bare forward() calls on one runtime (default flavor, 2 threads), q8 synthetic
// Qwen2.5-0.5B, bf16 KV: P1 = one 32-token prefill, g1 = a decode step of one sequence,
// P16 = 16 prompts in one 512-token step, g16 = a decode step of 16 sequences; medians
// over ROUNDS (after one warm-up round). With no engine cost beyond forward(), a request
// takes P1 + 32·g1 at concurrency 1 and (P16 + 32·g16) / 16 at 16: their ratio bounds
// the serve speed-up at 16.
//
//   node tools/serve-bound.mjs [ROUNDS]      # env DIR: a built checkout (default .)
import { resolve } from "node:path"; import { pathToFileURL } from "node:url";
const dir = process.env.DIR ?? "."; const lib = await import(pathToFileURL(resolve(dir, "dist/src/index.js")).href);
const C = 16, P = 32, S = 32, R = +(process.argv[2] ?? 3);
const rt = await lib.createRuntime({ threads: 2 });
const nbSeq = Math.ceil((P + S + 2) / 16);
const model = lib.createSyntheticModel(rt, { config: lib.qwen25HalfBConfig(), weights: "q8", kvDtype: "bf16", numBlocks: C * nbSeq + 1, maxBatchTokens: C * P });
function batch(seqs, start, n) { // seqs: indices; each gets n new tokens at positions start..start+n-1
  const T = seqs.length * n, tokens = new Int32Array(T), positions = new Int32Array(T), slot = new Int32Array(T);
  const table = new Int32Array(seqs.length * nbSeq), cu = new Int32Array(seqs.length + 1), lens = new Int32Array(seqs.length), li = new Int32Array(seqs.length);
  seqs.forEach((q, b) => { for (let i = 0; i < n; i++) { const t = b * n + i; tokens[t] = ((q + 1) * 7919 + (start + i) * 2654435761) % 151936 >>> 0; positions[t] = start + i; slot[t] = q * nbSeq * 16 + start + i; }
    for (let k = 0; k < nbSeq; k++) table[b * nbSeq + k] = q * nbSeq + k; cu[b + 1] = (b + 1) * n; lens[b] = start + n; li[b] = (b + 1) * n - 1; });
  return { tokens, positions, cuSeqlensQ: cu, seqLens: lens, blockTable: table, maxBlocksPerSeq: nbSeq, slotMapping: slot, logitIndices: li };
}
const all = Array.from({ length: C }, (_, i) => i);
const time = (b) => { const t0 = performance.now(); model.forward(b); return performance.now() - t0; };
const m = { P1: [], g1: [], P16: [], g16: [] };
for (let r = 0; r < R + 1; r++) {
  const p1 = time(batch([0], 0, P)); let g1 = [];
  for (let i = 0; i < 8; i++) g1.push(time(batch([0], P + i, 1)));
  const p16 = time(batch(all, 0, P)); let g16 = [];
  for (let i = 0; i < 8; i++) g16.push(time(batch(all, P + i, 1)));
  if (r > 0) { m.P1.push(p1); m.g1.push(...g1); m.P16.push(p16); m.g16.push(...g16); }
}
const med = (xs) => { const a = [...xs].sort((x, y) => x - y); return a[a.length >> 1]; };
const [P1, g1, P16, g16] = [med(m.P1), med(m.g1), med(m.P16), med(m.g16)];
const one = P1 + S * g1, sixteen = P16 / C + S * g16 / C;
console.log(`${process.version} ${rt.kernels}/${rt.int8Dot}: P1 ${P1.toFixed(1)} ms, g1 ${g1.toFixed(2)} ms, P16 ${P16.toFixed(1)} ms (${(P16 / C).toFixed(1)} per prompt), g16 ${g16.toFixed(2)} ms (${(g16 / C).toFixed(2)} per token)`);
console.log(`per request: c=1 ${one.toFixed(0)} ms, c=16 ${sixteen.toFixed(0)} ms -> forward-only bound on the c=16 speed-up ${(one / sixteen).toFixed(2)}x; decode-only ${(g1 * C / g16).toFixed(2)}x; prefill per token c=1 ${(P1 / P).toFixed(2)} ms, c=16 ${(P16 / C / P).toFixed(2)} ms`);
await rt.dispose();

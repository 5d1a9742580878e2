// The embed suite's encoder (bench/suites/embed.ts: all-MiniLM-L6-v2-shaped
// BertModel, random weights from writeTinyBert, mean pooling, the same short
// inputs) on two built checkouts in one process, alternated round by round
// (order flipping every round), 2 threads each. Prints per weight format and
// batch each build's median ms, the median of the per-round time ratios
// first / second (> 1: the second is faster), their range, and the largest
// difference between the two builds' vectors (0: bit-identical).
//
//   node tools/ab-builds/ab-embed.mjs DIR1 DIR2        # e.g. a base of main and this checkout
//   env ROUNDS (default 9), BATCHES (default 16,256), FMTS (f32,q8)
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const dirs = process.argv.slice(2);
if (dirs.length !== 2) throw new Error(`give two built checkouts, got ${dirs.length}`);
const ROUNDS = Number(process.env.ROUNDS ?? 9);
const BATCHES = (process.env.BATCHES ?? "16,256").split(",").map(Number);
const FMTS = (process.env.FMTS ?? "f32,q8").split(",");
const MINILM = { hiddenSize: 384, numHeads: 12, numLayers: 6, intermediateSize: 1536, maxPositionEmbeddings: 512, vocabSize: 30522 };

const sides = [];
for (const d of dirs) {
  const at = (p) => pathToFileURL(resolve(d, p)).href;
  const { createRuntime } = await import(at("dist/src/ops-entry.js"));
  const { loadEncoderModel } = await import(at("dist/src/model/encoder/encoder-model.js"));
  const { writeTinyBert } = await import(at("dist/src/testing/tiny-bert.js"));
  const { Prng } = await import(at("dist/src/tensor/prng.js"));
  const rt = await createRuntime({ threads: 2 });
  const dir = mkdtempSync(join(tmpdir(), "kvflash-ab-embed-"));
  writeTinyBert({ dir, ...MINILM, pooling: "mean", normalize: true, seed: 7, weightScale: 0.05 });
  const models = Object.fromEntries(FMTS.map((f) => [f, loadEncoderModel(rt, dir, f === "q8" ? { weights: "q8" } : {})]));
  rmSync(dir, { recursive: true, force: true });
  sides.push({ rt, models, Prng });
}

// The suite's inputs: [CLS] + 6–30 word ids + [SEP], Prng(11), batches 1, 16, 256 drawn in that order.
const rng = new sides[0].Prng(11);
const shortInputs = (n) => Array.from({ length: n }, () => [2, ...Array.from({ length: 6 + rng.nextInt(25) }, () => 200 + rng.nextInt(MINILM.vocabSize - 200)), 3]);
const inputs = Object.fromEntries([1, 16, 256].map((b) => [b, shortInputs(b)]));
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];

for (const f of FMTS) {
  for (const B of BATCHES) {
    const seqs = inputs[B];
    if (seqs === undefined) throw new Error(`BATCHES: the suite's batches are 1, 16, 256, got ${B}`);
    const [a, b] = sides.map((s) => s.models[f].embed(seqs));
    let diff = 0;
    a.forEach((v, i) => v.forEach((x, j) => (diff = Math.max(diff, Math.abs(x - b[i][j])))));
    const ms = [[], []];
    const ratios = [];
    for (let r = 0; r < ROUNDS; r++) {
      const t = [];
      for (const i of r % 2 ? [1, 0] : [0, 1]) {
        const t0 = performance.now();
        sides[i].models[f].embed(seqs);
        t[i] = performance.now() - t0;
        ms[i].push(t[i]);
      }
      ratios.push(t[0] / t[1]);
    }
    console.log(`${f} batch ${B}: ${median(ms[0]).toFixed(1)} / ${median(ms[1]).toFixed(1)} ms, first/second ${median(ratios).toFixed(3)} [${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}], max |Δ| ${diff}`);
  }
}
for (const s of sides) {
  for (const m of Object.values(s.models)) m.dispose();
  s.rt.dispose();
}

// The WebGPU ModelRunner's decode step in two or more builds, alternated in one
// process (tools/ab-builds/README.md): the dispatches a step records and the host
// time recording them (GpuModelRunner.lastStep.dispatches, .recordMs). A
// Qwen2.5-0.5B-shaped q8 model cut to hidden 128 (recording costs per dispatch,
// not per weight), LAYERS layers, one sequence of STEPS decode steps; the first
// two steps of each build are warm-up. On SwiftShader only the recording time is
// meaningful (host CPU time), never the GPU's.
//
//   node tools/ab-builds/ab-gpu-record.mjs 24 6 dist-dir-a dist-dir-b   # each a build's dist/

import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
process.env.VK_ICD_FILENAMES ??= "/usr/lib/chromium/vk_swiftshader_icd.json";
const [layers, steps, ...dists] = process.argv.slice(2);
const L = Number(layers), N = Number(steps);
async function setup(dist) {
  const imp = (p) => import(pathToFileURL(resolve(dist, p)).href);
  const ops = await imp("src/ops-entry.js");
  const testing = await imp("src/testing/index.js");
  const { GpuDevice } = await imp("src/gpu/device.js");
  const { GpuModelRunner } = await imp("src/gpu/model-runner.js");
  const rt = await ops.createRuntime({ threads: 1 });
  const full = testing.qwen25HalfBConfig();
  const config = { ...full, hiddenSize: 128, intermediateSize: 384, numHeads: 2, numKvHeads: 1, headDim: 64, numLayers: L, vocabSize: 1024, layerWindows: full.layerWindows.slice(0, 1).concat(Array(L - 1).fill(full.layerWindows[0])), layerRope: Array(L).fill(full.layerRope[0]) };
  const cpu = testing.createSyntheticModel(rt, { config, weights: "q8", kvDtype: "bf16", numBlocks: 8, maxBatchTokens: 16 });
  const gpu = await GpuDevice.open({ device: "webgpu" });
  const runner = await GpuModelRunner.create(gpu, rt, { config, weights: cpu.weights, numBlocks: 8, blockSize: 16, kvDtype: "bf16" });
  return { dist, runner, rec: [], disp: [] };
}
const runs = [];
for (const d of dists) runs.push(await setup(d));
const I = (...a) => Int32Array.from(a);
const batch = (pos) => ({ tokens: I(pos % 1000 + 1), positions: I(pos), slotMapping: I(pos), cuSeqlensQ: I(0, 1), seqLens: I(pos + 1), blockTable: I(0, 1, 2, 3, 4, 5, 6, 7), maxBlocksPerSeq: 8, logitIndices: I(0) });
for (let i = 0; i < N; i++) {
  for (const r of runs) {
    await r.runner.forward(batch(i));
    if (i >= 2) { r.rec.push(r.runner.lastStep.recordMs); r.disp.push(r.runner.lastStep.dispatches); }
  }
}
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
for (const r of runs) console.log(`${r.dist}: ${L} layers, dispatches ${med(r.disp)}, recordMs median ${med(r.rec).toFixed(3)} (${(1000 * med(r.rec) / med(r.disp)).toFixed(1)} µs a dispatch), min ${Math.min(...r.rec).toFixed(3)}`);
process.exit(0);

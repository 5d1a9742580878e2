// The sampler's share of a decode step: each step's logits (synthetic
// Qwen2.5-0.5B shapes, q8 weights, f16 KV cache, 2 threads, one sequence,
// 256-token prompt) are sampled by both of the sampler's passes (float64
// JavaScript and the wasm kernels), in alternating order, per setting; the
// step time is forward + that setting's sampling. After `npm run build`:
//
//   node tools/sampler-in-decode.mjs            STEPS=48 by default
//
// Prints the median forward time and, per setting, the median sampling time
// of each pass and the tok/s a step would give with it.
import { fileURLToPath } from "node:url";
const dist = (p) => fileURLToPath(new URL(`../dist/src/${p}`, import.meta.url));
const lib = await import(dist("index.js"));
const { argmax } = await import(dist("engine/sampler.js"));
const { KvCacheManager } = await import(dist("engine/kv-cache-manager.js"));
const { Scheduler } = await import(dist("engine/scheduler.js"));
const { Request } = await import(dist("engine/request.js"));
const prompt = 256, steps = +(process.env.STEPS ?? 48);
const rt = await lib.createRuntime({ threads: 2 });
const model = lib.createSyntheticModel(rt, { config: lib.qwen25HalfBConfig(), weights: "q8", kvDtype: "f16", numBlocks: Math.ceil((prompt + steps + 30) / 16) + 1, maxBatchTokens: prompt });
const V = model.vocabSize;
const kvm = new KvCacheManager({ numBlocks: model.kvCache.numBlocks, blockSize: model.kvCache.blockSize, enablePrefixCaching: false });
const sched = new Scheduler({ kvCacheManager: kvm, maxNumBatchedTokens: prompt, maxNumSeqs: 1, maxModelLen: model.maxModelLen, stopChecker: () => null });
const ids = Array.from({ length: prompt }, (_, i) => (i * 2654435761) % V >>> 0);
sched.addRequest(new Request({ requestId: "r", promptTokenIds: ids, maxTokens: steps + 20 }));
const settings = { "openai default (T=1)": { temperature: 1 }, "qwen generation_config": { temperature: 0.7, topP: 0.8, topK: 20, repetitionPenalty: 1.05 }, "T=0.8 top_p=0.95": { temperature: 0.8, topP: 0.95 }, greedy: { temperature: 0 } };
const js = new lib.Sampler(V), wa = new lib.Sampler(V, { runtime: rt });
const st = Object.fromEntries(Object.entries(settings).map(([k, p]) => [k, { js: new lib.SamplingState(lib.resolveSamplingParams({ ...p, seed: 1 }, V), ids), wasm: new lib.SamplingState(lib.resolveSamplingParams({ ...p, seed: 1 }, V), ids) }]));
const fw = [], t = Object.fromEntries(Object.keys(settings).map((k) => [k, { js: [], wasm: [] }]));
for (let i = 0; i < steps + 5; i++) {
  const s = sched.schedule();
  const t0 = performance.now();
  const logits = model.forward(lib.buildForwardBatch(s, kvm.blockSize));
  const f = performance.now() - t0;
  const row = logits.subarray(0, V);
  for (const k of Object.keys(settings)) for (const side of i % 2 ? ["js", "wasm"] : ["wasm", "js"]) {
    const sm = side === "js" ? js : wa; const a = performance.now(); sm.sample(st[k][side], row); const d = performance.now() - a; if (i >= 5) t[k][side].push(d);
  }
  if (i >= 5) fw.push(f);
  sched.updateFromOutput(new Map([["r", [argmax(row)]]]));
}
const med = (a) => { const b = [...a].sort((x, y) => x - y); return b[b.length >> 1]; };
const F = med(fw);
console.log(`node ${process.version} ${rt.kernels}: forward median ${F.toFixed(2)} ms (context ${prompt}…${prompt + steps})`);
for (const k of Object.keys(settings)) { const j = med(t[k].js), w = med(t[k].wasm); console.log(`${k.padEnd(24)} sample js ${(j * 1000).toFixed(0)} us, wasm ${(w * 1000).toFixed(0)} us; step tok/s js ${(1000 / (F + j)).toFixed(1)}, wasm ${(1000 / (F + w)).toFixed(1)} (${((F + j) / (F + w)).toFixed(3)}x)`); }
await rt.dispose();

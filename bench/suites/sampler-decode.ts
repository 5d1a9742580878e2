/**
 * Suite `sampler-decode`: the sampler's share of a whole decode step (was
 * tools/sampler-in-decode.mjs). One sequence of synthetic Qwen2.5-0.5B shapes
 * (q8 weights, f16 KV cache, a 256-token prompt) decodes through the engine
 * core (Scheduler + KvCacheManager → buildForwardBatch → forward, the greedy
 * token fed back); each step's logits are sampled under each setting by both
 * of the sampler's passes, float64 JavaScript and the wasm kernels, in
 * alternating order step by step (ratios in one run hold on a shared
 * machine; BENCHMARKS.md "Performance method"). A row per setting: the median
 * forward time, each pass's median sampling time, and the tok/s a step of
 * forward + that sampling gives. The first 5 steps are warm-up.
 */
import { KvCacheManager, Request, Sampler, SamplingState, Scheduler, buildForwardBatch, resolveSamplingParams } from "../../src/ops-entry.js";
import { createSyntheticModel, qwen25HalfBConfig } from "../../src/testing/index.js";
import { argmax } from "../../src/engine/sampler.js";
import { type Row, type Suite, median } from "../harness.js";

const PROMPT = 256;
const WARMUP = 5;
const SETTINGS = {
  "openai default (T=1)": { temperature: 1 },
  "qwen generation_config": { temperature: 0.7, topP: 0.8, topK: 20, repetitionPenalty: 1.05 },
  "T=0.8 top_p=0.95": { temperature: 0.8, topP: 0.95 },
  greedy: { temperature: 0 },
} as const;

export const samplerDecode: Suite = {
  name: "sampler-decode",
  description: "the sampler's share of a q8 Qwen2.5-0.5B-shaped decode step: forward ms, JS vs wasm sampling µs, step tok/s per setting",
  run({ rt, quick, log }): Row[] {
    const steps = quick ? 12 : 48;
    const model = createSyntheticModel(rt, { config: qwen25HalfBConfig(), weights: "q8", kvDtype: "f16", numBlocks: Math.ceil((PROMPT + steps + 30) / 16) + 1, maxBatchTokens: PROMPT });
    try {
      const V = model.vocabSize;
      const kv = new KvCacheManager({ numBlocks: model.kvCache.numBlocks, blockSize: model.kvCache.blockSize, enablePrefixCaching: false });
      const scheduler = new Scheduler({ kvCacheManager: kv, maxNumBatchedTokens: PROMPT, maxNumSeqs: 1, maxModelLen: model.maxModelLen, stopChecker: () => null });
      const ids = Array.from({ length: PROMPT }, (_, i) => ((i * 2654435761) % V) >>> 0);
      scheduler.addRequest(new Request({ requestId: "r", promptTokenIds: ids, maxTokens: steps + WARMUP + 20 }));
      const passes = { js: new Sampler(V), wasm: new Sampler(V, { runtime: rt }) };
      const names = Object.keys(SETTINGS) as (keyof typeof SETTINGS)[];
      const state = (k: keyof typeof SETTINGS) => new SamplingState(resolveSamplingParams({ ...SETTINGS[k], seed: 1 }, V), ids);
      const states = Object.fromEntries(names.map((k) => [k, { js: state(k), wasm: state(k) }])) as Record<keyof typeof SETTINGS, Record<"js" | "wasm", SamplingState>>;
      const forwardMs: number[] = [];
      const sampleMs = Object.fromEntries(names.map((k) => [k, { js: [] as number[], wasm: [] as number[] }])) as Record<keyof typeof SETTINGS, Record<"js" | "wasm", number[]>>;
      for (let i = 0; i < steps + WARMUP; i++) {
        const step = scheduler.schedule();
        const t0 = performance.now();
        const logits = model.forward(buildForwardBatch(step, kv.blockSize));
        const f = performance.now() - t0;
        const row = logits.subarray(0, V);
        for (const k of names) {
          for (const side of i % 2 ? (["js", "wasm"] as const) : (["wasm", "js"] as const)) {
            const a = performance.now();
            passes[side].sample(states[k][side], row);
            if (i >= WARMUP) sampleMs[k][side].push(performance.now() - a);
          }
        }
        if (i >= WARMUP) forwardMs.push(f);
        scheduler.updateFromOutput(new Map([["r", [argmax(row)]]]));
      }
      passes.wasm.free();
      const F = median(forwardMs);
      log(`sampler-decode: forward median ${F.toFixed(2)} ms (context ${PROMPT}…${PROMPT + steps + WARMUP})`);
      return names.map((k) => {
        const js = median(sampleMs[k].js);
        const wasm = median(sampleMs[k].wasm);
        return { setting: k, context: PROMPT, forward_ms: F, sample_js_us: js * 1000, sample_wasm_us: wasm * 1000, step_tok_s_js: 1000 / (F + js), step_tok_s_wasm: 1000 / (F + wasm), wasm_step_speedup: (F + js) / (F + wasm) };
      });
    } finally {
      model.dispose();
    }
  },
};

/**
 * Suite `model`: the whole decoder on a synthetic model with Qwen2.5-0.5B's
 * shapes (createSyntheticModel: hidden 896, 24 layers, 14 heads × 64, 2 KV
 * heads, MLP 4864, vocabulary 151936, tied embeddings, q/k/v biases; random
 * weights built in memory), for every weight format, through the engine loop
 * `kvflash generate` runs (runRequest: scheduler → buildForwardBatch →
 * forward → argmax → update).
 *
 *   prefill  a 512-token prompt in one step: `tok_s` = 512 / step time (the
 *            faster of two runs); `gflops` counts the projections' 2·params
 *            FLOPs per token (attention's ≈ 2% more is left out),
 *            `simd_frac` = gflops / simd_gflops_all.
 *   decode   64 steps of one token after that prompt (context 513…), twice:
 *            `tok_s` = 1000 / the median of the 128 step times; `gbps` =
 *            tok_s × weight bytes read per token (every layer's matrices + the
 *            LM head = the tied embedding); **`roofline`** = gbps / `read_gbps`,
 *            the all-thread read bandwidth measured right before and right
 *            after the format's runs (their mean): this VM's bandwidth drifts
 *            by up to 1.7× within minutes, so the start-of-run ceiling alone
 *            does not describe the decode it is divided into.
 *            `roofline_run_start` divides by the start-of-run ceiling instead.
 *
 * The first run of each format also warms the activations, the ops' scratch
 * and the KV blocks. KV cache bf16 (the checkpoint's dtype, as
 * `--kv-dtype auto` picks).
 *
 * Then Llama-3.1-8B's shapes (hidden 4096, 32 layers, 32/8 heads, MLP 14336,
 * vocabulary 128256) at q8 and q4: too big for one wasm32 memory at q8, so
 * placed across memories (`memories`), with a 32-token prompt and 16 decode
 * steps (a 512-token 8B prefill takes minutes on 2 cores). Every row says
 * `model`, `memories` and `load_s` (building the synthetic weights); the 8B
 * rows add the process's `rss_gb` after the runs and `peak_rss_gb` (the
 * process's high-water mark so far: wasm memories never shrink, so it
 * includes the memory the 0.5B runs left grown). Skipped by --quick.
 *
 * Placement cost (`npm run bench -- model`, not --quick): the 0.5B model at q8
 * twice in one runtime — placed in one memory, and forced across two by a
 * per-memory budget of 60% of its size (the test-only `memoryBytes` option) —
 * with their runs alternated (one, two, one, two…), 512-token prefill and 64
 * decode steps each. The two-memory rows carry `over_one_memory`: their tok/s
 * over the one-memory model's in the same run (target ≥ 0.97: placement costs
 * nothing when a model fits).
 *
 * Both kernel flavors (run.ts): the 0.5B runs alternate run by run between the
 * flavors' models, both loaded; the 8B rows run on the default flavor only
 * (or the one --kernels names): two 8B models' wasm memories do not fit in
 * this machine at once.
 */
import { type Decoder, type ModelConfig, type WeightFormat, WEIGHT_FORMATS, runRequest } from "../../src/ops-entry.js";
import { createSyntheticModel, llama31EightBConfig, qwen25HalfBConfig } from "../../src/testing/index.js";
import { planRunner } from "../../src/model/loader.js";
import { resolveKernelFlavor } from "../../src/runtime/module.js";
import { argmax } from "../../src/engine/sampler.js";
import { measureReadBandwidth } from "../ceilings.js";
import { type Row, type Suite, type SuiteContext, median } from "../harness.js";

const PROMPT = 512;

interface BenchModel {
  name: string;
  config: ModelConfig;
  formats: readonly WeightFormat[];
  prompt: number;
  decodeSteps: number;
  reps: number;
  rss: boolean;
}

export const model: Suite = {
  name: "model",
  bothKernels: true,
  description: "decoder forward on synthetic Qwen2.5-0.5B (every format) and Llama-3.1-8B (q8, q4; placed across wasm memories): prefill and decode tok/s, decode against the bandwidth roofline",
  async run(ctx: SuiteContext): Promise<Row[]> {
    const { quick } = ctx;
    const rows: Row[] = [];
    const half: BenchModel = { name: "qwen2.5-0.5b", config: qwen25HalfBConfig(), formats: WEIGHT_FORMATS, prompt: quick ? 64 : PROMPT, decodeSteps: quick ? 8 : 64, reps: quick ? 1 : 2, rss: false };
    // Both flavors' models alive at once, their runs alternated (ctx.repeat).
    rows.push(...(await runModel(half, ctx, ctx.repeat)));
    if (!quick) {
      rows.push(...(await runPlacementPair(ctx)));
      // The 8B rows run on one flavor per process: the default one (what
      // createRuntime picks here), or the one --kernels names. Two 8B q8
      // models' memories do not fit in this 24 GiB machine at once, and a wasm
      // memory never shrinks, so the other flavor's would stay allocated (a run
      // that tried peaked at 24.2 GB RSS and decoded 4× slower while the kernel
      // reclaimed pages). `npm run bench -- model --kernels baseline` gives the other.
      const eightFlavor = ctx.flavors.length === 1 ? ctx.flavors[0]! : resolveKernelFlavor();
      const eight: BenchModel = { name: "llama-3.1-8b", config: llama31EightBConfig(), formats: ["q8", "q4"] as const, prompt: 32, decodeSteps: 16, reps: 1, rss: true };
      const [eightRows] = await ctx.repeat(() => (ctx.rt.kernels === eightFlavor ? runModel(eight, ctx, runInPlace) : []), 1);
      rows.push(...eightRows!);
    }
    return rows;
  },
};

/** The 0.5B q8 model in one memory and forced across two, alternated run by run. */
async function runPlacementPair({ rt, log, repeat }: SuiteContext): Promise<Row[]> {
  const config = qwen25HalfBConfig();
  const format: WeightFormat = "q8";
  const decodeSteps = 64;
  const base = { config, weights: format, kvDtype: "bf16" as const, numBlocks: Math.ceil((PROMPT + decodeSteps + 1) / 16), maxBatchTokens: PROMPT };
  const one = planRunner(config, format, base, 2);
  const memoryBytes = Math.ceil((one.totalBytes * 0.6) / 4096) * 4096;
  const runners: Decoder[] = [];
  try {
    for (const options of [base, { ...base, memoryBytes }]) runners.push(createSyntheticModel(rt, options));
    const memories = runners.map((r) => r.memories);
    if (memories[0] !== 1 || memories[1] !== 2) throw new Error(`placement pair: expected 1 and 2 memories, got ${memories.join(" and ")}`);
    log(`placement pair: q8 in 1 memory and in 2 (budget ${(memoryBytes / 2 ** 20).toFixed(0)} MiB a memory)`);
    const ids = Array.from({ length: PROMPT }, (_, i) => (i * 2654435761) % config.vocabSize >>> 0);
    const prefills: number[][] = [[], []];
    const decodes: number[][] = [[], []];
    await repeat(() => {
      runners.forEach((runner, k) => {
        runRequest(runner, ids, {
          maxTokens: 1 + decodeSteps,
          maxNumBatchedTokens: PROMPT,
          pick: (logits) => ({ token: argmax(logits), stop: null }),
          onStep: (s) => (s.tokens === PROMPT ? prefills[k]!.push(s.ms) : decodes[k]!.push(s.ms)),
        });
      });
      log(`placement pair run ${prefills[0]!.length}: decode median ${median(decodes[0]!.slice(-decodeSteps)).toFixed(2)} ms (1 memory), ${median(decodes[1]!.slice(-decodeSteps)).toFixed(2)} ms (2)`);
    }, 3);
    const prefillTokS = prefills.map((p) => (PROMPT * 1000) / Math.min(...p));
    const decodeTokS = decodes.map((d) => 1000 / median(d));
    const rows: Row[] = [];
    for (const k of [0, 1]) {
      const common: Row = { model: "qwen2.5-0.5b", weights: format, memories: memories[k]!, load_s: null, kv_dtype: "bf16", weight_mb: runners[k]!.weights.bytesPerToken / 1e6, placement: k === 0 ? "one memory" : "forced across two" };
      rows.push({ ...common, phase: "prefill", tokens: PROMPT, ms: (PROMPT * 1000) / prefillTokS[k]!, tok_s: prefillTokS[k]!, over_one_memory: k === 0 ? null : prefillTokS[1]! / prefillTokS[0]! });
      rows.push({ ...common, phase: "decode", tokens: decodes[k]!.length, ms: 1000 / decodeTokS[k]!, tok_s: decodeTokS[k]!, over_one_memory: k === 0 ? null : decodeTokS[1]! / decodeTokS[0]! });
    }
    return rows;
  } finally {
    for (const r of runners) r.dispose();
  }
}

/** Runs `fn` n times, here and now (no alternation). */
async function runInPlace<T>(fn: () => T | Promise<T>, n: number): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < n; i++) out.push(await fn());
  return out;
}

async function runModel(m: BenchModel, { rt, quick, ceilings, log }: SuiteContext, repeat: SuiteContext["repeat"]): Promise<Row[]> {
  const rows: Row[] = [];
  const { prompt, decodeSteps } = m;
  {
    // Prompt ids drawn from the whole vocabulary, deterministic.
    const ids = Array.from({ length: prompt }, (_, i) => (i * 2654435761) % m.config.vocabSize >>> 0);
    for (const format of m.formats) {
      const t0 = performance.now();
      let runner: Decoder | undefined;
      try {
        runner = createSyntheticModel(rt, { config: m.config, weights: format, kvDtype: "bf16", numBlocks: Math.ceil((prompt + decodeSteps + 1) / 16), maxBatchTokens: prompt });
        const loadS = (performance.now() - t0) / 1000;
        const bytes = runner.weights.bytesPerToken;
        const c = runner.config;
        const params = c.numLayers * ((c.numHeads + 2 * c.numKvHeads) * c.headDim * c.hiddenSize + c.numHeads * c.headDim * c.hiddenSize + 3 * c.intermediateSize * c.hiddenSize);
        const inUse = rt.memoryUsage().reduce((n, u) => n + u.inUse, 0);
        log(`${m.name} ${format}: weights ready in ${loadS.toFixed(1)} s in ${runner.memories} memories (${(bytes / 1e6).toFixed(0)} MB read per decoded token; heaps ${(inUse / 2 ** 30).toFixed(2)} GiB)`);
        const bandwidthBefore = measureReadBandwidth(rt, quick, false).allThreads;
        const prefills: number[] = [];
        const decodeMs: number[] = [];
        const model = runner;
        await repeat(() => {
          const steps: number[] = [];
          runRequest(model, ids, {
            maxTokens: 1 + decodeSteps,
            maxNumBatchedTokens: prompt,
            pick: (logits) => ({ token: argmax(logits), stop: null }),
            onStep: (s) => (s.tokens === prompt ? prefills.push(s.ms) : steps.push(s.ms)),
          });
          decodeMs.push(...steps);
          log(`${format} run ${prefills.length}: prefill ${prefills.at(-1)!.toFixed(0)} ms, decode median ${median(steps).toFixed(2)} ms`);
        }, m.reps);
        const bandwidthAfter = measureReadBandwidth(rt, quick, false).allThreads;
        const readGbps = (bandwidthBefore + bandwidthAfter) / 2;
        log(`${format}: read bandwidth ${bandwidthBefore.toFixed(1)} GB/s before, ${bandwidthAfter.toFixed(1)} after`);
        const prefillMs = Math.min(...prefills);
        const prefillTokS = (prompt * 1000) / prefillMs;
        const gflops = (2 * params * prompt) / (prefillMs * 1e6);
        const rss: Row = m.rss ? { rss_gb: process.memoryUsage().rss / 1e9, peak_rss_gb: (process.resourceUsage().maxRSS * 1024) / 1e9 } : {};
        const common: Row = { model: m.name, weights: format, memories: runner.memories, load_s: loadS, kv_dtype: "bf16", weight_mb: bytes / 1e6, ...rss };
        rows.push({ ...common, phase: "prefill", tokens: prompt, ms: prefillMs, tok_s: prefillTokS, gflops, simd_frac: gflops / ceilings.simd_gflops_all, gbps: null, read_gbps: null, roofline: null, roofline_run_start: null });
        const stepMs = median(decodeMs);
        const tokS = 1000 / stepMs;
        const gbps = (tokS * bytes) / 1e9;
        rows.push({ ...common, phase: "decode", tokens: decodeMs.length, ms: stepMs, tok_s: tokS, gflops: null, simd_frac: null, gbps, read_gbps: readGbps, roofline: gbps / readGbps, roofline_run_start: gbps / ceilings.read_gbps_all });
      } finally {
        runner?.dispose();
      }
    }
  }
  return rows;
}

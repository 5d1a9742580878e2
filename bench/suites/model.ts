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
 */
import { type Decoder, WEIGHT_FORMATS, createSyntheticModel, runRequest } from "../../src/index.js";
import { argmax } from "../../src/engine/sampler.js";
import { measureReadBandwidth } from "../ceilings.js";
import { type Row, type Suite, median } from "../harness.js";

const PROMPT = 512;

export const model: Suite = {
  name: "model",
  bothKernels: true,
  description: "decoder forward on a synthetic Qwen2.5-0.5B: prefill (512 tokens) and decode tok/s per weight format, decode against the bandwidth roofline",
  run({ rt, quick, ceilings, log }): Row[] {
    const rows: Row[] = [];
    const prompt = quick ? 64 : PROMPT;
    const decodeSteps = quick ? 8 : 64;
    // Prompt ids drawn from the whole vocabulary, deterministic.
    const ids = Array.from({ length: prompt }, (_, i) => (i * 2654435761) % 151936 >>> 0);
    for (const format of WEIGHT_FORMATS) {
      const t0 = performance.now();
      let runner: Decoder | undefined;
      try {
        runner = createSyntheticModel(rt, { weights: format, kvDtype: "bf16", numBlocks: Math.ceil((prompt + decodeSteps + 1) / 16), maxBatchTokens: prompt });
        const bytes = runner.weights.bytesPerToken;
        const c = runner.config;
        const params = c.numLayers * ((c.numHeads + 2 * c.numKvHeads) * c.headDim * c.hiddenSize + c.numHeads * c.headDim * c.hiddenSize + 3 * c.intermediateSize * c.hiddenSize);
        log(`${format}: weights ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (${(bytes / 1e6).toFixed(0)} MB read per decoded token; heap ${(rt.heap.inUse / 2 ** 30).toFixed(2)} GiB)`);
        const bandwidthBefore = measureReadBandwidth(rt, quick, false).allThreads;
        const prefills: number[] = [];
        const decodeMs: number[] = [];
        for (let rep = 0; rep < (quick ? 1 : 2); rep++) {
          const steps: number[] = [];
          runRequest(runner, ids, {
            maxTokens: 1 + decodeSteps,
            maxNumBatchedTokens: prompt,
            pick: (logits) => ({ token: argmax(logits), stop: null }),
            onStep: (s) => (s.tokens === prompt ? prefills.push(s.ms) : steps.push(s.ms)),
          });
          decodeMs.push(...steps);
          log(`${format} run ${rep + 1}: prefill ${prefills.at(-1)!.toFixed(0)} ms, decode median ${median(steps).toFixed(2)} ms`);
        }
        const bandwidthAfter = measureReadBandwidth(rt, quick, false).allThreads;
        const readGbps = (bandwidthBefore + bandwidthAfter) / 2;
        log(`${format}: read bandwidth ${bandwidthBefore.toFixed(1)} GB/s before, ${bandwidthAfter.toFixed(1)} after`);
        const prefillMs = Math.min(...prefills);
        const prefillTokS = (prompt * 1000) / prefillMs;
        const gflops = (2 * params * prompt) / (prefillMs * 1e6);
        const common = { weights: format, kv_dtype: "bf16", weight_mb: bytes / 1e6 };
        rows.push({ ...common, phase: "prefill", tokens: prompt, ms: prefillMs, tok_s: prefillTokS, gflops, simd_frac: gflops / ceilings.simd_gflops_all, gbps: null, read_gbps: null, roofline: null, roofline_run_start: null });
        const stepMs = median(decodeMs);
        const tokS = 1000 / stepMs;
        const gbps = (tokS * bytes) / 1e9;
        rows.push({ ...common, phase: "decode", tokens: decodeMs.length, ms: stepMs, tok_s: tokS, gflops: null, simd_frac: null, gbps, read_gbps: readGbps, roofline: gbps / readGbps, roofline_run_start: gbps / ceilings.read_gbps_all });
      } finally {
        runner?.dispose();
      }
    }
    return rows;
  },
};

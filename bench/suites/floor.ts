/**
 * Suite `floor`: the fixed cost of one decode step (issue #11's per-token
 * floor), on models so small that the step is mostly that cost.
 *
 *   tiny     Llama-shaped, hidden 256, 4 layers, 4 heads / 2 KV heads × 64, MLP
 *            1024, vocabulary 32000 (untied head), random weights
 *            (writeTinyModel) converted to a Q8_0 GGUF; kvflash loads that
 *            file (--weights auto: q8 kernels), f16 KV cache (llama.cpp's
 *            default); greedy, as the llama.cpp side.
 *   default  the embedded default model (models/default: hidden 256, 4 layers,
 *            4/2 heads, MLP 704, vocabulary 4096, bf16, tied head) as `npm
 *            start` runs it: bf16 KV, sampled with its generation_config
 *            (temperature 0.3, top-p 0.9, repetition penalty 1.2, seeded).
 *
 * Each model runs on 1 and 2 threads (one runtime each, both alive), through
 * `runRequest` (the loop `kvflash generate` runs: schedule → batch → forward →
 * sample → update) and, for the default model, through `Engine.step()` (what
 * the server's engine worker runs per step). llama.cpp runs the tiny GGUF on
 * 1 and 2 threads through its C API (llamacpp-harness.ts, argmax fed back)
 * when node-llama-cpp and g++ are there; otherwise its rows are left out
 * with a log line.
 *
 * A request is a 16-token prompt and 64 decode steps (16 with --quick); the
 * sides take turns request by request (the order rotating each round, a 1 ms
 * pause between sides so one side's spinning workers are asleep before the
 * next starts), 8 rounds (2 with --quick). Per side, over its decode steps
 * (the prompt's step left out): `median_ms`, `p10_ms`, `p90_ms` of the step
 * time, `tok_s` = 1000 / median; kvflash rows add `fork_joins_per_step`
 * (parallelFor calls that went to the workers). `load_avg`: the 1-minute load
 * average over the run; on this shared 2-core machine compare rows of one
 * run, and read p10 as the nearest to an idle machine.
 */
import { existsSync, mkdirSync, renameSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { Engine } from "../../src/engine/engine.js";
import {
  type LoadedModel,
  type Runtime,
  Sampler,
  SamplingState,
  createRuntime,
  loadModel,
  resolveSamplingParams,
  runRequest,
  samplingDefaults,
} from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";
import type { ResolvedSamplingParams } from "../../src/engine/sampling-params.js";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { writeTinyModel } from "../../src/testing/tiny-model.js";
import { type Row, type Suite, median, quantile } from "../harness.js";
import { BENCH_CACHE, LlamaCppBench, buildLlamaCppHarness } from "../llamacpp-harness.js";

const PROMPT = 16;
const THREADS = [1, 2] as const;

/** One thing being timed: a model on a runtime through one path, or llama.cpp. */
interface Side {
  row: Row;
  /** One request: the decode steps' times (ms) and the fork–joins they made. */
  run(): Promise<{ steps: number[]; forks: number }>;
}

/** The tiny model's GGUF in bench/.cache (written once: a HF directory, then Q8_0). */
export function tinyGguf(log: (line: string) => void): string {
  const dir = join(BENCH_CACHE, "floor");
  const file = join(dir, "tiny-llama-h256-l4-v32000-q8_0.gguf");
  if (existsSync(file)) return file;
  mkdirSync(dir, { recursive: true });
  log(`writing ${file} (random weights, once)…`);
  const hf = writeTinyModel(join(dir, "tiny-llama-hf"), {
    arch: "llama",
    hiddenSize: 256,
    intermediateSize: 1024,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    vocabSize: 32000,
    maxPositionEmbeddings: 1024,
    dtype: "bf16",
    embeddingStd: 0.5,
    tokenizer: { kind: "copy", dir: defaultModelDir() },
  });
  const tmp = `${file}.${process.pid}.tmp`;
  convertModelDirToGguf(hf.dir, tmp, { type: "Q8_0" });
  renameSync(tmp, file);
  return file;
}

/** (i · 2654435761) mod V: the prompt llamacpp/bench.cpp feeds, so both engines see the same ids. */
function promptIds(vocab: number): number[] {
  return Array.from({ length: PROMPT }, (_, i) => ((i * 2654435761) % vocab) >>> 0);
}

/** runRequest with the Sampler deciding each token (as generate() does, without the detokenizer). */
function requestSide(rt: Runtime, model: LoadedModel, params: ResolvedSamplingParams, decode: number, row: Row): Side {
  const runner = model.runner;
  const ids = promptIds(runner.vocabSize);
  const sampler = new Sampler(runner.vocabSize, { runtime: rt }); // as generate() in `kvflash generate`: the wasm passes
  return {
    row,
    run: async () => {
      const state = new SamplingState(params, ids);
      const steps: number[] = [];
      let forks = 0;
      let last = 0;
      runRequest(runner, ids, {
        maxTokens: 1 + decode,
        pick: (logits) => ({ token: sampler.sample(state, logits).token, stop: null }),
        onStep: (s) => {
          const f = rt.forkJoins;
          if (s.tokens === 1) {
            steps.push(s.ms);
            forks += f - last;
          }
          last = f;
        },
      });
      return { steps, forks };
    },
  };
}

/** Engine.step() in a loop, one request at a time: the server's engine worker without its message passing. */
function engineSide(rt: Runtime, model: LoadedModel, params: ResolvedSamplingParams, row: Row): Side {
  const engine = new Engine({ runner: model.runner, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds, maxNumSeqs: 1, enablePrefixCaching: false, runtime: rt });
  const ids = promptIds(model.runner.vocabSize);
  let n = 0;
  return {
    row,
    run: async () => {
      engine.addRequest({ requestId: `floor-${n++}`, promptTokenIds: ids, params });
      const steps: number[] = [];
      let forks = 0;
      for (let i = 0; engine.hasUnfinishedRequests; i++) {
        const f0 = rt.forkJoins;
        const t0 = performance.now();
        engine.step();
        const ms = performance.now() - t0;
        if (i > 0) {
          // Every step after the prompt's: one token each.
          steps.push(ms);
          forks += rt.forkJoins - f0;
        }
      }
      return { steps, forks };
    },
  };
}

const pause = new Int32Array(new SharedArrayBuffer(4));

export const floor: Suite = {
  name: "floor",
  description: "per-token floor: decode step time (median, p10, p90) of a tiny q8 model and the default model, 1 and 2 threads, runRequest and Engine.step, against llama.cpp on the tiny GGUF",
  async run({ rt, quick, log }): Promise<Row[]> {
    const decode = quick ? 16 : 64;
    const rounds = quick ? 2 : 8;
    const file = tinyGguf(log);
    const runtimes: Runtime[] = [];
    const models: LoadedModel[] = [];
    const closers: (() => Promise<void>)[] = [];
    const sides: Side[] = [];
    try {
      for (const threads of THREADS) {
        const r = await createRuntime({ threads, kernels: rt.kernels });
        runtimes.push(r);
        const common = { threads, kernels: r.kernels, prompt_tokens: PROMPT, decode_tokens: decode };
        const tiny = loadModel(r, file, { weights: "auto", kvDtype: "f16", maxModelLen: 1024, progress: false });
        models.push(tiny);
        const greedy = resolveSamplingParams({ temperature: 0, maxTokens: 1 + decode }, tiny.runner.vocabSize);
        sides.push(requestSide(r, tiny, greedy, decode, { model: "tiny-q8", engine: "kvflash", path: "runRequest", ...common, weights: tiny.runner.weights.format, kv: "f16", sampling: "greedy" }));
        const def = loadModel(r, defaultModelDir(), { progress: false });
        models.push(def);
        const sampled = resolveSamplingParams({ maxTokens: 1 + decode, seed: 1, ignoreEos: true }, def.runner.vocabSize, samplingDefaults(def.generation));
        const defRow = { model: "default", engine: "kvflash", ...common, weights: def.runner.weights.format, kv: def.runner.cache.dtype, sampling: "generation_config" };
        sides.push(requestSide(r, def, sampled, decode, { ...defRow, path: "runRequest" }));
        sides.push(engineSide(r, def, sampled, { ...defRow, path: "Engine.step" }));
      }
      try {
        const harness = buildLlamaCppHarness(log);
        for (const threads of THREADS) {
          const cpp = await LlamaCppBench.start(harness, file, { threads, prompt: PROMPT, decode });
          closers.push(() => cpp.close());
          sides.push({
            row: { model: "tiny-q8", engine: "llama.cpp", path: "C API", threads, kernels: `llama.cpp (node-llama-cpp ${harness.version}, flash_attn ${cpp.flashAttn})`, prompt_tokens: PROMPT, decode_tokens: decode, weights: "Q8_0", kv: "f16", sampling: "greedy" },
            run: async () => ({ steps: (await cpp.run()).decodeMs, forks: NaN }),
          });
        }
      } catch (e) {
        log(`llama.cpp rows left out: ${(e as Error).message}`);
      }

      const times: number[][] = sides.map(() => []);
      const forks: number[] = sides.map(() => 0);
      log(`warm-up: one request per side (${sides.length} sides)`);
      for (const s of sides) await s.run();
      const load0 = loadavg()[0]!;
      for (let round = 0; round < rounds; round++) {
        for (let k = 0; k < sides.length; k++) {
          const i = (k + round) % sides.length;
          Atomics.wait(pause, 0, 0, 1);
          const r = await sides[i]!.run();
          times[i]!.push(...r.steps);
          forks[i]! += r.forks;
        }
        log(`round ${round + 1}/${rounds}: ${sides.map((s, i) => `${s.row["model"]}/${s.row["path"]}/${s.row["threads"]}t ${median(times[i]!).toFixed(2)}`).join(", ")} ms`);
      }
      const load = (load0 + loadavg()[0]!) / 2;
      return sides.map((s, i) => {
        const t = times[i]!;
        const m = median(t);
        return { ...s.row, steps: t.length, median_ms: m, p10_ms: quantile(t, 0.1), p90_ms: quantile(t, 0.9), tok_s: 1000 / m, fork_joins_per_step: Number.isNaN(forks[i]) ? null : forks[i]! / t.length, load_avg: load };
      });
    } finally {
      for (const c of closers) await c();
      for (const m of models) m.runner.dispose();
      for (const r of runtimes) await r.dispose();
    }
  },
};

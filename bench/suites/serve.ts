/**
 * Suite `serve`: a `kvflash serve` process serving the synthetic Qwen2.5-0.5B
 * (q8 weights, then f32 for comparison; bench/synthetic-loader.ts) on loopback under closed-loop load
 * (serve-load.ts) at concurrency 1, 4, 16 and 64; aggregate output tok/s,
 * TTFT and inter-token latency percentiles per level, and the speed-up of
 * each level over concurrency 1 (target: ≥ 2.5× at 16).
 *
 * At concurrency 1 and 16 a `constrained: true` row repeats the level with
 * every request under a JSON schema (response_format json_schema, XGrammar
 * masks each step's logits); `constrained_over_free` is its tok/s over the
 * free row's, measured in the same server (target ≥ 0.9). The schema needs
 * more tokens than max_tokens to complete, so every request runs its full
 * length under the mask; a warm-up request compiles the grammar first.
 *
 * `gemm_over_gemv` bounds that speed-up: one decoder layer's projections in
 * the served weight format as a GEMM over c tokens vs c GEMVs
 * (batch-efficiency.ts), measured in this run before the server starts.
 *
 * The server runs in its own process (the engine in its worker, with all the
 * threads), so the load generator's JavaScript does not share a thread with it.
 * Both kernel flavors (run.ts): one server per flavor, both up, each level's
 * load run alternating between them (baseline, relaxed, next level…).
 *
 * Against llama.cpp (issue #30): the Qwen2.5-0.5B-shaped Q8_0 GGUF of the
 * `gguf` suite (qwen-gguf-file.ts, random weights) served by kvflash (q8
 * weights, f16 KV cache, as llama.cpp's default) and decoded by llama.cpp's
 * C API as llama-server's slots do (serve-peer.ts: all prompts in one
 * llama_decode, then one llama_decode of N tokens per step), at concurrency
 * 1, 4 and 16 on the same prompts, alternated run by run (llamacpp-harness.ts
 * `alternate`; 3 runs, 1 with --quick, $KVFLASH_BENCH_RUNS), each run with
 * prompts of its own (the prefix cache would skip a repeat's prefill).
 * Rows `engine: "kvflash"` (every field above, tok/s the median over the
 * runs) carry `kvflash_over_llamacpp` (median over median; targets on x64
 * without AVX-VNNI: ≥ 1.1 at 1, ≥ 2.0 at 16); rows `engine: "llama.cpp"`
 * follow each (their `kernels` names the kvflash flavor they alternated
 * with). Without llama.cpp installed the kvflash rows run alone.
 * `KVFLASH_SERVE_ROWS=llamacpp` runs these rows alone (the synthetic levels
 * take most of a full run).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type WeightFormat } from "../../src/ops-entry.js";
import { layerBatchEfficiency } from "../batch-efficiency.js";
import { type Row, type Suite, type SuiteContext, cpuSummary, int8DotSummary, median, quantile } from "../harness.js";
import { BENCH_CACHE, alternate, benchRuns } from "../llamacpp-harness.js";
import { qwenGgufFile } from "../qwen-gguf-file.js";
import { type LoadResult, randomPrompts, runLoad } from "../serve-load.js";
import { type PeerLoad, type ServePeer, peerLoad, ratioOfMedians, startServePeer } from "../serve-peer.js";
import { writeSyntheticServeDir } from "../synthetic-loader.js";
import { ownChild } from "../child-processes.js";

const CLI = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const SYNTHETIC_LOADER = new URL("../synthetic-loader.js", import.meta.url).href;
const LEVELS = [1, 4, 16, 64];
/** Levels of the comparison with llama.cpp. */
const PEER_LEVELS = [1, 4, 16];
/** Levels that get a constrained row too. */
const CONSTRAINED_LEVELS = [1, 16];
/** A JSON schema no request completes within max_tokens (≥ 48 array items): each runs all its tokens masked. */
const BENCH_SCHEMA = {
  type: "object",
  properties: {
    name: { type: "string" },
    kind: { enum: ["alpha", "beta", "gamma"] },
    values: { type: "array", items: { type: "integer" }, minItems: 48 },
  },
  required: ["name", "kind", "values"],
};
const CONSTRAINED_BODY = { response_format: { type: "json_schema", json_schema: { name: "bench", schema: BENCH_SCHEMA } } };

/** Serve arguments of the benchmarked model. */
export interface ServeTarget {
  label: string;
  /** The weight format the server computes with (for the GEMM-over-GEMV measurement). */
  weights: WeightFormat;
  args: string[];
  model: string;
  /** Token ids for random prompts: [low, high). */
  lowToken: number;
  highToken: number;
}

/** A `kvflash serve` child on `kernels` (its own $KVFLASH_KERNELS: flavors run side by side in one bench process). */
async function startServer(target: ServeTarget, threads: number, kernels: string, log: (line: string) => void): Promise<{ url: string; proc: ChildProcess }> {
  const proc = ownChild(
    spawn(process.execPath, [...process.execArgv, CLI, "serve", "--port", "0", "--threads", String(threads), "--max-num-seqs", "64", ...target.args], {
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, KVFLASH_KERNELS: kernels },
    }),
  );
  let stderr = "";
  proc.stderr.setEncoding("utf8");
  return new Promise((resolve, reject) => {
    proc.stderr.on("data", (chunk: string) => {
      stderr += chunk;
      for (const line of chunk.split("\n")) if (line.trim()) log(`  ${line}`);
      const url = /listening on (http:\/\/\S+)/.exec(stderr)?.[1];
      if (url && /ready in/.test(stderr)) resolve({ url, proc });
    });
    proc.once("exit", (code) => reject(new Error(`the server exited with code ${code}:\n${stderr}`)));
  });
}

/** Prompt and output tokens of every request (and of every llama.cpp sequence). */
function workload(quick: boolean): { promptTokens: number; maxTokens: number } {
  return { promptTokens: quick ? 16 : 32, maxTokens: quick ? 8 : 32 };
}

type Efficiency = Map<number, { us: number; efficiency: number }>;

/** The server's rows: at every level free, at CONSTRAINED_LEVELS constrained too; or, with `peer`, the comparison with llama.cpp. */
async function serveRows(ctx: SuiteContext, target: ServeTarget, efficiency: Efficiency, peer?: { peer: ServePeer | null }): Promise<Row[]> {
  const { quick, log } = ctx;
  const { promptTokens, maxTokens } = workload(quick);
  const { url, proc } = await startServer(target, ctx.rt.threads, ctx.rt.kernels, log);
  try {
    // Warm-up: full-length requests, free and constrained, until V8 has tiered
    // the kernels' and the engine's code up (first-call costs, then Liftoff to
    // TurboFan): with one 2-token request the first measured level, c = 1 and
    // every speed-up's base, still ran partly on unoptimized code.
    await runLoad({ url, model: target.model, concurrency: 1, requests: 4, promptTokens, maxTokens, lowToken: target.lowToken, highToken: target.highToken, seed: 99 });
    if (peer) return await comparedRows(ctx, target, url, efficiency, peer.peer);
    await runLoad({ url, model: target.model, concurrency: 1, requests: 2, promptTokens, maxTokens, lowToken: target.lowToken, highToken: target.highToken, seed: 98, extraBody: CONSTRAINED_BODY });
    return await levelRows(ctx, target, url, efficiency);
  } finally {
    proc.kill("SIGTERM");
    await new Promise((r) => proc.once("exit", r));
  }
}

/** Every level once, free, then CONSTRAINED_LEVELS constrained, on the server at `url`. */
async function levelRows(ctx: SuiteContext, target: ServeTarget, url: string, efficiency: Efficiency): Promise<Row[]> {
  const { quick, log } = ctx;
  const { promptTokens, maxTokens } = workload(quick);
  const levels = quick ? [1, 4, 16] : LEVELS;
  const rows: Row[] = [];
  let base = NaN;
  const free = new Map<number, number>();
  const passes = levels.map((c) => ({ c, constrained: false })).concat(CONSTRAINED_LEVELS.filter((c) => levels.includes(c)).map((c) => ({ c, constrained: true })));
  for (const { c, constrained } of passes) {
    const requests = Math.max(4, c);
    // One load run per level, in turn with the other flavors' servers (ctx.repeat).
    // Prompts are drawn from the seed: the constrained pass must not reuse its
    // free pass's (seed c), whose blocks the server's prefix cache still holds,
    // or it skips the prefill the free pass paid for.
    const seed = constrained ? 1000 + c : c;
    const r = (await ctx.repeat(() => runLoad({
      url, model: target.model, concurrency: c, requests, promptTokens, maxTokens, lowToken: target.lowToken, highToken: target.highToken, seed,
      ...(constrained ? { extraBody: CONSTRAINED_BODY } : {}),
    }), 1))[0]!;
    const ttft = r.requests.map((q) => q.ttftMs);
    const itl = r.requests.flatMap((q) => q.itlMs);
    if (c === 1 && !constrained) base = r.tokS;
    if (!constrained) free.set(c, r.tokS);
    const row: Row = {
      model: target.label,
      weights: target.weights,
      concurrency: c,
      constrained,
      ...(constrained ? { constrained_over_free: r.tokS / free.get(c)! } : {}),
      requests,
      prompt_tokens: promptTokens,
      output_tokens: maxTokens,
      tok_s: r.tokS,
      speedup_vs_c1: r.tokS / base,
      gemm_over_gemv: efficiency.get(c)!.efficiency,
      ttft_p50_ms: quantile(ttft, 0.5),
      ttft_p99_ms: quantile(ttft, 0.99),
      itl_p50_ms: quantile(itl, 0.5),
      itl_p99_ms: quantile(itl, 0.99),
    };
    log(`serve c=${c}${constrained ? " constrained" : ""}: ${r.tokS.toFixed(1)} tok/s${constrained ? ` (${(r.tokS / free.get(c)!).toFixed(2)}× free)` : ""} (${(r.tokS / base).toFixed(2)}× c=1), TTFT p50 ${quantile(ttft, 0.5).toFixed(0)} ms, ITL p50 ${quantile(itl, 0.5).toFixed(0)} ms`);
    rows.push(row);
  }
  return rows;
}

/**
 * PEER_LEVELS on the server at `url` against llama.cpp (`peer`; null: kvflash
 * alone): per level, benchRuns runs of each engine alternated, run i of both
 * on the same prompts; a kvflash row and a llama.cpp row.
 */
async function comparedRows(ctx: SuiteContext, target: ServeTarget, url: string, efficiency: Efficiency, peer: ServePeer | null): Promise<Row[]> {
  const { quick, log } = ctx;
  const { promptTokens, maxTokens } = workload(quick);
  const reps = benchRuns(quick);
  const prompts = (requests: number, seed: number) => randomPrompts({ requests, promptTokens, lowToken: target.lowToken, highToken: target.highToken, seed });
  // llama.cpp's warm-up: every weight read once, its largest batch.
  if (peer) await peer.bench.batch(prompts(Math.max(...PEER_LEVELS), 97), Math.min(4, maxTokens));
  const rows: Row[] = [];
  const base = { kvflash: NaN, llamacpp: NaN };
  for (const c of PEER_LEVELS) {
    const requests = Math.max(4, c);
    const sets = Array.from({ length: reps }, (_, rep) => prompts(requests, c + 100 * rep));
    let k = 0;
    let p = 0;
    const kvflash = async (): Promise<LoadResult> => {
      const set = sets[k++]!;
      return (await ctx.repeat(() => runLoad({ url, model: target.model, concurrency: c, requests, promptTokens, maxTokens, lowToken: target.lowToken, highToken: target.highToken, prompts: set }), 1))[0]!;
    };
    const llamacpp = async (live: ServePeer): Promise<PeerLoad> => {
      const set = sets[p++]!;
      return (await ctx.repeat(() => peerLoad(live, set, c, maxTokens), 1))[0]!;
    };
    const loadBefore = loadavg()[0]!;
    const runs: { kvflash: LoadResult[]; llamacpp: PeerLoad[] } = peer
      ? await alternate(reps, kvflash, () => llamacpp(peer), (rep, kr, cr) => log(`serve c=${c} run ${rep + 1}: kvflash ${kr.tokS.toFixed(1)} tok/s, llama.cpp ${cr.tokS.toFixed(1)} tok/s`))
      : { kvflash: [], llamacpp: [] };
    if (!peer) for (let rep = 0; rep < reps; rep++) runs.kvflash.push(await kvflash());
    const common = { model: target.label, concurrency: c, constrained: false, requests, prompt_tokens: promptTokens, output_tokens: maxTokens, runs: reps, cpu: cpuSummary(), load_avg: (loadBefore + loadavg()[0]!) / 2 };
    const kTokS = median(runs.kvflash.map((r) => r.tokS));
    if (c === 1) base.kvflash = kTokS;
    const ttft = runs.kvflash.flatMap((r) => r.requests.map((q) => q.ttftMs));
    const itl = runs.kvflash.flatMap((r) => r.requests.flatMap((q) => q.itlMs));
    const ratio = peer ? ratioOfMedians(runs.kvflash.map((r) => r.tokS), runs.llamacpp.map((r) => r.tokS)) : null;
    rows.push({
      engine: "kvflash",
      ...common,
      weights: target.weights,
      int8_dot: int8DotSummary(ctx.rt),
      tok_s: kTokS,
      speedup_vs_c1: kTokS / base.kvflash,
      kvflash_over_llamacpp: ratio,
      gemm_over_gemv: efficiency.get(c)!.efficiency,
      ttft_p50_ms: quantile(ttft, 0.5),
      ttft_p99_ms: quantile(ttft, 0.99),
      itl_p50_ms: quantile(itl, 0.5),
      itl_p99_ms: quantile(itl, 0.99),
    });
    if (!peer) {
      log(`serve ${target.label} c=${c}: kvflash ${kTokS.toFixed(1)} tok/s (llama.cpp not installed)`);
      continue;
    }
    const cTokS = median(runs.llamacpp.map((r) => r.tokS));
    if (c === 1) base.llamacpp = cTokS;
    rows.push({
      engine: "llama.cpp",
      ...common,
      weights: peer.label,
      tok_s: cTokS,
      speedup_vs_c1: cTokS / base.llamacpp,
      kvflash_over_llamacpp: null,
      prefill_ms_p50: median(runs.llamacpp.flatMap((r) => r.prefillMs)),
      step_ms_p50: median(runs.llamacpp.flatMap((r) => r.stepMs)),
    });
    log(`serve ${target.label} c=${c}: kvflash ${kTokS.toFixed(1)} tok/s, llama.cpp ${cTokS.toFixed(1)} tok/s: kvflash_over_llamacpp ${ratio!.toFixed(2)}`);
  }
  return rows;
}

export const serve: Suite = {
  name: "serve",
  bothKernels: true,
  description: "kvflash serve of the synthetic Qwen2.5-0.5B (q8 weights, then f32) under closed-loop streaming load at concurrency 1, 4, 16, 64: tok/s, TTFT, ITL; then a Q8_0 GGUF against llama.cpp's batched decode at 1, 4, 16",
  async run(ctx) {
    const { quick, log } = ctx;
    const levels = quick ? [1, 4, 16] : LEVELS;
    const efficiency = async (weights: WeightFormat): Promise<Efficiency> => {
      log(`measuring one layer's ${weights} projections as GEMV and GEMM…`);
      return layerBatchEfficiency(ctx, weights, levels);
    };
    const rows: Row[] = [];
    const only = process.env["KVFLASH_SERVE_ROWS"];
    if (only !== undefined && only !== "llamacpp") throw new Error(`KVFLASH_SERVE_ROWS: unknown value ${JSON.stringify(only)}; known: llamacpp`);
    const q8 = await efficiency("q8");
    if (only === undefined) {
      const dir = mkdtempSync(join(tmpdir(), "kvflash-serve-bench-"));
      try {
        writeSyntheticServeDir(dir);
        rows.push(...(await serveRows(ctx, syntheticQwenTarget(dir, "q8"), q8)));
        // f32 weights too (not in --quick): their GEMV is bandwidth-bound and their GEMM
        // reuses each load ~3×, so they show what the engine's batching gives when the
        // kernels' batching bound (gemm_over_gemv) is high.
        if (!quick) rows.push(...(await serveRows(ctx, syntheticQwenTarget(dir, "f32"), await efficiency("f32"))));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    // Against llama.cpp on one GGUF file: the same shapes and weight format as the
    // synthetic q8 model, so its gemm_over_gemv holds here too.
    const file = qwenGgufFile(BENCH_CACHE, "Q8_0", log);
    const { promptTokens, maxTokens } = workload(quick);
    const peer = await startServePeer(file, { threads: ctx.rt.threads, seqs: Math.max(...PEER_LEVELS), prompt: promptTokens, output: maxTokens }, log);
    try {
      rows.push(...(await serveRows(ctx, ggufTarget(file), q8, { peer })));
    } finally {
      await peer?.bench.close();
    }
    return rows;
  },
};

/** The GGUF file served as it is (its Q8_0 as q8 weights, llama.cpp's f16 KV cache), 1024 blocks of 16 tokens. */
function ggufTarget(file: string): ServeTarget {
  const model = basename(file, ".gguf");
  return {
    label: model,
    weights: "q8",
    args: ["--model", file, "--served-model-name", model, "--weights", "q8", "--kv-dtype", "f16", "--num-gpu-blocks-override", "1024"],
    model,
    lowToken: 1000,
    highToken: 30000,
  };
}

/**
 * The synthetic Qwen2.5-0.5B (bench/synthetic-loader.ts) with `weights` and
 * a bf16 KV cache of 1024 blocks (16 384 tokens: every level's sequences fit,
 * so no level measures preemption).
 */
function syntheticQwenTarget(dir: string, weights: WeightFormat): ServeTarget {
  const model = "qwen2.5-0.5b-synthetic";
  return {
    label: model,
    weights,
    args: ["--model", dir, "--served-model-name", model, "--loader", SYNTHETIC_LOADER, "--weights", weights, "--kv-dtype", "bf16", "--num-gpu-blocks-override", "1024"],
    model,
    lowToken: 1000,
    highToken: 30000,
  };
}

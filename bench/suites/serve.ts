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
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type WeightFormat } from "../../src/ops-entry.js";
import { layerBatchEfficiency } from "../batch-efficiency.js";
import { type Row, type Suite, type SuiteContext, quantile } from "../harness.js";
import { runLoad } from "../serve-load.js";
import { writeSyntheticServeDir } from "../synthetic-loader.js";

const CLI = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const SYNTHETIC_LOADER = new URL("../synthetic-loader.js", import.meta.url).href;
const LEVELS = [1, 4, 16, 64];
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
  const proc = spawn(process.execPath, [...process.execArgv, CLI, "serve", "--port", "0", "--threads", String(threads), "--max-num-seqs", "64", ...target.args], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, KVFLASH_KERNELS: kernels },
  });
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

export async function serveRows(ctx: SuiteContext, target: ServeTarget): Promise<Row[]> {
  const { quick, log } = ctx;
  const promptTokens = quick ? 16 : 32;
  const maxTokens = quick ? 8 : 32;
  const levels = quick ? [1, 4, 16] : LEVELS;
  log(`measuring one layer's ${target.weights} projections as GEMV and GEMM…`);
  const efficiency = await layerBatchEfficiency(ctx, target.weights, levels);
  const { url, proc } = await startServer(target, ctx.rt.threads, ctx.rt.kernels, log);
  const rows: Row[] = [];
  try {
    // Warm-up: full-length requests, free and constrained, until V8 has tiered
    // the kernels' and the engine's code up (first-call costs, then Liftoff to
    // TurboFan): with one 2-token request the first measured level, c = 1 and
    // every speed-up's base, still ran partly on unoptimized code.
    await runLoad({ url, model: target.model, concurrency: 1, requests: 4, promptTokens, maxTokens, lowToken: target.lowToken, highToken: target.highToken, seed: 99 });
    await runLoad({ url, model: target.model, concurrency: 1, requests: 2, promptTokens, maxTokens, lowToken: target.lowToken, highToken: target.highToken, seed: 98, extraBody: CONSTRAINED_BODY });
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
  } finally {
    proc.kill("SIGTERM");
    await new Promise((r) => proc.once("exit", r));
  }
  return rows;
}

export const serve: Suite = {
  name: "serve",
  bothKernels: true,
  description: "kvflash serve of the synthetic Qwen2.5-0.5B (q8 weights, then f32) under closed-loop streaming load at concurrency 1, 4, 16, 64: tok/s, TTFT, ITL",
  async run(ctx) {
    const dir = mkdtempSync(join(tmpdir(), "kvflash-serve-bench-"));
    try {
      writeSyntheticServeDir(dir);
      const rows = await serveRows(ctx, syntheticQwenTarget(dir, "q8"));
      // f32 weights too (not in --quick): their GEMV is bandwidth-bound and their GEMM
      // reuses each load ~3×, so they show what the engine's batching gives when the
      // kernels' batching bound (gemm_over_gemv) is high.
      if (!ctx.quick) rows.push(...(await serveRows(ctx, syntheticQwenTarget(dir, "f32"))));
      return rows;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

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

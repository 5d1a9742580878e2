/**
 * llama.cpp as a benchmark baseline, timed through its C API: builds
 * bench/llamacpp/bench.cpp with the machine's g++ against the libllama that
 * @node-llama-cpp/linux-<arch> ships and the headers of the same llama.cpp
 * commit (node-llama-cpp carries its sources as a git bundle), caches the
 * binary under bench/.cache/llamacpp/<version>/, and runs it as a child
 * process that answers each "run" (one sequence: the gguf suite) or "batch"
 * (N sequences decoded together: the serve suite) with one JSON line of
 * timings.
 *
 * Needs node-llama-cpp installed (`npm run llamacpp:install`), g++ and git;
 * says which one is missing otherwise.
 */
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { argmax } from "../src/engine/sampler.js";
import { ArgumentError, show } from "../src/errors.js";
import { type ModelRunner, runRequest } from "../src/ops-entry.js";
import { findLlamaCpp } from "../src/testing/llamacpp.js";
import { median } from "./harness.js";
import { ownChild } from "./child-processes.js";

/** bench/.cache at the repository root (gitignored): generated model files and the built harness. */
export const BENCH_CACHE = fileURLToPath(new URL("../../bench/.cache/", import.meta.url));
const SOURCE = fileURLToPath(new URL("../../bench/llamacpp/bench.cpp", import.meta.url));

function run(cmd: string, args: readonly string[], what: string): string {
  const r = spawnSync(cmd, args, { encoding: "utf8" });
  if (r.error) throw new Error(`${what}: cannot run ${cmd} (${(r.error as NodeJS.ErrnoException).code ?? r.error.message}); the gguf benchmark needs ${cmd} on PATH`);
  if (r.status !== 0) throw new Error(`${what}: ${cmd} ${args.join(" ")} exited with ${r.status}:\n${r.stderr}`);
  return r.stdout;
}

/** One shared library in `dir` whose name matches, for `-l:NAME`. */
function library(dir: string, re: RegExp): string {
  const name = readdirSync(dir).find((f) => re.test(f));
  if (name === undefined) throw new Error(`no library matching ${re} in ${dir}`);
  return name;
}

export interface LlamaCppHarness {
  binary: string;
  libDir: string;
  /** Where bench.cpp loads its backends from (ggml_backend_load_all_from_path): libDir, or a folder of one CPU variant ($KVFLASH_LLAMACPP_CPU_BACKEND). */
  backendDir?: string;
  /** node-llama-cpp's version (its llama.cpp build), and the CPU variant when one is forced ("3.22.1, ggml-cpu haswell"). */
  version: string;
}

/**
 * $KVFLASH_LLAMACPP_CPU_BACKEND: one of the CPU backend variants that
 * node-llama-cpp ships (libggml-cpu-<name>.so: haswell, alderlake, zen4, …),
 * the only one the harness loads; unset, ggml picks the best the CPU runs.
 * "haswell" (AVX2 + FMA, no VNNI) is llama.cpp as it runs on x64 without
 * AVX-VNNI, so that a machine with it can measure issue #30's condition
 * with kvflash under `node --no-enable-avx-vnni --no-enable-avx-vnni-int8`.
 */
export const LLAMACPP_CPU_BACKEND_ENV = "KVFLASH_LLAMACPP_CPU_BACKEND";

/**
 * The harness with its backends limited to CPU variant `name`: a folder under
 * bench/.cache/llamacpp holding a link to libggml-cpu-<name>.so alone (ggml
 * loads every libggml-cpu-*.so of the folder it is given and keeps the best
 * this CPU runs). The other libraries still come from libDir (the binary's rpath).
 */
export function withCpuBackend(h: LlamaCppHarness, name: string, cacheRoot = join(BENCH_CACHE, "llamacpp")): LlamaCppHarness {
  const file = `libggml-cpu-${name}.so`;
  if (!existsSync(join(h.libDir, file))) {
    const have = readdirSync(h.libDir).flatMap((f) => /^libggml-cpu-(.+)\.so$/.exec(f)?.[1] ?? []);
    throw new ArgumentError(LLAMACPP_CPU_BACKEND_ENV, `names no CPU backend of ${h.libDir}: got ${show(name)}, which has ${have.join(", ") || "none"}`);
  }
  const dir = join(cacheRoot, `${h.version}-cpu-${name}`);
  mkdirSync(dir, { recursive: true });
  const link = join(dir, file);
  rmSync(link, { force: true });
  symlinkSync(join(h.libDir, file), link);
  return { ...h, backendDir: dir, version: `${h.version}, ggml-cpu ${name}` };
}

/**
 * Where the Vulkan build of the harness comes from:
 *   - $KVFLASH_LLAMACPP_VULKAN: a folder holding a `bench` built here against
 *     @node-llama-cpp/linux-x64-vulkan and that package's libraries (how a
 *     lent GPU machine, which has no g++ or npm registry, gets it:
 *     tools/gpu-device/pack.sh), used as it is;
 *   - else the package installed beside node-llama-cpp
 *     (`bash .ci/llamacpp.sh vulkan`), built here.
 */
export const LLAMACPP_VULKAN_ENV = "KVFLASH_LLAMACPP_VULKAN";

/**
 * Builds the harness if its cached binary is missing or older than bench.cpp:
 * against the CPU package, or with variant "vulkan" against
 * @node-llama-cpp/linux-x64-vulkan (its libllama.vulkan.*.so and
 * libggml-vulkan.so; the CPU backends ship beside them).
 */
export function buildLlamaCppHarness(log: (line: string) => void, variant: "cpu" | "vulkan" = "cpu"): LlamaCppHarness {
  const built = buildHarness(log, variant);
  const cpu = process.env[LLAMACPP_CPU_BACKEND_ENV];
  return variant === "cpu" && cpu ? withCpuBackend(built, cpu) : built;
}

function buildHarness(log: (line: string) => void, variant: "cpu" | "vulkan"): LlamaCppHarness {
  const found = findLlamaCpp();
  if (variant === "vulkan") {
    const given = process.env[LLAMACPP_VULKAN_ENV];
    if (given) {
      const binary = join(given, "bench");
      if (!existsSync(binary)) throw new Error(`${LLAMACPP_VULKAN_ENV}=${given} has no bench binary (tools/gpu-device/pack.sh builds one)`);
      const stamp = join(given, "version");
      return { binary, libDir: given, version: `${existsSync(stamp) ? readFileSync(stamp, "utf8").trim() : "unknown"} vulkan` };
    }
  }
  if ("missing" in found) throw new Error(`the benchmark times llama.cpp, but ${found.missing}`);
  const libDir = variant === "cpu" ? found.libDir : join(found.modules, "@node-llama-cpp", "linux-x64-vulkan", "bins", "linux-x64-vulkan");
  if (!existsSync(libDir)) throw new Error(`the Vulkan peer needs @node-llama-cpp/linux-x64-vulkan in ${found.modules}: bash .ci/llamacpp.sh vulkan`);
  const dir = join(BENCH_CACHE, "llamacpp", variant === "cpu" ? found.version : `${found.version}-vulkan`);
  const version = variant === "cpu" ? found.version : `${found.version} vulkan`;
  const binary = join(dir, "bench");
  if (existsSync(binary) && statSync(binary).mtimeMs >= statSync(SOURCE).mtimeMs) return { binary, libDir, version };
  mkdirSync(dir, { recursive: true });
  const headers = join(BENCH_CACHE, "llamacpp", found.version, "src");
  if (!existsSync(join(headers, "include", "llama.h"))) {
    log(`llama.cpp: extracting the headers of node-llama-cpp ${found.version}'s llama.cpp from ${found.sourceBundle}`);
    const clone = join(dir, "clone");
    rmSync(clone, { recursive: true, force: true });
    run("git", ["clone", "--quiet", "--no-checkout", found.sourceBundle, clone], "llama.cpp headers");
    const tar = join(dir, "headers.tar");
    run("git", ["-C", clone, "archive", "--format=tar", "-o", tar, "HEAD", "include", "ggml/include"], "llama.cpp headers");
    mkdirSync(headers, { recursive: true });
    run("tar", ["-xf", tar, "-C", headers], "llama.cpp headers");
    rmSync(clone, { recursive: true, force: true });
    rmSync(tar, { force: true });
  }
  log(`llama.cpp: building ${binary} with g++`);
  const libs = [/^libllama(\.vulkan)?(\.v[\d.]+)?\.so$/, /^libggml(\.vulkan)?(\.v[\d.]+)?\.so$/, /^libggml-base\.so$/].map((re) => `-l:${library(libDir, re)}`);
  // The Vulkan build also finds its libraries beside the binary ($ORIGIN), so that a copy of the folder runs elsewhere.
  run("g++", ["-O2", "-std=c++17", "-I", join(headers, "include"), "-I", join(headers, "ggml", "include"), SOURCE, "-o", binary, "-L", libDir, ...libs, `-Wl,-rpath,${libDir}:$ORIGIN`], "building the llama.cpp harness");
  return { binary, libDir, version };
}

/** The x86 dot instructions' features among a CPU backend's (LlamaCppBench.cpuFeatures): what its q8 and K-quant dots run on, for row labels. */
const DOT_FEATURES = ["AVX2", "AVX_VNNI", "AVX512", "AVX512_VNNI", "AMX_INT8", "NEON", "DOTPROD", "SVE", "MATMUL_INT8"];

/** The label of the llama.cpp rows: "native (node-llama-cpp 3.22.1, AVX2 AVX512 AVX512_VNNI, flash_attn auto)". */
export function llamaCppLabel(harness: Pick<LlamaCppHarness, "version">, bench: Pick<LlamaCppBench, "cpuFeatures" | "gpu" | "flashAttn">): string {
  const have = new Set(bench.cpuFeatures.split(" "));
  const dots = DOT_FEATURES.filter((f) => have.has(f)).join(" ");
  return `native (node-llama-cpp ${harness.version}${dots ? `, ${dots}` : ""}${bench.gpu ? `, ${bench.gpu}` : ""}, flash_attn ${bench.flashAttn})`;
}

export interface LlamaCppRun {
  prefillMs: number;
  decodeMs: number[];
}

/** One batch of sequences decoded together (bench.cpp's "batch" line). */
export interface LlamaCppBatchRun extends LlamaCppRun {
  /** The whole batch: prefill, every step and argmax. */
  wallMs: number;
  /** Output tokens of all sequences (N · D). */
  outputTokens: number;
}

/** bench.cpp's answer to a "batch" line, checked: the field names and types it prints (header of bench.cpp). */
export function parseBatchRun(line: string): LlamaCppBatchRun {
  const r = JSON.parse(line) as Record<string, unknown>;
  const num = (k: string): number => {
    const v = r[k];
    if (typeof v !== "number" || !Number.isFinite(v)) throw new Error(`the llama.cpp harness answered a batch without a finite "${k}": ${line}`);
    return v;
  };
  const steps = r["decode_ms"];
  if (!Array.isArray(steps) || !steps.every((x) => typeof x === "number")) throw new Error(`the llama.cpp harness answered a batch without "decode_ms" [numbers]: ${line}`);
  return { wallMs: num("wall_ms"), prefillMs: num("prefill_ms"), decodeMs: steps as number[], outputTokens: num("output_tokens") };
}

/** A started harness process with a model loaded: `run()` times one prefill + decode, `close()` ends it. */
export class LlamaCppBench {
  #child: ChildProcessWithoutNullStreams;
  #lines: AsyncIterator<string>;
  #stderr = "";
  readonly flashAttn: string;
  /** The first GPU device llama.cpp loaded ("Vulkan0: NVIDIA H100 …"), "" when none. */
  readonly gpu: string;
  /** The features the loaded CPU backend was built for ("AVX2 FMA …"; bench.cpp), "" from a harness built before it reported them. */
  readonly cpuFeatures: string;

  private constructor(child: ChildProcessWithoutNullStreams, lines: AsyncIterator<string>, flashAttn: string, gpu: string, cpuFeatures: string) {
    this.#child = child;
    this.#lines = lines;
    this.flashAttn = flashAttn;
    this.gpu = gpu;
    this.cpuFeatures = cpuFeatures;
    child.stderr.on("data", (d: Buffer) => (this.#stderr += d.toString()));
  }

  /**
   * `gpuLayers` (default 0): layers offloaded to the first GPU backend in the harness's libDir (the Vulkan peer: 999, all);
   * `seqs` (default 1): sequences the context holds, the most a `batch()` decodes together.
   */
  static async start(harness: LlamaCppHarness, model: string, o: { threads: number; prompt: number; decode: number; gpuLayers?: number; seqs?: number }): Promise<LlamaCppBench> {
    // SEQS only when asked for: a harness built before it (a packed Vulkan one) takes six or seven arguments.
    const seqs = o.seqs === undefined ? [] : [String(o.seqs)];
    const child = ownChild(spawn(harness.binary, [model, harness.backendDir ?? harness.libDir, String(o.threads), String(o.prompt), String(o.decode), String(o.gpuLayers ?? 0), ...seqs], { stdio: ["pipe", "pipe", "pipe"] }));
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const first = await lines.next();
    if (first.done) throw new Error(`the llama.cpp harness exited before loading ${model}:\n${stderr}`);
    const ready = JSON.parse(first.value) as { ready: boolean; flash_attn: string; gpu?: string; cpu?: string };
    return new LlamaCppBench(child, lines, ready.flash_attn, ready.gpu ?? "", ready.cpu ?? "");
  }

  /** One timed run: the full prompt and decode, or a shorter one (a warm-up). */
  async run(size?: { prompt: number; decode: number }): Promise<LlamaCppRun> {
    this.#child.stdin.write(size ? `run ${size.prompt} ${size.decode}\n` : "run\n");
    const line = await this.#lines.next();
    if (line.done) throw new Error(`the llama.cpp harness exited mid-run:\n${this.#stderr}`);
    const r = JSON.parse(line.value) as { prefill_ms: number; decode_ms: number[] };
    return { prefillMs: r.prefill_ms, decodeMs: r.decode_ms };
  }

  /**
   * One timed batch: `prompts` (N sequences of P token ids each, N ≤ seqs)
   * prefilled in one llama_decode, then `outputTokens` − 1 steps of one
   * llama_decode for all N, greedy; `outputTokens` a sequence (≤ decode).
   */
  async batch(prompts: readonly (readonly number[])[], outputTokens: number): Promise<LlamaCppBatchRun> {
    const p = prompts[0]?.length ?? 0;
    if (prompts.some((q) => q.length !== p)) throw new ArgumentError("prompts", `must all have the same length, got ${show(prompts.map((q) => q.length))}`);
    this.#child.stdin.write(`batch ${prompts.length} ${p} ${outputTokens} ${prompts.map((q) => q.join(" ")).join(" ")}\n`);
    const line = await this.#lines.next();
    if (line.done) throw new Error(`the llama.cpp harness exited mid-batch:\n${this.#stderr}`);
    return parseBatchRun(line.value);
  }

  async close(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.#child.once("exit", () => resolve()));
    this.#child.stdin.end("quit\n");
    await exited;
  }
}

/** Milliseconds of a run's decode steps in all. */
export function decodeMs(run: LlamaCppRun): number {
  return run.decodeMs.reduce((a, b) => a + b, 0);
}

/**
 * kvflash's side of a run, timed as the harness times llama.cpp's: the first
 * `size.prompt` of `ids` in one step, then `size.decode` steps feeding back the
 * argmax, through runRequest (the `kvflash generate` loop) on `runner`.
 */
export async function kvflashRun(runner: ModelRunner, ids: readonly number[], size: { prompt: number; decode: number }, maxNumBatchedTokens: number): Promise<LlamaCppRun> {
  const out: LlamaCppRun = { prefillMs: NaN, decodeMs: [] };
  await runRequest(runner, ids.slice(0, size.prompt), {
    maxTokens: 1 + size.decode,
    maxNumBatchedTokens,
    pick: (logits) => ({ token: argmax(logits), stop: null }),
    onStep: (st) => (st.tokens === size.prompt ? (out.prefillMs = st.ms) : out.decodeMs.push(st.ms)),
  });
  return out;
}

/** Prefill and decode tok/s: medians over runs. */
export interface RunRates {
  prefill: number;
  decode: number;
}

/**
 * `reps` runs of each engine, alternated run by run with the order flipping
 * (kvflash first on even runs), so both see the same machine; `each` sees
 * every pair. Returns every run of each, in order.
 */
export async function alternate<K, C>(reps: number, kvflash: () => Promise<K>, cpp: () => Promise<C>, each: (rep: number, k: K, c: C) => void): Promise<{ kvflash: K[]; llamacpp: C[] }> {
  const runs: { kvflash: K[]; llamacpp: C[] } = { kvflash: [], llamacpp: [] };
  for (let rep = 0; rep < reps; rep++) {
    if (rep % 2 === 0) runs.kvflash.push(await kvflash());
    runs.llamacpp.push(await cpp());
    if (rep % 2 === 1) runs.kvflash.push(await kvflash());
    each(rep, runs.kvflash.at(-1)!, runs.llamacpp.at(-1)!);
  }
  return runs;
}

/**
 * `reps` full prefill + decode runs of each engine, alternated (`alternate`).
 * The rates are medians: prompt / prefill time and decode steps / their total time.
 */
export async function alternateRuns(kvflash: () => Promise<LlamaCppRun>, cpp: LlamaCppBench, o: { reps: number; prompt: number; decode: number }, each: (rep: number, k: LlamaCppRun, c: LlamaCppRun) => void): Promise<{ kvflash: RunRates; llamacpp: RunRates }> {
  const runs = await alternate(o.reps, kvflash, () => cpp.run(), each);
  const rate = (rs: LlamaCppRun[]): RunRates => ({ prefill: median(rs.map((x) => (o.prompt * 1000) / x.prefillMs)), decode: median(rs.map((x) => (o.decode * 1000) / decodeMs(x))) });
  return { kvflash: rate(runs.kvflash), llamacpp: rate(runs.llamacpp) };
}

/** Timed runs per engine and file: 3, 1 with --quick, or $KVFLASH_BENCH_RUNS (a loaded machine: llama.cpp's runs there take minutes). */
export function benchRuns(quick: boolean): number {
  const env = process.env["KVFLASH_BENCH_RUNS"];
  if (env === undefined || env === "") return quick ? 1 : 3;
  const n = Number(env);
  if (!Number.isInteger(n) || n < 1) throw new ArgumentError("KVFLASH_BENCH_RUNS", `must be an integer ≥ 1, got ${show(env)}`);
  return n;
}

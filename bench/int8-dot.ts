/**
 * The relaxed q8 kernels' int8-dot modes against each other and against the
 * baseline kernels, in one process, alternated call by call (this machine is
 * shared: only ratios measured in turns hold). Up to four runtimes over the
 * same q8 weights: baseline (SIMD128), relaxed "i16" (the baseline's int16
 * dot inside the relaxed module: its default on x64 without AVX-VNNI),
 * relaxed "i7" (the portable relaxed dot, |w| and the sign on the codes) and
 * relaxed "u8" (AVX-VNNI's unsigned operand, where probed).
 *
 *   linear   one decoder layer's four q8 projections at Qwen2.5-0.5B's shapes
 *            (qkv, o, gate_up, down) for T tokens: GEMV at T = 1, GEMM above.
 *   prefill  a synthetic Qwen2.5-0.5B-shaped q8 model (createSyntheticModel),
 *            one prefill step of --prompt tokens through runRequest.
 *
 * Each cell: the median time per mode over the rounds, and the median of the
 * per-round ratios (each relaxed mode / baseline, u8 / i7): a round runs every mode once, in
 * turn, so load that comes and goes hits them alike.
 *
 *   node dist/bench/int8-dot.js [--threads N] [--tokens 1,64,256] [--rounds R] [--prompt P] [--prefill-rounds R] [--out FILE]
 */
import { writeFileSync } from "node:fs";
import { type Decoder, type Runtime, type Tensor, type Weight, createRuntime, createWeight, linear, runRequest } from "../src/ops-entry.js";
import { createSyntheticModel, qwen25HalfBConfig } from "../src/testing/index.js";
import { argmax } from "../src/engine/sampler.js";
import { kernelFlavorAvailable } from "../src/runtime/module.js";
import { machineInfo, median } from "./harness.js";

const HIDDEN = 896;
const INTERMEDIATE = 4864;
const LAYER: [string, number, number][] = [
  ["qkv_proj", (14 + 2 * 2) * 64, HIDDEN],
  ["o_proj", HIDDEN, 14 * 64],
  ["gate_up_proj", 2 * INTERMEDIATE, HIDDEN],
  ["down_proj", HIDDEN, INTERMEDIATE],
];

interface Mode {
  name: string;
  rt: Runtime;
}

function parse(argv: string[]): { threads: number; tokens: number[]; rounds: number; prompt: number; prefillRounds: number; out?: string } {
  const a = { threads: 1, tokens: [1, 64, 256], rounds: 7, prompt: 512, prefillRounds: 3, out: undefined as string | undefined };
  for (let i = 0; i < argv.length; i++) {
    const v = argv[i + 1] ?? "";
    if (argv[i] === "--threads") a.threads = Number(v);
    else if (argv[i] === "--tokens") a.tokens = v.split(",").map(Number);
    else if (argv[i] === "--rounds") a.rounds = Number(v);
    else if (argv[i] === "--prompt") a.prompt = Number(v);
    else if (argv[i] === "--prefill-rounds") a.prefillRounds = Number(v);
    else if (argv[i] === "--out") a.out = v;
    else throw new Error(`unknown option ${argv[i]}`);
    i++;
  }
  return a;
}

/** A deterministic f32 tensor of values in ±0.06. */
function filled(rt: Runtime, shape: [number, number], seed: number): Tensor {
  const t = rt.tensor("f32", shape, "bench int8-dot");
  const d = t.data() as Float32Array;
  let s = seed >>> 0;
  for (let i = 0; i < d.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    d[i] = ((s >>> 8) / 2 ** 24 - 0.5) * 0.12;
  }
  return t;
}

/** Runs every mode's fn once per round, in turn; returns each mode's times (ms). */
function alternate(modes: Mode[], rounds: number, fn: (m: Mode) => void): number[][] {
  const times = modes.map(() => [] as number[]);
  for (let r = 0; r < 3; r++) modes.forEach((m) => fn(m)); // warm-up: V8 tiers wasm up between calls (no OSR)
  for (let r = 0; r < rounds; r++) {
    modes.forEach((m, i) => {
      const t0 = performance.now();
      fn(m);
      times[i]!.push(performance.now() - t0);
    });
  }
  return times;
}

function ratios(times: number[][], num: number, den: number): number {
  return median(times[den]!.map((t, r) => t / times[num]![r]!));
}

async function main(): Promise<void> {
  const args = parse(process.argv.slice(2));
  const modes: Mode[] = [{ name: "baseline", rt: await createRuntime({ threads: args.threads, kernels: "baseline" }) }];
  if (kernelFlavorAvailable("relaxed")) {
    modes.push({ name: "relaxed-i16", rt: await createRuntime({ threads: args.threads, kernels: "relaxed", int8Dot: "i16" }) });
    modes.push({ name: "relaxed-i7", rt: await createRuntime({ threads: args.threads, kernels: "relaxed", int8Dot: "i7" }) });
    const auto = await createRuntime({ threads: args.threads, kernels: "relaxed" });
    if (auto.int8Dot === "u8") modes.push({ name: "relaxed-u8", rt: auto });
    else await auto.dispose();
  }
  const names = modes.map((m) => m.name);
  const last = modes.length - 1;
  process.stderr.write(`int8-dot bench: ${names.join(", ")}; ${args.threads} thread(s), Node ${process.version}\n`);
  const rows: Record<string, number | string>[] = [];
  const row = (what: string, tokens: number, times: number[][]): void => {
    const r: Record<string, number | string> = { what, tokens };
    modes.forEach((m, i) => (r[`${m.name}_ms`] = median(times[i]!)));
    // "relaxed-<mode>_over_baseline" per relaxed mode; "i7_over_baseline" and
    // "u8_over_i7" as in the JSON of earlier runs.
    modes.forEach((m, i) => {
      if (i > 0) r[`${m.name}_over_baseline`] = ratios(times, i, 0);
    });
    if (names.includes("relaxed-i7")) r["i7_over_baseline"] = ratios(times, names.indexOf("relaxed-i7"), 0);
    if (names.includes("relaxed-u8")) r["u8_over_i7"] = ratios(times, names.indexOf("relaxed-u8"), names.indexOf("relaxed-i7"));
    rows.push(r);
    process.stdout.write(`${JSON.stringify(r)}\n`);
  };

  // linear: one layer's four q8 projections.
  const weights: Weight[][] = modes.map((m) =>
    LAYER.map(([, rows, cols], k) => {
      const src = filled(m.rt, [rows, cols], 17 + k);
      const w = createWeight(m.rt, { source: src, format: "q8" });
      m.rt.free(src);
      return w;
    }),
  );
  for (const T of args.tokens) {
    const xs = modes.map((m) => LAYER.map(([, , cols], k) => filled(m.rt, [T, cols], 91 + k)));
    const outs = modes.map((m) => LAYER.map(([, rows]) => m.rt.tensor("f32", [T, rows], "bench out")));
    const times = alternate(modes, args.rounds, (m) => {
      const i = modes.indexOf(m);
      LAYER.forEach((_, k) => linear(m.rt, { x: xs[i]![k]!, weight: weights[i]![k]!, out: outs[i]![k]! }));
    });
    row("layer q8 linear", T, times);
    modes.forEach((m, i) => [...xs[i]!, ...outs[i]!].forEach((t) => m.rt.free(t)));
  }
  weights.forEach((ws) => ws.forEach((w) => w.free()));

  // prefill: the synthetic 0.5B model at q8, one prefill step.
  if (args.prompt > 0 && args.prefillRounds > 0) {
    const config = qwen25HalfBConfig();
    const ids = Array.from({ length: args.prompt }, (_, i) => (i * 2654435761) % config.vocabSize >>> 0);
    const models: Decoder[] = modes.map((m) =>
      createSyntheticModel(m.rt, { config, weights: "q8", kvDtype: "bf16", numBlocks: Math.ceil((args.prompt + 2) / 16), maxBatchTokens: args.prompt }),
    );
    const times = alternate(modes, args.prefillRounds, (m) => {
      runRequest(models[modes.indexOf(m)]!, ids, { maxTokens: 1, maxNumBatchedTokens: args.prompt, pick: (logits) => ({ token: argmax(logits), stop: null }) });
    });
    row("q8 model prefill (synthetic Qwen2.5-0.5B)", args.prompt, times);
  }
  if (args.out) {
    const machine = { ...machineInfo(args.threads), kernels: modes.some((m) => m.rt.kernels === "relaxed") ? "baseline+relaxed" : "baseline", int8Dot: modes[last]!.rt.int8Dot };
    writeFileSync(args.out, `${JSON.stringify({ machine, modes: names, rows }, null, 2)}\n`);
  }
  for (const m of modes) await m.rt.dispose();
}

await main();

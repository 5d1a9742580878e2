/**
 * Suite `gguf`: kvflash against llama.cpp on the same GGUF file, the issue #12
 * contract. A Qwen2.5-0.5B-shaped file with random weights
 * (qwen-gguf-file.ts) at Q8_0 and at Q4_K_M, and the same architecture at
 * hidden 1024 at Q4_K_M (`model` "qwen2-h1024": Q4_K and Q6_K throughout, as
 * most Q4_K_M files are, where Qwen2.5-0.5B's falls back to Q5_0 and Q8_0);
 * for each, a 512-token prefill
 * and 128 decode steps (argmax fed back), on 2 threads, kvflash in this
 * process (loadModel with --weights auto, f16 KV cache, through runRequest
 * as `kvflash generate`) and llama.cpp through its C API in a child process
 * (llamacpp-harness.ts: llama.cpp's default f16 KV cache; the Node binding is
 * left out, it costs milliseconds a token). After one untimed run each, the
 * two alternate run by run (the order flipping every run), so both see the
 * same machine.
 *
 * Runs: 3 (1 with --quick; $KVFLASH_BENCH_RUNS overrides). Per engine and file: `prefill_tok_s` = 512 / prefill time and
 * `decode_tok_s` = 128 / the decode steps' total time, each the median over
 * the runs; on the kvflash row `kvflash_over_llamacpp` = decode tok/s over
 * llama.cpp's (the headline: target ≥ 1.0) and
 * `kvflash_over_llamacpp_prefill` the same for prefill (target ≥ 0.8).
 * `weights` says what kvflash computed with: the format holding most of the
 * loaded bytes (--weights auto keeps every matrix as the file has it: q8 for
 * Q8_0, q5 for Q5_0, q6_k for Q6_K, so this Q4_K_M reads "q5"). `load_avg` is the
 * machine's 1-minute load average over the file's runs: llama.cpp's threads
 * meet at spinning barriers (ggml_barrier: no yield), so on a machine with
 * more runnable threads than cores its 2-thread runs slow down far more than
 * kvflash's, whose workers sleep in Atomics.wait; compare rows taken with
 * load_avg below the core count. Every row also names the machine (issue
 * #30): `cpu`, the CPU model and whether it has AVX-VNNI (harness.ts
 * cpuSummary), and `int8_dot`, kvflash's q8 / q4 integer dot and how its
 * relaxed dot lowers (int8DotSummary: "i16, relaxed dot saturating" on x64
 * without AVX-VNNI). Without --kernels (or $KVFLASH_KERNELS) a file whose
 * K-quants hold most of its bytes runs on the flavor `kvflash serve` gives it
 * (model/gguf/kquant-source.ts: relaxed on Node 22 too), and `kernels` names it.
 *
 * The roofline (decode-roofline.ts), on both engines' rows: a decode step
 * reads every weight once, so `decode_mb_per_token` is the weight bytes each
 * engine reads per token (kvflash: its loaded matrices,
 * DecoderWeights.bytesPerToken; llama.cpp: the file's tensors, the embedding
 * only where it is the LM head), `decode_gbps` those bytes × decode tok/s,
 * and `decode_roofline` = decode_gbps / `read_gbps`, the 2-thread read
 * bandwidth measured on this runtime before the file's runs and after each
 * pair of them (the median: this VM's bandwidth drifts within minutes, see
 * model.ts, and one probe can fall in a neighbour's burst the runs missed),
 * with the full 512 MiB probe, more than a step reads, even under --quick.
 */
import { loadavg } from "node:os";
import { readGgufHeader } from "../../src/sources/gguf/reader.js";
import { type Runtime, createRuntime, loadModel, resolveKernelFlavor } from "../../src/ops-entry.js";
import type { GgufQuantMix } from "../../src/model/gguf/convert.js";
import { measureReadBandwidth } from "../ceilings.js";
import { decodeRoofline, ggufDecodeBytes } from "../decode-roofline.js";
import { type Row, type Suite, cpuSummary, int8DotSummary, median } from "../harness.js";
import { BENCH_CACHE, LlamaCppBench, alternateRuns, benchRuns, buildLlamaCppHarness, decodeMs, llamaCppLabel, kvflashRun } from "../llamacpp-harness.js";
import { type QwenGgufShape, qwenGgufFile, qwenGgufTypes } from "../qwen-gguf-file.js";
import { kquantModelSource } from "../../src/model/gguf/kquant-source.js";

const THREADS = 2;
const FILES: readonly { shape: QwenGgufShape; mix: GgufQuantMix }[] = [
  { shape: "qwen2.5-0.5b", mix: "Q8_0" },
  { shape: "qwen2.5-0.5b", mix: "Q4_K_M" },
  { shape: "qwen2-h1024", mix: "Q4_K_M" },
];

/** "Q5_0×96 Q6_K×24 …": the file's matrix types and how many tensors have each. */
function typeCounts(mix: GgufQuantMix, shape: QwenGgufShape): string {
  const counts = new Map<string, number>();
  for (const t of qwenGgufTypes(mix, shape).values()) if (t !== "F32") counts.set(t, (counts.get(t) ?? 0) + 1);
  return [...counts].map(([t, n]) => `${t}×${n}`).join(" ");
}

export const gguf: Suite = {
  name: "gguf",
  description: "Qwen2.5-0.5B-shaped GGUF (random weights) at Q8_0 and Q4_K_M, and at hidden 1024 at Q4_K_M: prefill 512 / decode 128 tok/s, kvflash against llama.cpp's C API, alternated run by run, 2 threads",
  async run({ rt, quick, log, kernelsGiven }): Promise<Row[]> {
    const prompt = quick ? 64 : 512;
    const decode = quick ? 16 : 128;
    const reps = benchRuns(quick);
    const harness = buildLlamaCppHarness(log);
    const own: Runtime | null = rt.threads === THREADS ? null : await createRuntime({ threads: THREADS, kernels: rt.kernels, int8Dot: rt.int8Dot });
    const r = own ?? rt;
    const rows: Row[] = [];
    try {
      for (const { shape, mix } of FILES) {
        const file = qwenGgufFile(BENCH_CACHE, mix, log, shape);
        // The flavor serve would give this file (the K-quant hint), unless --kernels chose one.
        const hinted = kernelsGiven !== true && kquantModelSource({ kind: "gguf", path: file }, "auto") && resolveKernelFlavor(undefined, true) !== r.kernels;
        const fr = hinted ? await createRuntime({ threads: THREADS, kquantWeights: true }) : r;
        if (hinted) log(`${shape} ${mix}: mostly K-quants, run on the ${fr.kernels} kernels as kvflash serve would`);
        const km = loadModel(fr, file, { weights: "auto", kvDtype: "f16", blockSize: 16, numBlocks: Math.ceil((prompt + decode + 1) / 16) + 1, maxBatchTokens: prompt, progress: false });
        const cpp = await LlamaCppBench.start(harness, file, { threads: THREADS, prompt, decode });
        try {
          const ids = Array.from({ length: prompt }, (_, i) => (i * 2654435761) % km.config.vocabSize >>> 0);
          const run = (size = { prompt, decode }) => kvflashRun(km.runner, ids, size, prompt);
          log(`${shape} ${mix}: kvflash ${km.runner.weights.format} weights, llama.cpp ${harness.version} (flash_attn ${cpp.flashAttn}; CPU backend built for ${cpp.cpuFeatures || "(not reported)"}); warm-up runs…`);
          // Warm-up: every weight read once (pages in, caches, JIT), a short prompt and a few steps.
          const warm = { prompt: Math.min(prompt, 32), decode: Math.min(decode, 4) };
          await run(warm);
          await cpp.run(warm);
          const loadBefore = loadavg()[0]!;
          const reads = [measureReadBandwidth(fr, false, false).allThreads];
          const { kvflash: k, llamacpp: c } = await alternateRuns(run, cpp, { reps, prompt, decode }, (rep, kr, cr) => {
            log(`${shape} ${mix} run ${rep + 1}: prefill ${kr.prefillMs.toFixed(0)} ms kvflash, ${cr.prefillMs.toFixed(0)} ms llama.cpp; decode ${decodeMs(kr).toFixed(0)} ms kvflash, ${decodeMs(cr).toFixed(0)} ms llama.cpp`);
            reads.push(measureReadBandwidth(fr, false, false).allThreads);
          });
          const readGbps = median(reads);
          log(`${shape} ${mix}: read bandwidth ${reads.map((g) => g.toFixed(1)).join(", ")} GB/s (before, then after each run)`);
          const load = (loadBefore + loadavg()[0]!) / 2;
          const common = { kernels: fr.kernels, model: shape, cpu: cpuSummary(), int8_dot: int8DotSummary(fr), quant: mix, threads: THREADS, prompt_tokens: prompt, decode_tokens: decode, runs: reps, file_types: typeCounts(mix, shape), load_avg: load };
          rows.push({ engine: "kvflash", ...common, weights: km.runner.weights.format, prefill_tok_s: k.prefill, decode_tok_s: k.decode, kvflash_over_llamacpp: k.decode / c.decode, kvflash_over_llamacpp_prefill: k.prefill / c.prefill, ...decodeRoofline({ bytesPerToken: km.runner.weights.bytesPerToken, decodeTokS: k.decode, readGbps }) });
          rows.push({ engine: "llama.cpp", ...common, weights: llamaCppLabel(harness, cpp), prefill_tok_s: c.prefill, decode_tok_s: c.decode, kvflash_over_llamacpp: null, kvflash_over_llamacpp_prefill: null, ...decodeRoofline({ bytesPerToken: ggufDecodeBytes(readGgufHeader(file).tensors), decodeTokS: c.decode, readGbps }) });
        } finally {
          await cpp.close();
          km.runner.dispose();
          if (hinted) await fr.dispose();
        }
      }
    } finally {
      await own?.dispose();
    }
    return rows;
  },
};

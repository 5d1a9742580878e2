/**
 * Peer rows of the `webgpu` suite: kvflash's WebGPU ModelRunner against
 * llama.cpp's Vulkan backend on the same GPU and the same GGUF file (issue
 * #25): the Qwen2.5-0.5B-shaped Q8_0 file of the `gguf` suite
 * (qwen-gguf-file.ts, random weights), a 512-token prompt and 128 decode
 * steps (argmax fed back), as bench/suites/gguf.ts does on the CPU.
 *
 *   kvflash:   loadGpuModel (--device webgpu: Q8_0 stays q8 codes + scales on
 *              the GPU), f16 KV cache, through runRequest (`kvflash generate`);
 *   llama.cpp: bench/llamacpp/bench.cpp built against
 *              @node-llama-cpp/linux-x64-vulkan, every layer offloaded
 *              (GPU_LAYERS 999), its default f16 KV cache and flash-attention
 *              choice, timed through its C API in a child process.
 *
 * After one short untimed run each, the engines alternate run by run (order
 * flipping), 3 runs each ($KVFLASH_BENCH_RUNS overrides); rates are medians.
 * `kvflash_over_llamacpp` = decode tok/s over llama.cpp's (target ≥ 1.0),
 * `kvflash_over_llamacpp_prefill` the same for prefill. Skipped, with the
 * reason logged, on a software adapter (SwiftShader is no GPU) or when the
 * Vulkan build of the harness is missing (`bash .ci/llamacpp.sh vulkan`).
 */
import type { GpuDevice } from "../src/gpu/device.js";
import { loadGpuModel } from "../src/gpu/load-model.js";
import type { Runtime } from "../src/ops-entry.js";
import { adapterName } from "./gpu-ceilings.js";
import type { Row } from "./harness.js";
import { BENCH_CACHE, LlamaCppBench, alternateRuns, benchRuns, buildLlamaCppHarness, decodeMs, kvflashRun } from "./llamacpp-harness.js";
import { qwenGgufFile } from "./qwen-gguf-file.js";

const PROMPT = 512;
const DECODE = 128;

export async function peerRows(rt: Runtime, gpu: GpuDevice, log: (line: string) => void): Promise<Row[]> {
  if (gpu.adapter.software && process.env["KVFLASH_BENCH_PEER_ON_SOFTWARE"] !== "1") {
    log("llama.cpp Vulkan peer: skipped on a software adapter (KVFLASH_BENCH_PEER_ON_SOFTWARE=1 runs it anyway, as a rehearsal)");
    return [];
  }
  let harness;
  try {
    harness = buildLlamaCppHarness(log, "vulkan");
  } catch (e) {
    log(`llama.cpp Vulkan peer: skipped: ${(e as Error).message}`);
    return [];
  }
  const small = gpu.adapter.software;
  // A rehearsal on SwiftShader: a few tokens (a 0.5B step takes seconds there).
  const prompt = small ? 4 : PROMPT;
  const decode = small ? 2 : DECODE;
  const reps = benchRuns(small);
  const file = qwenGgufFile(BENCH_CACHE, "Q8_0", log);
  const cpp = await LlamaCppBench.start(harness, file, { threads: 2, prompt, decode, gpuLayers: 999 });
  let model: Awaited<ReturnType<typeof loadGpuModel>> | null = null;
  try {
    model = await loadGpuModel(rt, gpu, file, { weights: "auto", kvDtype: "f16", blockSize: 16, numBlocks: Math.ceil((prompt + decode + 1) / 16) + 1, maxBatchTokens: prompt, progress: false });
    const m = model;
    const ids = Array.from({ length: prompt }, (_, i) => (i * 2654435761) % m.config.vocabSize >>> 0);
    const run = (size = { prompt, decode }) => kvflashRun(m.runner, ids, size, prompt);
    log(`peer: kvflash ${m.runner.weightFormat} on ${adapterName(gpu)}; llama.cpp ${harness.version} on ${cpp.gpu || "no GPU device"} (flash_attn ${cpp.flashAttn}); warm-up…`);
    const warm = small ? { prompt: 2, decode: 1 } : { prompt: 32, decode: 4 };
    await run(warm);
    await cpp.run(warm);
    const { kvflash: k, llamacpp: c } = await alternateRuns(run, cpp, { reps, prompt, decode }, (rep, kr, cr) =>
      log(`peer run ${rep + 1}: prefill ${kr.prefillMs.toFixed(1)} ms kvflash, ${cr.prefillMs.toFixed(1)} ms llama.cpp; decode ${decodeMs(kr).toFixed(1)} ms kvflash, ${decodeMs(cr).toFixed(1)} ms llama.cpp`),
    );
    const common = { adapter: adapterName(gpu), model: "qwen2.5-0.5b-shaped Q8_0 GGUF", quant: "Q8_0", prompt_tokens: prompt, decode_tokens: decode, runs: reps, software: gpu.adapter.software };
    return [
      { engine: "kvflash webgpu", ...common, weights: model.runner.weightFormat, prefill_tok_s: k.prefill, decode_tok_s: k.decode, kvflash_over_llamacpp: k.decode / c.decode, kvflash_over_llamacpp_prefill: k.prefill / c.prefill },
      { engine: "llama.cpp vulkan", ...common, weights: `native (node-llama-cpp ${harness.version}, ${cpp.gpu}, flash_attn ${cpp.flashAttn})`, prefill_tok_s: c.prefill, decode_tok_s: c.decode, kvflash_over_llamacpp: null, kvflash_over_llamacpp_prefill: null },
    ];
  } finally {
    await cpp.close();
    model?.runner.dispose();
  }
}

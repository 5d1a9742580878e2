/**
 * The chat template of a model that ships none (a base model's GGUF, an old
 * conversion, a repository without chat_template), picked when the model is
 * opened (model-metadata.ts, model-dir.ts, gguf/gguf-model.ts) so every chat
 * request renders the same way. As llama-server does (common/chat.cpp
 * common_chat_templates_init: no template → CHATML_TEMPLATE_SRC), ChatML is
 * the default; before it, the family's own format when the vocabulary or the
 * architecture names the family:
 *
 *   vocabulary has <|start_header_id|> <|end_header_id|> <|eot_id|>   → llama3
 *   vocabulary has <|im_start|> <|im_end|>                            → chatml
 *   vocabulary has [INST] [/INST]                                     → mistral
 *   MistralForCausalLM                                                → mistral
 *   LlamaForCausalLM with the <s> BOS token (SentencePiece Llama 2)   → llama2
 *   Qwen2 / Qwen3                                                     → chatml
 *   anything else                                                     → chatml
 *
 * The [INST] formats fold a system message into the first user turn, as
 * llama.cpp's built-in mistral-v1 and llama2 formats (llama-chat.cpp) do,
 * rather than refusing it.
 */
import type { FallbackChatTemplate, Tokenizer } from "../tokenizer/tokenizer.js";

/** llama.cpp's CHATML_TEMPLATE_SRC (common/chat.cpp), the default of llama-server. */
export const CHATML_TEMPLATE =
  "{%- for message in messages -%}\n" +
  "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n" +
  "{%- endfor -%}\n" +
  "{%- if add_generation_prompt -%}\n" +
  "  {{- '<|im_start|>assistant\n' -}}\n" +
  "{%- endif -%}";

/** Meta-Llama-3-8B-Instruct's tokenizer_config.json chat_template. */
export const LLAMA3_TEMPLATE =
  "{% set loop_messages = messages %}{% for message in loop_messages %}" +
  "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}" +
  "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

/** Mistral Instruct v0.1's [INST] format: <s>[INST] {system}\n\n{user} [/INST]{assistant}</s>[INST] … */
export const MISTRAL_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}" +
  "{% if message['role'] == 'system' %}{{ '[INST] ' + message['content'] + '\n\n' }}" +
  "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token }}" +
  "{% else %}{% if loop.first or messages[loop.index0 - 1]['role'] != 'system' %}{{ '[INST] ' }}{% endif %}{{ message['content'] + ' [/INST]' }}{% endif %}" +
  "{% endfor %}";

/** Llama 2 Chat's format: <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] … */
export const LLAMA2_TEMPLATE =
  "{% for message in messages %}" +
  "{% if message['role'] == 'system' %}{{ bos_token + '[INST] <<SYS>>\n' + message['content'] + '\n<</SYS>>\n\n' }}" +
  "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + ' ' + eos_token }}" +
  "{% else %}{% if loop.first or messages[loop.index0 - 1]['role'] != 'system' %}{{ bos_token + '[INST] ' }}{% endif %}{{ message['content'] + ' [/INST]' }}{% endif %}" +
  "{% endfor %}";

const FORMATS = { chatml: CHATML_TEMPLATE, llama3: LLAMA3_TEMPLATE, mistral: MISTRAL_TEMPLATE, llama2: LLAMA2_TEMPLATE } as const;
export type FallbackTemplateName = keyof typeof FORMATS;

/** Families told by their special tokens: all of them in the vocabulary. */
const BY_VOCABULARY: readonly { tokens: readonly string[]; name: FallbackTemplateName; family: string }[] = [
  { tokens: ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"], name: "llama3", family: "Llama 3" },
  { tokens: ["<|im_start|>", "<|im_end|>"], name: "chatml", family: "ChatML" },
  { tokens: ["[INST]", "[/INST]"], name: "mistral", family: "Mistral" },
];

function pick(name: FallbackTemplateName, reason: string): FallbackChatTemplate {
  return { name, source: FORMATS[name], reason };
}

/** The template for a model of `architecture` (config.json's, e.g. "LlamaForCausalLM") whose files hold none. */
export function fallbackChatTemplate(architecture: string, tokenizer: Tokenizer): FallbackChatTemplate {
  for (const { tokens, name, family } of BY_VOCABULARY) {
    if (tokens.every((t) => tokenizer.tokenToId(t) !== undefined)) return pick(name, `the ${family} format: the vocabulary has ${tokens.join(" ")}`);
  }
  if (architecture === "MistralForCausalLM") return pick("mistral", "the Mistral family's format, by architecture");
  if (architecture === "LlamaForCausalLM" && tokenizer.bosToken === "<s>") return pick("llama2", "the Llama 2 format: LlamaForCausalLM with the <s> BOS token");
  if (architecture === "Qwen2ForCausalLM" || architecture === "Qwen3ForCausalLM") return pick("chatml", "the Qwen family's format, by architecture");
  return pick("chatml", "llama-server's default");
}

/** fallbackChatTemplate for `architecture`, as the readers of a model's tokenizer take it (TokenizerOptions). */
export function fallbackFor(architecture: string): { fallbackChatTemplate: (tokenizer: Tokenizer) => FallbackChatTemplate } {
  return { fallbackChatTemplate: (tokenizer) => fallbackChatTemplate(architecture, tokenizer) };
}

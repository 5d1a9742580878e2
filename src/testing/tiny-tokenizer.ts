/**
 * A small, real byte-level BPE tokenizer for generated test models: GPT-2's
 * byte alphabet (256 base tokens, ids in GPT-2 order), merges learned by
 * plain BPE training on a fixed built-in corpus, and each model family's
 * special tokens and chat template. Same options → same files, byte for byte.
 * The output is an ordinary tokenizer.json / tokenizer_config.json pair that
 * @huggingface/tokenizers (and Hugging Face's Rust tokenizers) load.
 */

export type TinyTokenizerFamily = "llama" | "mistral" | "qwen";

/** GPT-2's reversible byte → printable character map (bytes_to_unicode), in GPT-2's vocabulary order. */
export function byteLevelAlphabet(): { byte: number; char: string }[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const out = printable.map((b) => ({ byte: b, char: String.fromCodePoint(b) }));
  let n = 0;
  for (let b = 0; b < 256; b++) if (!printable.includes(b)) out.push({ byte: b, char: String.fromCodePoint(256 + n++) });
  return out;
}

/** The corpus the merges are learned from: English prose, code, numbers and a little of other scripts. */
const CORPUS = `The quick brown fox jumps over the lazy dog. The dog sleeps in the sun, and the fox runs into the woods.
Once upon a time there was a little model that wanted to talk. It read the words of the world and learned them one by one.
Hello world! Hello, how are you? I am fine, thank you. What is the capital of France? The capital of France is Paris.
She said that they would be there at the end of the day, and then they went home together with their friends.
function add(a, b) { return a + b; } const x = add(1, 2); console.log("the answer is", x);
def main(): print("hello world") for i in range(10): print(i * i)
In 2024 there were 365 days, 12 months and 52 weeks; 1 + 1 = 2, 3 * 4 = 12, 100 / 4 = 25.
Le renard brun saute par-dessus le chien paresseux. Der schnelle braune Fuchs springt über den faulen Hund.
El zorro marrón salta sobre el perro perezoso. Быстрая коричневая лиса прыгает через ленивую собаку.
你好，世界。今天天气很好。 こんにちは世界。 안녕하세요 세계. 🤗 🚀 ✨`;

/** GPT-2's pre-tokenization pattern (the one ByteLevel's use_regex applies). */
const GPT2_PATTERN = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

/**
 * Learns `count` merges: repeatedly merges the most frequent adjacent pair
 * (ties broken by the pair's text, so the result is deterministic).
 */
export function learnMerges(count: number, corpus = CORPUS): [string, string][] {
  const alphabet = new Map(byteLevelAlphabet().map((e) => [e.byte, e.char]));
  const utf8 = new TextEncoder();
  const wordFreq = new Map<string, number>();
  for (const m of corpus.matchAll(GPT2_PATTERN)) {
    const word = [...utf8.encode(m[0])].map((b) => alphabet.get(b)!).join("\u0000");
    wordFreq.set(word, (wordFreq.get(word) ?? 0) + 1);
  }
  let words = [...wordFreq].map(([w, f]) => ({ symbols: w.split("\u0000"), freq: f }));
  const merges: [string, string][] = [];
  while (merges.length < count) {
    const pairs = new Map<string, number>();
    for (const { symbols, freq } of words) {
      for (let i = 0; i + 1 < symbols.length; i++) {
        const key = `${symbols[i]}\u0000${symbols[i + 1]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + freq);
      }
    }
    let best: string | null = null;
    let bestFreq = 0;
    for (const [key, f] of pairs) {
      if (f > bestFreq || (f === bestFreq && best !== null && key < best)) {
        best = key;
        bestFreq = f;
      }
    }
    if (best === null || bestFreq < 2) break; // nothing left worth merging
    const [a, b] = best.split("\u0000") as [string, string];
    merges.push([a, b]);
    words = words.map(({ symbols, freq }) => {
      const next: string[] = [];
      for (let i = 0; i < symbols.length; i++) {
        if (i + 1 < symbols.length && symbols[i] === a && symbols[i + 1] === b) {
          next.push(a + b);
          i++;
        } else next.push(symbols[i]!);
      }
      return { symbols: next, freq };
    });
  }
  return merges;
}

interface FamilySpec {
  specials: string[];
  bos: string | null;
  eos: string;
  pad: string | null;
  /** Stop tokens for generation_config.json eos_token_id. */
  stops: string[];
  chatTemplate: string;
}

/** Llama 3's chat format. */
const LLAMA3_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

/** Mistral Instruct's [INST] format. */
const MISTRAL_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
  "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}" +
  "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}" +
  "{{ message['content'] + eos_token }}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}";

/** ChatML, as Qwen2 / Qwen3 use it. */
const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const FAMILIES: Readonly<Record<TinyTokenizerFamily, FamilySpec>> = {
  llama: {
    specials: ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    bos: "<|begin_of_text|>",
    eos: "<|eot_id|>",
    pad: null,
    stops: ["<|end_of_text|>", "<|eot_id|>"],
    chatTemplate: LLAMA3_TEMPLATE,
  },
  mistral: {
    specials: ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"],
    bos: "<s>",
    eos: "</s>",
    pad: null,
    stops: ["</s>"],
    chatTemplate: MISTRAL_TEMPLATE,
  },
  qwen: {
    specials: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    bos: null,
    eos: "<|im_end|>",
    pad: "<|endoftext|>",
    stops: ["<|im_end|>", "<|endoftext|>"],
    chatTemplate: CHATML_TEMPLATE,
  },
};

export interface TinyTokenizerFiles {
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  /** One past the largest id. */
  size: number;
  bosTokenId: number | null;
  eosTokenIds: number[];
  padTokenId: number | null;
}

/** Builds the tokenizer files of a tiny model of `family` with `mergeCount` learned merges. */
export function buildTinyTokenizer(family: TinyTokenizerFamily, mergeCount: number): TinyTokenizerFiles {
  const spec = FAMILIES[family];
  const vocab: Record<string, number> = {};
  byteLevelAlphabet().forEach((e, i) => (vocab[e.char] = i));
  const merges = learnMerges(mergeCount);
  for (const [a, b] of merges) if (vocab[a + b] === undefined) vocab[a + b] = Object.keys(vocab).length;
  const ids = new Map<string, number>();
  let next = Object.keys(vocab).length;
  const addedTokens = spec.specials.map((content) => {
    ids.set(content, next);
    return { id: next++, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
  });
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: true };
  const bos = spec.bos;
  const postProcessor =
    bos === null
      ? { ...byteLevel, use_regex: false }
      : {
          type: "TemplateProcessing",
          single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } }],
          pair: [
            { SpecialToken: { id: bos, type_id: 0 } },
            { Sequence: { id: "A", type_id: 0 } },
            { SpecialToken: { id: bos, type_id: 1 } },
            { Sequence: { id: "B", type_id: 1 } },
          ],
          special_tokens: { [bos]: { id: bos, ids: [ids.get(bos)!], tokens: [bos] } },
        };
  const tokenizerJson = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: postProcessor,
    decoder: { ...byteLevel, use_regex: false },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
  const addedDecoder: Record<string, unknown> = {};
  for (const t of addedTokens) addedDecoder[String(t.id)] = { content: t.content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true };
  const tokenizerConfig = {
    add_bos_token: bos !== null,
    add_eos_token: false,
    added_tokens_decoder: addedDecoder,
    bos_token: bos,
    chat_template: spec.chatTemplate,
    clean_up_tokenization_spaces: false,
    eos_token: spec.eos,
    model_max_length: 131072,
    pad_token: spec.pad,
    tokenizer_class: "PreTrainedTokenizerFast",
  };
  return {
    tokenizerJson,
    tokenizerConfig,
    size: next,
    bosTokenId: bos === null ? null : ids.get(bos)!,
    eosTokenIds: spec.stops.map((s) => ids.get(s)!),
    padTokenId: spec.pad === null ? null : ids.get(spec.pad)!,
  };
}

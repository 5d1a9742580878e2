/**
 * A GGUF file's tokenizer metadata → the same Tokenizer class the Hugging
 * Face path uses (tokenizer/tokenizer.ts over @huggingface/tokenizers), by
 * synthesizing the tokenizer.json and tokenizer_config.json that describe
 * what llama.cpp's tokenizers (llama-vocab.cpp) do:
 *
 *   tokenizer.ggml.model "llama" (SentencePiece): llm_tokenizer_spm merges the
 *     adjacent pair whose concatenation has the highest score, falls back to
 *     <0xXX> byte tokens, and prefixes a space (add_space_prefix) at the start
 *     and after every special token. That is a BPE whose merges are every split
 *     (a, b) of a vocabulary piece ordered by the piece's score — transformers'
 *     SentencePieceExtractor — with byte_fallback, over the legacy Llama
 *     normalizer (Prepend "▁", Replace " " → "▁").
 *   tokenizer.ggml.model "gpt2": byte-level BPE with tokenizer.ggml.merges,
 *     after the regex pre-tokenizer that tokenizer.ggml.pre names (llama.cpp's
 *     `regex_exprs`; each regex splits the pieces of the previous one).
 *
 * CONTROL tokens become special added tokens and USER_DEFINED ones plain
 * added tokens (both split out of the text before the model runs, as
 * llama.cpp's tokenizer_st_partition does); BOS/EOS/add_bos_token/
 * add_eos_token fill tokenizer_config; tokenizer.chat_template is the default
 * chat template and tokenizer.chat_template.NAME the one named NAME (named
 * as such in errors and in the startup log).
 *
 * Sizes (vocabulary, token length, merges) are checked before any of this
 * work (tokenizer-limits.ts), and the SentencePiece merges are derived in
 * linear time (spm-merges.ts).
 */
import { ArgumentError } from "../../errors.js";
import { type TokenizerOptions, Tokenizer } from "../../tokenizer/tokenizer.js";
import { GgufMetadata, isNumber, isString } from "./metadata.js";
import { MergeLimitError, mergesFromScores } from "./spm-merges.js";
import { MERGE_LIMITS, checkTokenizerSizes, mergeLimitError } from "./tokenizer-limits.js";

/** The key of the default chat template; NAMEd ones are CHAT_TEMPLATE_KEY.NAME (gguf-py Keys.Tokenizer.CHAT_TEMPLATE, CHAT_TEMPLATE_N). */
const CHAT_TEMPLATE_KEY = "tokenizer.chat_template";

/** llama.cpp's llama_token_type. */
export const TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;

const GPT2_REGEX = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const LLAMA3_REGEX =
  "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** tokenizer.ggml.pre → the regexes llama.cpp splits with, in order (llama-vocab.cpp). */
export const GGUF_PRE_TOKENIZERS: Readonly<Record<string, readonly string[]>> = {
  default: ["[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_REGEX, "\\p{N}+", "[0-9][0-9][0-9]"],
  "llama-bpe": [LLAMA3_REGEX],
  llama3: [LLAMA3_REGEX],
  qwen2: [LLAMA3_REGEX.replace("\\p{N}{1,3}", "\\p{N}")],
  smollm: ["\\p{N}", GPT2_REGEX],
  "gpt-2": [GPT2_REGEX],
};

type Json = Record<string, unknown>;

/**
 * End-of-generation texts that llama.cpp's vocabulary loader forces to CONTROL
 * ("control-looking token … was not control-type … its type will be
 * overridden"), so they split out of text as special tokens even where the
 * file marks them NORMAL (Qwen's vocabulary holds "</s>" as an ordinary piece).
 */
export const LLAMA_CPP_EOG_TEXTS: ReadonlySet<string> = new Set([
  "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>",
  "<|end_of_text|>", "<end_of_utterance>", "</s>", "<|return|>", "<|call|>", "<｜end▁of▁sentence｜>",
]);

function template(bos: string | null, eos: string | null): Json {
  const seq = (id: string, typeId: number) => ({ Sequence: { id, type_id: typeId } });
  const sp = (id: string, typeId: number) => ({ SpecialToken: { id, type_id: typeId } });
  const single = [...(bos ? [sp(bos, 0)] : []), seq("A", 0), ...(eos ? [sp(eos, 0)] : [])];
  const pair = [...single, ...(bos ? [sp(bos, 1)] : []), seq("B", 1), ...(eos ? [sp(eos, 1)] : [])];
  const specials: Json = {};
  for (const t of [bos, eos]) if (t) specials[t] = { id: t, ids: [], tokens: [t] };
  return { type: "TemplateProcessing", single, pair, special_tokens: specials };
}

/**
 * The tokenizer.json and tokenizer_config.json objects a GGUF file's metadata
 * describes, and its chat templates by name: tokenizer.chat_template is
 * "default", tokenizer.chat_template.NAME is NAME (gguf-py's add_chat_template
 * for a list of named templates; llama.cpp reads "tool_use" so).
 */
export function ggufTokenizerJson(meta: GgufMetadata): { tokenizerJson: Json; tokenizerConfig: Json; chatTemplates: Record<string, string> } {
  const model = meta.string("tokenizer.ggml.model");
  if (model !== "llama" && model !== "gpt2") {
    throw meta.error("tokenizer.ggml.model", `must be "llama" (SentencePiece) or "gpt2" (byte-level BPE), got ${model === null ? "nothing" : JSON.stringify(model)}`);
  }
  const tokens = meta.array("tokenizer.ggml.tokens", "a string", isString);
  if (!tokens || tokens.length === 0) throw meta.error("tokenizer.ggml.tokens", "must be a non-empty array of strings");
  const gpt2Merges = model === "gpt2" ? meta.array("tokenizer.ggml.merges", "a string", isString) : null;
  checkTokenizerSizes(meta, tokens, gpt2Merges); // before any work (tokenizer-limits.ts)
  const n = tokens.length;
  const types = meta.array("tokenizer.ggml.token_type", "an integer", isNumber) ?? new Array<number>(n).fill(TOKEN_TYPE.NORMAL);
  if (types.length !== n) throw meta.error("tokenizer.ggml.token_type", `must have one entry per token (${n}), got ${types.length}`);
  const id = (key: string): number | null => {
    const v = meta.optionalInt(key);
    if (v !== null && v >= n) throw meta.error(key, `must be a token id < ${n}, got ${v}`);
    return v;
  };
  const bosId = id("tokenizer.ggml.bos_token_id");
  const eosId = id("tokenizer.ggml.eos_token_id");
  const unkId = id("tokenizer.ggml.unknown_token_id");
  const padId = id("tokenizer.ggml.padding_token_id");
  const addBos = meta.bool("tokenizer.ggml.add_bos_token", model === "llama");
  const addEos = meta.bool("tokenizer.ggml.add_eos_token", false);
  const tok = (i: number | null) => (i === null ? null : tokens[i]!);

  const vocab: Record<string, number> = {};
  tokens.forEach((t, i) => {
    if (!(t in vocab)) vocab[t] = i;
  });
  const added = tokens.flatMap((content, i) => {
    const type = LLAMA_CPP_EOG_TEXTS.has(content) ? TOKEN_TYPE.CONTROL : types[i];
    if (type !== TOKEN_TYPE.CONTROL && type !== TOKEN_TYPE.USER_DEFINED && type !== TOKEN_TYPE.UNKNOWN) return [];
    return [{ id: i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: type !== TOKEN_TYPE.USER_DEFINED }];
  });

  let tokenizerJson: Json;
  if (model === "llama") {
    const scores = meta.array("tokenizer.ggml.scores", "a number", isNumber);
    if (!scores || scores.length !== n) throw meta.error("tokenizer.ggml.scores", `must have one score per token (${n}), got ${scores ? scores.length : "nothing"}`);
    const spacePrefix = meta.bool("tokenizer.ggml.add_space_prefix", true);
    let merges: [string, string][];
    try {
      merges = mergesFromScores(tokens, scores, (i) => types[i] === TOKEN_TYPE.NORMAL || types[i] === TOKEN_TYPE.USER_DEFINED, MERGE_LIMITS);
    } catch (e) {
      throw e instanceof MergeLimitError ? mergeLimitError(meta, e) : e;
    }
    tokenizerJson = {
      version: "1.0",
      added_tokens: added,
      normalizer: {
        type: "Sequence",
        normalizers: [...(spacePrefix ? [{ type: "Prepend", prepend: "▁" }] : []), { type: "Replace", pattern: { String: " " }, content: "▁" }],
      },
      pre_tokenizer: null,
      post_processor: template(addBos ? tok(bosId) : null, addEos ? tok(eosId) : null),
      decoder: {
        type: "Sequence",
        decoders: [
          { type: "Replace", pattern: { String: "▁" }, content: " " },
          { type: "ByteFallback" },
          { type: "Fuse" },
          ...(spacePrefix ? [{ type: "Strip", content: " ", start: 1, stop: 0 }] : []),
        ],
      },
      model: { type: "BPE", dropout: null, unk_token: tok(unkId ?? 0), continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges },
    };
  } else {
    const merges = gpt2Merges;
    if (!merges) throw meta.error("tokenizer.ggml.merges", "is required for tokenizer.ggml.model \"gpt2\"");
    const pre = meta.string("tokenizer.ggml.pre", "default");
    const regexes = GGUF_PRE_TOKENIZERS[pre];
    if (!regexes) {
      throw meta.error("tokenizer.ggml.pre", `must be one of ${Object.keys(GGUF_PRE_TOKENIZERS).map((p) => JSON.stringify(p)).join(", ")}, got ${JSON.stringify(pre)}`);
    }
    tokenizerJson = {
      version: "1.0",
      added_tokens: added,
      normalizer: null,
      pre_tokenizer: {
        type: "Sequence",
        pretokenizers: [
          ...regexes.map((r) => ({ type: "Split", pattern: { Regex: r }, behavior: "Isolated", invert: false })),
          { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
        ],
      },
      post_processor: template(addBos ? tok(bosId) : null, addEos ? tok(eosId) : null),
      decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
      model: {
        type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false,
        ignore_merges: pre === "llama-bpe" || pre === "llama3", vocab, merges,
      },
    };
  }
  const chatTemplates: Record<string, string> = {};
  for (const key of meta.map.keys()) {
    const name = key === CHAT_TEMPLATE_KEY ? "default" : key.startsWith(`${CHAT_TEMPLATE_KEY}.`) ? key.slice(CHAT_TEMPLATE_KEY.length + 1) : null;
    if (name !== null && name !== "") chatTemplates[name] = meta.string(key)!;
  }
  const tokenizerConfig: Json = {
    add_bos_token: addBos,
    add_eos_token: addEos,
    bos_token: tok(bosId),
    eos_token: tok(eosId),
    unk_token: tok(unkId),
    pad_token: tok(padId),
    // llama.cpp's detokenizer never drops the space before punctuation (transformers' clean-up, on unless told otherwise).
    clean_up_tokenization_spaces: false,
  };
  return { tokenizerJson, tokenizerConfig, chatTemplates };
}

/** The Tokenizer of a GGUF file's metadata, its chat templates from tokenizer.chat_template[.NAME] (else `options`' fallback). */
export function ggufTokenizer(meta: GgufMetadata, options: TokenizerOptions = {}): Tokenizer {
  const { tokenizerJson, tokenizerConfig, chatTemplates } = ggufTokenizerJson(meta);
  const origin = (name: string): string => `${meta.source} ${name === "default" ? CHAT_TEMPLATE_KEY : `${CHAT_TEMPLATE_KEY}.${name}`}`;
  try {
    return new Tokenizer({
      tokenizerJson,
      tokenizerConfig,
      source: meta.source,
      namedChatTemplates: Object.fromEntries(Object.entries(chatTemplates).map(([name, source]) => [name, { source, origin: origin(name) }])),
      ...options,
    });
  } catch (e) {
    throw new ArgumentError(`${meta.source} tokenizer metadata`, `does not make a tokenizer: ${(e as Error).message}`);
  }
}

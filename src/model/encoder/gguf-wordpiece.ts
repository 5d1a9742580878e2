/**
 * A BERT GGUF file's WordPiece vocabulary (tokenizer.ggml.model "bert", as
 * llama.cpp's convert_hf_to_gguf.py BertModel.set_vocab writes it) → the
 * project's Tokenizer, through the tokenizer.json that BERT's own repo ships
 * (tokenizer/tokenizer.ts over @huggingface/tokenizers), so a GGUF encoder
 * tokenizes exactly as its safetensors directory does.
 *
 * The converter rewrites the vocabulary into llama.cpp's "phantom space"
 * spelling: a CONTROL token stays as it is ([CLS], [SEP] …), a continuation
 * "##ing" becomes "ing", and every other token "word" becomes "▁word". This
 * file undoes that (▁x → x, x → ##x) and builds BertNormalizer (lowercase,
 * accents stripped, Chinese characters split) + BertPreTokenizer + WordPiece
 * (greedy longest match, "##" continuations, a word with no split → [UNK]) +
 * [CLS] A [SEP] (B [SEP]) with token types 0 / 1. The GGUF file does not say
 * whether the model is cased: like llama.cpp's llm_tokenizer_wpm (which
 * always lowercases), this lowercases; where llama.cpp keeps combining accents
 * after NFD, this strips them as transformers' BertTokenizer does (uncased
 * BERT, the models llama.cpp converts).
 *
 * Special ids: tokenizer.ggml.cls_token_id (else bos_token_id, llama.cpp's
 * WPM start token), seperator_token_id (gguf-py's spelling) and
 * unknown_token_id, each defaulting to llama.cpp's BERT defaults 101, 102, 100.
 */
import { ArgumentError } from "../../errors.js";
import { type TokenizerOptions, Tokenizer } from "../../tokenizer/tokenizer.js";
import { GgufMetadata, isNumber, isString } from "../../sources/gguf/metadata.js";
import { TOKEN_TYPE } from "../../sources/gguf/tokenizer.js";

const PHANTOM = "\u2581";

type Json = Record<string, unknown>;

/** The original (tokenizer.json) spelling of each phantom-space token. */
export function unphantomVocab(tokens: readonly string[], types: readonly number[]): string[] {
  return tokens.map((t, i) => (types[i] === TOKEN_TYPE.CONTROL ? t : t.startsWith(PHANTOM) ? t.slice(PHANTOM.length) : `##${t}`));
}

/** The tokenizer.json object of a "bert" GGUF vocabulary (see the header). */
export function ggufWordPieceJson(meta: GgufMetadata): Json {
  const model = meta.string("tokenizer.ggml.model");
  if (model !== "bert") {
    throw meta.error("tokenizer.ggml.model", `must be "bert" (WordPiece) or "t5" (Unigram) for a BERT-family encoder, got ${model === null ? "nothing" : JSON.stringify(model)}`);
  }
  const tokens = meta.array("tokenizer.ggml.tokens", "a string", isString);
  if (!tokens || tokens.length === 0) throw meta.error("tokenizer.ggml.tokens", "must be a non-empty array of strings");
  const n = tokens.length;
  const types = meta.array("tokenizer.ggml.token_type", "an integer", isNumber) ?? new Array<number>(n).fill(TOKEN_TYPE.NORMAL);
  if (types.length !== n) throw meta.error("tokenizer.ggml.token_type", `must have one entry per token (${n}), got ${types.length}`);
  const id = (keys: readonly string[], fallback: number): number => {
    const key = keys.find((k) => meta.has(k));
    const v = key === undefined ? fallback : meta.int(key);
    if (v >= n) throw meta.error(key ?? keys[0]!, `must be a token id < ${n}${key === undefined ? " (llama.cpp's BERT default)" : ""}, got ${v}`);
    return v;
  };
  const vocabList = unphantomVocab(tokens, types);
  const cls = vocabList[id(["tokenizer.ggml.cls_token_id", "tokenizer.ggml.bos_token_id"], 101)]!;
  const sep = vocabList[id(["tokenizer.ggml.seperator_token_id", "tokenizer.ggml.eos_token_id"], 102)]!;
  const unk = vocabList[id(["tokenizer.ggml.unknown_token_id"], 100)]!;
  const vocab: Record<string, number> = {};
  vocabList.forEach((t, i) => {
    if (!(t in vocab)) vocab[t] = i;
  });
  const added = vocabList.flatMap((content, i) =>
    types[i] === TOKEN_TYPE.CONTROL ? [{ id: i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }] : [],
  );
  const special = (t: string) => ({ SpecialToken: { id: t, type_id: 0 } });
  const seq = (s: "A" | "B", type: number) => ({ Sequence: { id: s, type_id: type } });
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: "BertPreTokenizer" },
    post_processor: {
      type: "TemplateProcessing",
      single: [special(cls), seq("A", 0), special(sep)],
      pair: [special(cls), seq("A", 0), special(sep), seq("B", 1), { SpecialToken: { id: sep, type_id: 1 } }],
      special_tokens: Object.fromEntries([cls, sep].map((t) => [t, { id: t, ids: [vocab[t]!], tokens: [t] }])),
    },
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: unk, continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab },
  };
}

/** The Tokenizer of a "bert" GGUF file's metadata. */
export function ggufWordPieceTokenizer(meta: GgufMetadata, options: TokenizerOptions = {}): Tokenizer {
  const tokenizerJson = ggufWordPieceJson(meta);
  const model = tokenizerJson["model"] as { unk_token: string };
  try {
    return new Tokenizer({ tokenizerJson, tokenizerConfig: { do_lower_case: true, unk_token: model.unk_token, clean_up_tokenization_spaces: true }, source: meta.source, ...options });
  } catch (e) {
    throw new ArgumentError(`${meta.source} tokenizer metadata`, `does not make a WordPiece tokenizer: ${(e as Error).message}`);
  }
}

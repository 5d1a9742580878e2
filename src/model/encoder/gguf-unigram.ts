/**
 * An XLM-RoBERTa GGUF file's SentencePiece Unigram vocabulary
 * (tokenizer.ggml.model "t5", as llama.cpp's convert_hf_to_gguf.py
 * _xlmroberta_set_vocab writes multilingual-e5 / bge-m3: arch "bert") → the
 * tokenizer.json its repo ships, through the project's Tokenizer:
 *
 *   normalizer     Precompiled (tokenizer.ggml.precompiled_charsmap, when present) and,
 *                  with tokenizer.ggml.remove_extra_whitespaces, runs of spaces → one
 *   pre-tokenizer  Metaspace "▁" (prepended when tokenizer.ggml.add_space_prefix, default true)
 *   model          Unigram over tokens and tokenizer.ggml.scores (Viterbi, as llama.cpp's
 *                  llm_tokenizer_ugm), unk = tokenizer.ggml.unknown_token_id
 *   post-processor <s> A </s>, pair <s> A </s></s> B </s> (XLM-R's RobertaProcessing; one token type)
 *
 * CONTROL, UNKNOWN and USER_DEFINED tokens are added tokens (split out of the
 * text first), CONTROL and UNKNOWN as special ones.
 */
import { ArgumentError } from "../../errors.js";
import { type TokenizerOptions, Tokenizer } from "../../tokenizer/tokenizer.js";
import { GgufMetadata, isNumber, isString } from "../../sources/gguf/metadata.js";
import { TOKEN_TYPE } from "../../sources/gguf/tokenizer.js";

type Json = Record<string, unknown>;

/** The tokenizer.json object of a "t5" (Unigram) GGUF vocabulary. */
export function ggufUnigramJson(meta: GgufMetadata): Json {
  const tokens = meta.array("tokenizer.ggml.tokens", "a string", isString);
  if (!tokens || tokens.length === 0) throw meta.error("tokenizer.ggml.tokens", "must be a non-empty array of strings");
  const n = tokens.length;
  const scores = meta.array("tokenizer.ggml.scores", "a number", isNumber);
  if (!scores || scores.length !== n) throw meta.error("tokenizer.ggml.scores", `must have one score per token (${n}), got ${scores ? scores.length : "nothing"}`);
  const types = meta.array("tokenizer.ggml.token_type", "an integer", isNumber) ?? new Array<number>(n).fill(TOKEN_TYPE.NORMAL);
  if (types.length !== n) throw meta.error("tokenizer.ggml.token_type", `must have one entry per token (${n}), got ${types.length}`);
  const id = (key: string, fallback: number): number => {
    const v = meta.int(key, fallback);
    if (v >= n) throw meta.error(key, `must be a token id < ${n}, got ${v}`);
    return v;
  };
  const bos = tokens[id("tokenizer.ggml.bos_token_id", 0)]!;
  const eos = tokens[id("tokenizer.ggml.eos_token_id", 2)]!;
  const unk = id("tokenizer.ggml.unknown_token_id", 3);
  const prefix = meta.bool("tokenizer.ggml.add_space_prefix", true);
  const merge = meta.bool("tokenizer.ggml.remove_extra_whitespaces", false);
  const charsmap = meta.array("tokenizer.ggml.precompiled_charsmap", "a byte", isNumber);
  const normalizers: Json[] = [
    ...(charsmap !== null && charsmap.length > 0 ? [{ type: "Precompiled", precompiled_charsmap: Buffer.from(Uint8Array.from(charsmap)).toString("base64") }] : []),
    ...(merge ? [{ type: "Replace", pattern: { Regex: " {2,}" }, content: " " }] : []),
  ];
  const added = tokens.flatMap((content, i) => {
    const t = types[i];
    if (t !== TOKEN_TYPE.CONTROL && t !== TOKEN_TYPE.UNKNOWN && t !== TOKEN_TYPE.USER_DEFINED) return [];
    return [{ id: i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: t !== TOKEN_TYPE.USER_DEFINED }];
  });
  const sp = (t: string) => ({ SpecialToken: { id: t, type_id: 0 } });
  const seq = (s: "A" | "B") => ({ Sequence: { id: s, type_id: 0 } });
  const metaspace = { type: "Metaspace", replacement: "\u2581", prepend_scheme: prefix ? "always" : "never", split: true };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: normalizers.length === 0 ? null : normalizers.length === 1 ? normalizers[0] : { type: "Sequence", normalizers },
    pre_tokenizer: metaspace,
    post_processor: {
      type: "TemplateProcessing",
      single: [sp(bos), seq("A"), sp(eos)],
      pair: [sp(bos), seq("A"), sp(eos), sp(eos), seq("B"), sp(eos)],
      special_tokens: Object.fromEntries([bos, eos].map((t) => [t, { id: t, ids: [tokens.indexOf(t)], tokens: [t] }])),
    },
    decoder: metaspace,
    model: { type: "Unigram", unk_id: unk, byte_fallback: false, vocab: tokens.map((t, i) => [t, scores[i]!]) },
  };
}

/** The Tokenizer of a "t5" GGUF file's metadata. */
export function ggufUnigramTokenizer(meta: GgufMetadata, options: TokenizerOptions = {}): Tokenizer {
  const tokenizerJson = ggufUnigramJson(meta);
  try {
    return new Tokenizer({ tokenizerJson, tokenizerConfig: { clean_up_tokenization_spaces: false }, source: meta.source, ...options });
  } catch (e) {
    throw new ArgumentError(`${meta.source} tokenizer metadata`, `does not make a Unigram tokenizer: ${(e as Error).message}`);
  }
}

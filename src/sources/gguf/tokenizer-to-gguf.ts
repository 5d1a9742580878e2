/**
 * A Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) → GGUF
 * tokenizer metadata, as llama.cpp's convert_hf_to_gguf.py writes it, so
 * tests and benchmarks can write GGUF files whose tokenizer is a real one:
 *
 *   BPE with byte_fallback (Llama 2 / Mistral / TinyLlama, SentencePiece in
 *     tokenizer.json form) → "llama": tokens by id, scores, token types. A
 *     piece's score is minus the rank of the first merge that makes it (what
 *     SentencePiece's BPE scores are, up to a constant), so ordering merges by
 *     score (tokenizer.ts) gives back the file's merges.
 *   byte-level BPE (Llama 3, Qwen2/3, SmolLM) → "gpt2": tokens, merges
 *     ("a b"), token types, and `pre` as the caller names it.
 */
import { ArgumentError } from "../../errors.js";
import { TOKEN_TYPE } from "./tokenizer.js";
import { type GgufTyped, gguf } from "./writer.js";

type Json = Record<string, unknown>;

/** convert_hf_to_gguf's does_token_look_special (the part that applies to these tokenizers). */
function looksSpecial(t: string): boolean {
  return (t.startsWith("<|") && t.endsWith("|>")) || ["<pad>", "<mask>"].includes(t);
}

function tokenContent(v: unknown): string | null {
  if (typeof v === "string") return v;
  if (typeof v === "object" && v !== null && typeof (v as Json)["content"] === "string") return (v as Json)["content"] as string;
  return null;
}

export interface HfToGgufOptions {
  /** tokenizer.ggml.pre for byte-level BPE ("llama-bpe", "qwen2", "smollm", "default"). */
  pre?: string;
  /** Pad the token list with [PADi] to this many entries (config.json's vocab_size), as convert_hf_to_gguf does: llama.cpp wants one token per embedding row. */
  vocabSize?: number;
}

export function hfTokenizerToGguf(tokenizerJson: Json, tokenizerConfig: Json, options: HfToGgufOptions = {}): Record<string, GgufTyped> {
  const model = tokenizerJson["model"] as Json;
  if (model?.["type"] !== "BPE") throw new ArgumentError("tokenizerJson.model.type", `must be "BPE", got ${String(model?.["type"])}`);
  const vocab = model["vocab"] as Record<string, number>;
  const rawMerges = model["merges"] as (string | [string, string])[];
  const merges = rawMerges.map((m) => (typeof m === "string" ? m : `${m[0]} ${m[1]}`));
  const added = (tokenizerJson["added_tokens"] as Json[] | undefined) ?? [];
  const size = [...Object.values(vocab), ...added.map((a) => a["id"] as number), (options.vocabSize ?? 0) - 1].reduce((a, b) => Math.max(a, b), -1) + 1;
  const tokens = Array.from({ length: size }, (_, i) => `[PAD${i}]`);
  const types = new Array<number>(size).fill(TOKEN_TYPE.UNUSED);
  for (const [t, id] of Object.entries(vocab)) {
    tokens[id] = t;
    types[id] = /^<0x[0-9A-F]{2}>$/.test(t) && model["byte_fallback"] === true ? TOKEN_TYPE.BYTE : TOKEN_TYPE.NORMAL;
  }
  for (const a of added) {
    const id = a["id"] as number;
    const content = a["content"] as string;
    tokens[id] = content;
    types[id] = a["special"] === true || looksSpecial(content) ? TOKEN_TYPE.CONTROL : TOKEN_TYPE.USER_DEFINED;
  }
  const idOf = (key: string): number | null => {
    const t = tokenContent(tokenizerConfig[key]);
    if (t === null) return null;
    const i = tokens.indexOf(t);
    return i < 0 ? null : i;
  };
  const post = JSON.stringify(tokenizerJson["post_processor"] ?? null);
  const meta: Record<string, GgufTyped> = {};
  const spm = model["byte_fallback"] === true;
  const unk = typeof model["unk_token"] === "string" ? tokens.indexOf(model["unk_token"]) : -1;
  if (unk >= 0) types[unk] = TOKEN_TYPE.UNKNOWN;
  meta["tokenizer.ggml.model"] = gguf.str(spm ? "llama" : "gpt2");
  if (!spm) meta["tokenizer.ggml.pre"] = gguf.str(options.pre ?? "default");
  meta["tokenizer.ggml.tokens"] = gguf.strings(tokens);
  if (spm) {
    const firstRank = new Map<string, number>();
    merges.forEach((m, rank) => {
      const sp = m.indexOf(" ");
      const piece = m.slice(0, sp) + m.slice(sp + 1);
      if (!firstRank.has(piece)) firstRank.set(piece, rank);
    });
    meta["tokenizer.ggml.scores"] = gguf.f32s(tokens.map((t, i) => (types[i] === TOKEN_TYPE.NORMAL ? -(firstRank.get(t) ?? merges.length) : 0)));
  } else {
    meta["tokenizer.ggml.merges"] = gguf.strings(merges);
  }
  meta["tokenizer.ggml.token_type"] = gguf.i32s(types);
  const bos = idOf("bos_token");
  const eos = idOf("eos_token");
  const pad = idOf("pad_token");
  if (bos !== null) meta["tokenizer.ggml.bos_token_id"] = gguf.u32(bos);
  if (eos !== null) meta["tokenizer.ggml.eos_token_id"] = gguf.u32(eos);
  if (pad !== null) meta["tokenizer.ggml.padding_token_id"] = gguf.u32(pad);
  if (unk >= 0) meta["tokenizer.ggml.unknown_token_id"] = gguf.u32(unk);
  // add_bos_token: tokenizer_config's, else whether the post-processor template starts with a special token.
  const addBos = typeof tokenizerConfig["add_bos_token"] === "boolean" ? (tokenizerConfig["add_bos_token"] as boolean) : /"single":\[\{"SpecialToken"/.test(post);
  meta["tokenizer.ggml.add_bos_token"] = gguf.bool(addBos);
  if (typeof tokenizerConfig["add_eos_token"] === "boolean") meta["tokenizer.ggml.add_eos_token"] = gguf.bool(tokenizerConfig["add_eos_token"] as boolean);
  if (spm) {
    const norm = JSON.stringify(tokenizerJson["normalizer"] ?? null);
    meta["tokenizer.ggml.add_space_prefix"] = gguf.bool(norm.includes('"Prepend"'));
  }
  const chat = tokenizerConfig["chat_template"];
  if (typeof chat === "string") meta["tokenizer.chat_template"] = gguf.str(chat);
  return meta;
}
